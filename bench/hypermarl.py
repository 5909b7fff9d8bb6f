"""HyperMARL against shared and independent policies: FuPS, FuPS+ID, NoPS and HyperMARL on
tasks that need specialisation (Dispersion), synchronisation (Navigation, one goal) and on
simple_spread and SMAC 2s3z.

    .venv/bin/python bench/hypermarl.py [--tasks dispersion,navigation,simple_spread,2s3z]
        [--seeds 5] [--scale 1.0] [--out bench/results/hypermarl.json]

The study itself, over 10 seeds as a Tune grid, is ``arena sweep hypermarl``
(``tune/sweeps/hypermarl.py``, docs/policies.md); this script runs the same methods and
settings on several tasks at once, as plain Ray tasks.

Every method is MAPPO (HyperMARL's Dispersion setup is its MAPPO config): FuPS = ``mappo
--policies shared``, FuPS+ID = the same with ``--set model.agent_id=true``, NoPS = ``mappo
--policies per_agent``, HyperMARL = ``hypermarl-mappo`` (``tune.sweeps.hypermarl.METHODS``).
The MPE tasks use HyperMARL's Dispersion hyper-parameters (``tune.sweeps.hypermarl.UPSTREAM``:
lr 5e-4, 16 envs x 128 steps a batch, 4 epochs, 2 minibatches of every module's batch
whatever its number of agents, clip 0.2, entropy 0.01, value weight 0.5, gradient norm 0.5,
ReLU). 2s3z uses Arena's MAPPO defaults. Each trial trains for the task's env-step budget, then plays 64 greedy episodes on
held-out seeds: the team return (summed over agents, RLlib's episode return) or, on 2s3z, the
win rate. SND (``policies.diversity``) is logged every iteration.

Trials run as Ray tasks (one CPU each) on an embedded Ray; each finished trial is written to
``--out`` at once, and a re-run skips the trials already there. The summary per task and
method: IQM over seeds with a 95% bootstrap interval (1,000 resamples), mean, final SND and
wall time; a PNG of the curves (mean over seeds with a 95% bootstrap band) beside the JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

EVAL_SEED = 1_000_000  # far from the training seeds
EVAL_EPISODES = 64

from tune.sweeps.hypermarl import METHODS as SWEEP_METHODS  # noqa: E402
from tune.sweeps.hypermarl import UPSTREAM  # noqa: E402

# this script evaluates greedily itself, at the end
MPE_SETTINGS = {k: v for k, v in UPSTREAM.items() if not k.startswith("test_")}
# task -> (env id, env steps per trial, settings)
TASKS = {
    "dispersion": ("mpe/dispersion-v0", 300_000, MPE_SETTINGS),
    "navigation": ("mpe/navigation-v0", 150_000, MPE_SETTINGS),
    "simple_spread": ("mpe/simple_spread-v3", 150_000, MPE_SETTINGS),
    "2s3z": ("smac/2s3z-v0", 200_000, {}),
}
# method -> (algorithm, --policies, extra settings)
METHODS = {
    m: (c["algo"], c["policies"], {k: v for k, v in c.items() if k not in ("algo", "policies")})
    for m, c in SWEEP_METHODS.items()
}


def settings_for(algo_name: str, knobs: dict):
    """The algorithm's settings with ``knobs`` (dotted keys reach nested settings)."""
    from policies import algorithm

    settings = algorithm.get(algo_name).settings()
    for key, value in knobs.items():
        target = settings
        *path, leaf = key.split(".")
        for part in path:
            target = getattr(target, part)
        setattr(target, leaf, value)
    return settings


def evaluate(algo, env_id: str, episodes: int) -> dict:
    """Greedy play of ``episodes`` episodes (one each of ``episodes`` envs stepped as a
    batch, ``policies.inference.test_episodes``): mean return (summed over the agents) and,
    where the env reports it, the win rate."""
    import envs
    from policies.inference import ModulePolicy, Policy, test_episodes

    specs = algo.config.rl_module_spec.rl_module_specs
    policy = Policy({mid: ModulePolicy(algo.get_module(mid)) for mid in specs})
    played = test_episodes(policy, envs.make_vector(env_id, episodes, seed=EVAL_SEED))
    out = {"return": float(played["return"].mean())}
    if played["won"] is not None:
        out["win_rate"] = float(played["won"].mean())
    return out


