"""Sweep definitions: typed dataclasses that turn their settings into stages of Tune trials.

A sweep is one of :data:`SWEEPS` (``arena sweep NAME --set key=value``). It runs as one or
more :class:`Stage` s, in order; a later stage may depend on the results of the earlier ones
(the compute-allocation sweep branches GRPO off the BC stage's checkpoints). A trial is a
plain dict, Tune's whole config for that trial:

- ``run``: the flat config of one Arena run (``env``, ``algo`` and any ``arena train --set``
  key; :func:`tune.trainable.trial_config`);
- ``study``: the labels the analysis groups by (``seed``, ``fraction``, ``config`` ...);
- ``stop``: ``{metric: value}``, the run ends at the first iteration whose metric reaches the
  value (a FLOP budget), else at its ``iterations``.

Trials are listed in full rather than drawn by Tune, so the random search is seeded, the same
configuration can be repeated over seeds, and a resumed sweep runs exactly the trials it
would have.
"""

from __future__ import annotations

import dataclasses
import importlib
from dataclasses import dataclass, field
from typing import Any

SWEEPS = {
    "seeds": "tune.sweeps.seeds:SeedsSweep",
    "sensitivity": "tune.sweeps.sensitivity:SensitivitySweep",
    "compute_allocation": "tune.sweeps.compute_allocation:ComputeAllocationSweep",
    "hypermarl": "tune.sweeps.hypermarl:HyperMARLSweep",
}
"""Sweep name -> ``module:class``."""
COUNTS = ("samples", "seeds")
"""Sweep settings that multiply its trials."""
MAX_SAMPLES = 1000
"""The most of each of :data:`COUNTS` (``--samples``)."""
MAX_TRIALS = 10_000
"""The most trials of one stage."""


@dataclass
class ASHA:
    """Asynchronous successive halving over a stage's trials (``ray.tune.schedulers``)."""

    max_t: int
    """The most iterations a trial runs."""
    grace_period: int = 1
    """Iterations every trial runs before it can be stopped."""
    reduction_factor: int = 2
    """Of the trials at a rung, 1 / reduction_factor go on."""


@dataclass
class Stage:
    """One Tune experiment of a sweep (a folder ``SWEEP_DIR/<name>``)."""

    name: str
    trials: list[dict[str, Any]]
    metric: str
    """What the live table shows and ASHA ranks by."""
    mode: str = "max"
    asha: ASHA | None = None


@dataclass
class Section:
    """A part of a sweep's report: Markdown text, then figures (paths, PNG and SVG)."""

    title: str
    text: str
    figures: list[str] = field(default_factory=list)


def sweep_class(name: str) -> type:
    from training.config import ConfigError

    if name not in SWEEPS:
        raise ConfigError(f"unknown sweep {name!r}; sweeps: {', '.join(SWEEPS)}")
    module, _, cls = SWEEPS[name].partition(":")
    return getattr(importlib.import_module(module), cls)


def make_sweep(name: str, values: dict[str, Any] | None = None, check: bool = True):
    """The sweep ``name`` with ``values`` set (typed; an unknown key names the allowed ones),
    checked to build every trial it could run unless ``check`` is false (a saved sweep)."""
    from training.config import ConfigError, set_field

    sweep = sweep_class(name)()
    for key, value in (values or {}).items():
        try:
            set_field(sweep, key, value)
        except ConfigError as e:
            raise ConfigError(f"sweep {name}: {e}") from None
    for key in COUNTS:  # before validate, which builds the trials they multiply
        value = getattr(sweep, key, 1)
        if value > MAX_SAMPLES:
            raise ConfigError(f"sweep {name}: {key}={value} (at most {MAX_SAMPLES})")
    if check:
        sweep.validate()
    return sweep


def sweep_values(sweep) -> dict[str, Any]:
    """The sweep's settings, as ``make_sweep`` takes them (written to ``sweep.yaml``)."""
    return dataclasses.asdict(sweep)


def trial_cpus(run: dict[str, Any]) -> tuple[list[dict[str, float]], str]:
    """The resources a trial's run declares, as Tune placement-group bundles: the trial's
    own process (it samples and learns itself with 0 EnvRunners and 0 Learners, on
    ``gpus_per_learner`` GPUs if any), a CPU per EnvRunner, a CPU or ``gpus_per_learner``
    GPUs per Learner."""
    gpus = float(run.get("gpus_per_learner", 0.0))
    n_learners = int(run.get("learners", 0))
    head = {"CPU": 1.0, **({"GPU": gpus} if gpus and not n_learners else {})}
    runners = [{"CPU": 1.0}] * int(run.get("env_runners", 0))
    learners = [{"GPU": gpus} if gpus else {"CPU": 1.0}] * n_learners
    return [head, *runners, *learners], "PACK"
