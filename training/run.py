"""A training run as an object: open (new or resumed), ``step()`` one iteration to a metrics
row, checkpoint, close; and the callbacks that watch it (progress bar, ``metrics.csv``,
TensorBoard, a Ray Tune reporter in ``tune/``).

    run = Run.create(cfg, callbacks=[ProgressBar(console), CsvLog(), TensorBoardLog()])
    run.train()          # or: while not run.done: row = run.step()

The run directory's layout and its checkpoints are :mod:`training.checkpoints`'.
"""

from __future__ import annotations

import csv
import math
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

import envs
from policies.algorithm import PPO_LOSSES
from training.checkpoints import (
    RunError,
    load_config,
    resume_checkpoint,
    run_dir_for,
    save_checkpoint,
    write_atomic,
)
from training.config import ConfigError, TrainConfig

DEFAULT_TIMESTEPS = 200_000
# Per module, after these: "<module>/return" and "<module>/<loss>" for each of the
# algorithm's learner metrics (``AlgorithmInfo.losses``: PPO's policy_loss, vf_loss, entropy).
METRIC_COLUMNS = [
    "iteration",
    "env_steps",
    "time_s",
    "episode_return_mean",
    "episode_len_mean",
    "win_rate",
    "sample_s",
    "learn_s",
    "env_steps_per_s",
]


def columns_for(
    modules: list[str], extra: Sequence[str] = (), losses: Sequence[str] = PPO_LOSSES
) -> list[str]:
    """metrics.csv's columns for a run with ``modules``, an algorithm's ``extra`` columns and
    its per-module learner metrics ``losses``."""
    per_module = ["return", *losses]
    return METRIC_COLUMNS + list(extra) + [f"{m}/{c}" for m in modules for c in per_module]


def seed_columns(settings: Any) -> tuple[str, ...]:
    """A stacked run's per-seed columns (``model.seeds`` > 1, as the sampler logs them)."""
    seeds = getattr(getattr(settings, "model", None), "seeds", 1)
    if seeds <= 1:
        return ()
    return tuple(f"{m}_seed{k}" for m in ("episode_return_mean", "win_rate") for k in range(seeds))


def _num(x: Any) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


def learner_scalars(result: dict) -> dict[str, dict[str, float]]:
    """Every scalar learner metric, per module (``module -> name -> value``)."""
    out = {}
    for mid, metrics in result.get("learners", {}).items():
        if mid.startswith("__") or not isinstance(metrics, dict):
            continue
        out[mid] = {k: _num(v) for k, v in metrics.items() if not isinstance(v, dict | list)}
    return out


def metrics_row(
    result: dict,
    it: int,
    elapsed: float,
    modules: list[str],
    extra: Sequence[str] = (),
    losses: Sequence[str] = PPO_LOSSES,
) -> dict[str, float]:
    er = result.get("env_runners", {})
    timers = result.get("timers", {})
    row = {
        "iteration": it,
        "env_steps": int(_num(er.get("num_env_steps_sampled_lifetime", 0))),
        "time_s": round(elapsed, 3),
        "episode_return_mean": _num(er.get("episode_return_mean")),
        "episode_len_mean": _num(er.get("episode_len_mean")),
        "win_rate": _num(er.get("win_rate")),
        "sample_s": _num(timers.get("env_runner_sampling_timer")),
        "learn_s": _num(timers.get("learner_update_timer")),
        "env_steps_per_s": _num(er.get("num_env_steps_sampled"))
        / max(_num(timers.get("training_iteration", timers.get("training_step"))), 1e-9),
    }
    own = result.get("arena", {}) or {}
    row.update({k: _num(own.get(k, er.get(k))) for k in extra})
    returns = er.get("module_episode_returns_mean", {}) or {}
    learned = learner_scalars(result)
    for mid in modules:
        row[f"{mid}/return"] = _num(returns.get(mid))
        for key in losses:
            row[f"{mid}/{key}"] = _num(learned.get(mid, {}).get(key))
    return row


