"""VDN: the team's Q-value is the sum of the agents' (Sunehag et al., "Value-Decomposition
Networks For Cooperative Multi-Agent Learning", AAMAS 2018). See :mod:`policies.q`."""

from policies.q import algorithm

ALGORITHM = algorithm("vdn", "vdn", "value decomposition: the team's Q is the sum of the agents'")
