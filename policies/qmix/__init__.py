"""QMIX: the team's Q-value is a monotonic mix of the agents', its weights generated from the
global state by hypernetworks (Rashid et al., ICML 2018; :mod:`policies.qmix.mixer`). See
:mod:`policies.q`."""

from policies.q import Mixer, algorithm
from policies.qmix.mixer import mix, qmix_module

MONOTONIC = Mixer(
    "qmix",
    mix=mix,
    module=qmix_module,
    # hijkzzz/pymarl2 src/config/algs/qmix.yaml (nq_learner)
    pymarl2={"batch_size": 128, "lr": 1e-3, "td_lambda": 0.6},
    # qmix.yaml's comments and pymarl2's README: 6h_vs_8z anneals epsilon over 500,000 steps
    # with lambda 0.3; 3s5z_vs_3s6z runs 4 envs, a replay of 2,500 and batches of 64
    pymarl2_per_map={
        "6h_vs_8z": {"epsilon_anneal_time": 500_000, "td_lambda": 0.3},
        "3s5z_vs_3s6z": {"batch_size_run": 4, "buffer_size": 2500, "batch_size": 64},
    },
)

ALGORITHM = algorithm(
    "qmix", MONOTONIC, "monotonic mixing of the agents' Q-values by state-conditioned hypernetworks"
)