def _check_tests(cfg: TrainConfig) -> None:
    """``stop_test_win_rate`` needs greedy test battles: a battle env, tests not turned off."""
    from policies.testing import BATTLE_FAMILIES, has_battles

    if not has_battles(cfg.env) or getattr(cfg.settings, "test_interval", None) == 0:
        raise ConfigError(
            f"stop_test_win_rate needs greedy test battles: an env of "
            f"{', '.join(BATTLE_FAMILIES)} with test_interval not 0 (got {cfg.env})"
        )


def read_metrics(path: Path, up_to: int) -> list[dict]:
    """The rows of ``metrics.csv`` up to iteration ``up_to``; rows that do not parse (a
    damaged file) are dropped with one warning line."""
    rows, dropped = [], 0
    if not path.exists():
        return rows
    try:
        with path.open(newline="", errors="replace") as f:
            for r in csv.DictReader(f):
                it = str(r.get("iteration") or "")
                if it.isdigit() and int(it) <= up_to:
                    rows.append(r)
                elif not it.isdigit():
                    dropped += 1
    except csv.Error:
        dropped += 1
    if dropped:
        print(f"arena: warning: {path}: dropped {dropped} unreadable row(s)", file=sys.stderr)
    return rows


class Callback:
    """Watches a :class:`Run`. Every hook is optional."""

    def on_open(self, run: Run) -> None:
        """The run is built (and restored); ``run.iteration`` is where it starts."""

    def on_iteration(
        self, run: Run, row: dict, learner: dict[str, dict[str, float]], checkpoint: Path | None
    ) -> None:
        """One counted iteration: its metrics row, every scalar learner metric per module, and
        the checkpoint written at this iteration (or None)."""

    def on_close(self, run: Run) -> None:
        """The run is over (finished, failed or interrupted)."""


