"""QMIX's mixing network (Rashid et al., "QMIX: Monotonic Value Function Factorisation for Deep
Multi-Agent Reinforcement Learning", ICML 2018; oxwhirl/pymarl ``src/modules/mixers/qmix.py``):
hypernetworks read the global state and give the weights and biases of a two-layer network
that mixes the agents' chosen Q-values into Q_tot. The weights pass through ``abs``, so Q_tot
never decreases when an agent's Q-value grows: the greedy joint action is the agents' greedy
actions (monotonicity). It is a learner-only module: nothing acts with it.
"""

from __future__ import annotations

import copy
from typing import Any

import gymnasium as gym
import torch
import torch.nn.functional as F
from ray.rllib.core.rl_module.rl_module import RLModule, RLModuleSpec
from ray.rllib.core.rl_module.torch import TorchRLModule
from ray.rllib.utils.annotations import override
from torch import nn


class QMixer(TorchRLModule):
    """QMIX's hypernetworks (see the module docstring), with their target copy.

    ``model_config`` keys: ``state_dim``, ``n_agents``, ``embed_dim`` (``mixing_embed_dim``),
    ``hypernet_layers`` (1 or 2) and ``hypernet_embed``.
    """

    @override(TorchRLModule)
    def setup(self):
        cfg = self.model_config
        self.net = _Hypernets(
            int(cfg["state_dim"]),
            int(cfg["n_agents"]),
            int(cfg["embed_dim"]),
            int(cfg["hypernet_layers"]),
            int(cfg["hypernet_embed"]),
        )
        self.target_net = copy.deepcopy(self.net).requires_grad_(False)

    @override(RLModule)
    def _forward(self, batch: dict[str, Any], **kwargs) -> dict[str, Any]:
        return {"weights": self.net(batch["state"])}

    @override(RLModule)
    def _forward_train(self, batch: dict[str, Any], **kwargs) -> dict[str, Any]:
        """The mixing weights for the states ``[E, T + 1, S]``: the network's and the target
        network's (no gradient)."""
        with torch.no_grad():
            target = self.target_net(batch["state"])
        return {"weights": self.net(batch["state"]), "target_weights": target}


class _Hypernets(nn.Module):
    """State -> the mixing network's |W1|, b1, |W2| and V(s) (pymarl's QMixer)."""

    def __init__(self, state_dim: int, n_agents: int, embed: int, layers: int, hyper: int):
        super().__init__()
        self.n_agents, self.embed = n_agents, embed

        def hypernet(out: int) -> nn.Module:
            if layers == 1:
                return nn.Linear(state_dim, out)
            return nn.Sequential(nn.Linear(state_dim, hyper), nn.ReLU(), nn.Linear(hyper, out))

        self.hyper_w_1 = hypernet(embed * n_agents)
        self.hyper_w_final = hypernet(embed)
        self.hyper_b_1 = nn.Linear(state_dim, embed)
        self.V = nn.Sequential(nn.Linear(state_dim, embed), nn.ReLU(), nn.Linear(embed, 1))

    def forward(self, states: torch.Tensor) -> dict[str, torch.Tensor]:
        lead = states.shape[:-1]
        return {
            "w1": torch.abs(self.hyper_w_1(states)).reshape(*lead, self.n_agents, self.embed),
            "b1": self.hyper_b_1(states).reshape(*lead, 1, self.embed),
            "w2": torch.abs(self.hyper_w_final(states)).reshape(*lead, self.embed, 1),
            "b2": self.V(states).reshape(*lead, 1, 1),
        }


def mix(qs: torch.Tensor, weights: dict[str, torch.Tensor]) -> torch.Tensor:
    """Q_tot ``[E, T]`` of the agents' Q-values ``qs`` ``[E, T, N]`` with a mixer's weights
    for the same steps: ``ELU(qs W1 + b1) W2 + V(s)``."""
    hidden = F.elu(qs.unsqueeze(-2) @ weights["w1"] + weights["b1"])
    return (hidden @ weights["w2"] + weights["b2"]).reshape(qs.shape[:-1])


def qmix_module(settings, state_dim: int, n_agents: int) -> RLModuleSpec:
    """The learner-only :class:`QMixer` spec of a run (``policies.q.Mixer.module``)."""
    return RLModuleSpec(
        module_class=QMixer,
        observation_space=gym.spaces.Box(-float("inf"), float("inf"), (state_dim,)),
        action_space=gym.spaces.Discrete(1),
        learner_only=True,
        model_config={
            "state_dim": state_dim,
            "n_agents": n_agents,
            "embed_dim": settings.mixing_embed_dim,
            "hypernet_layers": settings.hypernet_layers,
            "hypernet_embed": settings.hypernet_embed,
        },
    )
