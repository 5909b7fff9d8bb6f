"""Starting PPO from demonstrations (``policies.ppo.demos``): returns-to-go per episode, and a
built ippo algorithm whose Learner and EnvRunner both act as the demonstrator after the warm
start."""

import numpy as np
import pytest
import torch

from envs.demos import load_demos, save_demos
from policies import algorithm
from policies.ppo.demos import discounted_returns


def test_returns_restart_at_each_episode():
    reward = np.array([1.0, 0.0, 2.0, 5.0, 1.0], np.float32)
    episode = np.array([0, 0, 0, 1, 1])
    got = discounted_returns(reward, episode, 0.5)
    np.testing.assert_allclose(got, [1.0 + 0.0 + 0.5, 1.0, 2.0, 5.5, 1.0])


def test_a_malformed_demos_file_is_named(tmp_path):
    bad = tmp_path / "bad.npz"
    np.savez(bad, obs=np.zeros((3, 2)), act=np.zeros((3, 1)))
    with pytest.raises(ValueError, match=r"bad.npz is not a demos file: it has no reward"):
        load_demos(bad)
    with pytest.raises(ValueError, match="cannot read demos"):
        load_demos(tmp_path / "missing.npz")


def _demonstrator(obs: np.ndarray) -> np.ndarray:
    w = np.random.default_rng(1).normal(0, 0.3, (obs.shape[1], 4))
    return np.tanh(obs @ w).astype(np.float32)


def test_the_trained_module_starts_as_the_demonstrator(ray_session, tmp_path):
    env_id = "volleyball/hover-v0"
    info = algorithm.get("ippo")
    spec = info.modules(env_id, info.settings()).rl_module_specs["shared"]
    (dim,) = spec.build().spec.obs_shape
    obs = np.random.default_rng(0).normal(0, 1, (2048, dim)).astype(np.float32)
    act = _demonstrator(obs)
    path = tmp_path / "demos.npz"
    save_demos(path, {"obs": obs, "act": act, "reward": np.ones(len(obs), np.float32),
                      "episode": np.repeat(np.arange(16), 128)})  # fmt: skip
    settings = info.settings(
        train_batch_size=256, minibatch_size=128, num_envs_per_env_runner=8, demos=str(path),
        demo_epochs=40, demo_log_std=-2.0,
    )  # fmt: skip
    algo = info.build(env_id, settings, seed=0).build_algo()
    try:

        def error(module) -> float:
            batch = module.spec.pack(obs, None, None, np.zeros(len(obs), int))
            with torch.no_grad():
                out, _ = module.actor({"obs": {k: torch.as_tensor(v) for k, v in batch.items()}})
            return float(np.mean((out[:, :4].numpy() - act) ** 2))

        before = error(algo.env_runner.module["shared"])
        said = info.warm_start(algo, settings)
        assert said.startswith("cloned 2048 steps of 16 demonstrated episodes into shared")
        learner = algo.learner_group._learner.module["shared"]
        for module in (learner, algo.env_runner.module["shared"]):
            assert error(module) < 0.01 < before
            assert module.log_std.detach().numpy() == pytest.approx(-2.0)
    finally:
        algo.stop()


def test_demos_that_fit_no_module_are_refused(ray_session, tmp_path):
    path = tmp_path / "demos.npz"
    save_demos(path, {"obs": np.zeros((4, 5), np.float32), "act": np.zeros((4, 4), np.float32),
                      "reward": np.zeros(4, np.float32), "episode": np.zeros(4, int)})  # fmt: skip
    info = algorithm.get("ippo")
    settings = info.settings(
        train_batch_size=64, minibatch_size=64, num_envs_per_env_runner=4, demos=str(path)
    )
    algo = info.build("volleyball/hover-v0", settings, seed=0).build_algo()
    try:
        with pytest.raises(algorithm.AlgorithmMismatch, match=r"shape \(5,\) fit no trained"):
            info.warm_start(algo, settings)
    finally:
        algo.stop()
    settings.demos = str(tmp_path / "nope.npz")
    algo = info.build("volleyball/hover-v0", settings, seed=0).build_algo()
    try:
        with pytest.raises(algorithm.AlgorithmMismatch, match="demos: cannot read demos"):
            info.warm_start(algo, settings)
    finally:
        algo.stop()
