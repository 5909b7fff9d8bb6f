"""Population self-play for two-team games (VolleyBots' SP, FSP and PSRO-Nash).

The module ``near`` trains with PPO (IPPO's critic) against the frozen module ``far``. Both
teams see the court from their own side (mirrored observations), so ``near``'s weights can
play either side: each iteration ``far`` takes the weights of one member of a population of
frozen snapshots, drawn from the meta-strategy (``sp``: the latest member, ``fsp``: uniform,
``nash``: the Nash mixture of the payoff matrix). The population starts with the initial
policy; when ``near``'s training win rate converges (VolleyBots' rule: mean of the last 10
iterations >= 0.9 with std <= 0.02, after at least ``min_iterations``) its weights join the
population, their payoffs against every member are measured in ``payoff_games`` games each,
and training continues from them against the new meta-strategy. Members live in the run
directory (``population/``) and a resumed run keeps them; ``arena crossplay RUN``
(``training/crossplay.py``) plays the members against each other and writes win rates and Elo
ratings.

The serving team is drawn per episode (``random_serve``, unless the run sets it), so the
trained side learns to serve and to receive; VolleyBots' near team always serves, and its
trainer alternates the side that learns instead.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from policies.algorithm import AlgorithmInfo, AlgorithmMismatch, Capabilities
from policies.diversity import DiversityCallback
from policies.ppo import PPOSettings, configure_ppo, declare_ppo
from policies.ppo.demos import warm_start
from policies.selfplay.league import META_SOLVERS

TEAMS = ("near", "far")


@dataclass
class SelfPlaySettings(PPOSettings):
    """PPO's settings (:class:`policies.ppo.PPOSettings`) and the league's."""

    meta_solver: str = "fsp"
    """How opponents are drawn from the population: sp, fsp or nash."""
    win_window: int = 10
    freeze_win_rate: float = 0.9
    freeze_std: float = 0.02
    min_iterations: int = 50
    """Iterations a member trains at least before it may freeze (VolleyBots: 50)."""
    max_iterations: int = 5000
    """Iterations after which a member freezes whatever its win rate (VolleyBots: 5000)."""
    population_cap: int = 10
    payoff_games: int = 64
    """Games against each member when a new member joins (for the payoff matrix)."""

    def validate(self) -> None:
        super().validate()
        if self.meta_solver not in META_SOLVERS:
            raise ValueError(
                f"meta_solver must be one of {', '.join(META_SOLVERS)}, got {self.meta_solver!r}"
            )
        for name in (
            "win_window",
            "min_iterations",
            "max_iterations",
            "population_cap",
            "payoff_games",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)!r}")
        if not 0 < self.freeze_win_rate <= 1 or self.freeze_std < 0:
            raise ValueError("freeze_win_rate must be in (0, 1] and freeze_std >= 0")


def declare(env_id: str, settings: SelfPlaySettings, opts):
    import envs

    groups = set(envs.make_vector(env_id, 1).groups)
    if groups != set(TEAMS):
        raise AlgorithmMismatch(
            f"selfplay needs a two-team env whose groups are 'near' and 'far' (e.g. "
            f"volleyball/1v1-v0, 3v3, 6v6); {env_id} has {sorted(groups)}"
        )
    if opts.sharing not in ("auto", "per_group"):
        raise AlgorithmMismatch("selfplay trains one module per team: leave --policies at auto")
    opts = dataclasses.replace(opts, sharing="per_group")
    return declare_ppo(env_id, settings, opts, centralised_critic=False)


def configure(env_id: str, settings: SelfPlaySettings, modules, opts):
    from policies.selfplay.callback import SelfPlayCallback

    if opts.frozen:
        raise AlgorithmMismatch("selfplay freezes 'far' itself; do not pass frozen modules")
    # Either team serves (drawn per episode), so the trained side learns serving and
    # receiving and its snapshots can stand in for the other side.
    env_config = {"random_serve": True, **opts.env_config}
    opts = dataclasses.replace(opts, env_config=env_config, frozen=("far",))
    config = configure_ppo(env_id, settings, modules, opts)
    return config.callbacks([DiversityCallback, SelfPlayCallback.with_settings(settings)])


ALGORITHM = AlgorithmInfo(
    name="selfplay",
    description="PPO against a population of frozen snapshots (SP, FSP, PSRO-Nash)",
    settings=SelfPlaySettings,
    capabilities=Capabilities(recurrent=False),
    declare=declare,
    configure=configure,
    metrics=("population", "opponent", "train_win_rate"),
    warm_start=warm_start,
    example_env="volleyball/1v1-v0",
)
