"""MAPPO: PPO whose critic reads the env's global state and the agent's one-hot id.

Yu et al., "The Surprising Effectiveness of PPO in Cooperative Multi-Agent Games" (2022).
The actor reads the agent's own observation (and action mask); the centralised critic is used
in training only, so the deployed policy is decentralised.

``--set paper=true`` on a SMAC battle trains with that paper's SMAC setup for the map
(:data:`PAPER_COMMON`, :data:`PAPER_PER_MAP`, :data:`PAPER_SMACV2`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from policies.algorithm import AlgorithmInfo, AlgorithmMismatch, Capabilities
from policies.ppo import PPO_METRICS, PPOSettings, configure_ppo, declare_ppo
from policies.ppo.demos import warm_start

# The MAPPO paper's SMAC setup (github.com/marlbenchmark/on-policy, onpolicy/config.py and
# scripts/train_smac*_scripts/): rMAPPO with a GRU over 10-step chunks, MLP 64x64, lr 5e-4,
# clip 0.2, entropy 0.01, gradient norm 10, value loss weight 1, 8 rollout threads x 400
# steps a batch, one minibatch; per map the scripts change the epochs, the clip and the
# minibatches (maps without a script, 2s3z among them, keep the config's 15 epochs).
PAPER_COMMON = {
    "lr": 5e-4,
    "clip_param": 0.2,
    "entropy_coeff": 0.01,
    "grad_clip": 10.0,
    "vf_loss_coeff": 1.0,
    "train_batch_size": 8 * 400,
    "num_envs_per_env_runner": 8,
    "num_epochs": 15,
    "minibatches": 1,
}
PAPER_PER_MAP = {
    "10m_vs_11m": {"num_epochs": 10},
    "25m": {"num_epochs": 10},
    "27m_vs_30m": {"num_epochs": 5},
    "2c_vs_64zg": {"num_epochs": 5},
    "3s5z": {"num_epochs": 5},
    "3s5z_vs_3s6z": {"num_epochs": 5},
    "3s_vs_5z": {"clip_param": 0.05},
    "5m_vs_6m": {"num_epochs": 10, "clip_param": 0.05},
    "6h_vs_8z": {"num_epochs": 5},
    "8m_vs_9m": {"clip_param": 0.05},
    "MMM2": {"num_epochs": 5, "minibatches": 2},
    "corridor": {"num_epochs": 5},
}
PAPER_SMACV2 = {"num_epochs": 5}
"""Every SMACv2 scenario (scripts/train_smacv2_scripts/: 5 epochs, 20 M env steps)."""


@dataclass
class MAPPOSettings(PPOSettings):
    """MAPPO's settings: PPO's (see :class:`policies.ppo.PPOSettings`)."""

    paper: bool = False
    """SMAC battles only: train with the MAPPO paper's settings for the map (recurrent, lr,
    clip, epochs, batch, minibatches); leave those settings at their defaults."""


def paper_settings(env_id: str, settings: MAPPOSettings) -> MAPPOSettings:
    """``settings`` with the MAPPO paper's SMAC setup for ``env_id``'s map filled in (or as
    they are when ``paper`` is off)."""
    if not settings.paper:
        return settings
    family, _, rest = env_id.partition("/")
    if family not in ("smac", "smacv2"):
        raise AlgorithmMismatch(
            f"mappo paper=true is the MAPPO paper's SMAC setup; {env_id!r} is not a SMAC "
            "battle (smac/<map>-v0 or smacv2/<scenario>-v0)"
        )
    name = rest.rsplit("-v", 1)[0]
    per_map = PAPER_SMACV2 if family == "smacv2" else PAPER_PER_MAP.get(name, {})
    knobs = {**PAPER_COMMON, **per_map}
    minibatches = knobs.pop("minibatches")
    knobs["minibatch_size"] = knobs["train_batch_size"] // minibatches
    default = MAPPOSettings()
    changed = [k for k in knobs if getattr(settings, k) != getattr(default, k)]
    changed += [f"model.{k}" for k in ("recurrent", "max_seq_len")
                if getattr(settings.model, k) != getattr(default.model, k)]  # fmt: skip
    if changed:
        raise AlgorithmMismatch(
            f"mappo paper=true sets {', '.join(changed)} itself; leave them out or drop paper"
        )
    model = dataclasses.replace(settings.model, recurrent=True, max_seq_len=10)
    return dataclasses.replace(settings, model=model, **knobs)


def declare(env_id: str, settings: MAPPOSettings, opts):
    return declare_ppo(env_id, settings, opts, centralised_critic=True)


ALGORITHM = AlgorithmInfo(
    name="mappo",
    description="shared actor, centralised critic on the global state and agent id",
    settings=MAPPOSettings,
    capabilities=Capabilities(needs_state=True),
    prepare=paper_settings,
    declare=declare,
    configure=configure_ppo,
    metrics=PPO_METRICS,
    warm_start=warm_start,
)
