"""Results in marl-eval's format (Gorsane et al., "Towards a Standardised Performance Evaluation
Protocol for Cooperative MARL", NeurIPS 2022; github.com/instadeepai/marl-eval): a JSON of
``{env: {task: {algorithm: {run_<seed>: {step_<i>: {"step_count": env steps, metric:
[values]}, ..., "absolute_metrics": {metric: [values]}}}}}}``, which marl-eval's
``data_process_pipeline`` and rliable read.

Each step is an iteration where the run evaluated: its greedy test episodes where it plays
them (``test_return_mean``, ``test_battle_won_mean``), else its training episodes (the
return over the runner's recent episodes). Arena logs the mean of each evaluation, so each
list holds that one mean. ``absolute_metrics`` are the run's ``eval.json`` (``arena eval``)
where it has one, else its last evaluation.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from training.run import read_metrics

# marl-eval's metric -> Arena's columns, best first
COLUMNS = {
    "return": ("test_return_mean", "episode_return_mean"),
    "win_rate": ("test_battle_won_mean", "win_rate"),
}


def _finite(value) -> float | None:
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def run_entry(run: Path) -> dict:
    """One run's ``{step_<i>: ..., "absolute_metrics": ...}``."""
    rows = read_metrics(Path(run) / "metrics.csv", 10**12)
    chosen = {}
    for name, columns in COLUMNS.items():
        for column in columns:
            if any(_finite(r.get(column)) is not None for r in rows):
                chosen[name] = column
                break
    entry, last = {}, {}
    for r in rows:
        values = {n: _finite(r.get(c)) for n, c in chosen.items()}
        values = {n: [v] for n, v in values.items() if v is not None}
        if values:
            entry[f"step_{len(entry)}"] = {"step_count": int(float(r["env_steps"])), **values}
            last.update(values)
    absolute = dict(last)
    eval_json = Path(run) / "eval.json"
    if eval_json.is_file():
        summary = json.loads(eval_json.read_text())
        agents = max(1, len(summary.get("per_agent_return_mean") or {}))
        team = "return" in chosen and chosen["return"] == "test_return_mean"
        if _finite(summary.get("return_mean")) is not None:
            # test_return_mean is the team's (the mean over agents); eval.json's the sum
            absolute["return"] = [summary["return_mean"] / (agents if team else 1)]
        if _finite(summary.get("win_rate")) is not None:
            absolute["win_rate"] = [summary["win_rate"]]
    entry["absolute_metrics"] = absolute
    return entry


def marl_eval_json(runs: list[tuple[str, str, int, Path]]) -> dict:
    """marl-eval's JSON of ``runs``: (env id, algorithm, seed, run directory) each."""
    out: dict = {}
    for env_id, algo, seed, run in runs:
        family, _, task = env_id.partition("/")
        tasks = out.setdefault(family, {}).setdefault(task, {}).setdefault(algo, {})
        tasks[f"run_{seed}"] = run_entry(run)
    return out


def write_marl_eval(runs: list[tuple[str, str, int, Path]], path: Path) -> Path:
    from training.checkpoints import write_atomic

    write_atomic(Path(path), json.dumps(marl_eval_json(runs), indent=1))
    return Path(path)
