"""Arena runs as Ray Tune trials.

    from ray import tune
    from tune.trainable import trial

    tuner = tune.Tuner(
        tune.with_resources(trial, {"cpu": 1}),
        param_space={"env": "mpe/simple_spread-v3", "algo": "ippo", "iterations": 50,
                     "lr": tune.grid_search([3e-4, 1e-3])},
        tune_config=tune.TuneConfig(scheduler=ASHAScheduler(time_attr="iteration",
                                    metric="episode_return_mean", mode="max")),
    )

A trial's config is flat: ``env`` plus any key ``arena train --set`` takes (``algo``,
``iterations``, ``lr``, ``model.hidden``, ``env.max_cycles``, ...). The trial's run directory
is ``run/`` in its Tune trial folder (config.yaml, metrics.csv, tb/, checkpoints/; see
:func:`trial_run_dir`), so ``arena eval`` and ``arena serve`` take it like any run. Every iteration is reported with the
metrics row of ``metrics.csv`` (``iteration`` counts Arena's iterations, also after a
restore); ``checkpoint_every`` iterations (and the last) carry the checkpoint, which Tune keeps
in its storage and hands back on ``Tuner.restore`` or when PBT clones a trial.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path
from typing import Any

from training.checkpoints import write_atomic
from training.run import Callback, CsvLog, Run, TensorBoardLog


def trial_config(config: dict[str, Any]):
    """The :class:`training.config.TrainConfig` of a trial's flat ``config``."""
    from training.config import ConfigError, TrainConfig, set_value

    if "env" not in config:
        raise ConfigError("a trial's config needs 'env'")
    cfg = TrainConfig(env=config["env"])
    if "algo" in config:
        set_value(cfg, "algo", config["algo"])
    for key, value in config.items():
        if key not in ("env", "algo"):
            set_value(cfg, key, value)
    cfg.validate()
    return cfg


def reached(row: dict, stop: dict[str, float]) -> str | None:
    """The first metric of ``stop`` that ``row`` has reached, or None."""
    return next((k for k, v in stop.items() if row.get(k, -math.inf) >= v), None)


class TuneReporter(Callback):
    """Reports each iteration's metrics row to Tune, with the checkpoint when one was saved,
    or when the row reaches ``stop`` (the trial's last: Tune restores from there)."""

    def __init__(self, stop: dict[str, float] | None = None):
        self.stop = stop or {}

    def on_iteration(self, run, row, learner, checkpoint) -> None:
        from ray import tune

        if checkpoint is None and reached(row, self.stop):
            checkpoint = run.checkpoint()
        ckpt = tune.Checkpoint.from_directory(str(checkpoint)) if checkpoint else None
        tune.report(dict(row), checkpoint=ckpt)


def restored_checkpoint(run_dir: Path):
    """The checkpoint Tune hands this trial (after ``Tuner.restore`` or a PBT clone), copied
    into ``run_dir/checkpoints``, with its verified ``arena.json``; None on a fresh start."""
    from ray import tune

    from training.checkpoints import checkpoint_meta

    given = tune.get_checkpoint()
    if given is None:
        return None
    with given.as_directory() as src:
        meta = checkpoint_meta(Path(src))
        dest = run_dir / "checkpoints" / f"iter_{meta['iteration']:06d}"
        if Path(src).resolve() != dest.resolve():
            tmp = dest.with_name(f".{dest.name}.tmp")  # a kill mid-copy leaves no iter_N
            shutil.rmtree(tmp, ignore_errors=True)
            shutil.copytree(src, tmp)
            shutil.rmtree(dest, ignore_errors=True)
            os.replace(tmp, dest)
    return dest, meta


def trial_run_dir() -> Path:
    """The trial's run directory: ``run/`` in the trial's folder of Tune's storage when that
    is a local path (so it outlives a killed driver and is found again by ``Tuner.restore``),
    else in the trial's working directory, which Tune copies to its storage at every
    checkpoint (there a restored trial's ``metrics.csv`` starts at its checkpoint; Tune's own
    results keep every iteration)."""
    from ray import tune

    try:
        import pyarrow.fs
        from ray.train._internal.session import get_storage  # no public getter

        storage = get_storage()
        if isinstance(storage.storage_filesystem, pyarrow.fs.LocalFileSystem):
            return Path(storage.trial_fs_path) / "run"
    except (ImportError, AttributeError, RuntimeError):
        pass
    return Path(tune.get_context().get_trial_dir()) / "run"


def trial(config: dict[str, Any]) -> None:
    """Tune's function trainable: one Arena run to its target, reporting every iteration."""
    train_trial(config)


def sweep_trial(config: dict[str, Any]) -> None:
    """The trainable of ``arena sweep``: ``config["trial"]`` is a sweep's trial
    (:mod:`tune.sweeps`): its run, its labels and its stop."""
    spec = config["trial"]
    train_trial(spec["run"], spec.get("stop") or {})


def train_trial(run_config: dict[str, Any], stop: dict[str, float] | None = None) -> None:
    """Trains the run of a flat config in this trial's run directory until its target or
    until a metric of ``stop`` reaches its value, checkpoints at the end, and writes
    ``trial.json``: how it ended (``target``, the stop's metric, or ``scheduler`` when Tune
    stopped it) and the node it ran on."""
    import ray
    import torch

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    cfg = trial_config(run_config)
    run_dir = trial_run_dir()
    (run_dir / "trial.json").unlink(missing_ok=True)  # an earlier attempt's
    checkpoint = restored_checkpoint(run_dir)
    if checkpoint is None:  # Tune starts this trial over: drop what an earlier attempt left
        shutil.rmtree(run_dir / "checkpoints", ignore_errors=True)
    run = Run(
        cfg,
        run_dir,
        checkpoint=checkpoint,
        callbacks=[CsvLog(), TensorBoardLog(), TuneReporter(stop)],
    )
    ended = None
    try:
        while not run.done and ended is None:
            ended = reached(run.step(), stop or {})
        run.checkpoint()
        ended = ended or "target"
    except SystemExit:  # Tune stops a function trial (a scheduler's decision) this way
        ended = "scheduler"
        raise
    finally:
        run.close()
        if ended:
            node = ray.get_runtime_context().get_node_id()
            done = {"iteration": run.iteration, "ended": ended, "node": node}
            write_atomic(run_dir / "trial.json", json.dumps(done))
