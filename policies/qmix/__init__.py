"""QMIX: the team's Q-value is a monotonic mix of the agents', its weights generated from the
global state by hypernetworks (Rashid et al., ICML 2018). See :mod:`policies.q`."""

from policies.q import algorithm

ALGORITHM = algorithm(
    "qmix", "qmix", "monotonic mixing of the agents' Q-values by state-conditioned hypernetworks"
)
