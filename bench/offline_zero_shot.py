"""The zero-shot table of an offline multi-task task set: ``arena offline`` runs beside sanity
rows.

    .venv/bin/python bench/offline_zero_shot.py RUN [RUN ...] [--set marine-easy]
        [--episodes 128] [--out bench/results/offline_SET.json]

RUN: ``arena offline`` run folders (one per seed and algorithm) evaluated with ``--eval`` on
the set's test tasks (their ``zero_shot.json``). Sets: ODIS's marine-easy and marine-hard
(SMAC) and cn (its grid cooperative navigation, ``gridmpe/cn-v0``), whose metric is the win
rate, and spread (mpe2's simple_spread of 2-4 agents played with 2-6, Arena's own), whose metric
is the episode return summed over agents. For each task and algorithm (``--algo`` of the run)
on each data quality (its datasets' card labels: expert, medium, ...) it prints the runs' mean
with the standard deviation over seeds and the pooled 95% interval over all their episodes
(Wilson's for wins), and sanity rows played here on the same seeds: uniformly random legal
actions, and on SMAC its scripted heuristic (``heuristic_ai`` with ``heuristic_rest``, as
legal actions). Prints one JSON object and a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


@dataclass(frozen=True)
class TaskSet:
    sources: tuple[str, ...]
    tests: tuple[str, ...]
    task: str  # the env task of a name: str.format(name)
    metric: str  # "win" or "return"


TASK_SETS = {
    # ODIS's task sets: LAMDA-RL/ODIS src/config/tasks/marine-*-expert.yaml, cn-expert.yaml
    "marine-easy": TaskSet(
        ("3m", "5m", "10m"),
        ("3m", "4m", "5m", "6m", "7m", "8m", "9m", "10m", "11m", "12m"),
        "smac/{}-v0", "win",
    ),
    "marine-hard": TaskSet(
        ("3m", "5m_vs_6m", "9m_vs_10m"),
        ("3m", "4m", "5m", "10m", "12m", "5m_vs_6m", "7m_vs_8m", "8m_vs_9m", "9m_vs_10m",
         "10m_vs_11m", "10m_vs_12m", "13m_vs_15m"),
        "smac/{}-v0", "win",
    ),
    "cn": TaskSet(
        ("cn-2", "cn-4"), ("cn-2", "cn-3", "cn-4", "cn-5"), "gridmpe/cn-v0:map_name={}", "win"
    ),
    "spread": TaskSet(
        ("N=2", "N=3", "N=4"), ("N=2", "N=3", "N=4", "N=5", "N=6"), "mpe/simple_spread-v3:{}",
        "return",
    ),
}  # fmt: skip
EVAL_SEED = 1_000_000  # training.offline.evaluate's


def smac_scripted(map_name: str, episodes: int) -> tuple[np.ndarray, np.ndarray]:
    """Battles won and returns of ``episodes`` played by SMAC's heuristic."""
    from envs.smac.core import BattleBatch

    core = BattleBatch(episodes, seed=EVAL_SEED, map_name=map_name, auto_reset=False)
    core.reset(seed=EVAL_SEED)
    won, ret, done = np.zeros(episodes, bool), np.zeros(episodes), np.zeros(episodes, bool)
    while not done.all():
        step = core.step(core.scripted_actions())
        ret += np.where(done, 0.0, step.rewards.sum(1))
        end = (step.terminated | step.truncated) & ~done
        won[end] = step.info["battle_won"][end]
        done |= end
    return won, ret


def random_play(task: str, episodes: int) -> tuple[np.ndarray, np.ndarray]:
    """Wins and returns (summed over agents) of uniformly random legal actions, the first
    episode of each of ``episodes`` copies from ``evaluate``'s seeds."""
    import envs
    from training.offline import parse_task

    env, env_args = parse_task(task)
    vec = envs.make_vector(env, episodes, seed=EVAL_SEED, **env_args)
    group, info = next(iter(vec.groups.items()))
    step = vec.reset(seed=EVAL_SEED)
    rng = np.random.default_rng(EVAL_SEED)
    won, ret, done = np.zeros(episodes, bool), np.zeros(episodes), np.zeros(episodes, bool)
    while not done.all():
        A, n = step.obs[group].shape[1], info.action_space.n
        mask = (step.action_mask or {}).get(group, np.ones((episodes, A, n)))
        step = vec.step({group: (rng.random(mask.shape) * mask).argmax(-1)})
        ret += np.where(done, 0.0, step.rewards.sum(1))
        end = (step.terminated | step.truncated) & ~done
        if step.info is not None and "battle_won" in step.info:
            won[end] = np.asarray(step.info["battle_won"])[end]
        done |= end
    return won, ret


