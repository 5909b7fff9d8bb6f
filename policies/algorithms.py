"""Algorithms: functions from (env id, typed config) to an RLlib ``AlgorithmConfig``.

``ippo``: one PPO policy shared by all agents, each agent's critic on its own observation.
``mappo``: the same shared actor, the critic on the env's global state plus the agent's id.
Both use RLlib's PPO learner (clipped surrogate, GAE, value bootstrapping on truncation) on
the new API stack and sample through ``cluster.sampling.VectorEnvRunner``; action masks are
honoured where the env has them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import gymnasium as gym
from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.core.rl_module.rl_module import RLModuleSpec

import envs
from cluster.sampling import VectorEnvRunner, layout_for
from policies.modules import SharedActorCritic


@dataclass
class PPOSettings:
    """Hyper-parameters of ippo and mappo (``--set key=value`` fills these)."""

    lr: float = 1e-3
    """Adam learning rate."""
    gamma: float = 0.99
    """Discount factor."""
    gae_lambda: float = 0.95
    """GAE lambda."""
    clip_param: float = 0.2
    """PPO surrogate clip range."""
    vf_clip_param: float = 10.0
    """Clip range of the value loss."""
    entropy_coeff: float = 0.01
    """Entropy bonus weight."""
    vf_loss_coeff: float = 0.5
    """Value loss weight."""
    kl_coeff: float = 0.0
    """Initial KL penalty weight (0 turns the KL term off, as in MAPPO)."""
    grad_clip: float = 0.5
    """Global gradient-norm clip."""
    train_batch_size: int = 4000
    """Env steps per training iteration (all agents of an env step count once)."""
    minibatch_size: int = 512
    """Agent steps per SGD minibatch."""
    num_epochs: int = 5
    """SGD passes over each batch."""
    hidden: list[int] = field(default_factory=lambda: [64, 64])
    """Hidden layer sizes of actor and critic."""
    activation: str = "tanh"
    """Hidden activation: tanh or relu."""
    num_envs_per_env_runner: int = 64
    """Envs each EnvRunner steps as one batch."""

    def validate(self) -> None:
        checks = {
            "lr": self.lr > 0,
            "gamma": 0 < self.gamma <= 1,
            "gae_lambda": 0 <= self.gae_lambda <= 1,
            "clip_param": self.clip_param > 0,
            "entropy_coeff": self.entropy_coeff >= 0,
            "train_batch_size": self.train_batch_size > 0,
            "minibatch_size": self.minibatch_size > 0,
            "num_epochs": self.num_epochs > 0,
            "hidden": len(self.hidden) > 0 and all(h > 0 for h in self.hidden),
            "activation": self.activation in ("tanh", "relu"),
            "num_envs_per_env_runner": self.num_envs_per_env_runner > 0,
        }
        bad = [k for k, ok in checks.items() if not ok]
        if bad:
            raise ValueError(
                f"bad value for {', '.join(f'{k}={getattr(self, k)!r}' for k in bad)} "
                "(rates and sizes must be positive, gamma in (0, 1], gae_lambda in [0, 1], "
                "activation tanh or relu)"
            )


@dataclass(frozen=True)
class AlgorithmInfo:
    """What an algorithm is and what it supports (asked, not guessed, by tests and sweeps)."""

    name: str
    centralised_critic: bool
    description: str
    supports_discrete: bool = True
    supports_continuous: bool = True
    supports_action_masks: bool = True


ALGORITHMS = {
    "ippo": AlgorithmInfo("ippo", False, "independent PPO, one shared policy"),
    "mappo": AlgorithmInfo("mappo", True, "shared actor, critic on the global state"),
}


def algorithm(name: str) -> AlgorithmInfo:
    if name not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {name!r}; allowed: {', '.join(ALGORITHMS)}")
    return ALGORITHMS[name]


def build(
    env_id: str,
    algo: str,
    settings: PPOSettings,
    *,
    env_config: dict | None = None,
    num_env_runners: int = 0,
    seed: int | None = 0,
) -> PPOConfig:
    """The RLlib config that trains ``algo`` on ``env_id``."""
    info = algorithm(algo)
    settings.validate()
    env_config = dict(env_config or {})
    probe = envs.make_vector(env_id, 1, **env_config)
    discrete = isinstance(probe.action_space, gym.spaces.Discrete)
    if (discrete and not info.supports_discrete) or (not discrete and not info.supports_continuous):
        raise ValueError(f"{algo} does not support the action space {probe.action_space}")
    layout = layout_for(probe, info.centralised_critic)
    module_spec = RLModuleSpec(
        module_class=SharedActorCritic,
        observation_space=layout.space(),
        action_space=probe.action_space,
        model_config={
            **layout.to_dict(),
            "hidden": list(settings.hidden),
            "activation": settings.activation,
        },
    )
    return (
        PPOConfig()
        .environment(env=env_id, env_config=env_config)
        .framework("torch")
        .env_runners(
            env_runner_cls=VectorEnvRunner,
            num_env_runners=num_env_runners,
            num_envs_per_env_runner=settings.num_envs_per_env_runner,
            rollout_fragment_length="auto",
            num_cpus_per_env_runner=1,
            merge_env_runner_states=False,
            broadcast_env_runner_states=False,
        )
        .learners(num_learners=0)
        .rl_module(rl_module_spec=module_spec)
        .training(
            lr=settings.lr,
            gamma=settings.gamma,
            lambda_=settings.gae_lambda,
            clip_param=settings.clip_param,
            vf_clip_param=settings.vf_clip_param,
            entropy_coeff=settings.entropy_coeff,
            vf_loss_coeff=settings.vf_loss_coeff,
            kl_coeff=settings.kl_coeff,
            use_kl_loss=settings.kl_coeff > 0,
            grad_clip=settings.grad_clip,
            train_batch_size_per_learner=settings.train_batch_size,
            minibatch_size=settings.minibatch_size,
            num_epochs=settings.num_epochs,
        )
        .reporting(metrics_num_episodes_for_smoothing=100)
        .debugging(seed=seed)
    )
