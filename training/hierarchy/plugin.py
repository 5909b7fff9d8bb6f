"""The envs of ``training.hierarchy`` for the env registry, named by the ``arena.envs`` entry
point (``envs.registry.PLUGINS``). Nothing heavy is imported here: listing env ids stays cheap,
and the env itself loads on first use."""

from __future__ import annotations


def _validate(cfg: dict) -> None:
    import dataclasses

    from training.hierarchy.high_level import HighLevelOptions

    names = {f.name for f in dataclasses.fields(HighLevelOptions)}
    HighLevelOptions(**{k: v for k, v in cfg.items() if k in names})


def register() -> None:
    """Adds ``volleyball/3v3_high-v0`` (:mod:`training.hierarchy.high_level`)."""
    from envs.registry import register as add

    add(
        "volleyball/3v3_high-v0",
        "training.hierarchy.high_level:HighLevel3v3Env",
        vector="training.hierarchy.high_level:HighLevel3v3",
        description="VolleyBots 3v3: a learned high level picks skills (frozen), MuJoCo",
        validate=_validate,
    )