def trial(task: str, method: str, seed: int, scale: float) -> dict:
    """One training run of ``method`` on ``task``: its curve and its greedy evaluation."""
    import torch

    from policies import algorithm

    torch.set_num_threads(1)
    env_id, steps, knobs = TASKS[task]
    algo_name, sharing, extra = METHODS[method]
    settings = settings_for(algo_name, {**knobs, **extra})
    config = algorithm.get(algo_name).build(env_id, settings, seed=seed, sharing=sharing)
    algo = config.build_algo()
    curve, t0 = [], time.perf_counter()
    try:
        env_steps = 0
        while env_steps < steps * scale:
            result = algo.train()
            runners, own = result["env_runners"], result.get("arena", {})
            env_steps = int(runners["num_env_steps_sampled_lifetime"])
            curve.append(
                {
                    "env_steps": env_steps,
                    "time_s": round(time.perf_counter() - t0, 2),
                    "return": float(runners.get("episode_return_mean", float("nan"))),
                    "win_rate": float(runners.get("win_rate", float("nan"))),
                    "snd": float(own.get("snd", float("nan"))),
                    "snd_tv": float(own.get("snd_tv", float("nan"))),
                    "snd_js_bits": float(own.get("snd_js_bits", float("nan"))),
                }
            )
        wall = time.perf_counter() - t0
        final = evaluate(algo, env_id, EVAL_EPISODES)
    finally:
        algo.stop()
    return {
        "task": task,
        "method": method,
        "seed": seed,
        "env_steps": env_steps,
        "train_s": round(wall, 1),
        "snd": curve[-1]["snd"],
        "snd_tv": curve[-1]["snd_tv"],
        **final,
        "curve": curve,
    }


def iqm(x) -> float:
    """Interquartile mean: the mean of the middle half (scipy's trim_mean at 25%)."""
    x = np.sort(np.asarray(x, float))
    cut = int(0.25 * len(x))
    return float(x[cut : len(x) - cut].mean())


def bootstrap_ci(x, stat=iqm, n: int = 1000, seed: int = 0) -> list[float]:
    """95% percentile interval of ``stat`` over seeds resampled with replacement."""
    x = np.asarray(x, float)
    rng = np.random.default_rng(seed)
    stats = [stat(rng.choice(x, len(x))) for _ in range(n)]
    return [float(np.percentile(stats, 2.5)), float(np.percentile(stats, 97.5))]


def score(row: dict) -> float:
    return row["win_rate"] if "win_rate" in row else row["return"]


def summarise(trials: list[dict]) -> dict:
    out: dict[str, dict] = {}
    for task in TASKS:
        for method in METHODS:
            rows = [t for t in trials if t["task"] == task and t["method"] == method]
            if not rows:
                continue
            scores = [score(r) for r in rows]
            out.setdefault(task, {})[method] = {
                "metric": "win_rate" if "win_rate" in rows[0] else "return",
                "seeds": len(rows),
                "iqm": iqm(scores),
                "ci95": bootstrap_ci(scores),
                "mean": float(np.mean(scores)),
                "per_seed": scores,
                "snd": float(np.nanmean([r["snd"] for r in rows])),
                "snd_tv": float(np.nanmean([r["snd_tv"] for r in rows])),
                "train_s": float(np.mean([r["train_s"] for r in rows])),
                "env_steps": int(np.mean([r["env_steps"] for r in rows])),
            }
    return out


def markdown(summary: dict) -> str:
    """The summary as a Markdown table: IQM [95% CI] per task and method, SND, minutes."""
    lines = [
        "| task (metric) | method | IQM [95% CI] | mean | SND (JS / W2) | minutes per run |",
        "|---|---|---|---|---|---|",
    ]
    for task, methods in summary.items():
        for method, v in methods.items():
            lo, hi = v["ci95"]
            lines.append(
                f"| {task} ({v['metric']}, {v['seeds']} seeds) | {method} | {v['iqm']:.3g} "
                f"[{lo:.3g}, {hi:.3g}] | {v['mean']:.3g} | {v['snd']:.3f} | "
                f"{v['train_s'] / 60:.1f} |"
            )
    return "\n".join(lines)


