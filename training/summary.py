"""What ``arena train`` says when a run ends: a short summary of its ``metrics.csv`` (how far
it came, its final and best return, its win rate where it has one, where everything is, what
to run next) and its learning curve as ``curve.png`` in the run directory."""

from __future__ import annotations

import math
import re
from pathlib import Path

from envs.files import replacing
from training.run import read_metrics


def _column(rows: list[dict], key: str) -> list[tuple[int, float]]:
    """(env steps, value) of the rows where ``key`` holds a finite number."""
    out = []
    for r in rows:
        try:
            value = float(r.get(key) or "nan")
        except ValueError:
            continue
        if math.isfinite(value):
            out.append((int(float(r["env_steps"])), value))
    return out


def seed_keys(row: dict) -> list[str]:
    """The per-seed return columns of a stacked run's metrics row, in seed order."""
    keys = [k for k in row if re.fullmatch(r"episode_return_mean_seed\d+", k)]
    return sorted(keys, key=lambda k: int(k.rsplit("seed", 1)[1]))


def summary_lines(run: Path) -> list[str]:
    """The summary of ``run`` (a few lines, none of them wrapped: paths are for copying)."""
    rows = read_metrics(run / "metrics.csv", 10**12)
    lines = [f"run: {run}"]
    if not rows:
        return lines
    last = rows[-1]
    minutes = float(last.get("time_s") or 0) / 60
    lines.append(
        f"  {last['iteration']} iterations, {int(float(last['env_steps'])):,} env steps, "
        f"{minutes:.1f} min"
    )
    returns = _column(rows, "episode_return_mean")
    if returns:
        best = max(returns, key=lambda x: x[1])
        lines.append(
            f"  return: final {returns[-1][1]:.2f}, best {best[1]:.2f} (at {best[0]:,} env steps)"
        )
    per_seed = [_column(rows, key) for key in seed_keys(last)]
    if per_seed and all(per_seed):  # a stacked run (arena train --seeds N)
        finals = [col[-1][1] for col in per_seed]
        each = ", ".join(f"{k}: {v:.2f}" for k, v in enumerate(finals))
        lines.append(f"  final return per seed: {each} (mean {sum(finals) / len(finals):.2f})")
    for key, label in (("test_battle_won_mean", "greedy test win rate"), ("win_rate", "win rate")):
        wins = _column(rows, key)
        if wins:
            lines.append(f"  {label}: final {wins[-1][1]:.1%}, best {max(v for _, v in wins):.1%}")
            break
    latest = run / "checkpoints" / "latest"
    ckpt = latest.read_text().strip() if latest.is_file() else "none"
    extra = "".join(
        f" {name}," for name in ("curve.png", "marl_eval.json") if (run / name).exists()
    )
    lines.append(f"  files: config.yaml, metrics.csv,{extra} tb/, checkpoints/ (latest: {ckpt})")
    pick = " --seed-index 0" if per_seed else ""  # a stacked run plays one seed at a time
    lines.append(f"  next: arena eval {run}{pick}")
    lines.append(f"        arena serve {run}{pick}")
    lines.append(f"        tensorboard --logdir {run / 'tb'}")
    return lines


def write_curve(run: Path) -> Path | None:
    """``run/curve.png``: the training return (and the win rate where there is one) against
    env steps; None when the run has no finite return yet."""
    rows = read_metrics(run / "metrics.csv", 10**12)
    returns = _column(rows, "episode_return_mean")
    if not returns:
        return None
    wins = _column(rows, "test_battle_won_mean") or _column(rows, "win_rate")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = 2 if wins else 1
    fig, axes = plt.subplots(1, panels, figsize=(4.6 * panels, 3.2), squeeze=False)
    ax = axes[0][0]
    ax.plot([s / 1e6 for s, _ in returns], [v for _, v in returns], lw=1.2)
    ax.set_xlabel("env steps (M)")
    ax.set_ylabel("episode return (training, mean)")
    ax.grid(alpha=0.3)
    if wins:
        ax = axes[0][1]
        label = "greedy test win rate" if _column(rows, "test_battle_won_mean") else "win rate"
        ax.plot([s / 1e6 for s, _ in wins], [v for _, v in wins], lw=1.2, marker=".")
        ax.set_ylim(-0.02, 1.02)
        ax.set_xlabel("env steps (M)")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    fig.suptitle(f"{run.parent.parent.parent.name}/{run.parent.parent.name}, "
                 f"{run.parent.name}: {run.name}", fontsize=9)  # fmt: skip
    fig.tight_layout()
    path = run / "curve.png"
    try:
        with replacing(path) as tmp:
            fig.savefig(tmp, dpi=100, format="png")
    finally:
        plt.close(fig)
    return path
