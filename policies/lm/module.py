"""The student as an RLlib RLModule, so that Learners, EnvRunners, weight sync and
checkpoints treat it as any other module. Its ``model_config`` holds the student's settings
(``policies.lm.student.StudentSettings`` as a dict), the seed of a tiny student's weights and
the temperature at which training log-probabilities are taken (the sampling temperature)."""

from __future__ import annotations

from typing import Any

import torch
from ray.rllib.core.rl_module.torch import TorchRLModule

from policies.lm.student import Student, StudentSettings

MODULE_ID = "student"


class LMModule(TorchRLModule):
    """A :class:`policies.lm.student.Student` inside an RLModule."""

    SERVED_BY = "serve.lm:LMPolicy"
    """The policy server's class for runs of this module (``serve.policy.served_class``)."""

    def setup(self):
        cfg = self.model_config
        settings = StudentSettings(**cfg["student"])
        self.student = Student.build(settings, seed=int(cfg.get("seed", 0)))
        self.lm = self.student.model  # registers the parameters with this nn.Module
        self.temperature = float(cfg.get("temperature", 1.0))

    def _forward_train(self, batch: dict[str, Any], **kwargs) -> dict[str, Any]:
        self.lm.train()
        logp, entropy = self.student.token_logps(
            batch["tokens"], batch["attention"], batch["targets"], self.temperature
        )
        return {"logp": logp, "entropy": entropy}

    def _forward_inference(self, batch: dict[str, Any], **kwargs) -> dict[str, Any]:
        with torch.no_grad():
            return self._forward_train(batch)

    def _forward_exploration(self, batch: dict[str, Any], **kwargs) -> dict[str, Any]:
        return self._forward_inference(batch)
