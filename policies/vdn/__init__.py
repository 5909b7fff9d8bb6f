"""VDN: the team's Q-value is the sum of the agents' (Sunehag et al., "Value-Decomposition
Networks For Cooperative Multi-Agent Learning", AAMAS 2018). See :mod:`policies.q`."""

import torch

from policies.q import Mixer, algorithm


def add(qs: torch.Tensor, weights=None) -> torch.Tensor:
    """Q_tot = the sum of the agents' Q-values (pymarl ``src/modules/mixers/vdn.py``)."""
    return qs.sum(dim=-1)


SUM = Mixer(
    "vdn",
    mix=add,
    # hijkzzz/pymarl2 src/config/algs/vdn.yaml (nq_learner)
    pymarl2={"batch_size": 128, "lr": 1e-3, "td_lambda": 0.6},
)

ALGORITHM = algorithm("vdn", SUM, "value decomposition: the team's Q is the sum of the agents'")
