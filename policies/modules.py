"""RLModules of Arena's shared-policy algorithms.

All agents of a multi-agent env share one actor; each agent step is one row of the module's
input, a flat vector laid out as :class:`ObsLayout` says::

    [ observation (obs_dim) | action mask (mask_dim) | critic input (critic_dim) ]

IPPO's critic reads the agent's own observation (``critic_dim = 0``); MAPPO's reads the
critic input, the env's global state followed by the agent's one-hot id. Illegal actions get
the smallest float as logit, so they are never sampled and carry no probability in the loss.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.apis.value_function_api import ValueFunctionAPI
from ray.rllib.core.rl_module.rl_module import RLModule
from ray.rllib.core.rl_module.torch import TorchRLModule
from ray.rllib.utils.annotations import override
from torch import nn

FLOAT_MIN = torch.finfo(torch.float32).min


@dataclass(frozen=True)
class ObsLayout:
    """How one agent step is laid out in the module's flat input.

    Args:
        obs_dim: length of the agent's own observation.
        mask_dim: number of discrete actions when the env masks them, else 0.
        critic_dim: length of the centralised critic's input (0: the critic reads the
            observation).
        num_agents: agents per env (the one-hot id in the critic input).
    """

    obs_dim: int
    mask_dim: int = 0
    critic_dim: int = 0
    num_agents: int = 1

    @property
    def size(self) -> int:
        return self.obs_dim + self.mask_dim + self.critic_dim

    def space(self) -> gym.spaces.Box:
        return gym.spaces.Box(-np.inf, np.inf, (self.size,), np.float32)

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


def mlp(sizes: list[int], activation: str, out_gain: float) -> nn.Sequential:
    """An MLP with orthogonal init; the last layer is scaled by ``out_gain``."""
    act = {"tanh": nn.Tanh, "relu": nn.ReLU}[activation]
    layers: list[nn.Module] = []
    for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:], strict=True)):
        linear = nn.Linear(n_in, n_out)
        last = i == len(sizes) - 2
        nn.init.orthogonal_(linear.weight, out_gain if last else np.sqrt(2))
        nn.init.zeros_(linear.bias)
        layers.append(linear)
        if not last:
            layers.append(act())
    return nn.Sequential(*layers)


class SharedActorCritic(TorchRLModule, ValueFunctionAPI):
    """One actor for every agent and a value head: IPPO or MAPPO by ``critic_dim``.

    ``model_config`` keys: the :class:`ObsLayout` fields, ``hidden`` (list of layer sizes)
    and ``activation`` (``tanh`` or ``relu``).
    """

    @override(TorchRLModule)
    def setup(self):
        cfg: dict[str, Any] = self.model_config
        self.layout = ObsLayout(
            cfg["obs_dim"],
            cfg.get("mask_dim", 0),
            cfg.get("critic_dim", 0),
            cfg.get("num_agents", 1),
        )
        hidden = list(cfg.get("hidden", [64, 64]))
        activation = cfg.get("activation", "tanh")
        if isinstance(self.action_space, gym.spaces.Discrete):
            n_out = int(self.action_space.n)
            self.log_std = None
        else:
            n_out = int(np.prod(self.action_space.shape))
            self.log_std = nn.Parameter(torch.zeros(n_out))
        self.pi = mlp([self.layout.obs_dim, *hidden, n_out], activation, 0.01)
        critic_in = self.layout.critic_dim or self.layout.obs_dim
        self.vf = mlp([critic_in, *hidden, 1], activation, 1.0)

    def action_dist_inputs(self, x: torch.Tensor) -> torch.Tensor:
        """Logits (or Gaussian mean and log-std) for flat inputs ``x`` ``[rows, size]``."""
        lay = self.layout
        out = self.pi(x[:, : lay.obs_dim])
        if self.log_std is not None:
            return torch.cat([out, self.log_std.expand_as(out)], dim=-1)
        if lay.mask_dim:
            mask = x[:, lay.obs_dim : lay.obs_dim + lay.mask_dim]
            out = out.masked_fill(mask < 0.5, FLOAT_MIN)
        return out

    @override(RLModule)
    def _forward(self, batch: dict[str, Any], **kwargs) -> dict[str, Any]:
        return {Columns.ACTION_DIST_INPUTS: self.action_dist_inputs(batch[Columns.OBS])}

    @override(ValueFunctionAPI)
    def compute_values(self, batch: dict[str, Any], embeddings: Any = None) -> torch.Tensor:
        x = batch[Columns.OBS]
        lay = self.layout
        critic_in = x[:, lay.obs_dim + lay.mask_dim :] if lay.critic_dim else x[:, : lay.obs_dim]
        return self.vf(critic_in).squeeze(-1)
