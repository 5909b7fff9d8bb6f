"""Calibrating the SMAC enemy: SMAC's own ``heuristic_ai`` against each enemy model.

    .venv/bin/python bench/smac_heuristic.py [--maps 3m,8m,...] [--models smaclite,arena-0.2]
        [--battles 64] [--seed 0] [--published 2s3z=0.9,...] [--out FILE]

For each map and enemy model (``BattleOptions.enemy_ai``) it plays N battles (battle i seeded
``seed + i``, all N stepped together by the numba engine) with ``heuristic_ai=True``: the
agents follow SMAC's scripted heuristic (oxwhirl/smac@d6aab33 ``get_agent_action_heuristic``)
and the actions passed are ignored. Each battle runs to its end or its step limit.

Prints one JSON line per (map, model) with the win rate, its Wilson 95% interval, the mean
return (SMAC's shared reward summed over the battle) and the published heuristic value, then a
``summary`` line with each model's mean absolute difference from the published values over
the maps that have one; writes everything to ``bench/results/smac_heuristic.json``.

The published values are the "Heuristic" column of the SMAC paper (Samvelyan et al. 2019,
arXiv 1902.04043). None of them could be read from a source reachable when this bench was
written, so ``PUBLISHED`` holds none; pass them with ``--published`` (fractions) once they are
at hand, and the summary ranks the models by them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from envs.smac.core import ENEMY_AIS, BattleBatch  # noqa: E402
from policies.testing import wilson  # noqa: E402

# The maps of SMAC's heuristic column that the review of the enemy compared, and 3m, 8m.
MAPS = ("3m", "8m", "2s3z", "3s5z", "1c3s5z", "10m_vs_11m", "5m_vs_6m", "MMM2")
# SMAC paper, "Heuristic" column (fractions): not found in any source reachable here.
PUBLISHED: dict[str, float | None] = {m: None for m in MAPS}
OUT = ROOT / "bench" / "results" / "smac_heuristic.json"


def play(map_name: str, enemy_ai: str, battles: int, seed: int, engine: str = "numba") -> dict:
    """``battles`` battles of SMAC's heuristic against ``enemy_ai``: wins and returns."""
    core = BattleBatch(
        battles, seed=seed, map_name=map_name, auto_reset=False, engine=engine,
        enemy_ai=enemy_ai, heuristic_ai=True,
    )  # fmt: skip
    core.reset()
    done = np.zeros(battles, bool)
    won = np.zeros(battles, bool)
    ret = np.zeros(battles)
    idle = np.zeros((battles, core.n_allies), np.int64)  # ignored under heuristic_ai
    t0 = time.perf_counter()
    while not done.all():
        step = core.step(idle)
        ret += np.where(done, 0.0, step.rewards[:, 0])
        end = (step.terminated | step.truncated) & ~done
        won |= end & core.info["battle_won"]
        done |= end
    wins = int(won.sum())
    lo, hi = wilson(wins, battles)
    return {
        "map": map_name,
        "enemy_ai": enemy_ai,
        "battles": battles,
        "seed": seed,
        "wins": wins,
        "win_rate": wins / battles,
        "wilson95": [round(lo, 4), round(hi, 4)],
        "mean_return": round(float(ret.mean()), 4),
        "published": PUBLISHED.get(map_name),
        "seconds": round(time.perf_counter() - t0, 2),
    }


def summary(rows: list[dict]) -> dict:
    """Each model's mean absolute difference from the published values (where known)."""
    out = {}
    for model in sorted({r["enemy_ai"] for r in rows}):
        known = [r for r in rows if r["enemy_ai"] == model and r["published"] is not None]
        diff = [abs(r["win_rate"] - r["published"]) for r in known]
        out[model] = {
            "maps_with_published": [r["map"] for r in known],
            "mean_abs_diff": round(float(np.mean(diff)), 4) if diff else None,
        }
    ranked = [m for m in out if out[m]["mean_abs_diff"] is not None]
    best = min(ranked, key=lambda m: out[m]["mean_abs_diff"]) if ranked else None
    return {"summary": out, "closest_to_published": best}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--maps", default=",".join(MAPS))
    ap.add_argument("--models", default=",".join(ENEMY_AIS))
    ap.add_argument("--battles", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--published", default="", help="MAP=FRACTION,... (the paper's column)")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    for item in filter(None, args.published.split(",")):
        name, value = item.split("=")
        PUBLISHED[name] = float(value)
    rows = []
    for map_name in args.maps.split(","):
        for model in args.models.split(","):
            rows.append(play(map_name, model, args.battles, args.seed))
            print(json.dumps(rows[-1]), flush=True)
    tail = summary(rows)
    print(json.dumps(tail))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"rows": rows, **tail}, indent=1) + "\n")


if __name__ == "__main__":
    main()
