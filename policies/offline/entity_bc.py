"""ODIS's multi-task behaviour-cloning agent (BC-T), the population-invariant baseline of ODIS
(Zhang et al., ICLR 2023) and BiKT, as github.com/LAMDA-RL/ODIS writes it:

* ``src/modules/agents/multi_task/bc_agent.py`` (``Decoder``): each entity token is embedded
  by its kind's linear layer (``own_value``, ``enemy_value``, ``ally_value``); the agent's own
  token carries its binary id (``binary_embed(i + 1, id_length=4, max_agent=15)``) and its
  last action without the target (the no-attack one-hot and one "attacked" bit); each enemy
  token carries whether the agent attacked it last step. Tokens ``[own, enemies, allies,
  history]`` go through one transformer (``src/utils/transformer.py``: ``head=1``,
  ``depth=1``, post-norm blocks, feed-forward 4x); the output at the history slot is the next
  hidden state (recurrence as UPDeT's). The no-attack actions' logits are ``q_skill`` of the
  own token's output; attacking enemy ``j`` is the mean of ``q_skill`` over enemy ``j``'s
  output.
* ``src/config/algs/bc-t.yaml``: ``entity_embed_dim: 64``, ``head: 1``, ``depth: 1``,
  ``id_length: 4``, ``max_agent: 15``.

MPE's landmarks are embedded like allies, with a layer of their own (ODIS's cooperative
navigation decomposer gives landmarks the enemy slot; with no attack actions the two agree).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import torch
from torch import nn

KINDS = ("enemy", "ally", "landmark")  # token order after the own token


@dataclass(frozen=True)
class EntityBCConfig:
    """The network's shape; the token widths come from the envs' entity layouts."""

    own_width: int
    widths: dict[str, int]  # kind -> token width (kinds of KINDS present)
    n_no_attack: int  # actions that name no enemy (SMAC: 6, MPE spread: 5)
    embed_dim: int = 64  # bc-t.yaml entity_embed_dim
    heads: int = 1
    depth: int = 1
    id_length: int = 4
    max_agent: int = 15

    def to_json(self) -> dict:
        return asdict(self)


def binary_id(i: int, length: int, v_max: int) -> np.ndarray:
    """ODIS's ``binary_embed(v, length, v_max)`` of ``v = i + 1`` (``src/utils/embed.py``)."""
    v = i + 1
    if v > v_max or 2**length - 1 < v_max:
        raise ValueError(f"agent {i}: ODIS's binary id holds at most {v_max} agents")
    bits = [int(b) for b in bin(v)[2:]]
    out = np.zeros(length, np.float32)
    out[-len(bits) :] = bits
    return out


class SelfAttention(nn.Module):
    """ODIS's ``SelfAttention``: per-head projections of the full width, queries and keys
    each scaled by ``e ** -1/4``."""

    def __init__(self, emb: int, heads: int):
        super().__init__()
        self.emb, self.heads = emb, heads
        self.keys = nn.Linear(emb, emb * heads, bias=False)
        self.queries = nn.Linear(emb, emb * heads, bias=False)
        self.values = nn.Linear(emb, emb * heads, bias=False)
        self.unify = nn.Linear(heads * emb, emb)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, e = x.shape
        h = self.heads

        def fold(z):
            return z.view(b, t, h, e).transpose(1, 2).reshape(b * h, t, e) / e**0.25

        q, k = fold(self.queries(x)), fold(self.keys(x))
        v = self.values(x).view(b, t, h, e).transpose(1, 2).reshape(b * h, t, e)
        att = torch.softmax(q @ k.transpose(1, 2), -1)
        out = (att @ v).view(b, h, t, e).transpose(1, 2).reshape(b, t, h * e)
        return self.unify(out)


class Block(nn.Module):
    """ODIS's ``TransformerBlock`` (post-norm, feed-forward 4x, no dropout)."""

    def __init__(self, emb: int, heads: int):
        super().__init__()
        self.attention = SelfAttention(emb, heads)
        self.norm1, self.norm2 = nn.LayerNorm(emb), nn.LayerNorm(emb)
        self.ff = nn.Sequential(nn.Linear(emb, 4 * emb), nn.ReLU(), nn.Linear(4 * emb, emb))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.norm1(self.attention(x) + x)
        return self.norm2(self.ff(x) + x)