def plot(trials: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = [t for t in TASKS if any(r["task"] == t for r in trials)]
    fig, axes = plt.subplots(2, len(tasks), figsize=(4.2 * len(tasks), 6.4), squeeze=False)
    for col, task in enumerate(tasks):
        for method in METHODS:
            rows = [r for r in trials if r["task"] == task and r["method"] == method]
            if not rows:
                continue
            key = "win_rate" if task == "2s3z" else "return"
            for row_i, field in enumerate((key, "snd")):
                n = min(len(r["curve"]) for r in rows)
                x = np.array([p["env_steps"] for p in rows[0]["curve"][:n]]) / 1e3
                y = np.array([[p[field] for p in r["curve"][:n]] for r in rows])
                mean = np.nanmean(y, axis=0)
                rng = np.random.default_rng(0)
                boots = np.stack([np.nanmean(y[rng.integers(0, len(y), len(y))], axis=0) for _ in range(200)])  # fmt: skip
                ax = axes[row_i, col]
                ax.plot(x, mean, label=method)
                ax.fill_between(x, *np.nanpercentile(boots, [2.5, 97.5], axis=0), alpha=0.2)
                ax.set_xlabel("env steps (thousands)")
                ax.set_ylabel(("win rate (train)" if key == "win_rate" else "team return (train)") if row_i == 0 else "SND")  # fmt: skip
        axes[0, col].set_title(task)
    axes[0, 0].legend(fontsize=8)
    fig.suptitle("FuPS, FuPS+ID, NoPS and HyperMARL (MAPPO)\nmean over seeds, 95% bootstrap bands")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write(out: Path, doc: dict) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=1))
    os.replace(tmp, out)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tasks", default=",".join(TASKS))
    p.add_argument("--methods", default=",".join(METHODS))
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--scale", type=float, default=1.0, help="multiplies every env-step budget")
    p.add_argument("--cpus", type=int, default=2, help="trials run at once")
    p.add_argument("--out", default="bench/results/hypermarl.json")
    p.add_argument(
        "--table", action="store_true", help="print --out's table, redraw its plot, stop"
    )
    a = p.parse_args()
    if a.table:
        trials = json.loads(Path(a.out).read_text())["trials"]
        print(markdown(summarise(trials)))
        plot(trials, Path(a.out).with_suffix(".png"))
        return
    tasks = [t for t in a.tasks.split(",") if t]
    methods = [m for m in a.methods.split(",") if m]
    unknown = [t for t in tasks if t not in TASKS] + [m for m in methods if m not in METHODS]
    if unknown:
        p.error(f"unknown {unknown}; tasks: {', '.join(TASKS)}; methods: {', '.join(METHODS)}")
    if a.seeds <= 0 or a.scale <= 0 or a.cpus <= 0:
        p.error("--seeds, --scale and --cpus must be positive")

    out = Path(a.out)
    trials: list[dict] = []
    if out.exists():  # resume: keep every finished trial of the same scale
        doc = json.loads(out.read_text())
        if doc["scale"] != a.scale:
            p.error(f"{out} holds trials at --scale {doc['scale']}: pick another --out")
        trials = doc["trials"]
    done = {(t["task"], t["method"], t["seed"]) for t in trials}
    todo = [
        (t, m, s) for s in range(a.seeds) for t in tasks for m in methods if (t, m, s) not in done
    ]

    import tempfile

    import ray

    from training import runtime

    runtime.connect(num_cpus=a.cpus, dashboard=False, temp_dir=tempfile.mkdtemp(prefix="ray-bench-"))  # fmt: skip
    remote = ray.remote(num_cpus=1, max_retries=0)(trial)
    pending = {remote.remote(t, m, s, a.scale): (t, m, s) for t, m, s in todo}
    print(json.dumps({"bench": "hypermarl", "trials": len(todo), "kept": len(trials)}), flush=True)
    while pending:
        ready, _ = ray.wait(list(pending), num_returns=1)
        key = pending.pop(ready[0])
        try:
            row = ray.get(ready[0])
        except Exception as e:  # one failed trial is reported, the others go on
            print(json.dumps({"bench": "hypermarl", "failed": key, "error": str(e)[-600:]}))
            continue
        trials.append(row)
        print(json.dumps({k: v for k, v in row.items() if k != "curve"}), flush=True)
        write(out, {"scale": a.scale, "summary": summarise(trials), "trials": trials})
        plot(trials, out.with_suffix(".png"))
    summary = summarise(trials)
    print(json.dumps({"bench": "hypermarl", "summary": summary}, indent=1))
    print(markdown(summary))
    ray.shutdown()


if __name__ == "__main__":
    main()