class Run:
    """One training run, new or resumed. Build with :meth:`create` or :meth:`resume`.

    Attributes:
        cfg: the run's config. dir: its run directory. modules: its RLModule ids.
        iteration, env_steps: how far it has come (counted iterations only).
        algo: the RLlib Algorithm.
    """

    def __init__(
        self,
        cfg: TrainConfig,
        run_dir: Path,
        *,
        checkpoint: tuple[Path, dict] | None = None,
        address: str | None = None,
        callbacks: Sequence[Callback] = (),
        console=None,
    ):
        from rich.console import Console

        from policies import algorithm as algorithms
        from training import runtime

        cfg.validate()
        self.cfg, self.dir, self.callbacks = cfg, Path(run_dir), list(callbacks)
        self.console = console or Console()
        self.iteration, self.env_steps = (
            (checkpoint[1]["iteration"], checkpoint[1]["env_steps"]) if checkpoint else (0, 0)
        )
        info = algorithms.get(cfg.algo)
        if not (cfg.timesteps or cfg.iterations) and info.default_iterations:
            cfg.iterations = info.default_iterations
        self.target_steps = cfg.timesteps or (None if cfg.iterations else DEFAULT_TIMESTEPS)
        self.extra_metrics = (
            info.metrics
            + tuple(f"episode_{f}" for f in envs.facts(cfg.env))
            + seed_columns(cfg.settings)
        )
        self.losses = info.losses
        if cfg.stop_test_win_rate is not None:
            _check_tests(cfg)
        # the env arguments the algorithm's settings imply are the run's (config.yaml: eval and
        # serve build that env)
        cfg.env_args = info.env_config(cfg.env, cfg.settings, cfg.env_args)
        algo_config = info.build(  # checks algorithm x env before Ray starts
            cfg.env,
            cfg.settings,
            env_config=cfg.env_args,
            num_env_runners=cfg.env_runners,
            seed=cfg.seed,
            sharing=cfg.policies,
            frozen=tuple(cfg.frozen),
            learners=cfg.learners,
            gpus_per_learner=cfg.gpus_per_learner,
        )
        # the modules that act (a learner-only module, QMIX's mixer, has no return of its own)
        self.modules = [
            mid
            for mid, spec in algo_config.rl_module_spec.rl_module_specs.items()
            if not spec.learner_only
        ]
        if not (address or os.environ.get("RAY_ADDRESS")):
            check_fits(cfg, runtime.local_resources())
        if not checkpoint or not (self.dir / "config.yaml").exists():
            # everything is checked: only now does the run directory appear
            self.dir.mkdir(parents=True, exist_ok=True)
            write_atomic(self.dir / "config.yaml", yaml.safe_dump(cfg.to_dict(), sort_keys=False))
        runtime.connect(address)
        self.algo = algo_config.build_algo()
        self.algo.arena_run_dir = self.dir  # where algorithms keep their own files (a league)
        try:
            if not checkpoint and info.warm_start:
                said = info.warm_start(self.algo, cfg.settings)
                if said:
                    self.console.print(said)
            if checkpoint:
                self.algo.restore_from_path(str(checkpoint[0].resolve()))
                self.console.print(
                    f"resumed {self.dir} from {checkpoint[0].name} (iteration {self.iteration},"
                    f" {self.env_steps} env steps)"
                )
            rows = read_metrics(self.dir / "metrics.csv", self.iteration) if checkpoint else []
            self.stopped = any(map(self._reaches_stop, rows))  # a stopped run stays stopped
            elapsed = _num(rows[-1].get("time_s")) if rows else 0.0
            self._t0 = time.perf_counter() - (elapsed if math.isfinite(elapsed) else 0.0)
            self._faults = FaultWatch(self.algo, self.console)
            self._nans = NanWatch([m for m in self.modules if m not in cfg.frozen], self.losses)
            self._saved = self.iteration if checkpoint else -1
            for cb in self.callbacks:
                cb.on_open(self)
        except BaseException:
            self.algo.stop()
            raise

    @classmethod
    def create(
        cls, cfg: TrainConfig, *, out: str = "runs", name: str | None = None, **kwargs
    ) -> Run:
        """A new run in ``out/<env>/<algo>/<name>`` (refused if that holds anything)."""
        cfg.validate()
        run_dir = run_dir_for(cfg, out, name)
        if run_dir.exists() and any(run_dir.iterdir()):
            raise RunError(
                f"{run_dir} exists already; pick another --name or use --resume {run_dir}"
            )
        return cls(cfg, run_dir, **kwargs)

    @classmethod
    def resume(
        cls,
        run_dir: str | Path,
        *,
        checkpoint: str | None = None,
        more: dict[str, int] | None = None,
        **kwargs,
    ) -> Run:
        """``run_dir`` from ``checkpoint`` (``iter_N``) or its newest sound checkpoint, with
        a new target ``more={"iterations": N}`` / ``{"timesteps": N}`` or other
        ``env_runners``."""
        run_dir = Path(run_dir)
        cfg = load_config(run_dir)
        point = resume_checkpoint(run_dir, checkpoint)
        for key, value in (more or {}).items():
            setattr(cfg, key, value)
            if key in ("iterations", "timesteps"):
                setattr(cfg, "timesteps" if key == "iterations" else "iterations", None)
        return cls(cfg, run_dir, checkpoint=point, **kwargs)

    @property
    def total(self) -> int:
        """The target, in the unit of :attr:`progress`: iterations or env steps."""
        return self.cfg.iterations or self.target_steps

    @property
    def progress(self) -> int:
        return self.iteration if self.cfg.iterations else min(self.env_steps, self.total)

    @property
    def done(self) -> bool:
        return self.stopped or self.progress >= self.total

    def _reaches_stop(self, row: dict) -> bool:
        """Whether ``row``'s greedy test reached ``stop_test_win_rate`` (ODIS's stop_winrate)."""
        stop = self.cfg.stop_test_win_rate
        return stop is not None and _num(row.get("test_battle_won_mean")) >= stop

    def step(self) -> dict[str, Any]:
        """Trains one counted iteration (iterations that sampled nothing, while RLlib
        restarts lost EnvRunners, are repeated), checkpoints when due and at the end, tells
        the callbacks; returns the metrics row."""
        while True:
            result = self.algo.train()
            if self._faults.counts(result):
                break
        self.iteration += 1
        row = metrics_row(
            result,
            self.iteration,
            time.perf_counter() - self._t0,
            self.modules,
            self.extra_metrics,
            self.losses,
        )
        learner = learner_scalars(result)
        self._nans.check(learner, self.dir)
        self.env_steps = row["env_steps"]
        if self._reaches_stop(row):
            self.stopped = True
            self.console.print(
                f"arena: iteration {self.iteration}: greedy test win rate "
                f"{_num(row['test_battle_won_mean']):.0%} reached stop_test_win_rate "
                f"{self.cfg.stop_test_win_rate:g}; stopping here"
            )
        every = self.cfg.checkpoint_every  # 0: only at the end
        due = (every > 0 and self.iteration % every == 0) or self.done
        ckpt = self.checkpoint() if due else None
        for cb in self.callbacks:
            cb.on_iteration(self, row, learner, ckpt)
        return row

    def checkpoint(self) -> Path | None:
        """Saves (or returns) the checkpoint of the current iteration; None where its
        weights are not all finite (nothing is written)."""
        path = self.dir / "checkpoints" / f"iter_{self.iteration:06d}"
        if self._saved != self.iteration or not path.exists():
            path = save_checkpoint(
                self.algo, self.dir, self.iteration, self.env_steps, self.cfg.keep_checkpoints
            )
            if path is None:
                self.console.print(
                    f"arena: iteration {self.iteration}: weights are not finite; no checkpoint "
                    "written (checkpoints/latest names the last sound one)"
                )
                return None
            self._saved = self.iteration
        return path

    def train(self) -> Path:
        """Steps until the target, then closes; returns the run directory."""
        try:
            while not self.done:
                self.step()
            self.checkpoint()  # a resumed run that was already done has one anyway
        finally:
            self.close()
        return self.dir

    def close(self) -> None:
        if self.algo is None:
            return
        try:
            for cb in self.callbacks:
                cb.on_close(self)
        finally:
            self.algo.stop()
            self.algo = None


