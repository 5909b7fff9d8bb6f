"""BiKT's networks (Zhang et al., "Bi-Level Knowledge Transfer for Multi-Task Multi-Agent
Reinforcement Learning", NeurIPS 2025, openreview.net/forum?id=6jKed3sx4f).

The paper's abstract fixes the parts; its body and code (the supplementary zip) could not be
read here, so every size and wiring below that the abstract does not state is ours, on the
entity transformer BiKT shares with ODIS and BC-T (``policies.offline.entity_bc``):

* **Individual skills** ("we extract transferable individual skill embeddings from offline
  MARL trajectories"): a skill encoder reads an agent's entity tokens and the action it took
  (the same action encoding as the last-action input) and gives a skill embedding, quantised
  to a skill codebook (VQ-VAE: van den Oord et al., 2017); ODIS's action decoder, fed that
  embedding, must give the action back. The embedding only names a behaviour: which enemy to
  hit is read from the tokens, so a skill means the same with any number of units.
* **Tactics** ("tactics as coordinated patterns of skill combinations ... we map skill
  combinations into compact tactic embeddings and then construct a tactic codebook"): the
  team's skill embeddings at a step attend to each other (one transformer block, any number
  of agents), are mean-pooled into a tactic embedding and quantised to a tactic codebook; a
  tactic must give back the team's mix of skills (the share of agents on each skill code).
* **Bi-level decision transformer** ("infers them in sequence"): each agent's entity
  transformer over its observation, recurrent through its history token as BC-T's, with a
  return-to-go token (Decision Transformer: Chen et al., 2021), picks a tactic from the
  codebook, then its skill given the tactic's embedding; the decoder turns the skill into the
  action. Every agent infers the tactic from its own history (decentralised execution).

Both codebooks hold unit-length codes matched by cosine similarity (l2-normalised lookup, Yu
et al., "Vector-quantized Image Modeling with Improved VQGAN", ICLR 2022), which keeps every
code in use where a plain codebook collapses to a few.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from torch import nn

from policies.offline.entity_bc import Block, EntityBC, EntityBCConfig, EntityEncoder


@dataclass(frozen=True)
class BiKTConfig:
    """BiKT's sizes (ours: the paper's could not be read) and the return it asks for."""

    agent: EntityBCConfig
    target_return: float  # the datasets' best team return: DT's expert target
    skill_codes: int = 8
    tactic_codes: int = 16
    code_dim: int = 16
    commitment: float = 0.25  # VQ-VAE's beta

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, blob: dict) -> BiKTConfig:
        return cls(**(blob | {"agent": EntityBCConfig(**blob["agent"])}))


class Codebook(nn.Module):
    """Nearest unit-length code by cosine similarity, with a straight-through gradient.
    While training, a code that has gone unused (its running share of the rows below
    ``DEAD / n``) restarts at a random row's encoding, as Jukebox's codebooks do (Dhariwal
    et al., 2020): without it every row settles on one code within a few dozen batches."""

    DECAY, DEAD = 0.9, 0.02

    def __init__(self, n: int, dim: int):
        super().__init__()
        self.codes = nn.Embedding(n, dim)
        self.register_buffer("usage", torch.full((n,), 1.0 / n))  # running share per code

    def lookup(self, index: torch.Tensor) -> torch.Tensor:
        return nn.functional.normalize(self.codes(index), dim=-1)

    def forward(self, z: torch.Tensor, commitment: float, valid: torch.Tensor | None = None):
        """``z [..., d]`` -> quantised ``[..., d]`` (gradient passed to ``z``), code indices
        ``[...]``, and VQ-VAE's codebook + commitment loss per row ``[...]``. ``valid
        [...]``: the rows that count for the codes' usage (training only)."""
        z = nn.functional.normalize(z, dim=-1)
        if self.training and valid is not None and valid.any():
            self.restart_unused(z.detach()[valid])  # before the codes enter the graph
        codes = nn.functional.normalize(self.codes.weight, dim=-1)
        index = (z @ codes.T).argmax(-1)
        q = codes[index]
        loss = ((q - z.detach()) ** 2).sum(-1) + commitment * ((z - q.detach()) ** 2).sum(-1)
        return z + (q - z).detach(), index, loss

    @torch.no_grad()
    def restart_unused(self, z: torch.Tensor) -> None:
        n = len(self.usage)
        index = (z @ nn.functional.normalize(self.codes.weight, dim=-1).T).argmax(-1)
        share = torch.bincount(index, minlength=n).float() / len(index)
        self.usage.mul_(self.DECAY).add_((1 - self.DECAY) * share)
        dead = (self.usage < self.DEAD / n).nonzero().squeeze(1)
        if len(dead):
            self.codes.weight[dead] = z[torch.randint(len(z), (len(dead),))]
            self.usage[dead] = 1.0 / n


class TacticEncoder(nn.Module):
    """A team's skill combination -> its tactic embedding ``[R, d]``: the skill embeddings
    ``[R, A, d]`` attend to each other and are mean-pooled, beside the share of agents on
    each skill code ``[R, skill_codes]`` (pooled embeddings alone start out so alike that
    every step takes one tactic code and stays there)."""

    def __init__(self, c: BiKTConfig):
        super().__init__()
        e = c.agent.embed_dim
        self.embed = nn.Linear(c.code_dim, e)
        self.block = Block(e, c.agent.heads)
        self.out = nn.Sequential(
            nn.Linear(e + c.skill_codes, e), nn.ReLU(), nn.Linear(e, c.code_dim)
        )

    def forward(self, skills: torch.Tensor, share: torch.Tensor) -> torch.Tensor:
        return self.out(torch.cat([self.block(self.embed(skills)).mean(1), share], -1))


