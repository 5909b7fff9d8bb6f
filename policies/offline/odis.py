"""ODIS's networks (Zhang et al., "Discovering Generalizable Multi-agent Coordination Skills
from Multi-task Offline Data", ICLR 2023), as github.com/LAMDA-RL/ODIS writes them:

* ``src/modules/agents/multi_task/odis_agent.py``: ``StateEncoder`` (the global state's units,
  each with its current action, attend to each other; a linear ``Encoder`` head gives each
  agent's skill logits), ``ObsEncoder`` (the entity transformer of BC-T on the observation,
  recurrent through its history token), ``Decoder`` (BC-T's agent with the skill's embedding
  joined to its heads) and ``Qnet`` (a linear head: Q over skills).
* ``src/modules/mixers/multi_task/qattn.py``: the mixer, QMIX's monotonic hypernetwork fed by
  attention over the state's units.
* ``src/config/algs/odis.yaml``: ``skill_dim: 3``, ``entity_embed_dim: 64``,
  ``attn_embed_dim: 8``, ``mixing_embed_dim: 32``, ``hypernet_layers: 2``,
  ``hypernet_embed: 64``, ``head: 1``, ``depth: 1``, ``c_step: 1``.

Both attentions softmax over the queries (``F.softmax(energy, dim=1)`` on ``[b, query, key]``),
as ODIS does; unit ``j``'s output is ``sum_i softmax_i(q_i . k_j / sqrt(d)) v_i``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from torch import nn

from policies.offline.entity_bc import EntityBC, EntityBCConfig, EntityEncoder


@dataclass(frozen=True)
class ODISConfig:
    """odis.yaml's sizes; the state's unit widths come from the env's state layout."""

    agent: EntityBCConfig
    state_ally: int  # state_nf_al
    state_enemy: int  # state_nf_en
    state_last_action: bool = True
    skill_dim: int = 3
    attn_embed_dim: int = 8
    mixing_embed_dim: int = 32
    hypernet_embed: int = 64

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, blob: dict) -> ODISConfig:
        return cls(**(blob | {"agent": EntityBCConfig(**blob["agent"])}))


def compact(actions: torch.Tensor, n_no_attack: int) -> torch.Tensor:
    """ODIS's ``compact_action_info`` of action indices: the no-attack one-hot and one
    "attacks someone" bit (``decompose_action_info``)."""
    return nn.functional.one_hot(actions.clamp(max=n_no_attack), n_no_attack + 1).float()


def compact_onehot(onehot: torch.Tensor, n_no_attack: int) -> torch.Tensor:
    """As :func:`compact` of a one-hot (the state's last actions; all zeros at the start)."""
    attack = onehot[..., n_no_attack:].sum(-1, keepdim=True)
    return torch.cat([onehot[..., :n_no_attack], attack], -1)


def unit_attention(embed: torch.Tensor, query: nn.Linear, key: nn.Linear) -> torch.Tensor:
    """``embed [R, N, e]`` -> ``[R, N, e]``, softmax over the queries as ODIS."""
    q, k = query(embed), key(embed)
    score = torch.softmax(q @ k.transpose(1, 2) / q.shape[-1] ** 0.5, dim=1)
    return score.transpose(1, 2) @ embed


class StateEncoder(nn.Module):
    """Each agent's skill features from the state's units and the actions just taken."""

    def __init__(self, c: ODISConfig):
        super().__init__()
        n, e = c.agent.n_no_attack, c.agent.embed_dim
        ally = c.state_ally + (n + 1) * (1 + c.state_last_action)
        self.n_no_attack = n
        self.ally_encoder = nn.Linear(ally, e)
        self.enemy_encoder = nn.Linear(c.state_enemy + 1, e)
        self.query = nn.Linear(e, c.attn_embed_dim)
        self.key = nn.Linear(e, c.attn_embed_dim)

    def forward(self, state: dict[str, torch.Tensor], actions: torch.Tensor) -> torch.Tensor:
        """``state``: ``ally [R, A, w]``, ``enemy [R, E, w]``, ``last_action [R, A, n]``;
        ``actions [R, A]``. Returns ``[R, A, e]``."""
        n = self.n_no_attack
        E = state["enemy"].shape[1]
        ally = [state["ally"], compact(actions, n)]
        if "last_action" in state:
            ally.append(compact_onehot(state["last_action"], n))
        # an enemy's bit: some agent attacks it now
        target = nn.functional.one_hot((actions - n).clamp(0, E - 1), E) * (actions >= n)[..., None]
        enemy = torch.cat([state["enemy"], (target.sum(1) > 0).float()[..., None]], -1)
        embed = torch.cat([self.ally_encoder(torch.cat(ally, -1)), self.enemy_encoder(enemy)], 1)
        A = actions.shape[1]
        return unit_attention(embed, self.query, self.key)[:, :A]


