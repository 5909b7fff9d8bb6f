"""A learning-rate x seed sweep of Arena training runs with Ray Tune, submitted as a Ray job.
Every trial is an Arena run (``tune.trainable.trial``) whose run directory is ``run/`` in
its Tune trial folder, reporting every iteration to Tune.

    ray job submit --address http://127.0.0.1:8265 --runtime-env cluster/runtime_env.yaml \\
        -- python docs/examples/sweep.py --out /home/ray/arena/runs/sweeps/lr \\
           --lr 3e-4 1e-3 3e-3 --seeds 0 1 --iterations 50

Each trial takes one CPU (it samples in its own process, env_runners=0), so on an autoscaled
cluster pending trials make the autoscaler add CPU workers, and idle workers go away after the
sweep. It prints one line per trial (lr, seed, last return, run directory), best first.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import yaml
from ray import tune

from tune.trainable import trial


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--env", default="mpe/simple_spread-v3")
    p.add_argument("--algo", default="mappo")
    p.add_argument("--lr", type=float, nargs="+", default=[3e-4, 1e-3, 3e-3])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    p.add_argument("--iterations", type=int, default=50)
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--out", required=True, help="absolute folder for Tune's trial folders")
    args = p.parse_args(argv)
    out = Path(args.out)
    if not out.is_absolute():
        p.error("--out must be absolute: trials run in other processes, on other nodes")

    space = {
        "env": args.env,
        "algo": args.algo,
        "iterations": args.iterations,
        **{k: yaml.safe_load(v) for k, _, v in (pair.partition("=") for pair in args.set)},
        "lr": tune.grid_search(args.lr),
        "seed": tune.grid_search(args.seeds),
    }
    tuner = tune.Tuner(
        tune.with_resources(trial, {"cpu": 1}),
        param_space=space,
        run_config=tune.RunConfig(storage_path=str(out), name="sweep", verbose=1),
    )
    results = tuner.fit()
    rows = sorted(
        (r for r in results if r.error is None),
        key=lambda r: -r.metrics["episode_return_mean"],
    )
    for r in rows:
        print(
            f"lr {r.config['lr']:g} seed {r.config['seed']}: "
            f"return {r.metrics['episode_return_mean']:.2f}  {r.path}/run"
        )
    failed = [r for r in results if r.error is not None]
    for r in failed:
        print(f"lr {r.config['lr']:g} seed {r.config['seed']}: FAILED {r.error}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
