"""Do the bare PPO loop and Arena learn simple_spread alike? Learning curves of
``bench/bare_ppo.py``, Arena's ippo on the array path (the default) and on the episode path
(RLlib's learner connectors), same settings, several seeds.

    .venv/bin/python bench/learning_parity.py [--timesteps 200000] [--seeds 0,1,2] [--plot F]

Prints one JSON line per run (return of the episodes ended in the last 10% of its env steps,
wall time) and a summary with the mean and spread per variant; ``--plot`` draws the curves.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")


def arena_curve(path: str, timesteps: int, seed: int) -> tuple[list, float]:
    from ray.rllib.algorithms.ppo import PPO

    from policies import algorithm

    info = algorithm.get("ippo")
    config = info.build("mpe/simple_spread-v3", info.settings(), seed=seed)
    if path == "episodes":
        config.algo_class = PPO
    algo = config.build_algo()
    curve, steps, t0 = [], 0, time.perf_counter()
    while steps < timesteps:
        er = algo.train()["env_runners"]
        steps = er["num_env_steps_sampled_lifetime"]
        curve.append((steps, er.get("episode_return_mean")))
    wall = time.perf_counter() - t0
    algo.stop()
    return curve, wall


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--timesteps", type=int, default=200_000)
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--plot", help="PNG of the curves")
    args = p.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]

    import numpy as np
    import torch
    from bare_ppo import train as bare_train

    from training import runtime

    torch.set_num_threads(1)
    runtime.connect(dashboard=False)
    runs = []
    for seed in seeds:
        curve = []
        t0 = time.perf_counter()
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            bare_train("local", args.timesteps, seed, curve=True)
        wall = time.perf_counter() - t0
        for line in out.getvalue().splitlines():
            row = json.loads(line)
            curve.append((row["env_steps"], row["episode_return_mean"]))
        runs.append(("bare_loop", seed, curve, wall))
        for path in ("arrays", "episodes"):
            curve, wall = arena_curve(path, args.timesteps, seed)
            runs.append((f"arena_{path}", seed, curve, wall))
    summary = {}
    for name, seed, curve, wall in runs:
        steps = curve[-1][0]
        # Arena reports a 100-episode moving mean; the bare loop each iteration's episodes:
        # compare the mean over the last 10% of the env steps.
        tail = [r for s, r in curve if s > 0.9 * steps and r is not None]
        final = float(np.mean(tail))
        print(json.dumps({"variant": name, "seed": seed, "final_return": final, "wall_s": wall}))
        summary.setdefault(name, []).append(final)
    print(
        json.dumps(
            {
                "summary": {
                    k: {"mean": float(np.mean(v)), "min": min(v), "max": max(v)}
                    for k, v in summary.items()
                },
                "timesteps": args.timesteps,
            }
        )
    )
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        colours = {"bare_loop": "k", "arena_arrays": "tab:blue", "arena_episodes": "tab:orange"}
        fig, ax = plt.subplots(figsize=(7, 4))
        for name, seed, curve, _ in runs:
            xs = [s for s, r in curve if r is not None]
            ys = [r for _, r in curve if r is not None]
            ax.plot(
                xs, ys, color=colours[name], alpha=0.7, label=name if seed == seeds[0] else None
            )
        ax.set_xlabel("env steps")
        ax.set_ylabel("episode return (sum over 3 agents)")
        ax.set_title(f"ippo on mpe/simple_spread-v3, seeds {args.seeds}")
        ax.legend()
        fig.tight_layout()
        fig.savefig(args.plot, dpi=100)
    runtime.shutdown()


if __name__ == "__main__":
    main()
