"""The zero-shot table of ODIS's marine task sets: ``arena offline`` runs beside sanity rows.

    .venv/bin/python bench/offline_marine.py RUN [RUN ...] [--set marine-easy]
        [--episodes 128] [--out bench/results/offline_marine.json]

RUN: ``arena offline`` run folders (one per seed and algorithm) evaluated with ``--eval`` on
the task set's maps (their ``zero_shot.json``). For each map and algorithm (``--algo`` of the
run: bc, odis, bikt) on each data quality (its datasets' card labels: expert, medium,
medium-expert, ...) it prints the runs' mean win rate with the standard deviation over seeds
and the pooled Wilson 95% interval over all their battles, and two sanity rows played here
on the same seeds: uniformly random legal actions and SMAC's scripted heuristic
(``heuristic_ai`` with ``heuristic_rest``, as legal actions). Prints one JSON object and a
Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# ODIS's task sets (LAMDA-RL/ODIS src/config/tasks/marine-*-expert.yaml).
TASK_SETS = {
    "marine-easy": (("3m", "5m", "10m"), ("3m", "4m", "5m", "6m", "7m", "8m", "9m", "10m", "11m", "12m")),
    "marine-hard": (
        ("3m", "5m_vs_6m", "9m_vs_10m"),
        ("3m", "4m", "5m", "10m", "12m", "5m_vs_6m", "7m_vs_8m", "8m_vs_9m", "9m_vs_10m",
         "10m_vs_11m", "10m_vs_12m", "13m_vs_15m"),
    ),
}  # fmt: skip
EVAL_SEED = 1_000_000  # training.offline.evaluate's


def scripted(map_name: str, episodes: int, kind: str) -> int:
    """Battles won of ``episodes`` by random legal actions or SMAC's heuristic."""
    from envs.smac.core import BattleBatch

    core = BattleBatch(episodes, seed=EVAL_SEED, map_name=map_name, auto_reset=False)
    step = core.reset(seed=EVAL_SEED)
    rng = np.random.default_rng(EVAL_SEED)
    won = np.zeros(episodes, bool)
    done = np.zeros(episodes, bool)
    while not done.all():
        if kind == "heuristic":
            act = core.scripted_actions()
        else:
            mask = step.action_mask["agent"]
            act = (rng.random(mask.shape) * mask).argmax(-1)
        step = core.step(act)
        end = (step.terminated | step.truncated) & ~done
        won[end] = step.info["battle_won"][end]
        done |= end
    return int(won.sum())


def quality(datasets: list[str]) -> str:
    """The data quality of a run's datasets: their cards' labels (one, or all of them)."""
    labels = []
    for d in datasets:
        card = Path(d) / "card.json"
        label = json.loads(card.read_text()).get("quality") if card.exists() else None
        labels.append(label or "unlabelled")
    return "+".join(sorted(set(labels)))


def main() -> None:
    from policies.testing import wilson

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="+")
    p.add_argument("--set", default="marine-easy", choices=sorted(TASK_SETS))
    p.add_argument("--episodes", type=int, default=128, help="battles per sanity row")
    p.add_argument("--out", default="bench/results/offline_marine.json")
    a = p.parse_args()
    sources, tests = TASK_SETS[a.set]
    by_algo: dict[str, list[dict]] = {}  # "algo/quality" -> the runs' zero-shot tables
    for r in a.runs:
        run = json.loads((Path(r) / "offline.json").read_text())
        label = f"{run.get('algo', 'bc')}/{quality(run['datasets'])}"
        by_algo.setdefault(label, []).append(json.loads((Path(r) / "zero_shot.json").read_text()))
    rows = []
    for m in tests:
        env = f"smac/{m}-v0"
        row = {"map": m, "source": m in sources}
        for algo, tables in by_algo.items():
            got = [t[env] for t in tables if env in t]
            if len(got) != len(tables):
                p.error(f"{env} is missing from a run's zero_shot.json: arena offline --eval-only")
            rates = [g["win_rate"] for g in got]
            wins = sum(round(g["win_rate"] * g["episodes"]) for g in got)
            n = sum(g["episodes"] for g in got)
            row |= {
                f"{algo}_mean": float(np.mean(rates)),
                f"{algo}_std": float(np.std(rates)),
                f"{algo}_seeds": rates,
                f"{algo}_pooled_ci95": list(wilson(wins, n)),
                f"{algo}_battles": n,
            }
        for kind in ("random", "heuristic"):
            w = scripted(m, a.episodes, kind)
            row[kind] = w / a.episodes
            row[f"{kind}_ci95"] = list(wilson(w, a.episodes))
        rows.append(row)
    report = {"set": a.set, "runs": a.runs, "episodes": a.episodes, "rows": rows}
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(report, indent=2))
    print(json.dumps(report))
    names = {"bc": "BC-T", "odis": "ODIS", "bikt": "BiKT"}
    heads = []
    for k, v in by_algo.items():
        algo, data = k.split("/", 1)
        heads.append(
            f"{names.get(algo, algo)} on {data} (mean ± std over {len(v)} seeds; pooled 95%)"
        )
    print(f"\n| map | {' | '.join(heads)} | random | heuristic |")
    print("| --- |" + " --- |" * (len(heads) + 2))
    for r in rows:
        name = f"{r['map']} (source)" if r["source"] else r["map"]
        cells = []
        for k in by_algo:
            lo, hi = r[f"{k}_pooled_ci95"]
            cells.append(f"{r[f'{k}_mean']:.1%} ± {r[f'{k}_std']:.1%} ({lo:.1%}-{hi:.1%})")
        print(f"| {name} | {' | '.join(cells)} | {r['random']:.1%} | {r['heuristic']:.1%} |")


if __name__ == "__main__":
    main()
