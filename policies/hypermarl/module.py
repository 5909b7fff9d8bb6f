"""HyperMARL's module: every agent's actor and critic weights generated from its embedding.

Tessera et al., "HyperMARL: Adaptive Hypernetworks for Multi-Agent RL" (NeurIPS 2025;
github.com/KaleabTessera/HyperMARL). A learned agent embedding ``e_i`` (or the one-hot id)
feeds, for every layer of the target network, a weight head and a bias head (MLPs, hidden 64,
ReLU); they output that agent's weights ``W_i`` and biases ``b_i``. The agent id only selects
the embedding; the observation goes into the generated network alone, so the gradient of an
agent's samples reaches the shared hypernetwork only through that agent's own weights.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from policies.batch import AGENT_ID, OBS, STATE
from policies.modules import ActorCritic, mlp_body, shown


@dataclass
class HyperSettings:
    """The hypernetworks (``--set hyper.KEY=VALUE``)."""

    embedding: str = "learned"
    """``learned`` (orthogonal init, scale sqrt 2) or ``onehot`` (the agent id itself)."""
    embedding_dim: int = 4
    """Size of a learned embedding (HyperMARL's SMAX scripts: 4)."""
    hidden: list[int] | None = None
    """Hidden layers of each weight and bias head (default [64])."""

    def __post_init__(self):
        self.hidden = [64] if self.hidden is None else self.hidden

    def problems(self) -> list[str]:
        bad = []
        if self.embedding not in ("learned", "onehot"):
            bad.append(f"hyper.embedding={self.embedding!r} (learned or onehot)")
        if not 0 < self.embedding_dim <= 4096:
            bad.append(f"hyper.embedding_dim={self.embedding_dim} (in 1..4096)")
        if not self.hidden or len(self.hidden) > 16 or any(h <= 0 or h > 4096 for h in self.hidden):
            bad.append(f"hyper.hidden={shown(self.hidden)} (1..16 layers of sizes in 1..4096)")
        return bad


class HyperMLP(nn.Module):
    """An MLP ``sizes[0] -> ... -> sizes[-1]`` with its own weights for each of ``num_agents``
    agents, generated from the agents' embeddings.

    At init the generated weights of every agent are orthogonal matrices (gain sqrt 2 for the
    hidden layers, ``out_gain`` for the last; a different matrix per agent) and the biases are
    zero: the weight head's last layer is solved for exactly that (least squares on the
    agents' head features), the bias head's last layer starts at zero.
    """

    def __init__(
        self,
        sizes: list[int],
        num_agents: int,
        settings: HyperSettings,
        activation: str,
        out_gain: float,
    ):
        super().__init__()
        self.sizes, self.num_agents = list(sizes), num_agents
        self.act = {"tanh": torch.tanh, "relu": torch.relu}[activation]
        if settings.embedding == "onehot":
            self.register_buffer("onehot", torch.eye(num_agents))
            self.embedding = None
            dim = num_agents
        else:
            self.embedding = nn.Parameter(torch.empty(num_agents, settings.embedding_dim))
            nn.init.orthogonal_(self.embedding, np.sqrt(2))
            dim = settings.embedding_dim
        self.weight_heads = nn.ModuleList()
        self.bias_heads = nn.ModuleList()
        layers = list(zip(sizes[:-1], sizes[1:], strict=True))
        for k, (n_in, n_out) in enumerate(layers):
            gain = out_gain if k == len(layers) - 1 else np.sqrt(2)
            self.weight_heads.append(self._head(dim, settings.hidden, n_in * n_out))
            self.bias_heads.append(self._head(dim, settings.hidden, n_out))
            nn.init.zeros_(self.bias_heads[-1][-1].weight)
            nn.init.zeros_(self.bias_heads[-1][-1].bias)
            self._start_orthogonal(self.weight_heads[-1], n_in, n_out, gain)

    @staticmethod
    def _head(dim: int, hidden: list[int], n_out: int) -> nn.Sequential:
        body = mlp_body([dim, *hidden], "relu")
        return nn.Sequential(*body, nn.Linear(hidden[-1], n_out))

    def embeddings(self) -> torch.Tensor:
        """``[K, E]``: every agent's embedding."""
        return self.onehot if self.embedding is None else self.embedding

    @torch.no_grad()
    def _start_orthogonal(self, head: nn.Sequential, n_in: int, n_out: int, gain: float):
        feats = head[:-1](self.embeddings())  # [K, H]
        targets = torch.empty(self.num_agents, n_in, n_out)
        for t in targets:
            nn.init.orthogonal_(t, gain)
        # The least-norm solution of feats @ M = targets (exact while K <= H).
        solution = torch.linalg.pinv(feats) @ targets.reshape(self.num_agents, -1)
        head[-1].weight.copy_(solution.T)
        nn.init.zeros_(head[-1].bias)

    def generated(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Every agent's weights ``[K, in, out]`` and biases ``[K, out]``, layer by layer."""
        e = self.embeddings()
        out = []
        for (n_in, n_out), wh, bh in zip(
            zip(self.sizes[:-1], self.sizes[1:], strict=True),
            self.weight_heads,
            self.bias_heads,
            strict=True,
        ):
            out.append((wh(e).reshape(self.num_agents, n_in, n_out), bh(e)))
        return out

    def forward(self, x: torch.Tensor, agent: torch.Tensor) -> torch.Tensor:
        """``x`` ``[N, in]`` through the network of each row's agent (``agent`` ``[N]``).

        Each layer is one matrix product of the rows with every agent's weights side by side,
        then each row keeps its own agent's columns: with the few agents of these tasks that
        is faster than gathering a weight matrix per row, and it has no loop over agents.
        """
        rows = torch.arange(len(x), device=x.device)
        layers = self.generated()
        for k, (w, b) in enumerate(layers):
            K, n_in, n_out = w.shape
            every = (x @ w.permute(1, 0, 2).reshape(n_in, K * n_out)).view(-1, K, n_out)
            x = every[rows, agent] + b[agent]
            if k < len(layers) - 1:
                x = self.act(x)
        return x


class HyperActorCritic(ActorCritic):
    """An :class:`ActorCritic` whose actor and critic are :class:`HyperMLP` s, one for all the
    module's agents, each agent selected by its id (never concatenated with its input).

    Feed-forward: the whole actor (observation -> hidden -> actions) and the whole critic
    (observation, or the global state for MAPPO -> hidden -> 1) are generated. Recurrent:
    a shared encoder layer and a shared GRU, then generated layers after the GRU
    (HyperMARL's recurrent variant). ``model_config["hyper"]`` holds :class:`HyperSettings`.
    """

    READS_AGENT_ID = True
    STACKS_SEEDS = False  # its hypernetworks have no per-seed form

    def build_networks(self, actor_in: int, critic_in: int, hidden: list[int], activation: str):
        hyper = HyperSettings(**self.model_config.get("hyper", {}))
        K = self.spec.num_ids
        if self.recurrent:
            h = self.gru_size = hidden[0]
            self.pi_body = mlp_body([actor_in, h], activation)
            self.vf_body = mlp_body([critic_in, h], activation)
            self.pi_gru = nn.GRU(h, h, batch_first=True)
            self.vf_gru = nn.GRU(h, h, batch_first=True)
            post = [h, *hidden[1:]]
        else:
            self.pi_body = self.vf_body = nn.Identity()
            self.pi_gru = self.vf_gru = None
            post = None
        pi_sizes = [*(post or [actor_in, *hidden]), self.n_out]
        vf_sizes = [*(post or [critic_in, *hidden]), 1]
        self.pi_hyper = HyperMLP(pi_sizes, K, hyper, activation, out_gain=0.01)
        self.vf_hyper = HyperMLP(vf_sizes, K, hyper, activation, out_gain=1.0)
        # on-policy's LayerNorms and value normaliser are ActorCritic's (refused here)
        self.pi_gru_norm = self.vf_gru_norm = nn.Identity()
        self.value_norm = None

    def critic_width(self, feat: int) -> int:
        return self.spec.state_dim or feat

    def actor_input(self, batch: dict) -> torch.Tensor:
        return self.encoder(self._rows(batch, OBS))

    def critic_input(self, batch: dict) -> torch.Tensor:
        return self._rows(batch, STATE) if self.spec.state_dim else self.actor_input(batch)

    def agent_index(self, batch: dict) -> torch.Tensor:
        """``[N]``: each row's place among the module's agents."""
        return self._rows(batch, AGENT_ID).argmax(dim=-1)

    def pi_out(self, z, batch):
        return self.pi_hyper(z, self.agent_index(batch))

    def vf_out(self, z, batch):
        return self.vf_hyper(z, self.agent_index(batch))
