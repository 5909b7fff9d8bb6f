"""IQL: independent Q-learning, each agent's recurrent Q-network learning from the team reward
(Tan, "Multi-Agent Reinforcement Learning: Independent vs. Cooperative Agents", 1993; as
PyMARL runs it on SMAC, Samvelyan et al. 2019). See :mod:`policies.q`."""

from policies.q import algorithm

ALGORITHM = algorithm(
    "iql", "none", "independent Q-learning (recurrent agents, shared team reward)"
)
