"""The agents' RLModule of value-based MARL: per-agent recurrent Q-networks.

:class:`QNetwork` is PyMARL's agent (oxwhirl/pymarl ``src/modules/agents/rnn_agent.py``): the
observation, the agent's one-hot id and its last action (one-hot) go through a ReLU layer, a
GRU cell and a linear layer to one Q-value per action; one network serves all the agents
mapped to its module (parameter sharing, told apart by the id). Illegal actions get the
smallest float as Q-value, so no greedy choice and no target max picks them. A target copy
of the network (``target_net``) lives in the module for the learner; EnvRunners build the
module without it (RLlib's ``InferenceOnlyAPI``).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import torch
import torch.nn.functional as F
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.apis import InferenceOnlyAPI
from ray.rllib.core.rl_module.rl_module import RLModule
from ray.rllib.core.rl_module.torch import TorchRLModule
from ray.rllib.utils.annotations import override
from torch import nn

from policies.batch import AGENT_ID, MASK, OBS, BatchSpec
from policies.modules import FLOAT_MIN, ModelSettings, encoder_for


@dataclass
class QModelSettings:
    """Each agent's Q-network (``--set model.KEY=VALUE``); PyMARL's ``default.yaml`` names."""

    hidden: int = 64
    """Width of the hidden layer and of the GRU (``rnn_hidden_dim``)."""
    recurrent: bool = True
    """A GRU cell carries the agent's history (PyMARL's ``rnn`` agent); false: a ReLU layer."""
    agent_id: bool = True
    """The agent's one-hot id among its module's agents is an input (``obs_agent_id``)."""
    last_action: bool = True
    """The agent's previous action (one-hot) is an input (``obs_last_action``)."""

    MAX_HIDDEN = 16384

    def problems(self) -> list[str]:
        if not 0 < self.hidden <= self.MAX_HIDDEN:
            return [f"model.hidden={self.hidden} (in 1..{self.MAX_HIDDEN})"]
        return []


class _AgentNet(nn.Module):
    """fc1 (ReLU) -> GRU (or a second ReLU layer) -> one Q-value per action."""

    def __init__(self, spec: BatchSpec, model: QModelSettings, n_actions: int):
        super().__init__()
        self.encoder, feat = encoder_for(spec, ModelSettings())
        feat += spec.num_ids if model.agent_id else 0
        feat += n_actions if model.last_action else 0
        self.fc1 = nn.Linear(feat, model.hidden)
        self.rnn = nn.GRU(model.hidden, model.hidden, batch_first=True) if model.recurrent else None
        self.mid = None if model.recurrent else nn.Linear(model.hidden, model.hidden)
        self.fc2 = nn.Linear(model.hidden, n_actions)


