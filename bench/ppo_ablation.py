"""What makes PPO learn per env step: Arena's ippo on MPE simple_spread, one loss choice at a
time, over seeds.

    .venv/bin/python bench/ppo_ablation.py [--seeds 0,1,2,3] [--env-steps 1000000]
        [--arms defaults,rllib,value_clip=loss,...] [--parallel 2]
        [--out bench/results/ppo_ablation.json]

Every arm is ``arena train mpe/simple_spread-v3 --algo ippo`` with the settings of JaxMARL's
IPPO comparison (64 envs x 63 steps = 4,032 env steps an update, 5 epochs, 24 minibatches,
lr 1e-3, gamma 0.99, lambda 0.95, clip 0.2, entropy 0.01, one shared 64-64 tanh policy: the
defaults) and the ``--set`` changes its name lists. ``defaults`` is Arena's loss (CleanRL's
and JaxMARL's choices), ``rllib`` is RLlib's (the squared error clamped at 10, advantages
standardised per batch, Adam eps 1e-8), and every other arm changes one default. The score
of a run at B env steps is the mean ``episode_return_mean`` over the last 10% of its
iterations up to B (as JaxMARL's comparison is read). Runs are resumed from where a killed
bench left them (finished runs are read back, not rerun).

Prints one JSON line per run and, per arm, a summary line with the mean, standard deviation
and a 95% t-interval over seeds at 500 k and at ``--env-steps``.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from scipy import stats

ROOT = Path(__file__).resolve().parents[1]
ENV = "mpe/simple_spread-v3"
RLLIB = "value_clip=loss,vf_clip_param=10,advantage_norm=batch,adam_eps=1e-8"
ARMS = {
    "defaults": "",
    "rllib": RLLIB,
    "value_clip=loss": "value_clip=loss,vf_clip_param=10",
    "value_clip=none": "value_clip=none",
    "advantage_norm=batch": "advantage_norm=batch",
    "adam_eps=1e-8": "adam_eps=1e-8",
}


def score(rows: list[dict], budget: int) -> float:
    """Mean return over the last 10% of the iterations up to ``budget`` env steps."""
    upto = [r for r in rows if int(r["env_steps"]) <= budget] or rows[:1]
    tail = upto[-max(1, len(upto) // 10) :]
    return float(np.mean([float(r["episode_return_mean"]) for r in tail]))


def run(arm: str, seed: int, env_steps: int, root: Path) -> dict:
    out = root / arm.replace("=", "_") / f"s{seed}"
    name = "run"
    metrics = out / ENV / "ippo" / name / "metrics.csv"
    done = metrics.exists() and _rows(metrics) and int(_rows(metrics)[-1]["env_steps"]) >= env_steps
    wall = None
    if not done:
        sets = [kv for kv in ARMS[arm].split(",") if kv]
        cmd = [sys.executable, "-m", "arena", "train", ENV, "--algo", "ippo", "--seed", str(seed)]
        cmd += ["--timesteps", str(env_steps), "--out", str(out), "--name", name]
        cmd += [a for kv in sets for a in ("--set", kv)]
        if (out / ENV / "ippo" / name / "checkpoints").exists():
            cmd = [
                sys.executable,
                "-m",
                "arena",
                "train",
                "--resume",
                str(out / ENV / "ippo" / name),
            ]
            cmd += ["--timesteps", str(env_steps)]
        t0 = time.perf_counter()
        env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if proc.returncode:
            raise RuntimeError(f"{arm} seed {seed} failed: {proc.stderr[-2000:]}")
    rows = _rows(metrics)
    result = {
        "arm": arm,
        "seed": seed,
        "return_500k": score(rows, 500_000),
        f"return_{env_steps}": score(rows, env_steps),
        "env_steps": int(rows[-1]["env_steps"]),
        "train_s": float(rows[-1]["time_s"]),
        "process_s": wall,
    }
    print(json.dumps(result), flush=True)
    return result


def _rows(path: Path) -> list[dict]:
    with open(path) as f:
        return list(csv.DictReader(f))


def interval(xs: list[float]) -> dict:
    a = np.asarray(xs)
    half = stats.t.ppf(0.975, len(a) - 1) * a.std(ddof=1) / np.sqrt(len(a)) if len(a) > 1 else 0
    return {
        "mean": round(float(a.mean()), 2),
        "std": round(float(a.std(ddof=1)) if len(a) > 1 else 0.0, 2),
        "ci95": [round(float(a.mean() - half), 2), round(float(a.mean() + half), 2)],
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seeds", default="0,1,2,3")
    p.add_argument("--env-steps", type=int, default=1_000_000)
    p.add_argument("--arms", default=",".join(ARMS))
    p.add_argument("--parallel", type=int, default=2)
    p.add_argument("--runs", default=str(ROOT / "runs" / "ppo_ablation"))
    p.add_argument("--out", default=str(ROOT / "bench" / "results" / "ppo_ablation.json"))
    a = p.parse_args()
    arms = [x for x in a.arms.split(",") if x]
    unknown = [x for x in arms if x not in ARMS]
    if unknown:
        p.error(f"unknown arms {unknown}; allowed: {', '.join(ARMS)}")
    seeds = [int(s) for s in a.seeds.split(",")]
    jobs = [(arm, s) for s in seeds for arm in arms]
    with ThreadPoolExecutor(a.parallel) as pool:
        results = list(pool.map(lambda j: run(*j, a.env_steps, Path(a.runs)), jobs))
    summary = {}
    for arm in arms:
        mine = [r for r in results if r["arm"] == arm]
        summary[arm] = {
            "seeds": len(mine),
            "return_500k": interval([r["return_500k"] for r in mine]),
            f"return_{a.env_steps}": interval([r[f"return_{a.env_steps}"] for r in mine]),
            "train_s": round(float(np.mean([r["train_s"] for r in mine])), 1),
        }
        print(json.dumps({"summary": arm, **summary[arm]}), flush=True)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps({"runs": results, "summary": summary}, indent=1) + "\n")


if __name__ == "__main__":
    main()
