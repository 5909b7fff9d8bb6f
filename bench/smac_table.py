"""The MAPPO paper's SMAC table, re-run on Arena: resumable runs, then a report.

    .venv/bin/python bench/smac_table.py run [--maps 3m,2s3z] [--seeds 0] [--hours 2.5]
    .venv/bin/python bench/smac_table.py report

``run`` trains ``arena train``'s MAPPO with the MAPPO paper's settings for each map
(``--set paper=true``; Yu et al. 2022, marlbenchmark/on-policy) to the paper's 10 M env steps,
or until the run has trained ``--hours`` (its own training time, summed over sessions), and
plays PyMARL's greedy test battles (``test_nepisode`` 32) every ``--test-interval`` env steps.
Each (map, seed) is an ordinary run directory under ``--out``/runs: the command can be stopped
at any moment and run again; finished runs are skipped and the others resume from their newest
checkpoint. The default plan is the paper's maps (:data:`MAPS`), 3 seeds on :data:`THREE_SEEDS`.

``report`` reads the runs' ``metrics.csv`` and writes ``table.json`` (per map: the median over
seeds of the final greedy test win rate, env steps and hours reached, the paper's MAPPO and QMIX
medians beside), ``curves.png`` (test win rate against env steps, one panel per map) and the
Kendall rank correlation between Arena's final win rates and the paper's MAPPO column.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import sys
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

MAPS = ("3m", "2s3z", "3s5z", "5m_vs_6m", "MMM2", "corridor", "6h_vs_8z", "3s5z_vs_3s6z")
THREE_SEEDS = ("3m", "2s3z", "5m_vs_6m")
ENV_STEPS = 10_000_000  # the paper's budget on the hard and super-hard maps
# The MAPPO paper's median test win rates (%) on StarCraft II, MAPPO and QMIX columns (Yu et al.
# 2022, "The Surprising Effectiveness of PPO in Cooperative Multi-Agent Games", SMAC table).
PAPER_MAPPO = {"3m": 100.0, "2s3z": 100.0, "3s5z": 96.9, "5m_vs_6m": 89.1, "MMM2": 90.6}
PAPER_MAPPO |= {"corridor": 100.0, "6h_vs_8z": 88.3}
PAPER_QMIX = {"3m": 96.9, "2s3z": 95.3, "3s5z": 88.3, "5m_vs_6m": 75.8, "MMM2": 87.5}
PAPER_QMIX |= {"corridor": 84.4, "6h_vs_8z": 9.4}


def plan(maps: list[str], seeds: list[int] | None) -> list[tuple[str, int]]:
    """(map, seed) pairs: the given seeds on every map, else 3 seeds on THREE_SEEDS, 1 elsewhere."""
    return [
        (m, s)
        for m in maps
        for s in (seeds if seeds is not None else range(3 if m in THREE_SEEDS else 1))
    ]


def run_dir(out: Path, map_name: str, seed: int) -> Path:
    return out / "runs" / f"{map_name}-s{seed}"


def train_one(map_name: str, seed: int, a) -> dict:
    """Trains (or resumes) one run until its env steps or its hours are reached."""
    from policies import algorithm
    from training.config import TrainConfig, apply_overrides
    from training.run import Run, default_callbacks

    where = run_dir(Path(a.out), map_name, seed)
    callbacks = default_callbacks(None, 0, None)
    if (where / "config.yaml").exists():
        run = Run.resume(where, more={"timesteps": a.env_steps}, callbacks=callbacks)
    else:
        settings = algorithm.get("mappo").settings()
        settings.paper = True
        settings.test_interval, settings.test_nepisode = a.test_interval, a.test_episodes
        cfg = TrainConfig(
            env=f"smac/{map_name}-v0",
            algo="mappo",
            seed=seed,
            timesteps=a.env_steps,
            checkpoint_every=a.checkpoint_every,
            settings=settings,
        )
        apply_overrides(cfg, a.set)
        run = Run(cfg, where, callbacks=callbacks)
    hours = 0.0
    try:
        while not run.done:
            row = run.step()
            hours = float(row["time_s"]) / 3600
            if hours >= a.hours:
                break
        run.checkpoint()
    finally:
        run.close()
    return {"map": map_name, "seed": seed, "env_steps": run.env_steps, "hours": round(hours, 3)}


def finished(where: Path, a) -> bool:
    rows = read_rows(where)
    return bool(rows) and (
        int(rows[-1]["env_steps"]) >= a.env_steps or float(rows[-1]["time_s"]) >= a.hours * 3600
    )


def read_rows(where: Path) -> list[dict]:
    path = where / "metrics.csv"
    if not path.exists():
        return []
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def tests_of(rows: list[dict], interval: int) -> list[tuple[int, float, float]]:
    """(env steps, greedy test win rate, test team return) of the iterations that played test
    battles, on the schedule ``policies.testing.is_due`` keeps (metrics.csv repeats a test's
    numbers in the rows until the next one)."""
    from policies.testing import is_due

    out, last = [], None
    for r in rows:
        won = float(r.get("test_battle_won_mean") or "nan")
        steps = int(r["env_steps"])
        if math.isfinite(won) and is_due(steps, last, interval):
            last = steps
            out.append((steps, won, float(r.get("test_return_mean") or "nan")))
    return out


def report(a) -> dict:
    import numpy as np
    from scipy.stats import kendalltau

    out = Path(a.out)
    table, curves = {}, {}
    for m in a.maps:
        finals, returns, steps, hours = [], [], [], []
        for s in range(16):
            rows = read_rows(run_dir(out, m, s))
            tests = tests_of(rows, a.test_interval)
            if not tests:
                continue
            curves.setdefault(m, {})[s] = tests
            finals.append(100 * tests[-1][1])
            returns.append(tests[-1][2])
            steps.append(int(rows[-1]["env_steps"]))
            hours.append(float(rows[-1]["time_s"]) / 3600)
        if finals:
            table[m] = {
                "seeds": len(finals),
                "final_test_win_rate": float(np.median(finals)),
                "each_seed": finals,
                "final_test_return": float(np.median(returns)),
                "env_steps": int(min(steps)),
                "hours": round(max(hours), 2),
                "paper_mappo": PAPER_MAPPO.get(m),
                "paper_qmix": PAPER_QMIX.get(m),
            }
    both = [m for m in table if table[m]["paper_mappo"] is not None]
    tau = None
    if len(both) >= 3:
        res = kendalltau(
            [table[m]["final_test_win_rate"] for m in both], [PAPER_MAPPO[m] for m in both]
        )
        tau = {"tau": float(res.statistic), "p": float(res.pvalue), "maps": both}
    doc = {"bench": "smac_table", "table": table, "kendall_vs_paper_mappo": tau}
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / "table.json.tmp"
    tmp.write_text(json.dumps(doc, indent=1))
    os.replace(tmp, out / "table.json")
    if curves:
        plot(curves, out / "curves.png")
    return doc


def plot(curves: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(curves)
    cols = min(4, n)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(max(6.0, 3.4 * cols), 3.0 * rows), squeeze=False)
    for ax, (m, seeds) in zip(axes.flat, curves.items(), strict=False):
        for s, pts in seeds.items():
            ax.plot([p[0] / 1e6 for p in pts], [100 * p[1] for p in pts], lw=1, label=f"seed {s}")
        if m in PAPER_MAPPO:
            ax.axhline(PAPER_MAPPO[m], color="grey", ls="--", lw=0.8, label="MAPPO paper")
        ax.set(title=m, ylim=(-2, 102), xlabel="env steps (M)", ylabel="test win rate (%)")
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=7)
    fig.suptitle("MAPPO paper=true on SMAC: greedy test wins (32 battles)", fontsize=10)
    fig.tight_layout()
    tmp = path.with_suffix(".tmp.png")
    fig.savefig(tmp, dpi=100)
    os.replace(tmp, path)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("command", choices=("run", "report"))
    p.add_argument("--maps", default=",".join(MAPS))
    p.add_argument("--seeds", default=None, help="comma list (default: 3 on 3m/2s3z/5m_vs_6m)")
    p.add_argument("--env-steps", type=int, default=ENV_STEPS)
    p.add_argument("--hours", type=float, default=2.5, help="training hours per run at most")
    p.add_argument("--test-interval", type=int, default=100_000, help="env steps between tests")
    p.add_argument("--test-episodes", type=int, default=32)
    p.add_argument("--checkpoint-every", type=int, default=20, help="iterations")
    p.add_argument("--set", nargs="*", default=[], help="more settings, KEY=VALUE")
    p.add_argument("--out", default="bench/results/smac_table")
    a = p.parse_args()
    from envs.smac.maps import SMAC_MAPS

    a.maps = [m.strip() for m in a.maps.split(",") if m.strip()]
    unknown = [m for m in a.maps if m not in SMAC_MAPS]
    if unknown:
        p.error(f"unknown SMAC map(s) {unknown}; maps: {', '.join(sorted(SMAC_MAPS))}")
    seeds = [int(s) for s in a.seeds.split(",")] if a.seeds else None
    if a.env_steps <= 0 or a.hours <= 0 or a.test_interval <= 0 or a.test_episodes <= 0:
        p.error("--env-steps, --hours, --test-interval and --test-episodes must be positive")
    if a.command == "report":
        print(json.dumps(report(a)))
        return
    import tempfile

    from training import runtime

    runtime.connect(num_cpus=2, dashboard=False, temp_dir=tempfile.mkdtemp(prefix="ray-table-"))
    for m, s in plan(a.maps, seeds):
        if finished(run_dir(Path(a.out), m, s), a):
            continue
        print(json.dumps({"bench": "smac_table", **train_one(m, s, a)}), flush=True)
        report(a)
    print(json.dumps(report(a)))


if __name__ == "__main__":
    main()
