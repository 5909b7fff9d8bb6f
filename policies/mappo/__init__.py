"""MAPPO: PPO whose critic reads the env's global state and the agent's one-hot id.

Yu et al., "The Surprising Effectiveness of PPO in Cooperative Multi-Agent Games" (2022).
The actor reads the agent's own observation (and action mask); the centralised critic is used
in training only, so the deployed policy is decentralised.
"""

from __future__ import annotations

from dataclasses import dataclass

from policies.algorithm import AlgorithmInfo, Capabilities
from policies.ppo import PPOSettings, build_ppo, module_specs


@dataclass
class MAPPOSettings(PPOSettings):
    """MAPPO's settings: PPO's (see :class:`policies.ppo.PPOSettings`)."""


def build(env_id: str, settings: MAPPOSettings, **options):
    return build_ppo(ALGORITHM, env_id, settings, centralised_critic=True, **options)


def modules(env_id: str, settings: PPOSettings, **options):
    return module_specs(ALGORITHM, env_id, settings, centralised_critic=True, **options)


ALGORITHM = AlgorithmInfo(
    name="mappo",
    description="shared actor, centralised critic on the global state and agent id",
    settings=MAPPOSettings,
    capabilities=Capabilities(needs_state=True),
    build=build,
    modules=modules,
)
