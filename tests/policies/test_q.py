"""Value-based MARL (policies/q): targets, the mixer's monotonicity, the replay of whole
episodes, the epsilon schedule, PyMARL's and pymarl2's settings, capabilities."""

import dataclasses

import numpy as np
import pytest
import torch

from policies import algorithm
from policies.algorithm import AlgorithmMismatch
from policies.batch import BatchSpec
from policies.iql import INDEPENDENT
from policies.q import PYMARL2_COMMON, QSettings
from policies.q.learner import td_lambda_targets
from policies.q.replay import EpisodeReplay, ReplayError
from policies.q.trainer import epsilon
from policies.qmix import MONOTONIC
from policies.qmix.mixer import _Hypernets, mix
from policies.sampling import Episode
from policies.vdn import SUM


def test_one_step_targets_bootstrap_until_the_episode_terminates():
    # Two episodes of T=3 steps (the second ends after 2 by termination), gamma 0.5.
    rewards = torch.tensor([[1.0, 2.0, 3.0], [1.0, 2.0, 0.0]])
    terminated = torch.tensor([[0.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
    q_next = torch.tensor([[10.0, 20.0, 30.0, 40.0], [10.0, 20.0, 30.0, 40.0]])
    got = td_lambda_targets(rewards, terminated, mask, q_next, 0.5, 0.0)
    want = torch.tensor([[1 + 10.0, 2 + 15.0, 3 + 20.0], [1 + 10.0, 2.0, 0.0]])
    torch.testing.assert_close(got, want)


def test_td_lambda_targets_mix_n_step_returns():
    # One episode, gamma 1, lambda 0.5, truncated after 2 steps (bootstraps from Q(s2)).
    r = torch.tensor([[1.0, 1.0]])
    q = torch.tensor([[0.0, 4.0, 8.0]])
    got = td_lambda_targets(r, torch.zeros(1, 2), torch.ones(1, 2), q, 1.0, 0.5)
    g1 = 1 + 8.0  # from step 1: the one-step return (the last step)
    g0 = 1 + 0.5 * 4.0 + 0.5 * g1  # r0 + (1 - lambda) Q(s1) + lambda G1
    torch.testing.assert_close(got, torch.tensor([[g0, g1]]))


def test_qmix_is_monotonic_in_every_agents_q_value():
    """QMIX's defining constraint (Rashid et al. 2018, eq. 5): dQ_tot/dQ_a >= 0 for every
    state and agent, so the agents' greedy actions are the team's. Fails if the abs on the
    hypernetworks' weights is dropped."""
    torch.manual_seed(0)
    nets = _Hypernets(state_dim=6, n_agents=4, embed=8, layers=2, hyper=16)
    states = torch.randn(64, 5, 6) * 3
    qs = (torch.randn(64, 5, 4) * 5).requires_grad_(True)
    q_tot = mix(qs, nets(states))
    assert q_tot.shape == (64, 5)
    (grad,) = torch.autograd.grad(q_tot.sum(), qs)
    assert (grad >= 0).all() and (grad > 0).any()


def test_epsilon_falls_linearly_then_stays():
    assert epsilon(0, 1.0, 0.05, 50_000) == 1.0
    assert epsilon(25_000, 1.0, 0.05, 50_000) == pytest.approx(0.525)
    assert epsilon(50_000, 1.0, 0.05, 50_000) == pytest.approx(0.05)
    assert epsilon(10**7, 1.0, 0.05, 50_000) == 0.05


def _episode(length: int, terminated: bool, value: float, K: int = 2) -> Episode:
    obs = np.full((length + 1, K, 3), value, np.float32)
    mask = np.ones((length + 1, K, 4), np.float32)
    return Episode(
        {"shared": {"obs": obs, "action_mask": mask, "agent_id": np.zeros((length + 1, K, K))}},
        {"shared": np.full((length, K), int(value) % 4)},
        np.full((length, K), value, np.float32),
        np.full((length + 1, 5), value, np.float32),
        terminated,
    )


def test_the_replay_keeps_whole_episodes_and_samples_them_padded():
    spec = BatchSpec(obs_shape=(3,), mask_dim=4, num_ids=2)
    replay = EpisodeReplay(3, {"shared": spec}, {"shared": 2}, state_dim=5, team_reward="sum")
    replay.add([_episode(2, True, 1.0), _episode(4, False, 2.0)])
    assert replay.size == 2 and not replay.can_sample(3)
    batch = replay.sample(2, np.random.default_rng(0))
    order = np.argsort(batch["shared"]["filled"].sum(1))  # the short episode first
    b = {k: v[order] for k, v in batch["shared"].items() if k != "obs"}
    assert batch["shared"]["obs"]["obs"].shape == (2, 5, 2, 3)  # padded to the longer, T + 1
    assert batch["shared"]["obs"]["agent_id"][0, 0].tolist() == [[1, 0], [0, 1]]
    assert b["filled"].tolist() == [[1, 1, 0, 0], [1, 1, 1, 1]]
    assert b["terminated"].tolist() == [[0, 1, 0, 0], [0, 0, 0, 0]]  # the truncated one: none
    assert b["reward"][0].tolist() == [2.0, 2.0, 0.0, 0.0]  # summed over 2 agents, then pads
    assert batch["state"].shape == (2, 5, 5)
    # A longer episode regrows the slots; a full ring overwrites the oldest.
    replay.add([_episode(6, True, 3.0), _episode(1, True, 4.0)])
    assert replay.size == 3 and replay.T == 6
    lengths = sorted(replay.arrays["length"].tolist())
    assert lengths == [1, 4, 6]
    # What a checkpoint keeps comes back the same.
    again = EpisodeReplay(3, {"shared": spec}, {"shared": 2}, state_dim=5, team_reward="sum")
    again.set_state(replay.get_state())
    rng_a, rng_b = np.random.default_rng(5), np.random.default_rng(5)
    x, y = replay.sample(3, rng_a), again.sample(3, rng_b)
    for key in ("reward", "filled", "terminated", "actions"):
        np.testing.assert_array_equal(x["shared"][key], y["shared"][key])
    np.testing.assert_array_equal(x["shared"]["obs"]["obs"], y["shared"]["obs"]["obs"])


def test_a_replay_that_cannot_fit_is_refused_with_its_size():
    spec = BatchSpec(obs_shape=(100_000,))
    replay = EpisodeReplay(10**6, {"shared": spec}, {"shared": 8}, state_dim=0)
    with pytest.raises(ReplayError, match="GiB.*use a smaller buffer_size"):
        replay.add([_episode(2, True, 1.0)])


def test_defaults_are_pymarls_published_smac_settings():
    """oxwhirl/pymarl at c971afd: default.yaml, algs/qmix.yaml, envs/sc2.yaml."""
    s = QSettings()
    pymarl = {
        "lr": 0.0005, "optimizer": "rmsprop", "optim_alpha": 0.99, "optim_eps": 0.00001,
        "gamma": 0.99, "grad_norm_clip": 10.0, "batch_size": 32, "buffer_size": 5000,
        "batch_size_run": 1, "target_update_interval": 200, "epsilon_start": 1.0,
        "epsilon_finish": 0.05, "epsilon_anneal_time": 50000, "double_q": True,
        "td_lambda": 0.0, "loss_scale": 1.0, "mixing_embed_dim": 32, "hypernet_layers": 2,
        "hypernet_embed": 64, "test_interval": 10000, "test_nepisode": 32,
    }  # fmt: skip
    assert {k: getattr(s, k) for k in pymarl} == pymarl
    assert dataclasses.asdict(s.model) == {
        "hidden": 64, "recurrent": True, "agent_id": True, "last_action": True
    }  # fmt: skip


# hijkzzz/pymarl2 at 8ccac7c, field by field: (pymarl2 file: key = value) -> our field.
PYMARL2_FILES = {
    "qmix": {
        "algs/qmix.yaml: batch_size_run": ("batch_size_run", 8),
        "algs/qmix.yaml: buffer_size": ("buffer_size", 5000),
        "algs/qmix.yaml: batch_size": ("batch_size", 128),
        "algs/qmix.yaml: optimizer": ("optimizer", "adam"),
        "algs/qmix.yaml: lr": ("lr", 0.001),
        "algs/qmix.yaml: td_lambda": ("td_lambda", 0.6),
        "algs/qmix.yaml: epsilon_anneal_time": ("epsilon_anneal_time", 100000),
        "algs/qmix.yaml: target_update_interval": ("target_update_interval", 200),
        "algs/qmix.yaml: mixing_embed_dim": ("mixing_embed_dim", 32),
        "algs/qmix.yaml: hypernet_embed": ("hypernet_embed", 64),
        "learners/nq_learner.py: 0.5 * td_error.pow(2)": ("loss_scale", 0.5),
        "learners/nq_learner.py: max over the online network": ("double_q", True),
        "default.yaml: gamma": ("gamma", 0.99),
        "default.yaml: grad_norm_clip": ("grad_norm_clip", 10.0),
        "default.yaml: rnn_hidden_dim": ("model.hidden", 64),
        "default.yaml: obs_agent_id": ("model.agent_id", True),
        "default.yaml: obs_last_action": ("model.last_action", True),
    },
    "vdn": {
        "algs/vdn.yaml: batch_size_run": ("batch_size_run", 8),
        "algs/vdn.yaml: buffer_size": ("buffer_size", 5000),
        "algs/vdn.yaml: batch_size": ("batch_size", 128),
        "algs/vdn.yaml: optimizer": ("optimizer", "adam"),
        "algs/vdn.yaml: lr": ("lr", 0.001),
        "algs/vdn.yaml: td_lambda": ("td_lambda", 0.6),
        "algs/vdn.yaml: epsilon_anneal_time": ("epsilon_anneal_time", 100000),
        "algs/vdn.yaml: target_update_interval": ("target_update_interval", 200),
        "learners/nq_learner.py: 0.5 * td_error.pow(2)": ("loss_scale", 0.5),
    },
    "iql": {
        "algs/iql.yaml: batch_size_run": ("batch_size_run", 8),
        "algs/iql.yaml: buffer_size": ("buffer_size", 5000),
        "algs/iql.yaml: optimizer": ("optimizer", "adam"),
        "algs/iql.yaml: double_q": ("double_q", True),
        "algs/iql.yaml: epsilon_anneal_time": ("epsilon_anneal_time", 100000),
        "algs/iql.yaml: target_update_interval": ("target_update_interval", 200),
        "default.yaml: batch_size": ("batch_size", 32),
        "default.yaml: lr": ("lr", 0.0005),
        "learners/q_learner.py: 0.5 * (masked_td_error ** 2)": ("loss_scale", 0.5),
        "learners/q_learner.py: one-step targets": ("td_lambda", 0.0),
    },
}


@pytest.mark.parametrize("name", sorted(PYMARL2_FILES))
def test_the_pymarl2_preset_is_pymarl2s_config_field_by_field(name):
    info = algorithm.get(name)
    s = info.prepared("smac/5m_vs_6m-v0", info.settings(preset="pymarl2"))
    for source, (key, want) in PYMARL2_FILES[name].items():
        target = s.model if key.startswith("model.") else s
        got = getattr(target, key.removeprefix("model."))
        assert got == want, f"{source}: {key} is {got!r}, pymarl2 has {want!r}"
    mixer = {"qmix": MONOTONIC, "vdn": SUM, "iql": INDEPENDENT}[name]
    assert {*PYMARL2_COMMON, *mixer.pymarl2} <= {k for k, _ in PYMARL2_FILES[name].values()}
    # qmix.yaml's comments: 6h_vs_8z anneals epsilon over 500,000 steps with lambda 0.3
    if name == "qmix":
        hard = info.prepared("smac/6h_vs_8z-v0", info.settings(preset="pymarl2"))
        assert (hard.epsilon_anneal_time, hard.td_lambda) == (500_000, 0.3)


def test_a_preset_refuses_knobs_it_sets_itself():
    info = algorithm.get("qmix")
    with pytest.raises(AlgorithmMismatch, match="preset=pymarl2 sets lr"):
        info.prepared("smac/3m-v0", info.settings(preset="pymarl2", lr=0.01))
    with pytest.raises(AlgorithmMismatch, match="preset="):
        info.prepared("smac/3m-v0", info.settings(preset="pymarl3"))


def test_mixers_refuse_what_they_cannot_mix():
    qmix, vdn, iql = (algorithm.get(n) for n in ("qmix", "vdn", "iql"))
    with pytest.raises(AlgorithmMismatch, match="qmix cannot train mpe/simple_spread_continuous"):
        qmix.build("mpe/simple_spread_continuous-v3", qmix.settings())
    with pytest.raises(AlgorithmMismatch, match="vdn cannot train .* 2 agent groups"):
        vdn.build("mpe/simple_speaker_listener-v4", vdn.settings())
    with pytest.raises(AlgorithmMismatch, match="no global state"):
        algorithm.get("qmix").check(
            algorithm.EnvFacts(
                "x/y-v0", frozenset({"discrete"}), False, 1, frozenset({"vector"}), 0
            )
        )
    # independent learners take a module per group
    specs = iql.modules("mpe/simple_speaker_listener-v4", iql.settings())
    assert set(specs.rl_module_specs) == {"speaker", "listener"}
    with pytest.raises(AlgorithmMismatch, match="freezing .* only"):
        vdn.build("test/masked_grid-v0", vdn.settings(), sharing="per_agent", frozen=("a0",))


@pytest.mark.parametrize(
    "knob, value",
    [("lr", 1e30), ("lr", 0.0), ("batch_size", 0), ("batch_size", 6000), ("buffer_size", 10**9),
     ("epsilon_finish", 1.5), ("td_lambda", -0.1), ("optimizer", "sgd"), ("hypernet_layers", 3),
     ("team_reward", "max"), ("gamma", float("nan")), ("batch_size_run", 0), ("hysteresis", 1.5), ("hysteresis", -0.1)],
)  # fmt: skip
def test_bad_settings_are_refused_with_their_name(knob, value):
    s = QSettings(**{knob: value})
    with pytest.raises(ValueError, match=knob if value == value else "not finite"):
        s.validate()
