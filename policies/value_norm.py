"""MAPPO's value normaliser (on-policy's ``ValueNorm``) and its use by GAE and the loss.

marlbenchmark/on-policy@de66d7a: onpolicy/utils/valuenorm.py. The critic predicts values in
normalised units; the normaliser keeps a running (exponentially weighted, debiased) mean and
mean square of the value targets, updated with each minibatch's targets before its value
loss (onpolicy/algorithms/r_mappo/r_mappo.py:64-67), and GAE reads the predictions
denormalised (onpolicy/utils/shared_buffer.py:236-239).

The statistics are buffers of the module (:class:`ValueNorm` is a submodule of
``policies.modules.ActorCritic`` under ``model.value_norm``), so they travel with the weights
from the Learner to the EnvRunners, where GAE runs, and into checkpoints.
"""

from __future__ import annotations

import torch
from torch import nn

BETA = 0.99999
"""onpolicy/utils/valuenorm.py:11 (``beta``; ``per_element_update`` off: one decay per
update, whatever the batch size)."""
EPSILON = 1e-5
"""onpolicy/utils/valuenorm.py:11: the smallest debiasing term divided by."""
MIN_VAR = 1e-2
"""onpolicy/utils/valuenorm.py:35: the variance is clamped at this from below."""


class ValueNorm(nn.Module):
    """Running mean and variance of scalar value targets (on-policy's ``ValueNorm(1)``)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("running_mean", torch.zeros(1))
        self.register_buffer("running_mean_sq", torch.zeros(1))
        self.register_buffer("debiasing_term", torch.zeros(()))

    def mean_var(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The debiased mean and variance (valuenorm.py:32-36)."""
        debias = self.debiasing_term.clamp(min=EPSILON)
        mean = self.running_mean / debias
        var = (self.running_mean_sq / debias - mean**2).clamp(min=MIN_VAR)
        return mean, var

    @torch.no_grad()
    def update(self, targets: torch.Tensor) -> None:
        """One decay step towards ``targets``' mean and mean square (valuenorm.py:38-55)."""
        x = targets.detach().to(self.running_mean.dtype).reshape(-1)
        self.running_mean.mul_(BETA).add_(x.mean() * (1.0 - BETA))
        self.running_mean_sq.mul_(BETA).add_((x**2).mean() * (1.0 - BETA))
        self.debiasing_term.mul_(BETA).add_(1.0 - BETA)

    def normalize(self, x: torch.Tensor) -> torch.Tensor:
        mean, var = self.mean_var()
        return (x - mean) / torch.sqrt(var)

    def denormalize(self, x: torch.Tensor) -> torch.Tensor:
        mean, var = self.mean_var()
        return x * torch.sqrt(var) + mean


def value_norm_of(module) -> ValueNorm | None:
    """The module's value normaliser, if it has one (``model.value_norm``)."""
    return getattr(module, "value_norm", None)
