"""Learning curves of runs from their ``metrics.csv``: one panel per run and column (an
episode fact such as ``episode_pos_error``, ``episode_success``, or the return) against env
steps.

    .venv/bin/python bench/learning_curves.py --out docs/img/volleyball_learning.png \\
        RUN_DIR:episode_pos_error RUN_DIR:episode_bumps
    .venv/bin/python bench/learning_curves.py --out docs/img/mmwalk/navigate_learning.png \\
        RUN_DIR:episode_return_mean RUN_DIR:episode_success RUN_DIR:episode_bumps

Prints one JSON line per run: the column's first and last values and the wall time.
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="+", metavar="RUN_DIR:COLUMN")
    p.add_argument("--out", required=True)
    p.add_argument(
        "--title", default="Training curves on 2 CPU cores (sampled actions, moving window)"
    )
    args = p.parse_args()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(args.runs), figsize=(4.5 * len(args.runs), 3.4), squeeze=False)
    for ax, item in zip(axes[0], args.runs, strict=True):
        run, _, column = item.rpartition(":")
        rows = list(csv.DictReader((Path(run) / "metrics.csv").open()))
        # columns measured only some iterations (greedy test episodes) are NaN in between
        rows = [r for r in rows if r[column] not in ("", "nan")]
        steps = [int(r["env_steps"]) / 1e6 for r in rows]
        values = [float(r[column]) for r in rows]
        family, env = Path(run).resolve().parts[-4:-2]  # OUT/family/env/algo/name
        ax.plot(steps, values, lw=1.2)
        ax.set_xlabel("env steps (M)")
        ax.set_ylabel(column.removeprefix("episode_").replace("_", " "))
        ax.set_title(f"{family}/{env} ({Path(run).parent.name})", fontsize=10)
        ax.grid(alpha=0.3)
        if column in ("test_battle_won_mean", "win_rate", "episode_success"):
            ax.set_ylim(-0.02, 1.02)  # a share: the whole range, so runs compare by eye
        minutes = float(rows[-1]["time_s"]) / 60
        print(json.dumps({"run": run, "column": column, "first": values[0], "last": values[-1],
                          "env_steps": int(rows[-1]["env_steps"]), "minutes": round(minutes, 1)}))  # fmt: skip
    fig.suptitle(args.title, fontsize=10)
    fig.tight_layout()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=110)


if __name__ == "__main__":
    main()
