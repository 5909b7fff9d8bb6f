"""The zero-shot table of an MPE task set: ``arena offline`` runs on simple_spread of some team
sizes, played on those and on larger ones, beside sanity rows.

    .venv/bin/python bench/offline_spread.py RUN [RUN ...] [--sources 2,3,4] [--tests 2,3,4,5,6]
        [--episodes 128] [--out bench/results/offline_spread.json]

RUN: ``arena offline`` run folders (one per seed and algorithm) evaluated with ``--eval
mpe/simple_spread-v3:N=n,...`` (their ``zero_shot.json``). For each team size and algorithm
(``--algo`` of the run) on each data quality (its datasets' card labels) it prints the runs'
mean episode return (the sum over agents, as the datasets' cards count it) with the standard
deviation over seeds and the 95% interval of the mean over all their episodes; beside them,
the expert's greedy return on its own size (the source dataset's card) and uniformly random
actions played here on the same seeds (a sanity row). Prints one JSON object and a Markdown
table.
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

ENV = "mpe/simple_spread-v3"
EVAL_SEED = 1_000_000  # training.offline.evaluate's


def random_returns(n: int, episodes: int) -> np.ndarray:
    """Each episode's return (summed over agents) under uniformly random actions."""
    import envs

    vec = envs.make_vector(ENV, episodes, seed=EVAL_SEED, N=n)
    group, info = next(iter(vec.groups.items()))
    step = vec.reset(seed=EVAL_SEED)
    rng = np.random.default_rng(EVAL_SEED)
    ret = np.zeros(episodes)
    done = np.zeros(episodes, bool)
    while not done.all():
        A = step.obs[group].shape[1]
        step = vec.step({group: rng.integers(0, info.action_space.n, (episodes, A))})
        ret += np.where(done, 0.0, step.rewards.sum(1))
        done |= step.terminated | step.truncated
    return ret


def main() -> None:
    from bench.offline_marine import quality
    from policies.testing import mean_ci95

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="+")
    p.add_argument("--sources", default="2,3,4", help="the team sizes the data had")
    p.add_argument("--tests", default="2,3,4,5,6", help="the team sizes played")
    p.add_argument("--episodes", type=int, default=128, help="episodes of the random row")
    p.add_argument("--out", default="bench/results/offline_spread.json")
    a = p.parse_args()
    sources = [int(n) for n in a.sources.split(",")]
    tests = [int(n) for n in a.tests.split(",")]
    by_algo: dict[str, list[dict]] = {}  # "algo/quality" -> the runs' zero-shot tables
    experts: dict[int, float] = {}  # team size -> the source dataset's mean return
    for r in a.runs:
        run = json.loads((Path(r) / "offline.json").read_text())
        label = f"{run.get('algo', 'bc')}/{quality(run['datasets'])}"
        by_algo.setdefault(label, []).append(json.loads((Path(r) / "zero_shot.json").read_text()))
        for d in run["datasets"]:
            card = json.loads((Path(d) / "card.json").read_text())
            experts[int(card["env_args"].get("N", 3))] = card["return_mean"]
    rows = []
    for n in tests:
        task = f"{ENV}:N={n}"
        row = {"N": n, "source": n in sources, "data_return": experts.get(n)}
        for algo, tables in by_algo.items():
            got = [t[task] for t in tables if task in t]
            if len(got) != len(tables):
                p.error(f"{task} is missing from a run's zero_shot.json: arena offline --eval-only")
            means = [g["return_mean"] for g in got]
            # each run's interval half-width gives its episodes' spread back
            half = [(g["return_ci95"][1] - g["return_ci95"][0]) / 2 for g in got]
            eps = [g["episodes"] for g in got]
            var = (
                sum((h / 1.96) ** 2 * e * e for h, e in zip(half, eps, strict=True)) / sum(eps) ** 2
            )
            m = float(np.average(means, weights=eps))
            row |= {
                f"{algo}_mean": float(np.mean(means)),
                f"{algo}_std": float(np.std(means)),
                f"{algo}_seeds": means,
                f"{algo}_pooled_ci95": [m - 1.96 * var**0.5, m + 1.96 * var**0.5],
                f"{algo}_episodes": sum(eps),
            }
        rnd = random_returns(n, a.episodes)
        row |= {"random": float(rnd.mean()), "random_ci95": list(mean_ci95(rnd))}
        rows.append(row)
    report = {"env": ENV, "runs": a.runs, "episodes": a.episodes, "rows": rows}
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(report, indent=2))
    print(json.dumps(report))
    names = {"bc": "BC-T", "odis": "ODIS", "bikt": "BiKT"}
    heads = []
    for k, v in by_algo.items():
        algo, data = k.split("/", 1)
        heads.append(f"{names.get(algo, algo)} on {data} (mean ± std over {len(v)} seeds; 95%)")
    print(f"\n| agents | {' | '.join(heads)} | expert (its data) | random |")
    print("| --- |" + " --- |" * (len(heads) + 2))
    for r in rows:
        name = f"{r['N']} (source)" if r["source"] else str(r["N"])
        cells = []
        for k in by_algo:
            lo, hi = r[f"{k}_pooled_ci95"]
            cells.append(f"{r[f'{k}_mean']:.2f} ± {r[f'{k}_std']:.2f} ({lo:.2f} to {hi:.2f})")
        expert = f"{r['data_return']:.2f}" if r["data_return"] is not None else "-"
        print(f"| {name} | {' | '.join(cells)} | {expert} | {r['random']:.2f} |")


if __name__ == "__main__":
    main()
