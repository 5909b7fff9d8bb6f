"""Evaluation: a run's policy rebuilt from plain weights (nothing unpickled), played for a
number of episodes; and the random baseline."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from policies import algorithm as algorithms
from policies.inference import STACKED_SEED
from training.checkpoints import (
    RunError,
    latest_checkpoint,
    load_config,
    verify_weights,
    write_atomic,
)
from training.config import ConfigError
from training.run import read_metrics


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
    facts: dict[str, list[float]] = {}
    for ep in range(episodes):
        ret = dict.fromkeys(env.possible_agents, 0.0)
        n, won, last_info = 0, None, {}
        before = (lambda: frames.append(env.render())) if render and ep == 0 else None
        for step in episode_steps(env, act, seed + ep, reset, before):
            rew, infos = step.rewards, step.infos
            for a, r in rew.items():
                ret[a] += float(r)
            n += 1
            won = battle_won(infos, won)
            for info in infos.values():
                last_info = info or last_info
        for key, value in last_info.items():  # the env's episode facts (e.g. volleyball's bumps)
            if (
                key != "battle_won"
                and isinstance(value, int | float)
                and not isinstance(value, bool)
            ):
                facts.setdefault(key, []).append(float(value))
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
        "episode_facts": {k: float(np.mean(v)) for k, v in facts.items()},
    }
    if render and frames:
        summary["animation"] = write_animation(frames, render, env.metadata.get("render_fps", 10))
    return summary


class Step(NamedTuple):
    """One step of an episode: what the agents saw (``obs``, the env's global ``state`` or
    None), what they did, and what the env gave back."""

    obs: dict
    state: Any
    actions: dict
    rewards: dict
    terminations: dict
    truncations: dict
    infos: dict
    next_obs: dict


def battle_won(infos: dict, won: bool | None = None) -> bool | None:
    """Whether a step's infos report the battle won (SMAC's ``battle_won``), else ``won``."""
    for info in infos.values():
        if "battle_won" in info:
            won = bool(info["battle_won"])
    return won


def episode_steps(env, act, seed: int, reset=None, before=None):
    """The steps of one episode of ``env`` reset with ``seed``, every agent acting by
    ``act(obs, state)`` (``reset()`` called first, for recurrent policies; ``before()`` before
    each step, e.g. to render): ``arena eval`` and ``arena record`` play through this."""
    obs, _ = env.reset(seed=seed)
    if reset is not None:
        reset()
    while env.agents:
        if before is not None:
            before()
        state = env.state() if hasattr(env, "state") else None
        actions = act(obs, state)
        nxt, rew, term, trunc, infos = env.step(actions)
        yield Step(obs, state, actions, rew, term, trunc, infos, nxt)
        obs = nxt


def write_animation(frames: list, path: str | Path, fps: float) -> str:
    """Writes RGB frames as an MP4 (H.264 through imageio-ffmpeg's binary) or, for any other
    suffix, a looping GIF; returns the path."""
    import imageio.v2 as imageio

    Path(path).parent.mkdir(parents=True, exist_ok=True)
    frames = [np.asarray(f) for f in frames]
    if Path(path).suffix.lower() == ".mp4":
        imageio.mimsave(path, frames, fps=fps, macro_block_size=1)
    else:
        # imageio reads a GIF frame's duration in milliseconds
        imageio.mimsave(path, frames, duration=1000 / fps, loop=0)
    return str(path)


def random_actor(env_id: str, env_args: dict, seed: int):
    """``act(obs, state)`` drawing uniformly random legal actions."""
    import envs

    env = envs.make(env_id, **env_args)
    rng = np.random.default_rng(seed)

    def reseed(s: int) -> None:  # arena record: each episode's draws from its own seed
        nonlocal rng
        rng = np.random.default_rng(s)

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

    act.reseed = reseed
    return act


def module_specs(run: str | Path, seed_index: int | None = None):
    """The ``MultiRLModuleSpec`` of ``run``'s modules, from its ``config.yaml`` and its env's
    spaces (this builds the env once).

    A stacked run (``arena train --seeds N``) needs ``seed_index``: its specs are then those
    of one seed's plain modules, whose weights are sliced from the stacked ones on loading
    (``policies.inference.module_from_weights``)."""
    cfg = load_config(Path(run))
    seeds = getattr(getattr(cfg.settings, "model", None), "seeds", 1)
    if seeds > 1:
        if seed_index is None or not 0 <= seed_index < seeds:
            given = "" if seed_index is None else f" (not {seed_index})"
            raise RunError(
                f"{run} trained {seeds} stacked seeds: pick one with --seed-index K, "
                f"K in 0..{seeds - 1}{given}"
            )
        cfg.settings.model.seeds = 1
    elif seed_index not in (None, 0):
        raise RunError(f"--seed-index {seed_index}: {run} trained one seed (index 0)")
    specs = algorithms.get(cfg.algo).modules(
        cfg.env, cfg.settings, env_config=cfg.env_args, sharing=cfg.policies
    )
    if seeds > 1:
        for spec in specs.rl_module_specs.values():
            spec.model_config[STACKED_SEED] = [seed_index, seeds]
    return specs


def load_policy(
    run: str | Path,
    checkpoint: str | Path | None = None,
    specs=None,
    seed_index: int | None = None,
):
    """The run's policy (``policies.inference.Policy``) from a checkpoint's plain weights,
    rebuilt from ``config.yaml`` and the env's spaces (or ``specs``, from
    :func:`module_specs`; ``seed_index``: which seed of a stacked run): nothing in the run is
    unpickled."""
    from policies.inference import WEIGHTS_DIR, Policy, WeightsError

    run = Path(run)
    ckpt = Path(checkpoint) if checkpoint else latest_checkpoint(run)
    verify_weights(ckpt)
    specs = specs if specs is not None else module_specs(run, seed_index)
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
    real_episodes: int = 0,
    seed_index: int | None = None,
) -> dict:
    """Rebuilds the modules of ``run`` around its plain weights (no unpickling) and plays
    ``episodes``; writes ``eval.json``.
    The agents of ``random_modules`` act uniformly at random instead (a baseline for one
    side of a competitive env). ``seed_index``: the seed of a stacked run to play."""
    run = Path(run)
    if episodes <= 0:
        raise ConfigError(f"--episodes must be positive, got {episodes}")
    ckpt = latest_checkpoint(run)
    cfg = load_config(run)
    info = algorithms.get(cfg.algo)
    if info.evaluate is not None:
        return _evaluate_by_algorithm(info, run, ckpt, cfg, episodes, real_episodes)
    policy = load_policy(run, ckpt, seed_index=seed_index)
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
            **({} if seed_index is None else {"seed_index": seed_index}),
        }
    )
    name = "eval.json" if not random_modules else f"eval-random-{'-'.join(random_modules)}.json"
    summary["path"] = str(run / name)
    write_atomic(run / name, json.dumps(summary, indent=2))
    return summary


def _evaluate_by_algorithm(info, run: Path, ckpt: Path, cfg, episodes: int, real: int) -> dict:
    """The report of an algorithm that scores its runs itself (a language model's held-out
    pages), with the FLOPs its run spent; written to ``eval.json``."""
    from policies.inference import WEIGHTS_DIR

    verify_weights(ckpt)
    report = info.evaluate(
        module_specs(run), ckpt / WEIGHTS_DIR, cfg.env, cfg.settings, episodes, real
    )
    rows = read_metrics(run / "metrics.csv", 10**12)
    flops = float(rows[-1]["flops_total"]) if rows and rows[-1].get("flops_total") else None
    summary = {
        "run": str(run),
        "env": cfg.env,
        "checkpoint": ckpt.name,
        "greedy": True,
        "episodes": episodes,
        "flops_total": flops,
        **report,
    }
    summary["path"] = str(run / "eval.json")
    write_atomic(run / "eval.json", json.dumps(summary, indent=2))
    return summary


def random_baseline(env_id: str, env_args: dict, episodes: int = 100, seed: int = 10_000) -> dict:
    """The same summary for uniformly random legal actions."""
    return play(env_id, env_args, random_actor(env_id, env_args, seed), episodes, seed)