class QNetwork(TorchRLModule, InferenceOnlyAPI):
    """Q-values of the agents mapped to one module (see the module docstring).

    ``model_config`` keys: ``batch_spec`` (a :class:`BatchSpec` as dict: the observation, the
    action mask, the agent id), ``model`` (:class:`QModelSettings` fields), ``slot``.
    """

    SERVED_BY = "serve.policy:ModulesPolicy"
    """The policy server's class for runs of this module (``serve.policy.served_class``)."""

    EXPLORATION = "epsilon_greedy"
    """How its actions explore (``policies.inference.choose``)."""

    @override(TorchRLModule)
    def setup(self):
        cfg: dict[str, Any] = self.model_config
        self.spec = BatchSpec.from_dict(cfg["batch_spec"])
        self.settings = QModelSettings(**cfg.get("model", {}))
        if not isinstance(self.action_space, gym.spaces.Discrete):
            raise ValueError("Q-networks need discrete actions")
        self.n_actions = int(self.action_space.n)
        self.net = _AgentNet(self.spec, self.settings, self.n_actions)
        # The learner's target network: dropped from EnvRunners (get_non_inference_attributes)
        self.target_net = copy.deepcopy(self.net).requires_grad_(False)

    @override(InferenceOnlyAPI)
    def get_non_inference_attributes(self) -> list[str]:
        return ["target_net"]

    # -- state --------------------------------------------------------------------------------

    @override(RLModule)
    def get_initial_state(self) -> dict:
        state = {}
        if self.settings.recurrent:
            state["h"] = torch.zeros(self.settings.hidden)
        if self.settings.last_action:
            state["last_action"] = torch.zeros(self.n_actions)
        return state

    def initial_state_rows(self, rows: int) -> dict | None:
        """The initial state of ``rows`` agents (None when the network keeps none)."""
        init = self.get_initial_state()
        return {k: v[None].repeat(rows, 1) for k, v in init.items()} if init else None

    # -- the network --------------------------------------------------------------------------

    def _features(self, net: _AgentNet, obs: dict, last_action: torch.Tensor | None):
        """The inputs of fc1 for rows of ``obs`` (any leading axes), through ReLU."""
        x = obs[OBS]
        lead = x.shape[: x.dim() - len(self.spec.obs_shape)]
        parts = [net.encoder(x.reshape(-1, *self.spec.obs_shape))]
        if self.settings.agent_id:
            parts.append(obs[AGENT_ID].reshape(-1, self.spec.num_ids))
        if self.settings.last_action:
            parts.append(last_action.reshape(-1, self.n_actions))
        z = F.relu(net.fc1(torch.cat(parts, dim=-1)))
        return z.reshape(*lead, -1)

    def _masked(self, q: torch.Tensor, obs: dict) -> torch.Tensor:
        if not self.spec.mask_dim:
            return q
        return q.masked_fill(obs[MASK].reshape(q.shape) < 0.5, FLOAT_MIN)

    def step(self, obs: dict[str, torch.Tensor], state: dict | None):
        """One step for rows ``obs`` ``[N, ...]``: masked Q-values ``[N, A]`` and the next
        state (the GRU's; ``last_action`` is written by whoever picks the actions,
        ``policies.inference.act``)."""
        state = state or {}
        z = self._features(self.net, obs, state.get("last_action"))
        h = None
        if self.net.rnn is not None:
            out, h = self.net.rnn(z[:, None], state["h"][None].contiguous())
            z, h = out[:, 0], h[0]
        else:
            z = F.relu(self.net.mid(z))
        q = self._masked(self.net.fc2(z), obs)
        if not state:
            return q, None
        nxt = dict(state)
        if h is not None:
            nxt["h"] = h
        return q, nxt

    def sequence_q(self, net: _AgentNet, batch: dict) -> torch.Tensor:
        """Unmasked Q-values ``[E, T + 1, K, A]`` of whole episodes: ``batch["obs"]`` holds
        the inputs ``[E, T + 1, K, ...]``, ``batch["actions"]`` ``[E, T, K]`` (the last actions
        are those, shifted by one step), the GRU starts from zeros at each episode's start."""
        obs = batch[Columns.OBS]
        E, T1, K = obs[OBS].shape[:3]
        last = None
        if self.settings.last_action:
            last = torch.zeros(E, T1, K, self.n_actions, device=obs[OBS].device)
            last[:, 1:] = F.one_hot(batch[Columns.ACTIONS].long(), self.n_actions).float()
        z = self._features(net, obs, last)  # [E, T + 1, K, H]
        if net.rnn is not None:
            seq = z.permute(0, 2, 1, 3).reshape(E * K, T1, -1)
            out, _ = net.rnn(seq)
            z = out.reshape(E, K, T1, -1).permute(0, 2, 1, 3)
        else:
            z = F.relu(net.mid(z))
        return net.fc2(z)

    # -- RLlib ----------------------------------------------------------------------------------

    @override(RLModule)
    def _forward(self, batch: dict[str, Any], **kwargs) -> dict[str, Any]:
        q, state = self.step(batch[Columns.OBS], batch.get(Columns.STATE_IN))
        out = {Columns.ACTION_DIST_INPUTS: q}
        if state is not None:
            out[Columns.STATE_OUT] = state
        return out

    @override(RLModule)
    def _forward_train(self, batch: dict[str, Any], **kwargs) -> dict[str, Any]:
        """Q-values of the replayed episodes, and the target network's (no gradient)."""
        with torch.no_grad():
            target = self.sequence_q(self.target_net, batch)
        return {"q": self.sequence_q(self.net, batch), "q_target": target}
