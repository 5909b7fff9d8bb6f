"""Arena runs as Ray Tune trials: ASHA stops a trial from its per-iteration metrics, and a
trial resumed by ``Tuner.restore`` after its driver was killed loses no finished iteration."""

import csv
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cluster.local import short_temp_dir
from training.config import ConfigError
from tune.trainable import trial_config

ROOT = Path(__file__).resolve().parents[2]
SMALL = {
    "train_batch_size": 400,
    "minibatch_size": 200,
    "num_epochs": 1,
    "num_envs_per_env_runner": 8,
}


def test_trial_config_takes_set_keys_and_refuses_unknown_ones():
    cfg = trial_config(
        {"env": "mpe/simple_spread-v3", "algo": "ippo", "lr": 1e-3, "env.max_cycles": 5}
    )
    assert cfg.algo == "ippo" and cfg.settings.lr == 1e-3 and cfg.env_args == {"max_cycles": 5}
    with pytest.raises(ConfigError, match="unknown config key 'lrr'"):
        trial_config({"env": "mpe/simple_spread-v3", "lrr": 1e-3})
    with pytest.raises(ConfigError, match="needs 'env'"):
        trial_config({"lr": 1e-3})


def test_asha_stops_a_trial_early_from_per_iteration_metrics(ray_session, tmp_path):
    from ray import tune
    from ray.tune.schedulers import ASHAScheduler

    from tune.trainable import trial

    # Episodes of 5 steps lose far less reward than episodes of 25: run one after the other,
    # the 25-step trials score below the first trial's first rung and ASHA stops them there.
    space = {
        "env": "mpe/simple_spread-v3",
        "algo": "ippo",
        "iterations": 3,
        **SMALL,
        "env.max_cycles": tune.grid_search([5, 25, 25]),
    }
    asha = ASHAScheduler(
        time_attr="iteration",
        metric="episode_return_mean",
        mode="max",
        max_t=3,
        grace_period=1,
        reduction_factor=2,
    )
    tuner = tune.Tuner(
        tune.with_resources(trial, {"cpu": 1}),
        param_space=space,
        tune_config=tune.TuneConfig(scheduler=asha, max_concurrent_trials=1),
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="asha", verbose=0),
    )
    results = tuner.fit()
    assert not results.errors
    done = {r.config["env.max_cycles"]: r.metrics["iteration"] for r in results}
    reached = sorted(r.metrics["iteration"] for r in results)
    assert done[5] == 3 and reached[0] < 3, reached  # at least one trial stopped early
    # Each trial's run directory is an ordinary Arena run.
    for r in results:
        rows = list(csv.DictReader((Path(r.path) / "run" / "metrics.csv").open()))
        assert [int(x["iteration"]) for x in rows] == list(range(1, r.metrics["iteration"] + 1))


DRIVER = """
import sys
from training import runtime

runtime.connect(num_cpus=2, dashboard=False, temp_dir=sys.argv[2])
from ray import tune
from tune.trainable import trial

storage, name = sys.argv[1], "restore"
trainable = tune.with_resources(trial, {"cpu": 1})
if tune.Tuner.can_restore(f"{storage}/{name}"):
    tuner = tune.Tuner.restore(f"{storage}/{name}", trainable, resume_unfinished=True)
else:
    space = {"env": "mpe/simple_spread-v3", "algo": "ippo", "iterations": 6,
             "checkpoint_every": 1, **SMALL}
    tuner = tune.Tuner(trainable, param_space=space,
                       run_config=tune.RunConfig(storage_path=storage, name=name, verbose=0))
results = tuner.fit()
print("FINISHED", results[0].metrics["iteration"], flush=True)
"""


def driver(storage: Path, temp: Path) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}
    env.pop("RAY_ADDRESS", None)  # its own embedded Ray, not the test session's
    env["TUNE_GLOBAL_CHECKPOINT_S"] = "1"  # the experiment state follows each report closely
    return subprocess.Popen(
        [sys.executable, "-c", f"SMALL = {SMALL!r}\n" + DRIVER, str(storage), str(temp)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        cwd=ROOT,
        start_new_session=True,  # killed with its whole Ray, as a crashed driver machine
    )


def tune_knows_a_checkpoint(experiment: Path) -> bool:
    """Whether Tune's saved experiment state lists a checkpoint after the first one (a driver
    killed before that restores a trial from scratch, as Tune means to)."""
    for state in experiment.glob("experiment_state-*.json"):
        try:
            text = state.read_text()
        except OSError:
            continue
        if re.search(r"checkpoint_0*[1-9]", text):
            return True
    return False


def wait_gone(marker: str, within_s: float) -> bool:
    """Waits until no process has ``marker`` in its command line."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        alive = []
        for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
            try:
                alive += [cmdline] if marker.encode() in cmdline.read_bytes() else []
            except OSError:
                pass
        if not alive:
            return True
        time.sleep(0.5)
    return False


def test_a_trial_restored_after_its_driver_was_killed_loses_no_iteration(tmp_path):
    storage = tmp_path / "tune"
    temp = short_temp_dir()
    first = driver(storage, temp)
    deadline = time.monotonic() + 240
    metrics = None
    while time.monotonic() < deadline and first.poll() is None:
        found = list(storage.glob("restore/*/run/metrics.csv"))
        if (
            found
            and len(found[0].read_text().splitlines()) >= 1 + 3
            and tune_knows_a_checkpoint(storage / "restore")
        ):  # 3 iterations done, and Tune's own state already lists one of their checkpoints
            metrics = found[0]
            break
        time.sleep(0.5)
    assert metrics is not None, first.communicate()[0][-3000:] if first.poll() is not None else ""
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    # Its Ray workers outlive it by a moment (a trial could still write a checkpoint).
    assert wait_gone(str(temp), 60), "the killed driver's Ray processes did not exit"
    killed_at = len(metrics.read_text().splitlines()) - 1

    second = driver(storage, short_temp_dir())
    out, _ = second.communicate(timeout=300)
    assert second.returncode == 0 and "FINISHED 6" in out, out[-3000:]
    rows = list(csv.DictReader(metrics.open()))
    assert [int(r["iteration"]) for r in rows] == [1, 2, 3, 4, 5, 6]
    # Tune saw every iteration, and the restored trial went on from a checkpoint instead of
    # starting over: iteration 1 was reported once.
    reported = [
        json.loads(line)["iteration"]
        for line in (metrics.parent.parent / "result.json").read_text().splitlines()
    ]
    assert set(reported) == {1, 2, 3, 4, 5, 6} and reported.count(1) == 1, (killed_at, reported)
