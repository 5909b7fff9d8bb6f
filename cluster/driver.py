"""The training driver: loop, progress, metrics, checkpoints and resume; and evaluation.

A run directory ``runs/<env id>/<algo>/<run>/`` holds

* ``config.yaml``: the resolved :class:`cluster.config.TrainConfig`;
* ``checkpoints/iter_NNNNNN/``: RLlib checkpoints plus ``arena.json`` (iteration, env steps),
  ``checkpoints/latest``: the name of the newest complete one;
* ``metrics.csv`` and TensorBoard events (``tb/``);
* ``eval.json`` and media from ``arena eval``.

Every file is written to a temporary name and renamed, so a crash leaves the last complete
checkpoint and the metrics up to it; ``--resume`` goes on from there.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from cluster.config import ConfigError, TrainConfig

DEFAULT_TIMESTEPS = 200_000
# Per module, after these: "<module>/return", "<module>/policy_loss", ... (MODULE_COLUMNS).
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

MODULE_COLUMNS = ["return", "policy_loss", "vf_loss", "entropy"]


def columns_for(modules: list[str]) -> list[str]:
    """metrics.csv's columns for a run with ``modules``."""
    return METRIC_COLUMNS + [f"{m}/{c}" for m in modules for c in MODULE_COLUMNS]


class RunError(ValueError):
    """A run directory that cannot be used (missing, or without a checkpoint)."""


def write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def run_dir_for(cfg: TrainConfig, out: str, name: str | None) -> Path:
    name = name or time.strftime("%Y%m%d-%H%M%S") + f"-s{cfg.seed}"
    return Path(out) / cfg.env / cfg.algo / name


def latest_checkpoint(run: Path) -> Path:
    """The newest complete checkpoint of ``run``, or a :class:`RunError`."""
    if not (run / "config.yaml").exists():
        raise RunError(f"{run} is not a run directory (no config.yaml)")
    pointer = run / "checkpoints" / "latest"
    if not pointer.exists():
        raise RunError(f"{run} has no checkpoint yet (no checkpoints/latest)")
    ckpt = run / "checkpoints" / pointer.read_text().strip()
    if not (ckpt / "arena.json").exists():
        raise RunError(f"{run}: checkpoint {ckpt.name} is incomplete")
    return ckpt


def load_config(run: Path) -> TrainConfig:
    from cluster.config import read_config_file

    if not (run / "config.yaml").exists():
        raise RunError(f"{run} is not a run directory (no config.yaml)")
    try:
        cfg = TrainConfig.from_dict(read_config_file(run / "config.yaml"))
        cfg.validate()
    except ConfigError as e:
        raise RunError(f"{run / 'config.yaml'}: {e}") from None
    return cfg


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


def metrics_row(result: dict, it: int, elapsed: float, modules: list[str]) -> dict[str, float]:
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
    returns = er.get("module_episode_returns_mean", {}) or {}
    learned = learner_scalars(result)
    for mid in modules:
        row[f"{mid}/return"] = _num(returns.get(mid))
        for key in MODULE_COLUMNS[1:]:
            row[f"{mid}/{key}"] = _num(learned.get(mid, {}).get(key))
    return row


def read_metrics(path: Path, up_to: int) -> list[dict]:
    """The rows of ``metrics.csv`` up to iteration ``up_to``; rows that do not parse (a
    damaged file) are dropped with one warning line."""
    rows, dropped = [], 0
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


class MetricsLog:
    """``metrics.csv`` (rewritten atomically each iteration) plus TensorBoard scalars (every
    row column, and every scalar learner metric as ``learner/<module>/<name>``)."""

    def __init__(self, run: Path, columns: list[str], resume_iteration: int = 0):
        self.path = run / "metrics.csv"
        self.columns = columns
        self.rows: list[dict] = []
        if resume_iteration and self.path.exists():
            self.rows = read_metrics(self.path, resume_iteration)
        from torch.utils.tensorboard import SummaryWriter

        self.tb = SummaryWriter(str(run / "tb"), purge_step=resume_iteration + 1 or None)

    def add(self, row: dict, learner: dict[str, dict[str, float]] | None = None) -> None:
        self.rows.append(row)
        lines = [",".join(self.columns)]
        lines += [",".join(str(r.get(c, "")) for c in self.columns) for r in self.rows]
        write_atomic(self.path, "\n".join(lines) + "\n")
        it = row["iteration"]
        for key, value in row.items():
            if key != "iteration" and not math.isnan(_num(value)):
                self.tb.add_scalar(key, _num(value), it)
        for mid, metrics in (learner or {}).items():
            for key, value in metrics.items():
                if not math.isnan(value):
                    self.tb.add_scalar(f"learner/{mid}/{key}", value, it)
        self.tb.flush()

    def close(self) -> None:
        self.tb.close()


