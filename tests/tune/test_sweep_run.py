"""``arena sweep`` and ``arena report`` end to end, as a user runs them: a tiny seeds sweep
whose driver is killed after its first trial and resumed with ``--resume`` (no finished trial
is run again), ``--watch`` on it, its report rendered in headless Chromium; a sensitivity
sweep whose ASHA stops the trials that fall behind."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from cluster.local import short_temp_dir, venv_env
from tests.tune.test_trainable import SMALL, wait_gone

ROOT = Path(__file__).resolve().parents[2]
SPREAD = ["--set", "env=mpe/simple_spread-v3", "--set", "algo=ippo"]


def sweep_env(temp: Path) -> dict[str, str]:
    # TMPDIR: the sweep's embedded Ray keeps its session under it (found again by its path)
    return venv_env(TMPDIR=str(temp), TUNE_GLOBAL_CHECKPOINT_S="1", COLUMNS="160")


def arena(*args, temp: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "arena", *args],
        cwd=ROOT,
        env=sweep_env(temp),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def screenshot(html: Path, png: Path) -> dict:
    """Opens ``html`` in headless Chromium, saves a screenshot; returns what the page shows."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    from envs.web.browser import CHROME, CHROME_ARGS, CHROMEDRIVER

    options = webdriver.ChromeOptions()
    options.binary_location = CHROME
    for arg in CHROME_ARGS:
        options.add_argument(arg)
    options.add_argument("--window-size=1200,2400")
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        driver.get(html.as_uri())
        shown = driver.execute_script(
            "return {title: document.title, tables: document.querySelectorAll('table').length,"
            " images: Array.from(document.images).map(i => [i.alt, i.naturalWidth]),"
            " text: document.body.innerText}"
        )
        driver.save_screenshot(str(png))
        return shown
    finally:
        driver.quit()


def tune_knows_a_trial_ended(experiment: Path) -> bool:
    """Whether Tune's saved experiment state lists a trial as TERMINATED."""
    for state in experiment.glob("experiment_state-*.json"):
        try:
            if "TERMINATED" in state.read_text():
                return True
        except OSError:
            pass
    return False


