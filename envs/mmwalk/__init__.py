"""mmWalk-style walking assistance (KediYing/mmWalk, NeurIPS 2025): procedural street scenes
rendered with MuJoCo into walker, guide-dog and drone panoramas, a dataset builder with VQA in
mmWalkVQA's nine categories, and ``mmwalk/navigate-v0``, reaching a destination safely from
camera frames."""

from __future__ import annotations

import os

from envs.registry import register

# Headless rendering unless the user chose a backend; MuJoCo reads this when first imported.
os.environ.setdefault("MUJOCO_GL", "egl")


def _validate(cfg: dict) -> None:
    import dataclasses

    from envs.mmwalk.navigate import NavigateOptions

    names = {f.name for f in dataclasses.fields(NavigateOptions)}
    NavigateOptions(**{k: v for k, v in cfg.items() if k in names})


register(
    "mmwalk/navigate-v0",
    "envs.mmwalk.navigate:NavigateEnv",
    vector="envs.mmwalk.navigate:NavigateBatch",
    description="reach the route's destination safely from camera frames (MuJoCo street scenes)",
    validate=_validate,
)
