"""How fast masked MAPPO learns SMAC battles: test win rate against env steps and wall time.

    .venv/bin/python bench/learn_smac.py [--maps 3m,2s3z,5m_vs_6m] [--minutes 8]
        [--recurrent | --paper]

For each map (or SMACv2 scenario) it trains ``arena train``'s MAPPO (one process, as on a
laptop) for a wall-time budget and, every ``--eval-every`` seconds of training, plays
``--battles`` battles greedily (the test win rate, as SMAC papers report it) on held-out
seeds. Evaluation time is not counted as training time. Settings: Arena's defaults;
``--recurrent`` adds a GRU to actor and critic (``model.recurrent=true``); ``--paper`` uses the
MAPPO paper's recurrent MAPPO and its per-map settings (``arena train ... --set paper=true``).
The summary puts the published MAPPO test win rate (on StarCraft II) beside each map.
Runs with the same settings accumulate in ``--out``: a map run again replaces its curve, the
others are kept, so maps with different budgets share one table and plot.

Prints one JSON line per evaluation and a summary line per map (final test win rate, env
steps and minutes to reach 80% and 95%); writes ``--out`` (JSON) and a PNG next to it.
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


EVAL_SEED = 1_000_000  # far from the training seeds

# Published MAPPO test win rates (%): the MAPPO paper's medians (Yu et al. 2022, Table 2, 2-10 M
# env steps); protoss_5_vs_5 from SMACv2's own MAPPO runs (oxwhirl/smacv2,
# smacv2/examples/results: 5 seeds, mean of the last 5 evaluations at 10 M env steps).
MAPPO_PAPER_WIN = {"3m": 100.0, "2s3z": 100.0, "3s5z": 96.9, "5m_vs_6m": 89.1, "MMM2": 90.6}
MAPPO_PAPER_WIN |= {"corridor": 100.0, "6h_vs_8z": 88.3, "27m_vs_30m": 93.8}
MAPPO_PAPER_WIN |= {"protoss_5_vs_5": 56.4}


def test_win_rate(module, map_name: str, battles: int, env_config: dict | None = None) -> float:
    """Greedy test win rate of the shared ``module`` over ``battles`` battles stepped as one
    batch (``policies.inference.test_episodes``; recurrent modules carry state), with the run's
    env options ``env_config`` (``paper=true`` sets some)."""
    import torch

    from envs.smac.core import BattleBatch
    from policies.inference import ModulePolicy, Policy, test_episodes

    torch.set_num_threads(1)
    options = {k: v for k, v in (env_config or {}).items() if k != "map_name"}
    core = BattleBatch(battles, seed=EVAL_SEED, map_name=map_name, auto_reset=False, **options)
    return float(test_episodes(Policy({"shared": ModulePolicy(module)}), core)["won"].mean())


def learn(
    map_name: str,
    minutes: float,
    eval_every: float,
    battles: int,
    seed: int,
    recurrent=False,
    paper=False,
):
    from envs.smac.maps import SMAC_MAPS
    from policies import algorithm

    env_id = f"smac/{map_name}-v0" if map_name in SMAC_MAPS else f"smacv2/{map_name}-v0"
    mappo = algorithm.get("mappo")
    settings = mappo.settings()
    settings.model.recurrent = recurrent
    settings.paper = paper  # policies.mappo.PAPER_*: the paper's settings for the map
    algo = mappo.build(env_id, settings, seed=seed).build_algo()
    points, trained, t_eval = [], 0.0, 0.0
    try:
        while trained < minutes * 60:
            t0 = time.perf_counter()
            result = algo.train()
            trained += time.perf_counter() - t0
            if trained - t_eval < eval_every and trained < minutes * 60:
                continue
            t_eval = trained
            runners = result["env_runners"]
            point = {
                "bench": "learn_smac",
                "map": map_name,
                "recurrent": recurrent or paper,
                "paper_settings": paper,
                "env_steps": int(runners["num_env_steps_sampled_lifetime"]),
                "train_s": round(trained, 1),
                "train_win_rate": float(runners.get("win_rate", float("nan"))),
                "train_return_mean": float(runners.get("episode_return_mean", float("nan"))),
                "test_win_rate": test_win_rate(
                    algo.get_module("shared"), map_name, battles, dict(algo.config.env_config)
                ),
            }
            print(json.dumps(point), flush=True)
            points.append(point)
    finally:
        algo.stop()
    return points


def first_reaching(points, level: float) -> dict:
    for p in points:
        if p["test_win_rate"] >= level:
            return {"env_steps": p["env_steps"], "minutes": round(p["train_s"] / 60, 2)}
    return {"env_steps": None, "minutes": None}


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for name, points in results.items():
        win = [100 * p["test_win_rate"] for p in points]
        ax1.plot([p["env_steps"] / 1e6 for p in points], win, marker=".", label=name)
        ax2.plot([p["train_s"] / 60 for p in points], win, marker=".", label=name)
    ax1.set(xlabel="env steps (millions)", ylabel="test win rate (%)", ylim=(-2, 102))
    ax2.set(xlabel="training wall time (minutes, 2-core machine)")
    for ax in (ax1, ax2):
        ax.axhline(95, color="grey", lw=0.8, ls="--")
        ax.grid(alpha=0.3)
    ax1.legend(title="map")
    fig.suptitle("Arena MAPPO on SMAC battles: greedy test win rate")
    fig.tight_layout()
    tmp = path.with_suffix(".tmp.png")
    fig.savefig(tmp, dpi=110)
    os.replace(tmp, path)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--maps", default="3m,2s3z,5m_vs_6m")
    p.add_argument("--minutes", type=float, default=8.0, help="training wall time per map")
    p.add_argument("--eval-every", type=float, default=40.0, help="seconds of training")
    p.add_argument("--battles", type=int, default=64, help="test battles per evaluation")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--recurrent", action="store_true", help="GRU actor and critic")
    p.add_argument("--paper", action="store_true", help="the MAPPO paper's settings per map")
    p.add_argument("--out", default="bench/results/learn_smac.json")
    a = p.parse_args()
    from envs.smac.maps import spec_of

    maps = [m.strip() for m in a.maps.split(",") if m.strip()]
    try:
        for m in maps or [""]:
            spec_of(m)
    except ValueError as e:
        p.error(str(e))
    if a.minutes <= 0 or a.battles <= 0:
        p.error("--minutes and --battles must be positive")

    out = Path(a.out)
    same = ("eval_every", "battles", "seed", "recurrent", "paper")
    results, summary = {}, {}
    if out.exists():  # an earlier run's maps are kept: runs on several maps accumulate
        doc = json.loads(out.read_text())
        if any(doc["settings"].get(k) != getattr(a, k) for k in same):
            p.error(
                f"{out} holds a run with other settings ({', '.join(same)}): pick another --out"
            )
        results, summary = doc["curves"], doc["summary"]

    import tempfile

    from training import runtime

    runtime.connect(num_cpus=2, dashboard=False, temp_dir=tempfile.mkdtemp(prefix="ray-bench-"))
    for name in maps:
        results[name] = learn(
            name, a.minutes, a.eval_every, a.battles, a.seed, a.recurrent, a.paper
        )
        pts = results[name]
        summary[name] = {
            "final_test_win_rate": pts[-1]["test_win_rate"],
            "best_test_win_rate": max(q["test_win_rate"] for q in pts),
            "env_steps": pts[-1]["env_steps"],
            "minutes": round(pts[-1]["train_s"] / 60, 2),
            "reach_80": first_reaching(pts, 0.8),
            "reach_95": first_reaching(pts, 0.95),
            "mappo_paper_test_win_rate": MAPPO_PAPER_WIN.get(name),
        }
        print(json.dumps({"bench": "learn_smac", "summary": name, **summary[name]}), flush=True)
        # written after every map, so a long multi-map run loses nothing to a crash
        out.parent.mkdir(parents=True, exist_ok=True)
        settings = {k: v for k, v in vars(a).items() if k not in ("maps", "minutes", "out")}
        doc = {"settings": settings, "summary": summary, "curves": results}
        tmp = out.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc, indent=1))
        os.replace(tmp, out)
        plot(results, out.with_suffix(".png"))
    print(json.dumps({"bench": "learn_smac", "wrote": [str(out), str(out.with_suffix(".png"))]}))


if __name__ == "__main__":
    main()
