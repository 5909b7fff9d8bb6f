"""HyperMARL's module: every agent's actor and critic weights generated from its embedding.

Tessera et al., "HyperMARL: Adaptive Hypernetworks for Multi-Agent RL" (NeurIPS 2025;
github.com/KaleabTessera/HyperMARL). The agent's one-hot id (upstream's default) or a learned
embedding ``e_i`` feeds, for every layer of the target network, a weight head and a bias head (MLPs, hidden 64,
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

INITS = ("upstream", "orthogonal_per_agent")
EMBEDDINGS = ("onehot", "learned")
LEARNED_DIM = 4
"""A learned embedding's size when ``hyper.embedding=learned`` names none (HyperMARL's SMAX
configs)."""


@dataclass
class HyperSettings:
    """The hypernetworks (``--set hyper.KEY=VALUE``)."""

    embedding: str | None = None
    """``onehot`` (the agent id itself) or ``learned`` (a ``[agents, embedding_dim]`` table,
    orthogonal at init with scale sqrt 2). None: upstream's rule, one-hot unless
    ``embedding_dim`` is set (``ActorCritic.setup``: a learned table only with
    ``USE_AGENT_ID_EMBEDDINGS``, default False; its Dispersion config sets neither)."""
    embedding_dim: int | None = None
    """Size of a learned embedding (None: 4, as HyperMARL's SMAX configs)."""
    hidden: list[int] | None = None
    """Hidden layers of each weight and bias head (default [64], upstream's
    ``HYPERNET_HIDDEN_DIMS``)."""
    init: str = "upstream"
    """``upstream``: HyperMARL's ``MLPHyperNetwork`` init: the head's hidden layers flax's
    default (LeCun normal, truncated; zero bias), the weight head's kernel ``[H, in * out]``
    one orthogonal ``(in, out)`` block per hidden unit (``hypernet_init``), so an agent's
    generated ``W_i = sum_h relu(h_i)_h K_h`` is a mix of orthogonal blocks, not orthogonal
    itself. ``orthogonal_per_agent``: heads with orthogonal hidden layers and the weight head
    solved (least norm) so every agent's ``W_i`` is exactly orthogonal."""

    def __post_init__(self):
        self.hidden = [64] if self.hidden is None else self.hidden

    def kind(self) -> str:
        """The embedding used: ``embedding``, or upstream's default for it."""
        if self.embedding is not None:
            return self.embedding
        return "onehot" if self.embedding_dim is None else "learned"

    def dim(self) -> int:
        return LEARNED_DIM if self.embedding_dim is None else self.embedding_dim

    def problems(self) -> list[str]:
        bad = []
        if self.embedding is not None and self.embedding not in EMBEDDINGS:
            bad.append(f"hyper.embedding={shown(self.embedding)} (learned or onehot)")
        if self.embedding_dim is not None and not 0 < self.embedding_dim <= 4096:
            bad.append(f"hyper.embedding_dim={self.embedding_dim} (in 1..4096)")
        if self.embedding == "onehot" and self.embedding_dim is not None:
            bad.append("hyper.embedding_dim with hyper.embedding=onehot (a one-hot id has no size)")
        if not self.hidden or len(self.hidden) > 16 or any(h <= 0 or h > 4096 for h in self.hidden):
            bad.append(f"hyper.hidden={shown(self.hidden)} (1..16 layers of sizes in 1..4096)")
        if self.init not in INITS:
            bad.append(f"hyper.init={shown(self.init)} ({' or '.join(INITS)})")
        return bad


def lecun_normal_(w: torch.Tensor) -> torch.Tensor:
    """flax's default kernel init on an ``nn.Linear`` weight ``[out, in]``: a normal truncated
    at two standard deviations, rescaled so its variance is 1 / fan_in
    (``jax.nn.initializers.variance_scaling(1, "fan_in", "truncated_normal")``)."""
    std = np.sqrt(1.0 / w.shape[1]) / 0.87962566103423978
    return nn.init.trunc_normal_(w, 0.0, std, -2 * std, 2 * std)


def orthogonal_blocks_(w: torch.Tensor, n_in: int, n_out: int, gain: float) -> torch.Tensor:
    """HyperMARL's ``hypernet_init`` on the weight head's last ``nn.Linear`` weight
    ``[in * out, H]`` (flax's kernel transposed): kernel row h, read as ``(in, out)``, is an
    orthogonal matrix of scale ``gain``, drawn apart for every h."""
    blocks = torch.empty(w.shape[1], n_in, n_out)
    for block in blocks:  # H draws at init, not in the hot path
        nn.init.orthogonal_(block, gain)
    with torch.no_grad():
        return w.copy_(blocks.reshape(w.shape[1], -1).T)


class HyperMLP(nn.Module):
    """An MLP ``sizes[0] -> ... -> sizes[-1]`` with its own weights for each of ``num_agents``
    agents, generated from the agents' embeddings.

    Bias heads' last layers start at zero (every agent's biases 0). Weight heads start as
    ``settings.init`` says: upstream's orthogonal blocks per hidden unit, or
    ``orthogonal_per_agent`` (the last layer solved so every agent's generated weights are
    an orthogonal matrix, least squares on the agents' head features). Gains: sqrt 2 for the
    hidden layers, ``out_gain`` for the last (upstream: 0.01 actor, 1 critic).
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
        if settings.kind() == "onehot":
            self.register_buffer("onehot", torch.eye(num_agents))
            self.embedding = None
            dim = num_agents
        else:
            self.embedding = nn.Parameter(torch.empty(num_agents, settings.dim()))
            nn.init.orthogonal_(self.embedding, np.sqrt(2))
            dim = settings.dim()
        self.weight_heads = nn.ModuleList()
        self.bias_heads = nn.ModuleList()
        upstream = settings.init == "upstream"
        layers = list(zip(sizes[:-1], sizes[1:], strict=True))
        for k, (n_in, n_out) in enumerate(layers):
            gain = out_gain if k == len(layers) - 1 else np.sqrt(2)
            self.weight_heads.append(self._head(dim, settings.hidden, n_in * n_out, upstream))
            self.bias_heads.append(self._head(dim, settings.hidden, n_out, upstream))
            nn.init.zeros_(self.bias_heads[-1][-1].weight)
            nn.init.zeros_(self.bias_heads[-1][-1].bias)
            last = self.weight_heads[-1][-1]
            nn.init.zeros_(last.bias)
            if upstream:
                orthogonal_blocks_(last.weight, n_in, n_out, gain)
            else:
                self._start_orthogonal(self.weight_heads[-1], n_in, n_out, gain)

    @staticmethod
    def _head(dim: int, hidden: list[int], n_out: int, upstream: bool) -> nn.Sequential:
        body = mlp_body([dim, *hidden], "relu")
        if upstream:  # flax nn.Dense's defaults
            for layer in body:
                if isinstance(layer, nn.Linear):
                    lecun_normal_(layer.weight)
                    nn.init.zeros_(layer.bias)
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
