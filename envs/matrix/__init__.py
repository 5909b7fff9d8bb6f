"""Matrix games: Claus & Boutilier's climbing and penalty games, two agents of three actions
playing one joint action per episode for a shared payoff (``envs.matrix.games``).

``matrix/climbing-v0`` and ``matrix/penalty-v0`` (its ``k``, the miscoordination penalty,
default -100) are the textbook cases of relative overgeneralisation: each optimum sits next
to a heavy penalty, so a learner that averages over its partner's exploration prefers a safe,
worse action (docs/rac.md).

Version history: v0 = the first version.
"""

from envs.registry import register


def _validate(cfg: dict) -> None:
    from envs.matrix.games import PenaltyOptions

    PenaltyOptions(**{k: v for k, v in cfg.items() if k == "k"})


register(
    "matrix/climbing-v0",
    "envs.matrix.games:ClimbingEnv",  # imported on first use
    vector="envs.matrix.games:ClimbingBatch",
    description="Claus & Boutilier's climbing game: 2 agents, 3 actions, one step",
)
register(
    "matrix/penalty-v0",
    "envs.matrix.games:PenaltyEnv",
    vector="envs.matrix.games:PenaltyBatch",
    description="Claus & Boutilier's penalty game (k = -100): 2 agents, 3 actions, one step",
    validate=_validate,
)
