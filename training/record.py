"""Offline datasets: a policy's multi-agent episodes recorded by Ray actors into Parquet
through Ray Data, resumable, each with a dataset card (``arena record``, docs/offline.md).

A dataset directory holds

* ``data/shard-NNNNN/*.parquet``: one row per env step (the columns: :data:`COLUMNS`); shard
  ``k`` holds episodes ``k*S .. (k+1)*S - 1`` (``S``: ``--shard-episodes``), episode ``i``
  played from env seed ``seed + i``, so a shard's content is fixed before it is played;
* ``manifest.json``: what is recorded (env, policy, seeds, sizes) and the committed shards
  with each episode's return, length and outcome. A shard is written by Ray Data to
  ``.partial/`` and renamed into ``data/`` before the manifest (written to a temporary name
  and renamed) lists it, so a killed recording leaves complete shards only; the same command
  again records the shards the manifest lacks (a shard folder it does not list is dropped and
  played again) - no episode twice, none missing;
* ``card.json`` and ``README.md``: the dataset card (env, policy and checkpoint, episodes,
  steps, return mean/std/min/max, win rate where the env reports battles, the quality label,
  Arena's version and commit, the seeds), written once every shard is in.

Quality levels are ODIS's (Zhang et al., ICLR 2023, github.com/LAMDA-RL/ODIS): ``expert``
is the greedy policy at the end of QMIX's training and ``medium`` a policy whose training was
stopped once its greedy test win rate reached ``stop_winrate`` (``src/data_collect.py``;
``src/config/envs/sc2_collect.yaml``: 2000 episodes per set, greedy ``test_mode``), and
``medium-expert`` is not recorded but mixed: equal parts of the medium and the expert set
(``src/components/offline_buffer.py``: ``OfflineBuffer`` reads both qualities and
``OfflineBufferH5`` takes ``offline_data_size // n_sources`` episodes of each, the last ones
when ``offline_data_shuffle`` is False, ``src/config/envs/sc2_offline.yaml``). ``poor`` (a
policy at a low win rate) has no counterpart in ODIS's code, whose collector has ``random``
(``random_mac``); BiKT's definition of it was not checked. Arena records the policy it is
given: the label is the user's statement of which policy that is, and the card states its
measured return and win rate.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import time
from pathlib import Path

import numpy as np

from training.checkpoints import write_atomic
from training.config import ConfigError

FORMAT = "arena-offline/1"
QUALITIES = ("expert", "medium", "poor")
"""Labels ``arena record --quality`` takes (ODIS's and BiKT's; ``medium-expert`` is mixed)."""
RANK = {"poor": 0, "medium": 1, "expert": 2}

COLUMNS = {
    "episode": "int64: the episode's index in the dataset",
    "t": "int32: the step in the episode, from 0",
    "seed": "int64: the env seed the episode was reset with",
    "agent_ids": "list<string> [N]: the env's possible agents, the order of every [N] axis",
    "obs": "[N, D] (the env's dtype, float32 or uint8): each agent's observation, flattened "
    "and zero-padded to the largest agent's D",
    "state": "float32 [S]: the env's global state (only where the env has one)",
    "action_mask": "int8 [N, A]: the legal actions (all 1 where the env gives no mask; "
    "discrete actions only)",
    "action": "int64 [N] (discrete) or float32 [N, Da] (continuous)",
    "reward": "float32 [N]",
    "terminated": "bool [N]",
    "truncated": "bool [N]",
    "active": "bool [N]: the agent acted at this step (0s fill the rows of the others)",
    "next_obs": "as obs, after the step",
    "next_state": "as state, after the step",
    "next_action_mask": "as action_mask, after the step",
    "agent_return": "float32 [N]: each agent's return over the episode (on every row)",
    "return": "float64: the episode's return, every agent's rewards summed (arena eval's)",
    "length": "int32: the episode's steps",
    "won": "int8: 1 won, 0 lost, -1 the env reports no battles",
}


class RecordError(ConfigError):
    """A recording or dataset that cannot be used; the message says why."""


# --- the policy a dataset is recorded from ------------------------------------------------


# Policies that are not runs: uniformly random legal actions; SMAC's scripted heuristic.
SCRIPTED = ("random", "heuristic")


def policy_source(source: str, env: str | None, checkpoint: str | None = None) -> dict:
    """``random``, ``heuristic`` or a run directory, checked, as the card states it (for a run: its
    checkpoint, iteration, env steps and its weights' hashes); and its env id."""
    if source in SCRIPTED:
        from training.offline import parse_task

        if checkpoint:
            raise RecordError(f"--checkpoint names a checkpoint of a run, not of {source!r}")
        if not env:
            raise RecordError(f"recording the {source} policy needs --env ID")
        env, env_args = parse_task(env, "--env")  # ID[:KEY=VALUE...], e.g. an MPE spread's N
        if source == "heuristic" and not env.startswith(("smac/", "smacv2/")):
            raise RecordError(f"'heuristic' is SMAC's scripted policy: --env smac/*, not {env}")
        return {"kind": source, "env": env, "env_args": env_args}
    from training.checkpoints import (
        CHECKPOINT_NAME,
        RunError,
        checkpoint_meta,
        latest_checkpoint,
        load_config,
    )

    run = Path(source)
    if not run.is_dir():
        raise RecordError(f"{source!r} is neither 'random', 'heuristic' nor a run directory")
    cfg = load_config(run)
    if env and env != cfg.env:
        raise RecordError(f"{run} was trained on {cfg.env}, not --env {env}")
    if checkpoint and not CHECKPOINT_NAME.match(checkpoint):
        raise RunError(f"--checkpoint {checkpoint[:80]!r}: a checkpoint of the run is iter_N")
    ckpt = run / "checkpoints" / checkpoint if checkpoint else latest_checkpoint(run)
    if not (ckpt / "arena.json").is_file():
        raise RunError(f"{ckpt} is not a complete checkpoint of {run}")
    meta = checkpoint_meta(ckpt)
    weights = {k: v["sha256"] for k, v in (meta.get("files") or {}).items() if "weights" in k}
    return {
        "kind": "run",
        "run": str(run.resolve()),
        "algo": cfg.algo,
        "checkpoint": ckpt.name,
        "iteration": meta["iteration"],
        "env_steps": meta["env_steps"],
        "weights_sha256": weights,
        "env": cfg.env,
        "env_args": dict(cfg.env_args),
    }


def layout(env) -> dict:
    """The shapes every row takes in ``env``: agents, padded observation and action sizes."""
    import gymnasium as gym

    obs, _ = env.reset(seed=0)
    agents = list(env.possible_agents)
    shapes = {a: list(np.shape(_observation(obs[a]))) for a in agents if a in obs}
    dtypes = {np.asarray(_observation(o)).dtype for o in obs.values()}
    spaces = {a: env.action_space(a) for a in agents}
    discrete = all(isinstance(s, gym.spaces.Discrete) for s in spaces.values())
    state = env.state() if hasattr(env, "state") else None
    return {
        "agents": agents,
        "obs_shapes": shapes,
        "obs_dim": max(int(np.prod(s)) for s in shapes.values()),
        "obs_dtype": "uint8" if dtypes == {np.dtype("uint8")} else "float32",
        "state_dim": None if state is None else int(np.size(state)),
        "discrete": discrete,
        "n_actions": max(int(s.n) for s in spaces.values()) if discrete else None,
        "action_dim": None if discrete else max(int(np.prod(s.shape)) for s in spaces.values()),
    }


def _observation(o):
    return o["observations"] if isinstance(o, dict) and "observations" in o else o


# --- recording ----------------------------------------------------------------------------


class Recorder:
    """A Ray actor that plays shards of episodes with one env and one policy (the loop of
    ``arena eval``: :func:`training.evaluation.episode_steps`) and hands each as an Arrow
    table for Ray Data to write."""

    def __init__(self, source: dict, explore: bool, lay: dict):
        import envs

        os.environ.setdefault("OMP_NUM_THREADS", "1")
        self.source, self.explore, self.lay = source, explore, lay
        self.env = envs.make(source["env"], **source["env_args"])
        if source["kind"] == "random":
            from training.evaluation import random_actor

            self.act = random_actor(source["env"], source["env_args"], 0)
            self.reset = None
        elif source["kind"] == "heuristic":
            core, agents = self.env.core, self.env.possible_agents
            self.reset = None

            def act(obs, state):  # SMAC's heuristic_ai with heuristic_rest, as legal actions
                taken = core.scripted_actions()[0]
                return {a: int(taken[k]) for k, a in enumerate(agents) if a in obs}

            self.act = act
        else:
            from training.evaluation import load_policy

            ckpt = Path(source["run"]) / "checkpoints" / source["checkpoint"]
            policy = load_policy(source["run"], ckpt)
            self.act = lambda obs, state: policy.act(obs, state, explore)
            self.reset = policy.reset

    def record(self, episodes: list[int], seed: int):
        """The rows of ``episodes`` (episode ``i`` from seed ``seed + i``) as an Arrow table,
        and each episode's return, per-agent return, length and outcome."""
        import pyarrow as pa
        import torch
        from ray.data.block import BlockAccessor

        batches, stats = [], []
        for i in episodes:
            if hasattr(self.act, "reseed"):
                self.act.reseed(seed + i)
            torch.manual_seed(seed + i)  # a sampling (--explore) policy's draws
            batch, stat = self.episode(i, seed + i)
            batches.append(batch)
            stats.append(stat)
        columns = {k: np.concatenate([b[k] for b in batches]) for k in batches[0]}
        table = BlockAccessor.batch_to_block(columns)
        n = table.num_rows
        ids = pa.array([self.lay["agents"]] * n, type=pa.list_(pa.string()))
        table = table.add_column(3, "agent_ids", ids)
        schema = {
            k: {"dtype": str(v.dtype), "shape": list(v.shape[1:])} for k, v in columns.items()
        }
        return table, {"episodes": stats, "schema": schema, "agents": self.lay["agents"]}

    def episode(self, i: int, seed: int) -> tuple[dict, dict]:
        from training.evaluation import battle_won, episode_steps

        lay, env = self.lay, self.env
        agents, N = lay["agents"], len(lay["agents"])
        rows: dict[str, list] = {k: [] for k in COLUMNS if k != "agent_ids"}
        won = None
        for t, step in enumerate(episode_steps(env, self.act, seed, self.reset)):
            rows["obs"].append(self._obs(step.obs))
            rows["next_obs"].append(self._obs(step.next_obs))
            if lay["state_dim"] is not None:
                rows["state"].append(np.asarray(step.state, np.float32).reshape(-1))
                rows["next_state"].append(np.asarray(env.state(), np.float32).reshape(-1))
            if lay["discrete"]:
                rows["action_mask"].append(self._mask(step.obs))
                rows["next_action_mask"].append(self._mask(step.next_obs))
                act = np.zeros(N, np.int64)
                for k, a in enumerate(agents):
                    if a in step.actions:
                        act[k] = int(step.actions[a])
            else:
                act = np.zeros((N, lay["action_dim"]), np.float32)
                for k, a in enumerate(agents):
                    if a in step.actions:
                        act[k] = np.asarray(step.actions[a], np.float32).reshape(-1)
            rows["action"].append(act)
            rows["reward"].append(self._per_agent(step.rewards, np.float32))
            rows["terminated"].append(self._per_agent(step.terminations, bool))
            rows["truncated"].append(self._per_agent(step.truncations, bool))
            rows["active"].append(np.array([a in step.obs for a in agents]))
            rows["t"].append(t)
            won = battle_won(step.infos, won)
        T = len(rows["t"])
        agent_return = np.sum(rows["reward"], axis=0, dtype=np.float64)
        total = float(agent_return.sum())
        outcome = -1 if won is None else int(won)
        batch = {
            "episode": np.full(T, i, np.int64),
            "t": np.asarray(rows["t"], np.int32),
            "seed": np.full(T, seed, np.int64),
        }
        for k, v in rows.items():
            if k not in batch and v:
                batch[k] = np.stack(v)
        batch["agent_return"] = np.tile(agent_return.astype(np.float32), (T, 1))
        batch["return"] = np.full(T, total, np.float64)
        batch["length"] = np.full(T, T, np.int32)
        batch["won"] = np.full(T, outcome, np.int8)
        stat = {"episode": i, "return": total, "length": T, "won": outcome}
        stat["agent_return"] = [float(x) for x in agent_return]
        return batch, stat

    def _obs(self, obs: dict) -> np.ndarray:
        lay = self.lay
        out = np.zeros((len(lay["agents"]), lay["obs_dim"]), lay["obs_dtype"])
        for k, a in enumerate(lay["agents"]):
            if a in obs:
                flat = np.asarray(_observation(obs[a])).reshape(-1)
                out[k, : flat.size] = flat
        return out

    def _mask(self, obs: dict) -> np.ndarray:
        lay = self.lay
        out = np.zeros((len(lay["agents"]), lay["n_actions"]), np.int8)
        for k, a in enumerate(lay["agents"]):
            if a not in obs:
                continue
            o = obs[a]
            if isinstance(o, dict) and "action_mask" in o:
                m = np.asarray(o["action_mask"]).reshape(-1)
                out[k, : m.size] = m
            else:
                out[k, : self.env.action_space(a).n] = 1
        return out

    def _per_agent(self, values: dict, dtype) -> np.ndarray:
        return np.array([values.get(a, 0) for a in self.lay["agents"]], dtype)


def _commit(out: Path, ds, k: int) -> list[str]:
    """Writes ``ds`` (one shard) with Ray Data to ``.partial/`` and renames it into
    ``data/shard-k``; returns its files."""
    partial = out / ".partial" / f"shard-{k:05d}"
    shutil.rmtree(partial, ignore_errors=True)
    ds.write_parquet(str(partial))
    final = out / "data" / f"shard-{k:05d}"
    final.parent.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(final, ignore_errors=True)
    os.replace(partial, final)
    return sorted(p.name for p in final.iterdir())


def _read_manifest(out: Path) -> dict | None:
    path = out / "manifest.json"
    if not path.exists():
        return None
    try:
        manifest = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise RecordError(f"{path} is damaged ({type(e).__name__})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise RecordError(f"{path} is not an Arena dataset manifest ({FORMAT})")
    return manifest


def _describe(spec: dict) -> str:
    policy = spec.get("policy") or {}
    what = policy.get("run") or policy.get("kind") or "a mix of " + ", ".join(spec.get("mix", []))
    return f"env {spec.get('env')}, policy {what}, {spec.get('episodes')} episodes"


def _prepare(out: Path, spec: dict) -> dict:
    """The manifest to go on with: a new one, or the one in ``out`` if it records ``spec``;
    a folder holding anything else is refused."""
    manifest = _read_manifest(out)
    if manifest is None:
        if out.exists() and any(out.iterdir()):
            raise RecordError(
                f"--out {out} holds files but no dataset (no manifest.json): pick an empty "
                "or new folder"
            )
        out.mkdir(parents=True, exist_ok=True)
        manifest = {"format": FORMAT, "spec": spec, "shards": {}}
        write_atomic(out / "manifest.json", json.dumps(manifest, indent=1))
        return manifest
    if manifest.get("spec") != spec:
        raise RecordError(
            f"--out {out} holds another dataset ({_describe(manifest.get('spec') or {})}); "
            f"this command records {_describe(spec)}: pick another --out"
        )
    return manifest


def record(
    source: str,
    out: str | Path,
    env: str | None = None,
    episodes: int = 100,
    workers: int = 1,
    shard_episodes: int = 100,
    seed: int = 0,
    quality: str | None = None,
    explore: bool = False,
    checkpoint: str | None = None,
    address: str | None = None,
    progress=None,
) -> dict:
    """Records ``episodes`` episodes of ``source`` (``random`` or a run directory) into
    ``out`` with ``workers`` Ray actors, ``shard_episodes`` per shard; goes on where a
    killed recording of the same spec stopped. ``progress(done, total)`` is called after each
    shard is committed. Returns the card."""
    import ray

    import envs
    from training import runtime

    out = Path(out)
    for name, value in (("--episodes", episodes), ("--workers", workers)):
        if value < 1:
            raise RecordError(f"{name} must be at least 1, got {value}")
    if shard_episodes < 1:
        raise RecordError(f"--shard-episodes must be at least 1, got {shard_episodes}")
    if quality is not None and quality not in QUALITIES:
        raise RecordError(
            f"--quality {quality!r}: one of {', '.join(QUALITIES)} (medium-expert is mixed "
            "from a medium and an expert set with --mix)"
        )
    policy = policy_source(source, env, checkpoint)
    spec = {
        "env": policy["env"],
        "env_args": policy["env_args"],
        "policy": {k: v for k, v in policy.items() if k not in ("env", "env_args")},
        "explore": explore,
        "episodes": episodes,
        "shard_episodes": shard_episodes,
        "seed": seed,
        "quality": quality,
    }
    manifest = _prepare(out, spec)
    shards = math.ceil(episodes / shard_episodes)
    todo = [k for k in range(shards) if str(k) not in manifest["shards"]]
    shutil.rmtree(out / ".partial", ignore_errors=True)
    for k in todo:  # a shard renamed into data/ but killed before the manifest listed it
        shutil.rmtree(out / "data" / f"shard-{k:05d}", ignore_errors=True)
    if todo:
        probe = envs.make(policy["env"], **policy["env_args"])
        lay = layout(probe)
        probe.close()
        runtime.connect(address)
        ray.data.DataContext.get_current().enable_progress_bars = False
        # the actors leave a CPU to Ray Data's write tasks
        cpus = max(0.01, min(1.0, (ray.cluster_resources().get("CPU", 1) - 1) / workers))
        actor = ray.remote(Recorder).options(num_cpus=cpus)
        actors = [actor.remote(policy, explore, lay) for _ in range(min(workers, len(todo)))]
        queue = list(todo)
        pending = {}

        def submit(a):
            k = queue.pop(0)
            ids = list(range(k * shard_episodes, min((k + 1) * shard_episodes, episodes)))
            table, stats = a.record.options(num_returns=2).remote(ids, seed)
            pending[stats] = (k, a, table)

        try:
            for a in actors:
                if queue:
                    submit(a)
            while pending:
                [ready], _ = ray.wait(list(pending), num_returns=1)
                k, a, table = pending.pop(ready)
                if queue:
                    submit(a)  # the actor plays on while this shard is written
                stats = ray.get(ready)
                files = _commit(out, ray.data.from_arrow_refs([table]), k)
                manifest["shards"][str(k)] = {"files": files, **stats}
                write_atomic(out / "manifest.json", json.dumps(manifest, indent=1))
                del table
                if progress is not None:
                    progress(len(manifest["shards"]), shards)
        finally:
            for a in actors:
                ray.kill(a)
    card = make_card(out, manifest)
    write_card(out, card)
    return card


# --- the card -----------------------------------------------------------------------------


def _arena_version() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    try:
        v = version("arena")
    except PackageNotFoundError:
        v = None
    root = Path(__file__).resolve().parent.parent
    try:
        commit = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = ""
    return {"version": v, "commit": commit or None}


def _episode_stats(manifest: dict) -> list[dict]:
    stats = [e for s in manifest["shards"].values() for e in s["episodes"]]
    return sorted(stats, key=lambda e: e["episode"])


def make_card(out: Path, manifest: dict) -> dict:
    """The dataset card of a complete recording, from its manifest's per-episode numbers."""
    spec = manifest["spec"]
    stats = _episode_stats(manifest)
    returns = np.array([e["return"] for e in stats])
    won = [e["won"] for e in stats if e["won"] >= 0]
    first = next(iter(manifest["shards"].values()))
    schema, agents = first["schema"], first["agents"]
    per_agent = np.mean([e["agent_return"] for e in stats], axis=0)
    return {
        "format": FORMAT,
        "env": spec["env"],
        "env_args": spec["env_args"],
        "policy": spec.get("policy"),
        **({"mix": spec["mix"]} if "mix" in spec else {}),
        "explore": spec.get("explore", False),
        "quality": spec.get("quality"),
        "episodes": len(stats),
        "steps": int(sum(e["length"] for e in stats)),
        "return_mean": float(returns.mean()),
        "return_std": float(returns.std()),
        "return_min": float(returns.min()),
        "return_max": float(returns.max()),
        "per_agent_return_mean": [float(x) for x in per_agent],
        "episode_len_mean": float(np.mean([e["length"] for e in stats])),
        "win_rate": float(np.mean(won)) if won else None,
        "seeds": {
            "first": spec.get("seed"),
            "rule": "episode i is played from env seed first + i"
            if "mix" not in spec
            else "each source's seeds (column seed)",
        },
        "shard_episodes": spec.get("shard_episodes"),
        "columns": schema,
        "agents": agents,
        "arena": _arena_version(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def write_card(out: Path, card: dict) -> None:
    from training.offline import task_label

    write_atomic(out / "card.json", json.dumps(card, indent=1))
    policy = card.get("policy") or {}
    if card.get("mix"):
        who = "a mix of " + ", ".join(
            f"`{m['path']}` ({m['episodes']} episodes)" for m in card["mix"]
        )
    elif policy.get("kind") == "run":
        who = (
            f"`{policy['run']}` ({policy['algo']}, checkpoint {policy['checkpoint']}: "
            f"iteration {policy['iteration']}, {policy['env_steps']:,} env steps)"
        )
    elif policy.get("kind") == "heuristic":
        who = "SMAC's scripted heuristic (`heuristic_ai` with `heuristic_rest`) as legal actions"
    else:
        who = "uniformly random legal actions"
    win = "-" if card["win_rate"] is None else f"{card['win_rate']:.1%}"
    mode = "" if policy.get("kind") != "run" else ", sampling" if card["explore"] else ", greedy"
    lines = [
        f"# {task_label(card['env'], card['env_args'])}: {card['quality'] or 'unlabelled'} "
        f"({card['episodes']} episodes)",
        "",
        f"Recorded by `arena record` (Arena {card['arena']['version']}, commit "
        f"{card['arena']['commit'] or 'unknown'}) on {card['created']}.",
        "",
        "| | |",
        "| --- | --- |",
        f"| env | `{card['env']}` {json.dumps(card['env_args']) if card['env_args'] else ''} |",
        f"| policy | {who}{mode} |",
        f"| quality | {card['quality'] or '-'} |",
        f"| episodes, steps | {card['episodes']:,}, {card['steps']:,} |",
        f"| return mean +- std | {card['return_mean']:.3f} +- {card['return_std']:.3f} |",
        f"| return min, max | {card['return_min']:.3f}, {card['return_max']:.3f} |",
        f"| episode length (mean) | {card['episode_len_mean']:.1f} |",
        f"| win rate | {win} |",
        f"| seeds | {card['seeds']['first']}: {card['seeds']['rule']} |",
        "",
        "Columns (one row per env step; read with `training.record.load_episodes`):",
        "",
        "| column | dtype | shape per row |",
        "| --- | --- | --- |",
    ]
    for name, col in card["columns"].items():
        lines.append(f"| `{name}` | {col['dtype']} | {col['shape']} |")
    lines.append("| `agent_ids` | list<string> | [N] |")
    write_atomic(out / "README.md", "\n".join(lines) + "\n")


# --- medium-expert: ODIS's mix --------------------------------------------------------------


def mix(
    sources: list[str | Path],
    out: str | Path,
    episodes: int | None = None,
    quality: str | None = None,
    address: str | None = None,
) -> dict:
    """A dataset of equal parts of ``sources`` (complete datasets of one env), as ODIS builds
    medium-expert (``src/components/offline_buffer.py``: ``episodes // len(sources)`` of
    each, the last ones; ``episodes`` defaults to the smallest source's size, ODIS's 2000 of
    2000-episode sets). Episodes are renumbered; ``source`` and ``source_episode`` say where
    each came from. ``quality`` defaults to the sources' labels joined low to high
    (``medium-expert``)."""
    import ray

    from training import runtime

    out = Path(out)
    if len(sources) < 2:
        raise RecordError("--mix needs at least two datasets")
    cards = [check_card(Path(s)) for s in sources]
    for c, s in zip(cards[1:], sources[1:], strict=True):
        if (c["env"], c["agents"], c["columns"]) != (
            cards[0]["env"],
            cards[0]["agents"],
            cards[0]["columns"],
        ):
            raise RecordError(
                f"--mix {s}: {c['env']} with columns {sorted(c['columns'])} does not match "
                f"{sources[0]} ({cards[0]['env']}); mix sets of one env and policy layout"
            )
    episodes = episodes if episodes is not None else min(c["episodes"] for c in cards)
    per = episodes // len(sources)
    if per < 1:
        raise RecordError(f"--episodes {episodes}: at least one episode of each source")
    for c, s in zip(cards, sources, strict=True):
        if c["episodes"] < per:
            raise RecordError(f"--mix {s} has {c['episodes']} episodes, fewer than {per}")
    if quality is None:
        labels = [c["quality"] for c in cards]
        quality = (
            "-".join(sorted(set(labels), key=lambda q: RANK[q]))
            if all(q in RANK for q in labels)
            else None
        )
    spec = {
        "env": cards[0]["env"],
        "env_args": cards[0]["env_args"],
        "mix": [
            {"path": str(Path(s).resolve()), "quality": c["quality"], "episodes": per}
            for s, c in zip(sources, cards, strict=True)
        ],
        "episodes": per * len(sources),
        "quality": quality,
    }
    manifest = _prepare(out, spec)
    if manifest["shards"]:
        card = make_card(out, manifest)
        write_card(out, card)
        return card
    runtime.connect(address)
    ray.data.DataContext.get_current().enable_progress_bars = False
    parts, stats = [], []
    for j, (s, c) in enumerate(zip(sources, cards, strict=True)):
        first = c["episodes"] - per
        offset = j * per

        def renumber(batch, first=first, offset=offset, j=j):
            keep = batch["episode"] >= first
            batch = {k: v[keep] for k, v in batch.items()}
            batch["source_episode"] = batch["episode"]
            batch["episode"] = batch["episode"] - first + offset
            batch["source"] = np.full(len(batch["episode"]), j, np.int32)
            return batch

        parts.append(read_dataset(Path(s)).map_batches(renumber, batch_format="numpy"))
        src = _episode_stats(_read_manifest(Path(s)))
        for e in src[first:]:
            stats.append({**e, "episode": e["episode"] - first + offset})
    files = _commit(out, parts[0].union(*parts[1:]), 0)
    schema = dict(cards[0]["columns"])
    schema["source_episode"] = {"dtype": "int64", "shape": []}
    schema["source"] = {"dtype": "int32", "shape": []}
    manifest["shards"]["0"] = {
        "files": files,
        "episodes": stats,
        "schema": schema,
        "agents": cards[0]["agents"],
    }
    write_atomic(out / "manifest.json", json.dumps(manifest, indent=1))
    card = make_card(out, manifest)
    write_card(out, card)
    return card


# --- reading a dataset back -------------------------------------------------------------------


def check_card(path: Path) -> dict:
    """The card of a complete dataset at ``path``, checked against its manifest: every shard
    committed, the episode and step counts the card states."""
    manifest = _read_manifest(path)
    if manifest is None:
        raise RecordError(f"{path} is not an Arena dataset (no manifest.json)")
    spec = manifest["spec"]
    shards = 1 if "mix" in spec else math.ceil(spec["episodes"] / spec["shard_episodes"])
    if len(manifest["shards"]) != shards or not (path / "card.json").exists():
        raise RecordError(
            f"{path} is incomplete ({len(manifest['shards'])} of {shards} shards): run the "
            "same arena record command again to finish it"
        )
    card = json.loads((path / "card.json").read_text())
    stats = _episode_stats(manifest)
    if [e["episode"] for e in stats] != list(range(spec["episodes"])):
        raise RecordError(f"{path}: the manifest's episodes are not 0..{spec['episodes'] - 1}")
    steps = sum(e["length"] for e in stats)
    if (card.get("episodes"), card.get("steps")) != (len(stats), steps):
        raise RecordError(
            f"{path}/card.json states {card.get('episodes')} episodes, {card.get('steps')} "
            f"steps; the manifest has {len(stats)}, {steps}"
        )
    for k, s in manifest["shards"].items():
        shard = path / "data" / f"shard-{int(k):05d}"
        files = sorted(p.name for p in shard.iterdir()) if shard.is_dir() else None
        if files != s["files"]:
            raise RecordError(f"{shard} is missing or holds other files than the manifest lists")
    return card


def read_dataset(path: str | Path):
    """The rows of a complete dataset as a ``ray.data.Dataset`` (``read_parquet`` over its
    committed shards), after :func:`check_card`."""
    import ray

    path = Path(path)
    manifest = _read_manifest(path)
    check_card(path)
    dirs = [str(path / "data" / f"shard-{int(k):05d}") for k in sorted(manifest["shards"], key=int)]
    return ray.data.read_parquet(dirs)


def load_episodes(path: str | Path) -> tuple[list[dict[str, np.ndarray]], dict]:
    """The episodes of a dataset, in order, each a dict of column -> ``[T, ...]`` NumPy arrays
    (``agent_ids`` as in the card), and the card; checks that the rows hold the card's
    episodes and steps, each episode once with steps 0..T-1 and the return its rewards sum to."""
    path = Path(path)
    card = check_card(path)
    cols: dict[str, list] = {}
    for batch in (
        read_dataset(path)
        .drop_columns(["agent_ids"])
        .iter_batches(batch_format="numpy", batch_size=None)
    ):
        for k, v in batch.items():
            cols.setdefault(k, []).append(v)
    data = {k: np.concatenate(v) for k, v in cols.items()}
    if len(data.get("t", [])) != card["steps"]:
        raise RecordError(
            f"{path}: {len(data.get('t', []))} rows, but card.json states {card['steps']} steps"
        )
    order = np.lexsort((data["t"], data["episode"]))
    data = {k: v[order] for k, v in data.items()}
    cuts = np.flatnonzero(np.diff(data["episode"])) + 1
    episodes = [
        {k: v[a:b] for k, v in data.items()}
        for a, b in zip(np.r_[0, cuts], np.r_[cuts, len(order)], strict=True)
    ]
    if [int(e["episode"][0]) for e in episodes] != list(range(card["episodes"])):
        raise RecordError(f"{path}: the rows do not hold episodes 0..{card['episodes'] - 1} once")
    for e in episodes:
        T = len(e["t"])
        if not np.array_equal(e["t"], np.arange(T)) or int(e["length"][0]) != T:
            raise RecordError(f"{path}: episode {int(e['episode'][0])} has a gap or a repeat")
        if not np.isclose(float(e["reward"].sum()), float(e["return"][0]), atol=1e-3):
            raise RecordError(f"{path}: episode {int(e['episode'][0])}'s rewards miss its return")
    return episodes, card


def describe(card: dict) -> str:
    """One line for the terminal."""
    from training.offline import task_label

    win = "" if card["win_rate"] is None else f", win rate {card['win_rate']:.1%}"
    task = task_label(card["env"], card["env_args"])
    return (
        f"{card['episodes']} episodes, {card['steps']} steps of {task} "
        f"({card['quality'] or 'unlabelled'}): return {card['return_mean']:.3f} "
        f"+- {card['return_std']:.3f} [{card['return_min']:.3f}, {card['return_max']:.3f}]{win}"
    )