class CsvLog(Callback):
    """``metrics.csv``, one line appended per iteration. A resumed run first drops the rows
    after its checkpoint (rewriting the file once, atomically)."""

    def on_open(self, run: Run) -> None:
        self.path = run.dir / "metrics.csv"
        self.columns = columns_for(run.modules, run.extra_metrics, run.losses)
        rows = read_metrics(self.path, run.iteration) if run.iteration else []
        lines = [",".join(self.columns)]
        lines += [",".join(str(r.get(c) or "") for c in self.columns) for r in rows]
        write_atomic(self.path, "\n".join(lines) + "\n")

    def on_iteration(self, run, row, learner, checkpoint) -> None:
        with self.path.open("a") as f:
            f.write(",".join(str(row.get(c, "")) for c in self.columns) + "\n")


class TensorBoardLog(Callback):
    """TensorBoard scalars in ``tb/``, at the env steps of their iteration (the x axis papers
    plot): every row column, and every scalar learner metric as ``learner/<module>/<name>``."""

    def on_open(self, run: Run) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.tb = SummaryWriter(str(run.dir / "tb"), purge_step=run.env_steps + 1)

    def on_iteration(self, run, row, learner, checkpoint) -> None:
        step = int(row["env_steps"])
        for key, value in row.items():
            if key != "env_steps" and not math.isnan(_num(value)):
                self.tb.add_scalar(key, _num(value), step)
        for mid, metrics in learner.items():
            for key, value in metrics.items():
                if not math.isnan(value):
                    self.tb.add_scalar(f"learner/{mid}/{key}", value, step)
        self.tb.flush()

    def on_close(self, run: Run) -> None:
        self.tb.close()


