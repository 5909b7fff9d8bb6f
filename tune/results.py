"""A sweep directory read back as two pandas tables, from files alone (no Ray), so the live
table, ``arena sweep --watch`` and ``arena report`` read a running sweep the same way:

- trials: one row per trial: ``stage``, ``trial`` (its folder), ``status``, ``iterations``,
  ``run_dir``, then its labels (``study``);
- rows: one row per iteration of every trial: ``stage``, ``trial``, the labels, then the
  run's ``metrics.csv`` columns.

A trial's status: ``finished`` (it reached its target or its stop), ``stopped`` (a scheduler
stopped it), ``error`` (Tune recorded its exception), ``running`` (none of these yet; if the
sweep was killed, ``arena sweep --resume`` goes on with it).

    SWEEP_DIR/sweep.yaml              the sweep's name and settings
    SWEEP_DIR/<stage>/                a Tune experiment; <stage>/done.json once it is over
    SWEEP_DIR/<stage>/<trial>/run/    the trial's Arena run directory
    SWEEP_DIR/trials.parquet, results.parquet   these tables, written when a stage ends
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from envs.files import replacing
from training.config import ConfigError, read_config_file

MAX_CONCURRENT = 4096
"""The most trials at once (``--max-concurrent``; 0: one per CPU)."""
LABEL_ORDER = ("arm", "fraction", "config", "method", "seed")
"""The labels a trial table shows, in this order (those a sweep has)."""


def read_sweep(sweep_dir: Path) -> dict:
    """``sweep.yaml``: ``{"name": ..., "values": {...}, "max_concurrent": K}``, checked (as a
    config file is: size, UTF-8, YAML, a mapping); a damaged one is a :class:`ConfigError`
    naming it."""
    from tune.sweeps import SWEEPS

    path = Path(sweep_dir) / "sweep.yaml"
    if not path.is_file():
        raise ConfigError(f"{sweep_dir} is not a sweep directory (no sweep.yaml)")
    saved = read_config_file(path)
    name = saved.get("name")
    if not (isinstance(name, str) and name in SWEEPS and isinstance(saved.get("values"), dict)):
        raise ConfigError(
            f"{path}: needs 'name' (one of {', '.join(SWEEPS)}) and 'values' (a mapping)"
        )
    k = saved.setdefault("max_concurrent", 0)  # sweeps written before it was kept: CPUs
    if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= MAX_CONCURRENT:
        raise ConfigError(f"{path}: max_concurrent must be in 0..{MAX_CONCURRENT}, got {k!r}")
    return saved


def trial_dirs(stage_dir: Path) -> list[Path]:
    return sorted(p for p in stage_dir.iterdir() if (p / "params.json").is_file())


def collect(sweep_dir: Path, stages: tuple[str, ...]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The trials and rows tables of the sweep's ``stages`` found so far."""
    trials, rows = [], []
    for stage in stages:
        stage_dir = Path(sweep_dir) / stage
        if not stage_dir.is_dir():
            continue
        over = (stage_dir / "done.json").is_file()
        for path in trial_dirs(stage_dir):
            try:
                spec = json.loads((path / "params.json").read_text())["trial"]
            except (OSError, ValueError, KeyError):
                continue  # Tune is writing it
            labels = dict(spec.get("study", {}))
            metrics = _metrics(path / "run" / "metrics.csv")
            ended = _ended(path / "run" / "trial.json")
            if ended:
                status = "stopped" if ended == "scheduler" else "finished"
            elif (path / "error.txt").is_file() or (path / "error.pkl").is_file():
                status = "error"
            else:
                status = "stopped" if over else "running"  # over: stopped before trial.json
            trials.append({
                "stage": stage, "trial": path.name, "status": status,
                "iterations": len(metrics), "run_dir": str(path / "run"), **labels,
            })  # fmt: skip
            if len(metrics):
                metrics.insert(0, "stage", stage)
                metrics.insert(1, "trial", path.name)
                for key, value in labels.items():
                    metrics[key] = [value] * len(metrics)
                rows.append(metrics)
    trials_df = pd.DataFrame(trials)
    rows_df = pd.concat(rows, ignore_index=True) if rows else pd.DataFrame()
    return trials_df, rows_df


def _ended(path: Path) -> str | None:
    """How a trial ended (``trial.json``), or None while it has not."""
    try:
        return json.loads(path.read_text()).get("ended") or "target"
    except (OSError, ValueError):
        return None


def _metrics(path: Path) -> pd.DataFrame:
    if not path.is_file():
        return pd.DataFrame()
    try:
        df = pd.read_csv(path)
    except (pd.errors.EmptyDataError, pd.errors.ParserError, OSError):
        return pd.DataFrame()
    return df[pd.to_numeric(df["iteration"], errors="coerce").notna()].reset_index(drop=True)


def write_parquet(df: pd.DataFrame, path: Path) -> None:
    """``df`` to ``path`` atomically (a temp file, then a rename). Columns of mixed types
    (labels some trials lack) are written as text."""
    df = df.copy()
    for col in df.columns:
        if df[col].dtype == object and len({type(v) for v in df[col].dropna()}) > 1:
            df[col] = df[col].map(lambda v: None if v is None or v != v else str(v))
    with replacing(path) as tmp:
        df.to_parquet(tmp, index=False)


def save_tables(sweep_dir: Path, stages: tuple[str, ...]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Collects the sweep and writes ``trials.parquet`` and ``results.parquet``."""
    trials, rows = collect(sweep_dir, stages)
    write_parquet(trials, Path(sweep_dir) / "trials.parquet")
    write_parquet(rows, Path(sweep_dir) / "results.parquet")
    return trials, rows
