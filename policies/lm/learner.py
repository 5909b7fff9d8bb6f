"""The Learner of the language-model algorithms: behaviour cloning's cross-entropy on the
answer tokens, or GRPO's clipped surrogate (``policies.lm.objective``), chosen by
``learner_config_dict["mode"]``.

Batches are padded token arrays built by :func:`policies.lm.turns.turn_batch`: ``tokens``/``attention``/
``targets`` ``[B, L]`` (targets mark the answer tokens: the loss is on the agent's tokens
only), ``old_logp`` ``[B, L]`` (the sampler's log-probability of each answer token, at the
sampling temperature) and ``advantage`` ``[B]``.
"""

from __future__ import annotations

import copy

import torch
from ray.rllib.core.learner.torch.torch_learner import TorchLearner

from policies.lm.objective import lm_loss


class LMLearner(TorchLearner):
    """Behaviour cloning or GRPO on a :class:`policies.lm.module.LMModule`."""

    def build(self) -> None:
        super().build()
        self._reference = None
        self.snapshot_reference()

    def get_parameters(self, module):
        # Only what trains: a LoRA student's optimizer and gradient clip see its adapter
        # alone, never the frozen base (which has no gradients and must get no Adam moments).
        return [p for p in module.parameters() if p.requires_grad]

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
        ref_logp = None
        if cfg["mode"] == "grpo" and self._reference is not None:
            student = self.module[module_id].student
            with torch.no_grad():
                ref_student = copy.copy(student)
                ref_student.model = self._reference
                ref_logp, _ = ref_student.token_logps(
                    batch["tokens"], batch["attention"], batch["targets"], cfg["temperature"]
                )
        loss, log = lm_loss(fwd_out["logp"], fwd_out["entropy"], batch, cfg, ref_logp)
        self.metrics.log_dict(
            {(module_id, k): (v.detach() if torch.is_tensor(v) else v) for k, v in log.items()},
            window=1,
        )
        return loss
