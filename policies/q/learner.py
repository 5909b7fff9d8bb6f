"""The Learner of value-based MARL (IQL, VDN, QMIX): TD learning on replayed whole episodes.

One update (PyMARL's ``QLearner.train``, oxwhirl/pymarl ``src/learners/q_learner.py``; with
TD(lambda) as pymarl2's ``NQLearner``, hijkzzz/pymarl2 ``src/learners/nq_learner.py``):

1. every agent module unrolls its Q-network over the batch's episodes from a zero state
   (``QNetwork.sequence_q``), and its target network likewise;
2. each agent's Q-value of the action it took, and the target value of the next step: the
   target network's Q-value of the online network's best legal action (double Q) or the
   target network's best legal Q-value;
3. the algorithm's mixer (``policies.q.Mixer``) joins the agents: none (IQL: every agent
   learns its own Q from the team reward), their sum (VDN) or QMIX's monotonic network of
   the state;
4. targets ``r_t + gamma Q'_tot(t+1)`` (0 after a terminal step), or their TD(lambda) mix,
   and the mean squared TD error over the steps the episodes really had (with
   ``hysteresis`` < 1, the errors of estimates above their targets weigh that much:
   hysteretic Q-learning);
5. one optimiser step, the gradient clipped by the global norm of all parameters together;
   target networks copied every ``target_update_interval`` episodes (or moved by ``tau``).
"""

from __future__ import annotations

import torch
from ray.rllib.core.columns import Columns
from ray.rllib.core.learner.torch.torch_learner import TorchLearner

from policies.batch import MASK
from policies.q import MIXER


def td_lambda_targets(
    rewards: torch.Tensor,
    terminated: torch.Tensor,
    mask: torch.Tensor,
    target_qs: torch.Tensor,
    gamma: float,
    td_lambda: float,
) -> torch.Tensor:
    """TD(lambda) targets ``[E, T, ...]`` from the target values ``[E, T + 1, ...]`` of each
    step (pymarl2 ``build_td_lambda_targets``); ``td_lambda = 0`` gives one-step targets
    ``r_t + gamma (1 - terminated_t) Q'(t + 1)`` on the steps ``mask`` keeps (PyMARL's)."""
    shape = (*rewards.shape, *([1] * (target_qs.dim() - rewards.dim())))
    rewards, terminated, mask = (x.reshape(shape) for x in (rewards, terminated, mask))
    ret = torch.zeros_like(target_qs)
    ended = terminated.sum(dim=1)  # 1 where the episode ended by termination
    ret[:, -1] = target_qs[:, -1] * (1 - ended)
    for t in range(ret.shape[1] - 2, -1, -1):
        ret[:, t] = td_lambda * gamma * ret[:, t + 1] + mask[:, t] * (
            rewards[:, t] + (1 - td_lambda) * gamma * target_qs[:, t + 1] * (1 - terminated[:, t])
        )
    return ret[:, :-1]


