"""The Learner of the language-model algorithms: behaviour cloning's cross-entropy on the
answer tokens, or GRPO's clipped surrogate (``policies.lm.objective``), chosen by
``learner_config_dict["mode"]``.

Batches are padded token arrays built by :func:`turn_batch`: ``tokens``/``attention``/
``targets`` ``[B, L]`` (targets mark the answer tokens: the loss is on the agent's tokens
only), ``old_logp`` ``[B, L]`` (the sampler's log-probability of each answer token, at the
sampling temperature) and ``advantage`` ``[B]``.
"""

from __future__ import annotations

import copy

import numpy as np
import torch
from ray.rllib.core.learner.torch.torch_learner import TorchLearner

from policies.lm.objective import aggregate, k3, surrogate


def turn_batch(turns: list[dict], pad: int) -> dict[str, np.ndarray]:
    """Padded arrays of turns ``{"prompt", "answer", "logps"?, "advantage"?}``."""
    rows = [t["prompt"] + t["answer"] for t in turns]
    B, L = len(rows), max(len(r) for r in rows)
    tokens = np.full((B, L), pad, np.int64)
    attention = np.zeros((B, L), np.int64)
    targets = np.zeros((B, L), bool)
    old = np.zeros((B, L), np.float32)
    for i, (t, r) in enumerate(zip(turns, rows, strict=True)):
        n, p = len(r), len(t["prompt"])
        tokens[i, :n], attention[i, :n], targets[i, p:n] = r, 1, True
        if "logps" in t:
            old[i, p:n] = t["logps"]
    adv = np.array([t.get("advantage", 0.0) for t in turns], np.float32)
    return {
        "tokens": tokens,
        "attention": attention,
        "targets": targets,
        "old_logp": old,
        "advantage": adv,
    }


class LMLearner(TorchLearner):
    """Behaviour cloning or GRPO on a :class:`policies.lm.module.LMModule`."""

    def build(self) -> None:
        super().build()
        self._reference = None
        self.snapshot_reference()

    def snapshot_reference(self) -> None:
        """Freezes a copy of the current student as GRPO's KL reference (when beta > 0)."""
        cfg = self.config.learner_config_dict
        if cfg.get("mode") == "grpo" and cfg.get("beta", 0.0) > 0:
            for mid in self.module.keys():
                ref = copy.deepcopy(self.module[mid].student.model).eval()
                for p in ref.parameters():
                    p.requires_grad_(False)
                self._reference = ref

    def compute_loss_for_module(self, *, module_id, config, batch, fwd_out):
        cfg = config.learner_config_dict
        logp, entropy = fwd_out["logp"], fwd_out["entropy"]
        where = batch["targets"][:, 1:].bool()
        seq = torch.nonzero(where)[:, 0]
        B = batch["tokens"].shape[0]
        log = {"entropy": entropy.mean(), "tokens": float(logp.numel())}
        if cfg["mode"] == "bc":
            loss = aggregate(-logp, seq, B, cfg["loss_agg"], cfg["max_new_tokens"])
            log["policy_loss"] = loss
        else:
            old = batch["old_logp"][:, 1:][where]
            adv = batch["advantage"][seq]
            tok_loss, ratio, clipped = surrogate(
                logp, old, adv, cfg["eps_low"], cfg["eps_high"], cfg["clip"]
            )
            if self._reference is not None:
                student = self.module[module_id].student
                with torch.no_grad():
                    ref_student = copy.copy(student)
                    ref_student.model = self._reference
                    ref_logp, _ = ref_student.token_logps(
                        batch["tokens"], batch["attention"], batch["targets"], cfg["temperature"]
                    )
                kl = k3(logp, ref_logp)
                tok_loss = tok_loss + cfg["beta"] * kl
                log["kl_ref"] = kl.mean()
            loss = aggregate(tok_loss, seq, B, cfg["loss_agg"], cfg["max_new_tokens"])
            log.update(
                policy_loss=loss,
                ratio_mean=ratio.mean(),
                clip_fraction=clipped.float().mean(),
                kl_old=(old - logp).mean(),  # k1 estimate of KL(old || new)
            )
        self.metrics.log_dict(
            {(module_id, k): (v.detach() if torch.is_tensor(v) else v) for k, v in log.items()},
            window=1,
        )
        return loss
