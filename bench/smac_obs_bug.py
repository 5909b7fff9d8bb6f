"""How much of the enemy SMACv2's observation bug hides (``upstream_obs_bug``).

    .venv/bin/python bench/smac_obs_bug.py [--maps protoss_5_vs_5,terran_10_vs_10,zerg_5_vs_5]
        [--battles 64] [--steps 200]

Steps the same battles twice, with Arena's observation and with SMACv2's tagging reproduced,
on uniformly random legal actions (the masks, hence the battles, are the same in both runs;
finished battles reset), and counts the enemy rows of the agents' observations that are not
all zero. Prints one line per map: both counts and the share the bug hides.
"""

from __future__ import annotations

import argparse

import numpy as np

from envs.smac.core import BattleBatch


def shown_rows(name: str, bug: bool, battles: int, steps: int) -> int:
    core = BattleBatch(battles, seed=0, map_name=name, upstream_obs_bug=bug)
    step = core.reset()
    rng = np.random.default_rng(0)
    A, E, nf = core.n_allies, core.n_enemies, core.nf_enemy
    shown = 0
    for _ in range(steps):
        start = core.nf_move
        block = step.obs["agent"][:, :, start : start + E * nf].reshape(battles, A, E, nf)
        shown += int((block != 0).any(-1).sum())
        mask = step.action_mask["agent"]
        step = core.step((rng.random(mask.shape) * mask).argmax(-1))
    return shown


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--maps", default="protoss_5_vs_5,terran_10_vs_10,zerg_5_vs_5")
    parser.add_argument("--battles", type=int, default=64)
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()
    for name in args.maps.split(","):
        arena = shown_rows(name, False, args.battles, args.steps)
        upstream = shown_rows(name, True, args.battles, args.steps)
        print(
            f"{name}: enemy rows shown {arena} (Arena) / {upstream} (upstream_obs_bug), "
            f"{100 * (1 - upstream / arena):.1f}% hidden by the bug"
        )


if __name__ == "__main__":
    main()