class QLearner(TorchLearner):
    """See the module docstring. ``learner_config_dict`` holds the algorithm's settings
    (``policies.q.QSettings`` as a dict) and ``agents``: the agent modules, in mixing order."""

    def build(self) -> None:
        super().build()
        self._last_target_update = 0  # episodes sampled at the last hard target update

    # -- optimiser ------------------------------------------------------------------------------

    def configure_optimizers_for_module(self, module_id, config=None) -> None:
        s = self.config.learner_config_dict
        params = [p for p in self.get_parameters(self._module[module_id]) if p.requires_grad]
        if s["optimizer"] == "adam":
            optimizer = torch.optim.Adam(params)
        else:  # PyMARL's RMSprop (lr, optim_alpha, optim_eps)
            optimizer = torch.optim.RMSprop(params, alpha=s["optim_alpha"], eps=s["optim_eps"])
        self.register_optimizer(
            module_id=module_id, optimizer=optimizer, params=params, lr_or_lr_schedule=s["lr"]
        )

    def postprocess_gradients(self, gradients_dict):
        """Clips every gradient by the global norm of them all (PyMARL clips the agents'
        and the mixer's parameters as one)."""
        # parameters outside the loss (a frozen module's) have no gradient: left alone
        grads = {ref: g for ref, g in gradients_dict.items() if g is not None}
        norm = _clip_(list(grads.values()), self.config.learner_config_dict["grad_norm_clip"])
        for mid in self.config.learner_config_dict["agents"]:
            self.metrics.log_value((mid, "grad_norm"), float(norm), window=1)
        return grads

    # -- loss -----------------------------------------------------------------------------------

    def compute_losses(self, *, fwd_out, batch):
        s = self.config.learner_config_dict
        agents = [mid for mid in s["agents"] if mid in fwd_out]
        team = batch[agents[0]]
        rewards = team["reward"]  # [E, T]
        terminated = team["terminated"].float()
        mask = team["filled"].float()
        mask[:, 1:] = mask[:, 1:] * (1 - terminated[:, :-1])
        chosen, following = [], []
        for mid in agents:
            q, q_target = fwd_out[mid]["q"], fwd_out[mid]["q_target"]  # [E, T + 1, K, A]
            b = batch[mid]
            actions = b[Columns.ACTIONS].long()
            chosen.append(q[:, :-1].gather(-1, actions[..., None])[..., 0])
            legal = b[Columns.OBS].get(MASK)
            best_q = q.detach() if s["double_q"] else q_target
            if legal is not None:
                best_q = best_q.masked_fill(legal < 0.5, float("-inf"))
            best = best_q.argmax(dim=-1, keepdim=True)
            following.append(q_target.gather(-1, best)[..., 0])  # [E, T + 1, K]
        chosen_q, target_q = torch.cat(chosen, dim=2), torch.cat(following, dim=2)
        mixer = s["mixer"]
        if mixer.mix is not None:
            out = fwd_out.get(MIXER, {})
            weights, target_weights = out.get("weights"), out.get("target_weights")
            if weights is not None:  # the step after the last has no own Q-value to mix
                weights = {k: v[:, :-1] for k, v in weights.items()}
            chosen_q, target_q = mixer.mix(chosen_q, weights), mixer.mix(target_q, target_weights)
        targets = td_lambda_targets(
            rewards, terminated, mask, target_q, s["gamma"], s["td_lambda"]
        ).detach()
        td = chosen_q - targets
        weight = mask if td.dim() == 2 else mask[..., None].expand_as(td)
        # hysteretic Q-learning: an estimate above its target moves at hysteresis x the rate
        step = torch.where(td > 0, s["hysteresis"], 1.0) * td.pow(2)
        loss = s["loss_scale"] * (step * weight).sum() / weight.sum()
        cells = weight.sum()
        n_agents = 1 if td.dim() == 2 else td.shape[-1]
        stats = {
            "td_loss": loss.detach(),
            "td_error_abs": ((td.abs() * weight).sum() / cells).detach(),
            "q_taken_mean": ((chosen_q * weight).sum() / (cells * n_agents)).detach(),
            "target_mean": ((targets * weight).sum() / (cells * n_agents)).detach(),
        }
        for mid in agents:
            self.metrics.log_dict({(mid, k): v for k, v in stats.items()}, window=1)
        return {agents[0]: loss}

    def compute_loss_for_module(self, *, module_id, config, batch, fwd_out):
        raise NotImplementedError("the TD loss is the team's: compute_losses")

    # -- target networks --------------------------------------------------------------------------

    def after_gradient_based_update(self, *, timesteps) -> None:
        super().after_gradient_based_update(timesteps=timesteps)
        s = self.config.learner_config_dict
        episodes = int(timesteps.get("episodes", 0))
        if s["target_update_interval"] > 0:
            if episodes - self._last_target_update >= s["target_update_interval"]:
                self._move_targets(1.0)
                self._last_target_update = episodes
        else:
            self._move_targets(s["tau"])

    def _move_targets(self, tau: float) -> None:
        """``target <- tau * online + (1 - tau) * target`` for every module (tau 1: a copy)."""
        with torch.no_grad():
            for mid in self.module.keys():
                module = self.module[mid].unwrapped()
                for p, t in zip(
                    module.net.parameters(), module.target_net.parameters(), strict=True
                ):
                    t.mul_(1 - tau).add_(p, alpha=tau)

    def get_state(self, *args, **kwargs):
        state = super().get_state(*args, **kwargs)
        state["arena_q"] = {"last_target_update": self._last_target_update}
        return state

    def set_state(self, state) -> None:
        super().set_state(state)
        if "arena_q" in state:
            self._last_target_update = int(state["arena_q"]["last_target_update"])


def _clip_(grads: list[torch.Tensor], max_norm: float) -> torch.Tensor:
    """Scales ``grads`` in place to a global norm of at most ``max_norm``; returns the norm
    before (``torch.nn.utils.clip_grad_norm_``'s rule, on gradients rather than parameters)."""
    norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
    scale = torch.clamp(max_norm / (norm + 1e-6), max=1.0)
    for g in grads:
        g.mul_(scale)
    return norm