class ProgressBar(Callback):
    """A rich progress bar (iterations or env steps), and a line every ``curve_every``
    iterations."""

    def __init__(self, console=None, curve_every: int = 0):
        self.console, self.curve_every = console, curve_every

    def on_open(self, run: Run) -> None:
        self.test_win = ""
        from policies import algorithm as algorithms

        self.status = algorithms.get(run.cfg.algo).status
        self.bar = _progress(self.console or run.console)
        self.bar.start()
        self.task = self.bar.add_task(
            "train",
            total=run.total,
            completed=run.progress,
            ret=math.nan,
            it=run.iteration,
            sps=0.0,
            steps=run.env_steps,
            win="",
            mods="",
        )

    def on_iteration(self, run, row, learner, checkpoint) -> None:
        mods = module_returns_text(row, run.modules)
        # Battle envs (SMAC) report a win rate; others leave the column empty. Greedy test
        # battles (the value-based algorithms play them every test_interval env steps) are
        # what SMAC papers report: their last rate is shown where there is one.
        test = _num(row.get("test_battle_won_mean"))
        if not math.isnan(test):
            self.test_win = f"test win {test:.0%}"
        win = "" if math.isnan(row["win_rate"]) else f"win {row['win_rate']:.0%}"
        win = self.test_win or win
        if self.status is not None:
            text, warning = self.status(row)
            win = win or text
            if warning:
                line = f"iter {run.iteration}: {warning}"
                self.bar.console.print(line, style="yellow", markup=False)
        self.bar.update(
            self.task,
            completed=run.progress,
            ret=row["episode_return_mean"],
            it=run.iteration,
            sps=row["env_steps_per_s"],
            steps=run.env_steps,
            win=win,
            mods=mods,
        )
        if self.curve_every and run.iteration % self.curve_every == 0:
            self.bar.console.print(
                f"iter {run.iteration:4d}  env steps {run.env_steps:>9,}  return "
                f"{row['episode_return_mean']:8.2f}  {row['env_steps_per_s']:8.0f} steps/s  "
                f"{win} {mods}"
            )

    def on_close(self, run: Run) -> None:
        self.bar.stop()


def _flat(row: dict, learner: dict[str, dict[str, float]]) -> dict[str, float]:
    """A row and the learner metrics as finite numbers by name (what loggers take)."""
    out = {k: _num(v) for k, v in row.items()}
    out.update(
        {f"learner/{m}/{k}": v for m, metrics in learner.items() for k, v in metrics.items()}
    )
    return {k: v for k, v in out.items() if math.isfinite(v)}


class WandbLog(Callback):
    """Weights & Biases: the run's config, and every iteration's metrics at its env steps.
    Offline by default (``wandb/`` in the run directory; ``wandb sync`` uploads it later);
    ``WANDB_MODE=online`` and a logged-in ``wandb`` send it as it goes. A resumed run goes on
    in the same W&B run (its id is the run directory's name)."""

    def on_open(self, run: Run) -> None:
        import wandb

        self.wandb = wandb.init(
            project=os.environ.get("WANDB_PROJECT", "arena"),
            name=run.dir.name,
            id=f"{run.cfg.env.replace('/', '-')}-{run.cfg.algo}-{run.dir.name}"[:128],
            dir=str(run.dir),
            mode=os.environ.get("WANDB_MODE", "offline"),
            config=run.cfg.to_dict(),
            resume="allow",
            settings=wandb.Settings(silent=True, console="off"),
        )

    def on_iteration(self, run, row, learner, checkpoint) -> None:
        self.wandb.log(_flat(row, learner), step=int(row["env_steps"]))

    def on_close(self, run: Run) -> None:
        self.wandb.finish()