class EntityEncoder(nn.Module):
    """Embeds a task's entity tokens and runs them through the transformer: the trunk ODIS's
    ``Decoder`` (BC-T's agent), ``ObsEncoder`` and BiKT's encoders share."""

    def __init__(self, cfg: EntityBCConfig):
        super().__init__()
        self.cfg = cfg
        n = cfg.n_no_attack
        attacks = "enemy" in cfg.widths
        own_in = cfg.own_width + cfg.id_length + n + int(attacks)
        self.own_value = nn.Linear(own_in, cfg.embed_dim)
        self.values = nn.ModuleDict(
            {k: nn.Linear(w + int(k == "enemy"), cfg.embed_dim) for k, w in cfg.widths.items()}
        )
        self.blocks = nn.Sequential(*(Block(cfg.embed_dim, cfg.heads) for _ in range(cfg.depth)))

    def initial_state(self, rows: int) -> torch.Tensor:
        return torch.zeros(rows, self.cfg.embed_dim)

    def ids(self, n_agents: int) -> torch.Tensor:
        c = self.cfg
        return torch.from_numpy(
            np.stack([binary_id(i, c.id_length, c.max_agent) for i in range(n_agents)])
        )

    def encode(
        self,
        tokens: dict[str, torch.Tensor],
        last_action: torch.Tensor,
        hidden: torch.Tensor,
        extra: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """``tokens``: ``own [R, A, w]``, kind ``[R, A, n_kind, w]`` for R rows of A agents;
        ``last_action [R, A]`` (-1 before the first step, as ODIS's zero one-hot);
        ``hidden [R*A, e]``; ``extra [R*A, k, e]``: embedded tokens of the caller's (BiKT's
        return-to-go). Returns the transformer's outputs ``[R*A, 1 + entities + k + 1, e]``:
        the own token first, then enemies, allies, landmarks, the extra tokens, and the next
        hidden state last."""
        c = self.cfg
        R, A = tokens["own"].shape[:2]
        n = c.n_no_attack
        first = last_action < 0  # no last action yet
        la = last_action.clamp(min=0)
        no_attack = nn.functional.one_hot(la.clamp(max=n - 1), n).float()
        no_attack = no_attack * ((la < n) & ~first)[..., None]
        own = [tokens["own"], self.ids(A).expand(R, A, -1), no_attack]
        seq = []
        if "enemy" in c.widths:
            E = tokens["enemy"].shape[2]
            attacked = (la >= n) & ~first
            own.append(attacked[..., None].float())
            target = nn.functional.one_hot((la - n).clamp(0, E - 1), E).float()
            target = target * attacked[..., None]
            seq.append(self.values["enemy"](torch.cat([tokens["enemy"], target[..., None]], -1)))
        for kind in KINDS[1:]:
            if kind in c.widths:
                seq.append(self.values[kind](tokens[kind]))
        if extra is not None:
            seq.append(extra.view(R, A, -1, c.embed_dim))
        own_h = self.own_value(torch.cat(own, -1))[:, :, None]
        x = torch.cat([own_h, *seq, hidden.view(R, A, 1, -1)], 2).view(R * A, -1, c.embed_dim)
        return self.blocks(x)


class EntityBC(EntityEncoder):
    """Logits over a task's actions from its entity tokens, one step at a time. With
    ``skill_dim`` it is ODIS's action decoder: a skill's embedding (``skill_enc``) joins the
    own token's and each enemy's output before ``q_skill``."""

    def __init__(self, cfg: EntityBCConfig, skill_dim: int = 0):
        super().__init__(cfg)
        e = cfg.embed_dim
        self.skill_enc = nn.Linear(skill_dim, e) if skill_dim else None
        self.q_skill = nn.Linear(e + e * bool(skill_dim), cfg.n_no_attack)

    def forward(
        self,
        tokens: dict[str, torch.Tensor],
        last_action: torch.Tensor,
        hidden: torch.Tensor,
        skill: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """As :meth:`encode` (``skill [R*A, skill_dim]`` for a decoder). Returns logits
        ``[R, A, n_no_attack + n_enemy]`` and the next hidden state."""
        R, A = tokens["own"].shape[:2]
        out = self.encode(tokens, last_action, hidden)
        E = tokens["enemy"].shape[2] if "enemy" in self.cfg.widths else 0
        heads = out[:, : 1 + E]
        if self.skill_enc is not None:
            s = self.skill_enc(skill)[:, None].expand(-1, heads.shape[1], -1)
            heads = torch.cat([heads, s], -1)
        q = self.q_skill(heads)
        logits = q[:, 0]
        if E:
            logits = torch.cat([logits, q[:, 1:].mean(-1)], -1)
        return logits.view(R, A, -1), out[:, -1]


def masked_greedy(logits: torch.Tensor, mask: np.ndarray) -> np.ndarray:
    """The legal action with the largest logit (ODIS's ``test_mode`` selection)."""
    m = torch.as_tensor(mask) > 0
    return logits.masked_fill(~m, -torch.inf).argmax(-1).numpy()