class QAttnMixer(nn.Module):
    """ODIS's ``mt_qattn`` mixer: Q_tot monotonic in the agents' Qs (QMIX), the hypernetworks
    reading attention over the state's units (``hypernet_layers: 2``)."""

    def __init__(self, c: ODISConfig):
        super().__init__()
        n, e, m, h = c.agent.n_no_attack, c.agent.embed_dim, c.mixing_embed_dim, c.hypernet_embed
        self.n_no_attack = n
        self.ally_encoder = nn.Linear(c.state_ally + (n + 1) * c.state_last_action, e)
        self.enemy_encoder = nn.Linear(c.state_enemy, e)
        self.query = nn.Linear(e, c.attn_embed_dim)
        self.key = nn.Linear(e, c.attn_embed_dim)
        self.hyper_w_1 = nn.Sequential(nn.Linear(2 * e, h), nn.ReLU(), nn.Linear(h, m))
        self.hyper_w_final = nn.Sequential(nn.Linear(e, h), nn.ReLU(), nn.Linear(h, m))
        self.hyper_b_1 = nn.Linear(e, m)
        self.V = nn.Sequential(nn.Linear(e, m), nn.ReLU(), nn.Linear(m, 1))

    def forward(self, agent_qs: torch.Tensor, state: dict[str, torch.Tensor]) -> torch.Tensor:
        """``agent_qs [R, A]``, ``state`` as :class:`StateEncoder`'s. Returns ``[R]``."""
        ally = [state["ally"]]
        if "last_action" in state:
            ally.append(compact_onehot(state["last_action"], self.n_no_attack))
        ally_embed = self.ally_encoder(torch.cat(ally, -1))
        embed = torch.cat([ally_embed, self.enemy_encoder(state["enemy"])], 1)
        pooled = unit_attention(embed, self.query, self.key).mean(1)  # [R, e]
        R, A = agent_qs.shape
        per_agent = torch.cat([pooled[:, None].expand(-1, A, -1), ally_embed], -1)
        w1 = self.hyper_w_1(per_agent).abs()  # [R, A, m]
        b1 = self.hyper_b_1(pooled)[:, None]
        hidden = nn.functional.elu(agent_qs[:, None] @ w1 + b1)  # [R, 1, m]
        w_final = self.hyper_w_final(pooled).abs()[..., None]  # [R, m, 1]
        return (hidden @ w_final).view(R) + self.V(pooled).view(R)


class ODISAgent(nn.Module):
    """ODIS's agent: skills from Q over the observation's encoding, actions from the decoder.
    Its recurrent state holds the observation encoder's and the decoder's history tokens."""

    def __init__(self, c: ODISConfig):
        super().__init__()
        self.cfg = c
        self.obs_encoder = EntityEncoder(c.agent)
        self.decoder = EntityBC(c.agent, skill_dim=c.skill_dim)
        self.state_encoder = StateEncoder(c)
        self.encoder = nn.Linear(c.agent.embed_dim, c.skill_dim)  # Encoder.q_skill
        self.q = nn.Linear(c.agent.embed_dim, c.skill_dim)  # Qnet.q_skill

    def initial_state(self, rows: int) -> torch.Tensor:
        return torch.zeros(rows, 2, self.cfg.agent.embed_dim)

    def skills(self, tokens, last_action, hidden_enc):
        """``forward_both``: Q over skills and the skill logits of the observation's
        encoding ``[R, A, K]`` each, and the encoder's next history token."""
        R, A = tokens["own"].shape[:2]
        out = self.obs_encoder.encode(tokens, last_action, hidden_enc)
        own = out[:, 0]
        return self.q(own).view(R, A, -1), self.encoder(own).view(R, A, -1), out[:, -1]

    def state_skills(self, state, actions) -> torch.Tensor:
        """``forward_skill``: skill logits ``[R, A, K]`` of the state and the actions taken."""
        return self.encoder(self.state_encoder(state, actions))

    def forward(self, tokens, last_action, hidden):
        """Acts as ODIS's ``forward`` with ``c_step: 1``: the skill of largest Q, decoded.
        Returns action logits ``[R, A, n]`` and the next recurrent state ``[R*A, 2, e]``."""
        q, _, h_enc = self.skills(tokens, last_action, hidden[:, 0])
        skill = nn.functional.one_hot(q.argmax(-1), self.cfg.skill_dim).float()
        logits, h_dec = self.decoder(
            tokens, last_action, hidden[:, 1], skill.view(-1, skill.shape[-1])
        )
        return logits, torch.stack([h_enc, h_dec], 1)