class MlflowLog(Callback):
    """MLflow: the run's config as parameters, every iteration's metrics at its env steps, in
    the tracking store of ``MLFLOW_TRACKING_URI`` or else the run directory's ``mlruns/`` (a
    local file store: ``mlflow ui --backend-store-uri RUN/mlruns``)."""

    def on_open(self, run: Run) -> None:
        import mlflow

        uri = os.environ.get("MLFLOW_TRACKING_URI")
        if not uri:  # the local file store: no server, no database; MLflow 3 asks to opt in
            uri = (run.dir / "mlruns").resolve().as_uri()
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        self.client = mlflow.MlflowClient(tracking_uri=uri)
        name = os.environ.get("MLFLOW_EXPERIMENT_NAME", "arena")
        experiment = self.client.get_experiment_by_name(name)
        eid = experiment.experiment_id if experiment else self.client.create_experiment(name)
        found = self.client.search_runs([eid], f"tags.arena_run = '{run.dir.resolve()}'")
        if found:  # a resumed run goes on in its MLflow run
            self.run_id = found[0].info.run_id
            self.client.update_run(self.run_id, status="RUNNING")
        else:
            made = self.client.create_run(eid, run_name=run.dir.name,
                                          tags={"arena_run": str(run.dir.resolve())})  # fmt: skip
            self.run_id = made.info.run_id
            flat = _flat_config(run.cfg.to_dict())
            for key, value in flat.items():
                self.client.log_param(self.run_id, key[:250], str(value)[:6000])

    def on_iteration(self, run, row, learner, checkpoint) -> None:
        from mlflow.entities import Metric

        step, now = int(row["env_steps"]), int(time.time() * 1000)
        metrics = [
            Metric(k.replace("/", "."), v, now, step) for k, v in _flat(row, learner).items()
        ]
        self.client.log_batch(self.run_id, metrics=metrics)

    def on_close(self, run: Run) -> None:
        self.client.set_terminated(self.run_id)