class BiKTAgent(nn.Module):
    """The skill and tactic VQ-VAEs and the bi-level decision transformer that acts. Its
    recurrent state holds the transformer's and the decoder's history tokens."""

    return_conditioned = True  # training.offline.evaluate passes the return to go

    def __init__(self, c: BiKTConfig):
        super().__init__()
        self.cfg = c
        e, d = c.agent.embed_dim, c.code_dim
        # individual level
        self.skill_encoder = EntityEncoder(c.agent)
        self.skill_proj = nn.Linear(e, d)
        self.skill_book = Codebook(c.skill_codes, d)
        self.decoder = EntityBC(c.agent, skill_dim=d)
        # team level
        self.tactic_encoder = TacticEncoder(c)
        self.tactic_book = Codebook(c.tactic_codes, d)
        self.tactic_decoder = nn.Sequential(nn.Linear(d, e), nn.ReLU(), nn.Linear(e, c.skill_codes))
        # the bi-level decision transformer
        self.backbone = EntityEncoder(c.agent)
        self.return_embed = nn.Linear(1, e)
        self.tactic_head = nn.Linear(e, c.tactic_codes)
        self.skill_head = nn.Sequential(nn.Linear(e + d, e), nn.ReLU(), nn.Linear(e, c.skill_codes))

    def vq_parameters(self) -> list:
        """What the skill and tactic VQ-VAEs learn (the first phase)."""
        parts = (self.skill_encoder, self.skill_proj, self.skill_book, self.decoder)
        parts += (self.tactic_encoder, self.tactic_book, self.tactic_decoder)
        return [p for m in parts for p in m.parameters()]

    def policy_parameters(self) -> list:
        """What the decision transformer learns (the second phase; the codebooks stay)."""
        parts = (self.backbone, self.return_embed, self.tactic_head, self.skill_head)
        return [p for m in parts for p in m.parameters()]

    def initial_state(self, rows: int) -> torch.Tensor:
        return torch.zeros(rows, 2, self.cfg.agent.embed_dim)

    def skills(self, tokens, actions, valid=None):
        """Skill embeddings ``[R, A, d]`` (straight-through), codes ``[R, A]`` and VQ losses
        ``[R, A]`` of the actions ``[R, A]`` taken on ``tokens``; ``valid [R]``: the rows
        where agents acted, for the codebook's usage."""
        R, A = actions.shape
        zero = self.skill_encoder.initial_state(R * A)
        own = self.skill_encoder.encode(tokens, actions, zero)[:, 0]
        rows = None if valid is None else valid[:, None].expand(R, A).reshape(-1)
        q, index, loss = self.skill_book(self.skill_proj(own), self.cfg.commitment, rows)
        return q.view(R, A, -1), index.view(R, A), loss.view(R, A)

    def tactics(self, skills: torch.Tensor, share: torch.Tensor, valid=None):
        """Tactic embeddings ``[R, d]``, codes ``[R]``, VQ losses ``[R]`` and the tactics'
        log-shares of the skill codes ``[R, skill_codes]`` from the team's skills ``[R, A,
        d]`` and its share of agents on each skill code ``[R, skill_codes]``."""
        z = self.tactic_encoder(skills, share)
        q, index, loss = self.tactic_book(z, self.cfg.commitment, valid)
        return q, index, loss, torch.log_softmax(self.tactic_decoder(q), -1)

    def infer(self, tokens, last_action, hidden, return_to_go, tactic=None):
        """The decision transformer's two levels: tactic logits ``[R, A, tactic_codes]``,
        skill logits ``[R, A, skill_codes]`` given ``tactic [R, A]`` (its own greedy pick
        when None), and the next history token. ``return_to_go [R]``: the team's."""
        R, A = tokens["own"].shape[:2]
        rtg = (return_to_go / (abs(self.cfg.target_return) or 1.0)).float()  # ~1 at the start
        extra = self.return_embed(rtg[:, None, None].expand(R, A, 1))
        out = self.backbone.encode(tokens, last_action, hidden, extra.reshape(R * A, 1, -1))
        own = out[:, 0]
        tactic_logits = self.tactic_head(own).view(R, A, -1)
        if tactic is None:
            tactic = tactic_logits.argmax(-1)
        t = self.tactic_book.lookup(tactic).view(R * A, -1)
        skill_logits = self.skill_head(torch.cat([own, t], -1)).view(R, A, -1)
        return tactic_logits, skill_logits, out[:, -1]

    def forward(self, tokens, last_action, hidden, return_to_go=None):
        """Acts: greedy tactic, greedy skill, decoded. Returns action logits ``[R, A, n]`` and
        the next recurrent state ``[R*A, 2, e]``; before any reward the return to go is the
        target."""
        R, A = tokens["own"].shape[:2]
        if return_to_go is None:
            return_to_go = torch.full((R,), self.cfg.target_return)
        _, skill_logits, h = self.infer(tokens, last_action, hidden[:, 0], return_to_go)
        skill = self.skill_book.lookup(skill_logits.argmax(-1)).view(R * A, -1)
        logits, h_dec = self.decoder(tokens, last_action, hidden[:, 1], skill)
        return logits, torch.stack([h, h_dec], 1)
