"""Drone volleyball on MuJoCo: VolleyBots' (thu-uav/VolleyBots, arXiv 2502.01932) ten tasks and the hitting skills of its hierarchical 3v3 team,
as batched cores (``envs.volleyball.core``) with PettingZoo faces."""

from __future__ import annotations

import os

from envs.registry import register

# Headless rendering unless the user chose a backend; MuJoCo reads this when first imported.
os.environ.setdefault("MUJOCO_GL", "egl")

TASKS = {
    "hover": ("Hover", "hold a pose (1 drone)"),
    "back_and_forth": ("BackAndForth", "fly between two targets (1 drone)"),
    "hit_ball": ("HitBall", "hit the falling ball over the net (1 drone)"),
    "solo_bump": ("SoloBump", "juggle the ball (1 drone)"),
    "bump_and_pass": ("BumpAndPass", "pass the ball between two drones"),
    "set_and_spike_easy": ("SetAndSpikeEasy", "set and spike into a target (2 drones)"),
    "set_and_spike_hard": ("SetAndSpikeHard", "set and spike past a defender (2 drones)"),
    "1v1": ("Match1v1", "a point of 1v1 on a 6 x 3 m court"),
    "3v3": ("Match3v3", "a point of 3v3 on a 12 x 6 m court"),
    "6v6": ("Match6v6", "a point of 6v6 on an 18 x 9 m court"),
    "serve": ("Serve", "3v3 skill: serve to a target (1 drone)"),
    "pass": ("Pass", "3v3 skill: receive and pass to the setter (1 drone)"),
    "set": ("Set", "3v3 skill: set the ball to the attacker (1 drone)"),
    "attack": ("Attack", "3v3 skill: attack over the net to a target (1 drone)"),
}


def _validate(core: str):
    def validate(cfg: dict) -> None:
        import dataclasses

        from envs.volleyball import env

        options = env.CORES[core].OPTIONS
        names = {f.name for f in dataclasses.fields(options)}
        options(**{k: v for k, v in cfg.items() if k in names})

    return validate


for _task, (_core, _what) in TASKS.items():
    register(
        f"volleyball/{_task}-v0",
        f"envs.volleyball.env:{_core}Env",
        vector=f"envs.volleyball.env:{_core}",
        description=f"VolleyBots {_what}, MuJoCo",
        validate=_validate(_core),
    )
