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


class BiKTLearner(nn.Module):
    def __init__(self, cfg: BiKTConfig):
        super().__init__()
        self.cfg = cfg
        self.agent = BiKTAgent(cfg)

    def pretrain_parameters(self) -> list:
        return self.agent.vq_parameters()

    def policy_parameters(self) -> list:
        return self.agent.policy_parameters()

    def labels(self, b, learning: bool):
        """Skill embeddings ``[B, L, A, d]``, skill codes ``[B, L, A]`` and their VQ losses,
        and the steps' tactic codes ``[B, L]``, VQ losses and skill log-shares. While the
        codebooks are ``learning``, their unused codes restart."""
        actions = b["actions"]
        B, L, A = actions.shape
        tokens = {k: v.reshape(B * L, *v.shape[2:]) for k, v in b["tokens"].items()}
        acted = b["acted"].reshape(B * L) > 0 if learning else None
        skill, code, skill_vq = self.agent.skills(tokens, actions.reshape(B * L, A), acted)
        share = nn.functional.one_hot(code, self.cfg.skill_codes).float().mean(1)
        _, t_code, tactic_vq, log_share = self.agent.tactics(skill.detach(), share, acted)
        return (
            skill.view(B, L, A, -1),
            code.view(B, L, A),
            skill_vq.view(B, L, A),
            t_code.view(B, L),
            tactic_vq.view(B, L),
            log_share.view(B, L, -1),
            share.view(B, L, -1),
        )

    def skill_loss(self, task, idx) -> torch.Tensor:
        b = batch(task, idx)
        actions, acted = b["actions"], b["acted"]
        B, L, A = actions.shape
        skill, code, skill_vq, _, tactic_vq, log_share, share = self.labels(b, learning=True)
        decoder = self.agent.decoder
        hidden = decoder.initial_state(B * A)
        last = torch.full((B, A), -1, dtype=torch.long)
        ce = []
        for t in range(L):
            step = {k: v[:, t] for k, v in b["tokens"].items()}
            logits, hidden = decoder(step, last, hidden, skill[:, t].reshape(B * A, -1))
            ce.append(per_agent_ce(logits, actions[:, t]))
            last = actions[:, t]
        share_ce = -(share * log_share).sum(-1)
        return (
            masked_mean(torch.stack(ce, 1), acted)
            + masked_mean(skill_vq, acted)
            + masked_mean(share_ce, acted)
            + masked_mean(tactic_vq, acted)
        )

    def policy_loss(self, task, idx) -> torch.Tensor:
        b = batch(task, idx)
        actions, acted = b["actions"], b["acted"]
        B, L, A = actions.shape
        with torch.no_grad():
            _, code, _, t_code, *_ = self.labels(b, learning=False)
        tactic = t_code[..., None].expand(B, L, A)
        hidden = self.agent.backbone.initial_state(B * A)
        last = torch.full((B, A), -1, dtype=torch.long)
        t_ce, s_ce = [], []
        for t in range(L):
            step = {k: v[:, t] for k, v in b["tokens"].items()}
            t_logits, s_logits, hidden = self.agent.infer(
                step, last, hidden, b["return_to_go"][:, t], tactic[:, t]
            )
            t_ce.append(per_agent_ce(t_logits, tactic[:, t]))
            s_ce.append(per_agent_ce(s_logits, code[:, t]))
            last = actions[:, t]
        return masked_mean(torch.stack(t_ce, 1), acted) + masked_mean(torch.stack(s_ce, 1), acted)