def test_a_seeds_sweep_resumes_after_its_driver_is_killed_and_reports(tmp_path):
    from envs.web.browser import chrome_missing

    out = tmp_path / "sweep"
    temp = short_temp_dir()
    cmd = ["sweep", "seeds", "--samples", "3", "--max-concurrent", "1", "--out", str(out),
           *SPREAD, "--set", "iterations=3", "--set", f"settings={json.dumps(SMALL)}"]  # fmt: skip
    first = subprocess.Popen(
        [sys.executable, "-m", "arena", *cmd],
        cwd=ROOT,
        env=sweep_env(temp),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # killed with its whole Ray, as a crashed driver machine
    )
    deadline = time.monotonic() + 300
    done = []
    while time.monotonic() < deadline and first.poll() is None and not done:
        # a trial has finished, and Tune's saved state says so (killed before that, Tune
        # would restore it from its last checkpoint and find it done)
        if tune_knows_a_trial_ended(out / "train"):
            done = list(out.glob("train/*/run/trial.json"))
        time.sleep(0.5)
    assert done, first.communicate()[0][-3000:] if first.poll() is not None else "no trial ended"
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    assert wait_gone(str(temp), 60), "the killed driver's Ray processes did not exit"
    finished = done[0].parent / "metrics.csv"
    before = finished.read_text(), done[0].stat().st_mtime_ns
    assert not (out / "train" / "done.json").exists()

    # the same sweep again without --resume is refused; with it, it goes on
    again = arena(*cmd, temp=short_temp_dir())
    assert again.returncode == 2 and "exists already; resume it with --resume" in again.stderr
    resumed = arena("sweep", "--resume", "--out", str(out), temp=short_temp_dir())
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert "3 trials, 1 at a time" in resumed.stdout  # --max-concurrent is kept
    # the finished trial was not run again (a rerun rewrites its trial.json)
    assert (finished.read_text(), done[0].stat().st_mtime_ns) == before

    trials = pd.read_parquet(out / "trials.parquet")
    assert sorted(trials["seed"]) == [0, 1, 2] and set(trials["status"]) == {"finished"}
    rows = pd.read_parquet(out / "results.parquet")
    assert len(rows) == 9 and sorted(rows["iteration"].unique()) == [1, 2, 3]
    assert rows["episode_return_mean"].notna().all()
    # TensorBoard logs of every trial
    assert len(list(out.glob("train/*/run/tb/events.out.tfevents.*"))) == 3

    watched = arena("sweep", "--watch", str(out), temp=short_temp_dir(), timeout=120)
    assert watched.returncode == 0 and watched.stdout.count("finished") == 3, watched.stdout
    assert "over" in watched.stdout

    report = arena("report", str(out), temp=short_temp_dir(), timeout=300)
    assert report.returncode == 0, report.stderr[-3000:]
    html = out / "report" / "report.html"
    md = (out / "report" / "report.md").read_text()
    assert "episode_return_mean over 3 seeds" in md and "95% bootstrap" in md
    assert "## What ran" in md and "| algo | ippo |" in md and "at least 5" in md
    assert "## Aggregates (rliable)" in md and "| IQM |" in md
    assert (out / "report" / "figures" / "curve.svg").is_file()
    runs = json.loads((out / "report" / "marl_eval.json").read_text())["mpe"]
    (task,) = runs.values()
    assert sorted(task["ippo"]) == ["run_0", "run_1", "run_2"]
    assert task["ippo"]["run_0"]["step_0"]["step_count"] > 0
    if chrome_missing():
        pytest.skip(str(chrome_missing()))
    shown = screenshot(html, tmp_path / "report.png")
    assert shown["title"] == "seeds sweep" and shown["tables"] >= 2
    assert shown["images"] and all(width > 100 for _, width in shown["images"]), shown["images"]
    assert "Mean episode_return_mean over 3 seeds" in shown["text"]
    import imageio.v3 as iio

    pixels = iio.imread(tmp_path / "report.png")
    assert pixels.shape[0] > 1000 and pixels.std() > 10  # a page, not a blank


def test_a_sensitivity_sweep_with_asha_stops_the_trials_behind(tmp_path):
    from tune.sweeps import make_sweep

    # Episodes of 5 steps lose far less reward than episodes of 25. Run one at a time with a
    # 5-step configuration first: the 25-step ones fall below its first rung and ASHA stops
    # them there. Pick the search seed whose draws are [5, 25, 25].
    space = {"env.max_cycles": [5, 25]}
    seed = next(
        s for s in range(100)
        if [c["env.max_cycles"] for c in make_sweep(
            "sensitivity", {"samples": 3, "seed": s, "space": space}).configs()] == [5, 25, 25]
    )  # fmt: skip
    out = tmp_path / "sens"
    run = arena(
        "sweep", "sensitivity", "--samples", "3", "--max-concurrent", "1", "--out", str(out),
        *SPREAD, "--set", "iterations=3", "--set", "grace_period=1", "--set", f"seed={seed}",
        "--set", f"space={json.dumps(space)}", "--set", f"settings={json.dumps(SMALL)}",
        temp=short_temp_dir(),
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    trials = pd.read_parquet(out / "trials.parquet").sort_values("config")
    assert list(trials["env.max_cycles"]) == [5, 25, 25]
    assert list(trials["status"]) == ["finished", "stopped", "stopped"]
    assert list(trials["iterations"]) == [3, 1, 1]
    report = arena("report", str(out), temp=short_temp_dir(), timeout=300)
    assert report.returncode == 0, report.stderr[-3000:]
    md = (out / "report" / "report.md").read_text()
    assert "## Hyperparameter importance" in md and "| env.max_cycles | 5 |" in md
