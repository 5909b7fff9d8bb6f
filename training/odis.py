"""ODIS's two losses (github.com/LAMDA-RL/ODIS ``src/learners/multi_task/odis_learner.py``),
on a batch of one task's episodes (``training.offline.Task``), with ``c_step: 1``:

* **Skill discovery** (``train_vae``, the pretraining phase): the state encoder gives each agent
  skill logits from the state and the actions taken; a Gumbel-softmax sample of them is decoded
  back into the agent's action by the decoder (cross-entropy, per step over the episodes that
  filled it, averaged over steps and agents), plus ``beta`` times the KL to the uniform prior.
* **Offline policy over skills** (``train_policy``): each step's skill label is the state
  encoder's argmax; the observation encoder learns Q over skills (double Q-learning, QAttn
  mixer, one-step targets), a conservative term pushing down the mixed Q of the greedy skills
  against the dataset's (``coef_conservative: 5``), and a cross-entropy of the labels through
  the frozen skill head (``coef_dist: 5``). The decoder, the state encoder and the skill head
  stay as pretraining left them.

ODIS's sums also count the padding of shorter episodes and, in the policy loss, the step after
the last action; here every term counts the steps an agent acted, and the step after the last
one only as the bootstrap of a time-limited episode's target.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import torch
from torch import nn

from policies.offline.odis import ODISAgent, ODISConfig, QAttnMixer


@dataclass(frozen=True)
class ODISLoss:
    """odis.yaml's loss settings (``beta``, ``coef_conservative``, ``coef_dist``,
    ``target_update_interval``) and default.yaml's ``gamma``."""

    beta: float = 0.001
    conservative: float = 5.0
    dist: float = 5.0
    gamma: float = 0.99
    target_update: int = 80  # task batches between target copies (ODIS's t_env)


def batch(task, idx):
    """One task's episodes ``idx``, cut to the longest one's steps plus its final observation."""
    L = int(task.length[idx].max()) + 1
    return {
        "tokens": {k: v[idx, :L] for k, v in task.tokens.items()},
        "state": {k: v[idx, :L] for k, v in task.state.items()},
        "actions": task.actions[idx, :L],
        "acted": task.filled[idx, :L].float(),
        "reward": task.reward[idx, :L],
        "terminal": task.terminal[idx, :L].float(),
    }


def flat_state(state: dict, B: int, L: int) -> dict:
    return {k: v.reshape(B * L, *v.shape[2:]) for k, v in state.items()}


def recurrent_skills(agent: ODISAgent, tokens: dict, actions: torch.Tensor):
    """Q over skills and skill logits ``[B, L, A, K]`` each, step by step through the
    observation encoder's history (the last action at step t is the dataset's at t - 1)."""
    B, L, A = actions.shape
    hidden = agent.obs_encoder.initial_state(B * A)
    last = torch.full((B, A), -1, dtype=torch.long)
    qs, ps = [], []
    for t in range(L):
        q, p, hidden = agent.skills({k: v[:, t] for k, v in tokens.items()}, last, hidden)
        qs.append(q)
        ps.append(p)
        last = actions[:, t]
    return torch.stack(qs, 1), torch.stack(ps, 1)


class ODISLearner(nn.Module):
    """The agent, the mixer and their targets (one module, so one state dict saves them)."""

    def __init__(self, cfg: ODISConfig, loss: ODISLoss = ODISLoss()):
        super().__init__()
        self.cfg, self.loss = cfg, loss
        self.agent = ODISAgent(cfg)
        self.mixer = QAttnMixer(cfg)
        self.target_agent = copy.deepcopy(self.agent).requires_grad_(False)
        self.target_mixer = copy.deepcopy(self.mixer).requires_grad_(False)

    def pretrain_parameters(self) -> list:
        a = self.agent
        return [*a.state_encoder.parameters(), *a.encoder.parameters(), *a.decoder.parameters()]

    def policy_parameters(self) -> list:
        a = self.agent
        return [*a.obs_encoder.parameters(), *a.q.parameters(), *self.mixer.parameters()]

    def update_targets(self) -> None:
        self.target_agent.load_state_dict(self.agent.state_dict())
        self.target_mixer.load_state_dict(self.mixer.state_dict())

    def skill_loss(self, task, idx) -> torch.Tensor:
        """``train_vae``: decode the dataset's actions from sampled skills."""
        b = batch(task, idx)
        actions, acted = b["actions"], b["acted"]
        B, L, A = actions.shape
        K = self.cfg.skill_dim
        logits = self.agent.state_skills(flat_state(b["state"], B, L), actions.reshape(B * L, A))
        skill = nn.functional.gumbel_softmax(logits.view(B, L, A, K)[:, :-1], dim=-1)
        kl = (skill * (skill.log() - math.log(1 / K))).sum(-1)  # [B, L-1, A]
        w = acted[:, :-1, None].expand_as(kl)
        enc = (kl * w).sum() / (w.sum() * K)  # ODIS: the mean over skills too
        decoder = self.agent.decoder
        hidden = decoder.initial_state(B * A)
        last = torch.full((B, A), -1, dtype=torch.long)
        dec = 0.0
        for t in range(L - 1):
            step = {k: v[:, t] for k, v in b["tokens"].items()}
            out, hidden = decoder(step, last, hidden, skill[:, t].reshape(B * A, K))
            ce = nn.functional.cross_entropy(
                out.reshape(B * A, -1), actions[:, t].reshape(-1), reduction="none"
            )
            dec = dec + (ce.view(B, A) * acted[:, t, None]).sum() / acted[:, t].sum() / A
            last = actions[:, t]
        return dec / (L - 1) + self.loss.beta * enc

    def policy_loss(self, task, idx) -> torch.Tensor:
        """``train_policy``: conservative Q-learning over the state encoder's skill labels."""
        b = batch(task, idx)
        actions, acted = b["actions"], b["acted"]
        B, L, A = actions.shape
        K = self.cfg.skill_dim
        state = flat_state(b["state"], B, L)
        with torch.no_grad():
            labels = self.agent.state_skills(state, actions.reshape(B * L, A)).argmax(-1)
            labels = labels.view(B, L, A)
            target_q, _ = recurrent_skills(self.target_agent, b["tokens"], actions)
        q, p = recurrent_skills(self.agent, b["tokens"], actions)
        n_acted = acted.sum() * A
        ce = nn.functional.cross_entropy(p.reshape(-1, K), labels.reshape(-1), reduction="none")
        dist = (ce.view(B, L, A) * acted[..., None]).sum() / n_acted
        chosen = q.gather(3, labels[..., None]).squeeze(3)
        greedy = q.detach().argmax(3, keepdim=True)  # double Q: the live network picks
        target_max = target_q.gather(3, greedy).squeeze(3)
        greedy_q = q.gather(3, greedy).squeeze(3)

        def mix(mixer, qs):
            return mixer(qs.reshape(B * L, A), state).view(B, L)

        chosen_tot = mix(self.mixer, chosen)
        greedy_tot = mix(self.mixer, greedy_q)
        with torch.no_grad():
            target_tot = mix(self.target_mixer, target_max)
        g = self.loss.gamma
        targets = b["reward"][:, :-1] + g * (1 - b["terminal"][:, :-1]) * target_tot[:, 1:]
        td = (chosen_tot[:, :-1] - targets) * acted[:, :-1]
        td_loss = (td**2).sum() / acted[:, :-1].sum()
        cons = ((greedy_tot - chosen_tot) * acted).sum() / acted.sum()
        return td_loss + self.loss.conservative * cons + self.loss.dist * dist
