"""Predator-prey with the miscoordination penalty: Böhmer, Kurin & Whiteson's relative
overgeneralisation task ("Deep Coordination Graphs", ICML 2020), a vectorised NumPy port of
their ``stag_hunt`` env with the ``rel_overgen`` config (``envs.predprey.core``).

``predprey/punish-v0``: 8 predators hunt 8 prey on a 10x10 grid for 200 steps; a prey is
caught when two adjacent predators execute ``catch`` together (+10 for the team), and a
predator that tries alone costs the team ``miscapture_punishment`` (default -2, the paper's
relative-overgeneralisation knob; 0 removes it).

Version history: v0 = the first version.
"""

from envs.registry import register


def _validate(cfg: dict) -> None:
    from envs.predprey.core import validate

    validate(cfg)


register(
    "predprey/punish-v0",
    "envs.predprey.core:PredPreyEnv",  # imported on first use
    vector="envs.predprey.core:PredPreyBatch",
    description="DCG's predator-prey: 8 predators, 8 prey, 10x10, lone catch -2 (p)",
    validate=_validate,
)
