"""Render the longest rally between two members of a self-play run's population, or a point
of the hierarchical 3v3 team against an opponent.

    .venv/bin/python bench/volleyball_rally.py RUN --near 4 --far 4 --episodes 100 \\
        --out docs/img/volleyball_1v1.gif
    .venv/bin/python bench/volleyball_rally.py --hierarchy [TEAM_YAML] --opponent volleybots:sp \\
        --episodes 1000 --out docs/img/volleyball_3v3_rally.gif

Population members: plays ``--episodes`` seeded points between members ``--near`` and
``--far`` (sampled actions, either team serving), keeps the seed of the point with the most
hits (then the longest) and replays it. The hierarchical team: one batch of ``--episodes``
points (one per world, VolleyBots' protocol), the world whose point crossed the net most (a
ball each way at best), then had the most touches, drawn from a second run of the same batch.
Frames are every second 0.02 s step (25 frames/s in real time). Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import torch  # noqa: E402


def point(env_id, members, seed, render=False):
    """One point from ``seed``: (hits, result, steps, frames)."""
    import envs

    env = envs.make(env_id, random_serve=True, **({"render_mode": "rgb_array"} if render else {}))
    obs, _ = env.reset(seed=seed)
    torch.manual_seed(seed)
    frames, info, steps = [], {}, 0
    while env.agents:
        if render and steps % 2 == 0:
            frames.append(env.render())
        actions = {}
        for team, policy in members.items():
            agents = [a for a in env.agents if a.startswith(team)]
            x = np.stack([obs[a] for a in agents])
            act, _ = policy.act(x, agent_index=np.arange(len(agents)), explore=True)
            actions.update(zip(agents, act, strict=True))
        obs, _, _, _, infos = env.step(actions)
        info = next(iter(infos.values()))
        steps += 1
    if render:
        frames.append(env.render())
    env.close()
    return int(info.get("hits", 0)), int(info.get("result", 0)), steps, frames


def hierarchy_rally(team: str | None, episodes: int, opponent: str, start: str, out: str) -> dict:
    """Of ``episodes`` points of the hierarchical team (one batch, one point per world, seed
    0), the one with the most net crossings (up to 2: a ball each way), then the most
    touches, drawn from a second run of the same batch into ``out``."""
    from training.hierarchy.team import BUNDLE, TeamConfig, play_hierarchy

    cfg = TeamConfig.from_file(team or BUNDLE / "team.yaml")
    kw = {"seed": 0, "opponent": opponent, "start": start}
    points = play_hierarchy(cfg, episodes, per_point=True, **kw)["points"]
    keys = list(zip(np.minimum(points["crossings"], 2), points["hits"], strict=True))
    best = max(range(episodes), key=lambda k: keys[k])
    r = play_hierarchy(cfg, episodes, render=out, render_world=best, per_point=True, **kw)
    return {
        "world": best,
        "games": episodes,
        **{name: r["points"][name][best] for name in ("server", "result", "hits", "crossings")},
        "out": out,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run", nargs="?", help="a self-play run (or, with --hierarchy, a team YAML)")
    p.add_argument("--hierarchy", action="store_true", help="hierarchical 3v3 teams")
    p.add_argument(
        "--opponent",
        default="hierarchy",
        choices=("hierarchy", "flat", "volleybots:sp", "volleybots:fsp", "volleybots:psro_nash"),
    )
    p.add_argument("--start", default="serve", choices=("serve", "receive"))
    p.add_argument("--near", type=int, default=-1, help="member index (-1: the latest)")
    p.add_argument("--far", type=int, default=-1)
    p.add_argument("--episodes", type=int, default=100)
    p.add_argument("--out", required=True)
    args = p.parse_args()
    if args.hierarchy:
        print(
            json.dumps(
                hierarchy_rally(args.run, args.episodes, args.opponent, args.start, args.out)
            )
        )
        return
    if not args.run:
        p.error("give a self-play RUN (or --hierarchy)")
    from policies.inference import ModulePolicy
    from policies.selfplay.league import Population
    from training.checkpoints import load_config
    from training.evaluation import module_specs

    run = Path(args.run)
    cfg = load_config(run)
    population = Population(run / "population")
    spec = module_specs(run).rl_module_specs["near"]

    def member(k):
        module = spec.build()
        module.load_state_dict(population.weights(k % population.size))
        return ModulePolicy(module)

    members = {"near": member(args.near), "far": member(args.far)}
    best = max(range(args.episodes), key=lambda s: point(cfg.env, members, s)[:3:2])
    hits, result, steps, frames = point(cfg.env, members, best, render=True)
    import imageio.v2 as imageio

    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    imageio.mimsave(args.out, frames, duration=40, loop=0)  # ms per frame: 25 fps
    print(
        json.dumps({"seed": best, "hits": hits, "result": result, "steps": steps, "out": args.out})
    )


if __name__ == "__main__":
    main()
