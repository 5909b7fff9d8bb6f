"""IQL: independent Q-learning, each agent's recurrent Q-network learning from the team reward
(Tan, "Multi-Agent Reinforcement Learning: Independent vs. Cooperative Agents", 1993; as
PyMARL runs it on SMAC, Samvelyan et al. 2019). See :mod:`policies.q`."""

from policies.q import Mixer, algorithm

INDEPENDENT = Mixer(
    "none",
    # hijkzzz/pymarl2 src/config/algs/iql.yaml (q_learner: one-step, double_q: True); its
    # batch_size and lr are default.yaml's
    pymarl2={"batch_size": 32, "lr": 5e-4, "td_lambda": 0.0},
)

ALGORITHM = algorithm(
    "iql", INDEPENDENT, "independent Q-learning (recurrent agents, shared team reward)"
)