def save_checkpoint(algo, run: Path, it: int, env_steps: int, keep: int) -> Path:
    """RLlib's checkpoint (for resume) plus each module's plain weights in ``weights/`` (for
    eval and serve, which never unpickle) and ``arena.json`` (iteration, env steps, and the
    size and sha256 of every file, so a damaged checkpoint is found before it is loaded)."""
    from policies.inference import WEIGHTS_DIR, save_weights

    ckdir = run / "checkpoints"
    ckdir.mkdir(parents=True, exist_ok=True)
    name = f"iter_{it:06d}"
    tmp = ckdir / f".{name}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    algo.save_to_path(str(tmp.resolve()))
    save_weights(algo.learner_group.get_weights(), tmp / WEIGHTS_DIR)
    meta = {"iteration": it, "env_steps": env_steps, "files": file_digests(tmp)}
    (tmp / "arena.json").write_text(json.dumps(meta, indent=1))
    final = ckdir / name
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)
    write_atomic(ckdir / "latest", name)
    for old in sorted(ckdir.glob("iter_*"))[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def train(
    cfg: TrainConfig,
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
    """Trains ``cfg`` (or resumes the run directory ``resume`` from ``checkpoint`` or its
    newest sound checkpoint, optionally with a new target ``more={"iterations": N}`` or
    ``{"timesteps": N}`` and other ``env_runners``); returns the run directory."""
    from rich.console import Console

    from cluster import runtime
    from policies import algorithm as algorithms

    console = console or Console()
    start_it, start_steps = 0, 0
    if resume:
        run = Path(resume)
        cfg = load_config(run)
        ckpt, meta = resume_checkpoint(run, checkpoint)
        for key, value in (more or {}).items():  # a new target, or other EnvRunners
            setattr(cfg, key, value)
            if key in ("iterations", "timesteps"):
                setattr(cfg, "timesteps" if key == "iterations" else "iterations", None)
        cfg.validate()
        start_it, start_steps = meta["iteration"], meta["env_steps"]
    else:
        cfg.validate()
        run = run_dir_for(cfg, out, name)
        if run.exists() and any(run.iterdir()):
            raise RunError(f"{run} exists already; pick another --name or use --resume {run}")
    target_steps = cfg.timesteps or (None if cfg.iterations else DEFAULT_TIMESTEPS)

    info = algorithms.get(cfg.algo)
    algo_config = info.build(  # checks the algorithm against the env before Ray starts
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
    modules = list(algo_config.rl_module_spec.rl_module_specs)
    if not (address or os.environ.get("RAY_ADDRESS")):
        check_fits(cfg, runtime.local_resources())
    if not resume:  # everything is checked: only now does the run directory appear
        run.mkdir(parents=True, exist_ok=True)
        write_atomic(run / "config.yaml", yaml.safe_dump(cfg.to_dict(), sort_keys=False))
    runtime.connect(address)
    algo = algo_config.build_algo()
    if resume:
        algo.restore_from_path(str(ckpt.resolve()))
        console.print(
            f"resumed {run} from {ckpt.name} (iteration {start_it}, {start_steps} env steps)"
        )
    log = MetricsLog(run, columns_for(modules), start_it)
    it, steps = start_it, start_steps
    elapsed = _num(log.rows[-1].get("time_s")) if log.rows else 0.0
    t0 = time.perf_counter() - (elapsed if math.isfinite(elapsed) else 0.0)
    try:
        with _progress(console) as progress:
            total = cfg.iterations if cfg.iterations else target_steps
            task = progress.add_task(
                "train",
                total=total,
                completed=it if cfg.iterations else steps,
                ret=math.nan,
                it=it,
                sps=0.0,
                steps=steps,
                win="",
                mods="",
            )
            faults = FaultWatch(algo, progress.console)
            nan_watch = NanWatch([m for m in modules if m not in cfg.frozen])
            while (it < cfg.iterations) if cfg.iterations else (steps < target_steps):
                result = algo.train()
                if not faults.counts(result):
                    continue
                it += 1
                row = metrics_row(result, it, time.perf_counter() - t0, modules)
                nan_watch.check(row, run)
                steps = row["env_steps"]
                log.add(row, learner_scalars(result))
                mods = module_returns_text(row, modules)
                # Battle envs (SMAC) report a win rate; others leave the column empty.
                win = "" if math.isnan(row["win_rate"]) else f"win {row['win_rate']:.0%}"
                progress.update(
                    task,
                    completed=it if cfg.iterations else min(steps, total),
                    ret=row["episode_return_mean"],
                    it=it,
                    sps=row["env_steps_per_s"],
                    steps=steps,
                    win=win,
                    mods=mods,
                )
                if curve_every and it % curve_every == 0:
                    progress.console.print(
                        f"iter {it:4d}  env steps {steps:>9,}  return {row['episode_return_mean']:8.2f}"
                        f"  {row['env_steps_per_s']:8.0f} steps/s  {win} {mods}"
                    )
                if it % cfg.checkpoint_every == 0:
                    save_checkpoint(algo, run, it, steps, cfg.keep_checkpoints)
        if not (run / "checkpoints" / f"iter_{it:06d}").exists():
            save_checkpoint(algo, run, it, steps, cfg.keep_checkpoints)
    finally:
        log.close()
        algo.stop()
    return run


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
    """Stops a run whose trained modules' losses have not been finite for ``PATIENCE``
    iterations in a row (it would only write NaN weights from then on)."""

    PATIENCE = 3

    def __init__(self, trained: list[str]):
        self.trained, self.bad = trained, 0

    def check(self, row: dict, run: Path) -> None:
        losses = [_num(row.get(f"{m}/policy_loss")) for m in self.trained]
        self.bad = self.bad + 1 if losses and not any(map(math.isfinite, losses)) else 0
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


def _progress(console):
    from rich.progress import (
        BarColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    return Progress(
        TextColumn("iter {task.fields[it]}"),
        BarColumn(),
        TextColumn("{task.fields[steps]:,} env steps"),
        TextColumn("return {task.fields[ret]:.2f} {task.fields[mods]}"),
        TextColumn("{task.fields[win]}"),
        TextColumn("{task.fields[sps]:.0f} steps/s"),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=console,
        transient=False,
    )


def play(
    env_id: str,
    env_args: dict,
    act,
    episodes: int,
    seed: int,
    render: str | None = None,
    reset=None,
):
    """Plays ``episodes`` episodes of ``env_id`` with ``act(obs, state) -> actions`` (and
    ``reset()`` at each episode start, for recurrent policies); returns the summary dict (and
    writes an animation of the first episode to ``render``). Returns are given per agent and
    per agent group (the sum over the group's agents)."""
    import envs
    from envs.vector import agent_groups

    env = envs.make(env_id, **env_args, **({"render_mode": "rgb_array"} if render else {}))
    groups = agent_groups(env)
    totals, per_agent, wins, lengths, frames = [], {a: [] for a in env.possible_agents}, [], [], []
    for ep in range(episodes):
        obs, infos = env.reset(seed=seed + ep)
        if reset is not None:
            reset()
        ret = dict.fromkeys(env.possible_agents, 0.0)
        n, won = 0, None
        while env.agents:
            if render and ep == 0:
                frames.append(env.render())
            state = env.state() if hasattr(env, "state") else None
            obs, rew, term, trunc, infos = env.step(act(obs, state))
            for a, r in rew.items():
                ret[a] += float(r)
            n += 1
            for info in infos.values():
                if "battle_won" in info:
                    won = bool(info["battle_won"])
        totals.append(sum(ret.values()))
        lengths.append(n)
        for a in env.possible_agents:
            per_agent[a].append(ret[a])
        if won is not None:
            wins.append(won)
    env.close()
    summary = {
        "env": env_id,
        "episodes": episodes,
        "return_mean": float(np.mean(totals)),
        "return_std": float(np.std(totals)),
        "episode_len_mean": float(np.mean(lengths)),
        "per_agent_return_mean": {a: float(np.mean(v)) for a, v in per_agent.items()},
        "per_group_return_mean": {
            g.name: float(np.mean(np.sum([per_agent[a] for a in g.agents], axis=0)))
            for g in groups.values()
        },
        "per_group_return_std": {
            g.name: float(np.std(np.sum([per_agent[a] for a in g.agents], axis=0)))
            for g in groups.values()
        },
        "win_rate": float(np.mean(wins)) if wins else None,
    }
    if render and frames:
        import imageio.v2 as imageio

        Path(render).parent.mkdir(parents=True, exist_ok=True)
        fps = env.metadata.get("render_fps", 10)
        imageio.mimsave(render, [np.asarray(f) for f in frames], duration=1 / fps, loop=0)
        summary["animation"] = str(render)
    return summary


def random_actor(env_id: str, env_args: dict, seed: int):
    """``act(obs, state)`` drawing uniformly random legal actions."""
    import envs

    env = envs.make(env_id, **env_args)
    rng = np.random.default_rng(seed)

    def act(obs, state):
        out = {}
        for a, o in obs.items():
            if isinstance(o, dict) and "action_mask" in o:
                out[a] = int(rng.choice(np.flatnonzero(o["action_mask"])))
            else:
                space = env.action_space(a)
                space.seed(int(rng.integers(2**31)))
                out[a] = space.sample()
        return out

    return act


def file_digests(root: Path) -> dict[str, dict]:
    """Size and sha256 of every file under ``root``, by relative path."""
    out = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file() and p.name != "arena.json"):
        out[str(path.relative_to(root))] = {
            "bytes": path.stat().st_size,
            "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
        }
    return out


def checkpoint_meta(ckpt: Path) -> dict:
    """``arena.json`` of ``ckpt``, checked: iteration and env steps as integers; every file it
    records present with its size and hash. Anything else is a :class:`RunError` naming it."""
    try:
        meta = json.loads((ckpt / "arena.json").read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise RunError(
            f"{ckpt / 'arena.json'} is missing or damaged ({type(e).__name__})"
        ) from None
    ok = isinstance(meta, dict) and all(
        isinstance(meta.get(k), int) and not isinstance(meta.get(k), bool) and meta[k] >= 0
        for k in ("iteration", "env_steps")
    )
    if not ok:
        raise RunError(f"{ckpt / 'arena.json'} lacks a valid iteration and env_steps")
    files = meta.get("files")
    if files is None:
        return meta  # written before files were recorded: the loaders' own checks still apply
    if not isinstance(files, dict):
        raise RunError(f"{ckpt / 'arena.json'}: 'files' is not a mapping")
    for rel, want in files.items():
        path = ckpt / rel
        data = path.read_bytes() if path.is_file() else None
        if (
            data is None
            or not isinstance(want, dict)
            or len(data) != want.get("bytes")
            or hashlib.sha256(data).hexdigest() != want.get("sha256")
        ):
            raise RunError(
                f"{path} is missing or damaged (its size or hash differs from arena.json)"
            )
    return meta


def verify_weights(ckpt: Path) -> None:
    """Checks a checkpoint before its weights are loaded (see :func:`checkpoint_meta`)."""
    checkpoint_meta(ckpt)


def resume_checkpoint(run: Path, name: str | None) -> tuple[Path, dict]:
    """The checkpoint to resume: ``name`` (``iter_N``) if given, else the newest one that
    verifies; a damaged newer one is skipped with one warning line."""
    ckdir = run / "checkpoints"
    if name is not None:
        ckpt = ckdir / name
        if not ckpt.is_dir():
            have = sorted(p.name for p in ckdir.glob("iter_*")) if ckdir.is_dir() else []
            raise RunError(f"{run} has no checkpoint {name!r}; it has {have or 'none'}")
        return ckpt, checkpoint_meta(ckpt)
    latest = latest_checkpoint(run).name
    candidates = sorted((p for p in ckdir.glob("iter_*") if p.name <= latest), reverse=True)
    problems = []
    for ckpt in candidates:
        try:
            meta = checkpoint_meta(ckpt)
        except RunError as e:
            problems.append(str(e))
            continue
        if problems:
            print(
                f"arena: warning: {problems[0]}; resuming from {ckpt.name} instead", file=sys.stderr
            )
        return ckpt, meta
    raise RunError(problems[0] if problems else f"{run} has no checkpoint to resume")


def module_specs(run: str | Path):
    """The ``MultiRLModuleSpec`` of ``run``'s modules, from its ``config.yaml`` and its env's
    spaces (this builds the env once)."""
    from policies import algorithm as algorithms

    cfg = load_config(Path(run))
    return algorithms.get(cfg.algo).modules(
        cfg.env, cfg.settings, env_config=cfg.env_args, sharing=cfg.policies
    )


def load_policy(run: str | Path, checkpoint: str | Path | None = None, specs=None):
    """The run's policy (``policies.inference.Policy``) from a checkpoint's plain weights,
    rebuilt from ``config.yaml`` and the env's spaces (or ``specs``, from
    :func:`module_specs`): nothing in the run is unpickled."""
    from policies.inference import WEIGHTS_DIR, Policy, WeightsError

    run = Path(run)
    ckpt = Path(checkpoint) if checkpoint else latest_checkpoint(run)
    verify_weights(ckpt)
    specs = specs if specs is not None else module_specs(run)
    try:
        return Policy.from_weights(specs, ckpt / WEIGHTS_DIR)
    except WeightsError as e:
        raise RunError(str(e)) from None


def evaluate(
    run: str | Path,
    episodes: int = 100,
    render: str | None = None,
    explore: bool = False,
    seed: int = 10_000,
    random_modules: list[str] | None = None,
) -> dict:
    """Rebuilds the modules of ``run`` around its plain weights (no unpickling) and plays
    ``episodes``; writes ``eval.json``.
    The agents of ``random_modules`` act uniformly at random instead (a baseline for one
    side of a competitive env)."""
    run = Path(run)
    if episodes <= 0:
        raise ConfigError(f"--episodes must be positive, got {episodes}")
    ckpt = latest_checkpoint(run)
    cfg = load_config(run)
    policy = load_policy(run, ckpt)
    random_modules = list(random_modules or [])
    unknown = sorted(set(random_modules) - set(policy.modules))
    if unknown:
        raise ConfigError(f"--random {unknown}: the run's modules are {sorted(policy.modules)}")
    randomised = {a for m in random_modules for a in policy.modules[m].agents}
    rand = random_actor(cfg.env, cfg.env_args, seed)

    def act(obs, state):
        mine = {a: o for a, o in obs.items() if a not in randomised}
        out = policy.act(mine, state, explore) if mine else {}
        others = {a: o for a, o in obs.items() if a in randomised}
        return {**out, **(rand(others, state) if others else {})}

    summary = play(cfg.env, cfg.env_args, act, episodes, seed, render, reset=policy.reset)
    summary.update(
        {
            "run": str(run),
            "checkpoint": ckpt.name,
            "greedy": not explore,
            "modules": {m: list(p.agents) for m, p in policy.modules.items()},
            "random_modules": random_modules,
        }
    )
    name = "eval.json" if not random_modules else f"eval-random-{'-'.join(random_modules)}.json"
    summary["path"] = str(run / name)
    write_atomic(run / name, json.dumps(summary, indent=2))
    return summary


def random_baseline(env_id: str, env_args: dict, episodes: int = 100, seed: int = 10_000) -> dict:
    """The same summary for uniformly random legal actions."""
    return play(env_id, env_args, random_actor(env_id, env_args, seed), episodes, seed)


__all__ = ["ConfigError", "RunError", "evaluate", "random_baseline", "train"]
