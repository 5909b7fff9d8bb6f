"""HyperMARL: IPPO and MAPPO whose modules generate each agent's weights with hypernetworks.

Tessera et al., "HyperMARL: Adaptive Hypernetworks for Multi-Agent RL" (NeurIPS 2025). One
module acts for all the agents of an env with homogeneous agents (``--policies shared``);
:class:`policies.hypermarl.module.HyperActorCritic` gives each agent its own actor and critic
generated from the agent's one-hot id (upstream's default) or a learned embedding. ``--algo
hypermarl-ippo`` (critics on the agent's observation) and ``hypermarl-mappo`` (per-agent
critics on the global state); the baselines
are ippo/mappo with ``--policies shared`` (FuPS), ``--set model.agent_id=true`` (FuPS+ID) and
``--policies per_agent`` (NoPS).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from policies.algorithm import AlgorithmInfo, AlgorithmMismatch, Capabilities
from policies.hypermarl.module import HyperActorCritic, HyperSettings
from policies.ppo import PPO_METRICS, PPOSettings, configure_ppo, declare_ppo
from policies.ppo.demos import warm_start


@dataclass
class HyperMARLSettings(PPOSettings):
    """PPO's settings (:class:`policies.ppo.PPOSettings`) and the hypernetworks'."""

    hyper: HyperSettings = field(default_factory=HyperSettings)
    """The hypernetworks (embedding kind and size, hidden layers of the heads, init)."""

    def validate(self) -> None:
        bad = self.hyper.problems()
        if self.model.agent_id:
            bad.append("model.agent_id=true (HyperMARL never feeds the id to the network)")
        m, plain = self.model, type(self.model)()
        for key in ("value_norm", "input_norm", "init"):
            if getattr(m, key) != getattr(plain, key):
                bad.append(
                    f"model.{key}={getattr(m, key)} (HyperMARL's networks have no such option)"
                )
        if bad:
            raise ValueError(f"bad value for {', '.join(bad)}")
        super().validate()


def algorithm(name: str, centralised_critic: bool) -> AlgorithmInfo:
    """The ``AlgorithmInfo`` of hypermarl-ippo or hypermarl-mappo."""

    def declare(env_id: str, settings: HyperMARLSettings, opts):
        if opts.sharing not in ("auto", "shared"):
            raise AlgorithmMismatch(
                f"{name} generates every agent's weights in one module: use --policies shared "
                f"(or auto), not {opts.sharing}"
            )
        return declare_ppo(
            env_id,
            settings,
            opts,
            centralised_critic=centralised_critic,
            module_class=HyperActorCritic,
            extra_config={"hyper": dataclasses.asdict(settings.hyper)},
        )

    critic = "per-agent critics on the global state" if centralised_critic else "on the agent's observation"  # fmt: skip
    return AlgorithmInfo(
        name=name,
        description=f"hypernetwork-generated per-agent actors and critics ({critic})",
        settings=HyperMARLSettings,
        capabilities=Capabilities(groups=False, needs_state=centralised_critic),
        declare=declare,
        configure=configure_ppo,
        metrics=PPO_METRICS,
        warm_start=warm_start,
        example_env="mpe/dispersion-v0",
    )