def _flat_config(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flat_config(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


LOGGER_CALLBACKS = {"csv": CsvLog, "tensorboard": TensorBoardLog, "wandb": WandbLog,
                    "mlflow": MlflowLog}  # fmt: skip


def user_callback(ref: str) -> Callback:
    """The callback ``module:Class`` names (a :class:`Callback` built without arguments); one
    that cannot be imported or is no Callback is a :class:`RunError` naming it."""
    import importlib

    module, _, name = ref.partition(":")
    try:
        cls = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as e:
        raise RunError(f"callback {ref}: cannot import it ({e})") from None
    if not (isinstance(cls, type) and issubclass(cls, Callback)):
        raise RunError(f"callback {ref} is not a training.run.Callback subclass")
    return cls()


def default_callbacks(
    console=None, curve_every: int = 0, cfg: TrainConfig | None = None
) -> list[Callback]:
    """What ``arena train`` uses: the progress bar, the run's loggers (metrics.csv and
    TensorBoard unless ``cfg.loggers`` says otherwise) and its own callbacks."""
    loggers = cfg.loggers if cfg is not None else ["csv", "tensorboard"]
    callbacks: list[Callback] = [ProgressBar(console, curve_every)]
    callbacks += [LOGGER_CALLBACKS[name]() for name in loggers]
    callbacks += [user_callback(ref) for ref in (cfg.callbacks if cfg is not None else [])]
    return callbacks


def train(
    cfg: TrainConfig | None,
    *,
    out: str = "runs",
    name: str | None = None,
    address: str | None = None,
    resume: str | None = None,
    more: dict[str, int] | None = None,
    checkpoint: str | None = None,
    console=None,
    curve_every: int = 0,
) -> Path:
    """Trains ``cfg`` to its target with the default callbacks (or resumes the run directory
    ``resume``, see :meth:`Run.resume`); returns the run directory."""
    loaded = load_config(Path(resume)) if resume else cfg
    callbacks = default_callbacks(console, curve_every, loaded)
    if resume:
        run = Run.resume(
            resume,
            checkpoint=checkpoint,
            more=more,
            address=address,
            callbacks=callbacks,
            console=console,
        )
    else:
        run = Run.create(
            cfg, out=out, name=name, address=address, callbacks=callbacks, console=console
        )
    return run.train()


def check_fits(cfg: TrainConfig, resources: dict) -> None:
    """Refuses, before Ray starts, a run the embedded Ray could never schedule (it would wait
    for CPUs or GPUs forever): each EnvRunner takes a CPU, each Learner a CPU or its GPUs."""
    cpus = cfg.env_runners + (cfg.learners if cfg.gpus_per_learner == 0 else 0)
    gpus = cfg.learners * cfg.gpus_per_learner
    have_cpus = resources.get("num_cpus", 0)
    if "num_gpus" in resources:
        have_gpus = resources["num_gpus"]
    else:  # what Ray would detect
        import torch

        have_gpus = torch.cuda.device_count()
    if cpus > have_cpus:
        raise RunError(
            f"--env-runners {cfg.env_runners} and --learners {cfg.learners} need {cpus} CPUs; "
            f"this machine has {have_cpus} (the driver samples and learns itself with 0 of each)"
        )
    if gpus > have_gpus:
        raise RunError(
            f"--learners {cfg.learners} x --gpus-per-learner {cfg.gpus_per_learner} "
            f"need {gpus:g} GPUs; this machine has {have_gpus}"
        )


class NanWatch:
    """Stops a run where any of its algorithm's learner metrics (``losses``) of a trained
    module has not been finite for ``PATIENCE`` iterations in a row (it would only write NaN
    weights from then on)."""

    PATIENCE = 3

    def __init__(self, trained: list[str], losses: Sequence[str] = PPO_LOSSES):
        self.trained, self.losses, self.bad = trained, tuple(losses), 0

    def check(self, learner: dict[str, dict[str, float]], run: Path) -> None:
        # A module that has not been updated yet (GRPO whose groups all had equal rewards, a
        # Q-learner whose replay is still filling) reports no loss at all: no divergence.
        values = [
            learner[m][k] for m in self.trained for k in self.losses if k in learner.get(m, {})
        ]
        self.bad = self.bad + 1 if values and not all(map(math.isfinite, values)) else 0
        if self.bad >= self.PATIENCE:
            raise RunError(
                f"losses were not finite for {self.PATIENCE} iterations (a learning rate too "
                f"high?); stopped before checkpointing broken weights; {run} keeps its last "
                "checkpoint"
            )


class FaultWatch:
    """Says when RLlib restarted a lost EnvRunner, and keeps iterations that sampled nothing
    (all EnvRunners lost) from counting toward ``--iterations``."""

    MAX_EMPTY = 10

    def __init__(self, algo, console):
        self.group, self.console = algo.env_runner_group, console
        self.restarts = self._restarts()
        self.empty = 0

    def _restarts(self) -> int:
        return self.group.num_remote_worker_restarts() if self.group is not None else 0

    def counts(self, result: dict) -> bool:
        """Whether this iteration trained on samples (and so counts)."""
        now = self._restarts()
        if now > self.restarts:
            self.console.print(
                f"arena: an EnvRunner was lost and restarted ({now} restart(s) so far)"
            )
            self.restarts = now
        sampled = _num(result.get("env_runners", {}).get("num_env_steps_sampled", 0))
        if sampled > 0:
            self.empty = 0
            return True
        self.empty += 1
        if self.empty >= self.MAX_EMPTY:
            raise RunError(
                f"{self.MAX_EMPTY} iterations in a row sampled nothing: the EnvRunners keep "
                "failing (their logs are in Ray's session folder)"
            )
        return False


def module_returns_text(row: dict, modules: list[str]) -> str:
    """Per-module returns for the progress bar, where there is more than one module."""
    if len(modules) < 2:
        return ""
    return "(" + ", ".join(f"{m} {row[f'{m}/return']:.1f}" for m in modules) + ")"


WIDE = 120
"""Terminals at least this wide get the full progress bar; narrower ones (80 columns) a
compact line whose every field still fits."""


def _progress(console):
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    console = console or Console()
    if console.width >= WIDE:
        columns = [
            TextColumn("iter {task.fields[it]}"),
            BarColumn(),
            TextColumn("{task.fields[steps]:,} env steps"),
            TextColumn("return {task.fields[ret]:.2f} {task.fields[mods]}"),
            TextColumn("{task.fields[win]}"),
            TextColumn("{task.fields[sps]:.0f} steps/s"),
        ]
    else:  # no bar and no per-module returns: about 75 columns
        columns = [
            TextColumn("iter {task.fields[it]}"),
            TextColumn("{task.fields[steps]:,} steps"),
            TextColumn("ret {task.fields[ret]:.2f}"),
            TextColumn("{task.fields[win]}"),
            TextColumn("{task.fields[sps]:.0f}/s"),
        ]
    return Progress(
        *columns,
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=console,
        transient=False,
    )
