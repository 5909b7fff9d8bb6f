"""BiKT's two phases (``policies.offline.bikt``) on a batch of one task's episodes
(``training.offline.Task``); every term counts the steps where agents acted.

* **Skills and tactics** (``skill_loss``, the first phase): the dataset's actions are
  encoded into skill codes and decoded back by ODIS's action decoder (cross-entropy through
  the straight-through skill embedding) plus the skill codebook's VQ-VAE loss; the team's
  skill embeddings at each step (detached: tactics read the skills, they do not shape them)
  are encoded into a tactic code that must give back the share of agents on each skill
  (cross-entropy of those shares) plus the tactic codebook's VQ-VAE loss.
* **Bi-level decision transformer** (``policy_loss``): the frozen encoders label each step
  with its tactic and each agent with its skill; the transformer, told the team's return to
  go from that step, learns the tactic (cross-entropy) and each agent's skill given the
  labelled tactic (cross-entropy; teacher forcing, as Decision Transformer trains on the
  dataset's tokens).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from policies.offline.bikt import BiKTAgent, BiKTConfig


def batch(task, idx):
    """One task's episodes ``idx``, cut to the longest one's acted steps, with the team's
    return to go at each step."""
    L = int(task.length[idx].max())
    reward = task.reward[idx, :L]
    return {
        "tokens": {k: v[idx, :L] for k, v in task.tokens.items()},
        "actions": task.actions[idx, :L],
        "acted": task.filled[idx, :L].float(),
        "return_to_go": reward.flip(1).cumsum(1).flip(1),
    }


def masked_mean(x: torch.Tensor, acted: torch.Tensor) -> torch.Tensor:
    """Mean of ``x [B, L, ...]`` over the steps where ``acted [B, L]``."""
    w = acted.view(*acted.shape, *(1,) * (x.dim() - 2)).expand_as(x)
    return (x * w).sum() / w.sum()


def per_agent_ce(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Cross-entropy ``[R, A]`` of logits ``[R, A, n]`` against labels ``[R, A]``."""
    return nn.functional.cross_entropy(logits.transpose(1, 2), labels, reduction="none")


@dataclass
class Labels:
    """What the skill and tactic encoders make of a batch ``[B, L, ...]``."""

    skill: torch.Tensor  # skill embeddings [B, L, A, d] (straight-through)
    code: torch.Tensor  # skill codes [B, L, A]
    skill_vq: torch.Tensor  # the skill codebook's VQ-VAE loss [B, L, A]
    tactic: torch.Tensor  # tactic codes [B, L]
    tactic_vq: torch.Tensor  # the tactic codebook's VQ-VAE loss [B, L]
    share_ce: torch.Tensor  # the tactic's cross-entropy of the skill shares [B, L]


class BiKTLearner(nn.Module):
    def __init__(self, cfg: BiKTConfig):
        super().__init__()
        self.cfg = cfg
        self.agent = BiKTAgent(cfg)

    def pretrain_parameters(self) -> list:
        return self.agent.vq_parameters()

    def policy_parameters(self) -> list:
        return self.agent.policy_parameters()

    def labels(self, b, learning: bool) -> Labels:
        """The batch's skills and tactics; while the codebooks are ``learning``, their unused
        codes restart."""
        actions = b["actions"]
        B, L, A = actions.shape
        tokens = {k: v.reshape(B * L, *v.shape[2:]) for k, v in b["tokens"].items()}
        acted = b["acted"].reshape(B * L) > 0 if learning else None
        skill, code, skill_vq = self.agent.skills(tokens, actions.reshape(B * L, A), acted)
        share = nn.functional.one_hot(code, self.cfg.skill_codes).float().mean(1)
        _, t_code, tactic_vq, log_share = self.agent.tactics(skill.detach(), share, acted)
        return Labels(
            skill.view(B, L, A, -1),
            code.view(B, L, A),
            skill_vq.view(B, L, A),
            t_code.view(B, L),
            tactic_vq.view(B, L),
            -(share * log_share).sum(-1).view(B, L),
        )

    def skill_loss(self, task, idx) -> torch.Tensor:
        b = batch(task, idx)
        actions, acted = b["actions"], b["acted"]
        B, L, A = actions.shape
        lab = self.labels(b, learning=True)
        decoder = self.agent.decoder
        hidden = decoder.initial_state(B * A)
        last = torch.full((B, A), -1, dtype=torch.long)
        ce = []
        for t in range(L):
            step = {k: v[:, t] for k, v in b["tokens"].items()}
            logits, hidden = decoder(step, last, hidden, lab.skill[:, t].reshape(B * A, -1))
            ce.append(per_agent_ce(logits, actions[:, t]))
            last = actions[:, t]
        return (
            masked_mean(torch.stack(ce, 1), acted)
            + masked_mean(lab.skill_vq, acted)
            + masked_mean(lab.share_ce, acted)
            + masked_mean(lab.tactic_vq, acted)
        )

    def policy_loss(self, task, idx) -> torch.Tensor:
        b = batch(task, idx)
        actions, acted = b["actions"], b["acted"]
        B, L, A = actions.shape
        with torch.no_grad():
            lab = self.labels(b, learning=False)
        tactic = lab.tactic[..., None].expand(B, L, A)
        hidden = self.agent.backbone.initial_state(B * A)
        last = torch.full((B, A), -1, dtype=torch.long)
        t_ce, s_ce = [], []
        for t in range(L):
            step = {k: v[:, t] for k, v in b["tokens"].items()}
            t_logits, s_logits, hidden = self.agent.infer(
                step, last, hidden, b["return_to_go"][:, t], tactic[:, t]
            )
            t_ce.append(per_agent_ce(t_logits, tactic[:, t]))
            s_ce.append(per_agent_ce(s_logits, lab.code[:, t]))
            last = actions[:, t]
        return masked_mean(torch.stack(t_ce, 1), acted) + masked_mean(torch.stack(s_ce, 1), acted)
