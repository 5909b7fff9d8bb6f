"""Demonstrations of VolleyBots' SP policy playing itself in Arena's 3v3, for a flat self-play
run to start from (``--set demos=FILE``).

    .venv/bin/python bench/volleybots_demos.py --points 512 --out runs/volleybots_sp_demos.npz
    arena train --config docs/examples/volleyball/selfplay_3v3.yaml --timesteps 5000000 \\
        --set demos=runs/volleybots_sp_demos.npz --set demo_epochs=5 --set env.start_noise=0 \\
        --set "model={hidden: [256, 128, 128], activation: relu, input_norm: true, init: onpolicy}"

Points start on the anchors (VolleyBots' start), either team serving; every drone of both
teams is a demonstrator (the far team's observations are mirrored, as the module sees them),
acting with SP's mean action clipped to the rotor range. Each drone's point is one episode of
the file. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402


def record(points: int, batch: int = 128, population: str = "sp") -> dict[str, np.ndarray]:
    from envs.volleyball.match import Match3v3
    from policies.volleybots import VolleyBotsTeam

    parts: dict[str, list[np.ndarray]] = {k: [] for k in ("obs", "act", "reward", "episode")}
    episodes = 0
    for seed in range(-(-points // batch)):
        core = Match3v3(batch, seed, auto_reset=False, random_serve=True, start_noise=0.0)
        step = core.reset()
        teams = {
            "near": VolleyBotsTeam(population, 0, seed=2 * seed),
            "far": VolleyBotsTeam(population, 1, seed=2 * seed + 1),
        }
        obs, act, reward, live = [], [], [], []
        playing = np.ones(batch, bool)
        while playing.any() and core.t.max() < core.max_steps:
            acts = {
                team: p.act_group(step.obs[team], explore=False)[0] for team, p in teams.items()
            }
            obs.append(np.concatenate([step.obs["near"], step.obs["far"]], 1))
            act.append(np.clip(np.concatenate([acts["near"], acts["far"]], 1), -1.0, 1.0))
            live.append(playing.copy())
            step = core.step(acts)
            reward.append(step.rewards)
            playing &= ~(step.terminated | step.truncated)
        # [T, B, 6, ...] -> one episode per (world, drone), its steps in order
        obs, act, reward, live = (np.stack(x) for x in (obs, act, reward, live))
        for b in range(batch):
            steps = int(live[:, b].sum())
            for d in range(6):
                parts["obs"].append(obs[:steps, b, d])
                parts["act"].append(act[:steps, b, d])
                parts["reward"].append(reward[:steps, b, d])
                parts["episode"].append(np.full(steps, episodes))
                episodes += 1
    return {
        "obs": np.concatenate(parts["obs"]).astype(np.float32),
        "act": np.concatenate(parts["act"]).astype(np.float32),
        "reward": np.concatenate(parts["reward"]).astype(np.float32),
        "episode": np.concatenate(parts["episode"]),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--points", type=int, default=512, help="points played (default 512)")
    p.add_argument("--population", default="sp", help="the VolleyBots population (default sp)")
    p.add_argument("--out", required=True, help="the .npz file")
    args = p.parse_args()
    if args.points < 1:
        p.error(f"--points must be >= 1, got {args.points}")
    from envs.demos import save_demos

    data = record(args.points, population=args.population)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    save_demos(args.out, data)
    print(
        json.dumps(
            {"out": args.out, "steps": len(data["obs"]), "episodes": int(data["episode"].max()) + 1}
        )
    )


if __name__ == "__main__":
    main()