def quality(datasets: list[str]) -> str:
    """The data quality of a run's datasets: their cards' labels (one, or all of them)."""
    labels = []
    for d in datasets:
        card = Path(d) / "card.json"
        label = json.loads(card.read_text()).get("quality") if card.exists() else None
        labels.append(label or "unlabelled")
    return "+".join(sorted(set(labels)))


def pooled(rows: list[dict], metric: str) -> tuple[float, float]:
    """The 95% interval over every episode of the runs' rows of one task."""
    from policies.testing import wilson

    n = [r["episodes"] for r in rows]
    if metric == "win":
        return wilson(sum(round(r["win_rate"] * k) for r, k in zip(rows, n, strict=True)), sum(n))
    # each row's interval half-width gives its episodes' spread back
    var = (
        sum(
            ((r["return_ci95"][1] - r["return_ci95"][0]) / 2 / 1.96) ** 2 * k * k
            for r, k in zip(rows, n, strict=True)
        )
        / sum(n) ** 2
    )
    m = float(np.average([r["return_mean"] for r in rows], weights=n))
    return m - 1.96 * var**0.5, m + 1.96 * var**0.5


def main() -> None:
    from policies.testing import mean_ci95, wilson
    from training.offline import parse_task, task_label

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="+")
    p.add_argument("--set", default="marine-easy", choices=sorted(TASK_SETS))
    p.add_argument("--episodes", type=int, default=128, help="episodes per sanity row")
    p.add_argument("--out", help="default: bench/results/offline_SET.json")
    a = p.parse_args()
    ts = TASK_SETS[a.set]
    key = "win_rate" if ts.metric == "win" else "return_mean"
    by_algo: dict[str, list[dict]] = {}  # "algo/quality" -> the runs' zero-shot tables
    for r in a.runs:
        run = json.loads((Path(r) / "offline.json").read_text())
        label = f"{run.get('algo', 'bc')}/{quality(run['datasets'])}"
        by_algo.setdefault(label, []).append(json.loads((Path(r) / "zero_shot.json").read_text()))
    rows = []
    for name in ts.tests:
        task = task_label(*parse_task(ts.task.format(name)))  # the rows' name for it
        row = {"task": name, "env": task, "source": name in ts.sources}
        for algo, tables in by_algo.items():
            got = [t[task] for t in tables if task in t]
            if len(got) != len(tables):
                p.error(f"{task} is missing from a run's zero_shot.json: arena offline --eval-only")
            values = [g[key] for g in got]
            row |= {
                f"{algo}_mean": float(np.mean(values)),
                f"{algo}_std": float(np.std(values)),
                f"{algo}_seeds": values,
                f"{algo}_pooled_ci95": list(pooled(got, ts.metric)),
                f"{algo}_episodes": sum(g["episodes"] for g in got),
                f"{algo}_length": float(np.mean([g.get("length_mean", np.nan) for g in got])),
            }
        plays = {"random": random_play(task, a.episodes)}
        if task.startswith("smac/"):
            plays["heuristic"] = smac_scripted(name, a.episodes)
        for kind, (won, ret) in plays.items():
            value = won.mean() if ts.metric == "win" else ret.mean()
            ci = wilson(int(won.sum()), a.episodes) if ts.metric == "win" else mean_ci95(ret)
            row |= {kind: float(value), f"{kind}_ci95": list(ci)}
        rows.append(row)
    report = {"set": a.set, "metric": ts.metric, "runs": a.runs, "episodes": a.episodes}
    report["rows"] = rows
    out = Path(a.out or f"bench/results/offline_{a.set}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2))
    print(json.dumps(report))
    names = {"bc": "BC-T", "odis": "ODIS", "bikt": "BiKT"}
    heads = []
    for k, v in by_algo.items():
        algo, data = k.split("/", 1)
        heads.append(f"{names.get(algo, algo)} on {data} (mean ± std over {len(v)} seeds; 95%)")
    sanity = [k for k in ("random", "heuristic") if k in rows[0]]
    print(f"\n| task | {' | '.join(heads + sanity)} |")
    print("|" + " --- |" * (len(heads) + len(sanity) + 1))
    fmt = (lambda x: f"{x:.1%}") if ts.metric == "win" else (lambda x: f"{x:.2f}")
    for r in rows:
        cells = []
        for k in by_algo:
            lo, hi = r[f"{k}_pooled_ci95"]
            cells.append(f"{fmt(r[f'{k}_mean'])} ± {fmt(r[f'{k}_std'])} ({fmt(lo)} to {fmt(hi)})")
        cells += [fmt(r[k]) for k in sanity]
        name = f"{r['task']} (source)" if r["source"] else r["task"]
        print(f"| {name} | {' | '.join(cells)} |")


if __name__ == "__main__":
    main()
