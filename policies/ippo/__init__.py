"""IPPO: independent PPO; each module's critic reads its agent's own observation.

de Witt et al., "Is Independent Learning All You Need in the StarCraft Multi-Agent
Challenge?" (2020). With ``--policies shared`` (the default where the env has one agent
group) all agents share one module, as in the paper's parameter-shared IPPO.
"""

from __future__ import annotations

from dataclasses import dataclass

from policies.algorithm import AlgorithmInfo, Capabilities
from policies.ppo import PPO_METRICS, PPOSettings, configure_ppo, declare_ppo
from policies.ppo.demos import warm_start


@dataclass
class IPPOSettings(PPOSettings):
    """IPPO's settings: PPO's (see :class:`policies.ppo.PPOSettings`)."""


def declare(env_id: str, settings: IPPOSettings, opts):
    return declare_ppo(env_id, settings, opts, centralised_critic=False)


ALGORITHM = AlgorithmInfo(
    name="ippo",
    description="independent PPO, the critic on the agent's own observation",
    settings=IPPOSettings,
    capabilities=Capabilities(),
    declare=declare,
    configure=configure_ppo,
    metrics=PPO_METRICS,
    warm_start=warm_start,
)
