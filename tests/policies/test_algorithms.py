"""Two-iteration training smoke tests per algorithm, and the masking path."""

import numpy as np
import pytest
import torch

from policies.algorithms import ALGORITHMS, PPOSettings, build
from policies.modules import SharedActorCritic

SMALL = dict(train_batch_size=256, minibatch_size=128, num_epochs=2, num_envs_per_env_runner=8)


@pytest.mark.parametrize("algo", sorted(ALGORITHMS))
@pytest.mark.parametrize("env_id", ["mpe/simple_spread-v3", "mpe/simple_spread_continuous-v3"])
def test_two_iterations_train(ray_session, algo, env_id):
    algorithm = build(env_id, algo, PPOSettings(**SMALL), seed=0).build_algo()
    before = {k: v.clone() for k, v in algorithm.get_module().state_dict().items()}
    for _ in range(2):
        result = algorithm.train()
    learner = result["learners"]["default_policy"]
    assert np.isfinite(learner["policy_loss"]) and np.isfinite(learner["vf_loss"])
    assert result["env_runners"]["num_env_steps_sampled_lifetime"] >= 512
    after = algorithm.get_module().state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before)
    algorithm.stop()


def test_mappo_with_masks_never_samples_illegal_actions(ray_session):
    algorithm = build("test/masked_grid-v0", "mappo", PPOSettings(**SMALL)).build_algo()
    algorithm.train()  # the env raises on an illegal action
    episodes = algorithm.env_runner.sample(num_timesteps=64)
    lay = algorithm.env_runner.layout
    assert lay.mask_dim == 3
    for e in episodes:
        x, a = e.get_observations()[:-1], e.get_actions()
        masks = x[:, lay.obs_dim : lay.obs_dim + 3]
        assert masks[np.arange(len(a)), a].all()
    algorithm.stop()


def test_masked_logits_are_minus_infinity_like():
    import gymnasium as gym

    module = SharedActorCritic(
        observation_space=gym.spaces.Box(-1, 1, (5,)),
        action_space=gym.spaces.Discrete(2),
        model_config={"obs_dim": 3, "mask_dim": 2, "critic_dim": 0, "num_agents": 1},
    )
    x = torch.tensor([[0.1, 0.2, 0.3, 1.0, 0.0]])
    logits = module.action_dist_inputs(x)
    assert logits[0, 1] < -1e30 and torch.softmax(logits, -1)[0, 0] == 1.0


def test_remote_env_runner_trains(ray_session):
    algorithm = build(
        "mpe/simple_spread-v3", "ippo", PPOSettings(**SMALL), num_env_runners=1
    ).build_algo()
    result = algorithm.train()
    assert result["env_runners"]["num_env_steps_sampled_lifetime"] >= 256
    algorithm.stop()


def test_masked_mappo_trains_on_smac_with_the_global_state(ray_session):
    algorithm = build("smac/3m-v0", "mappo", PPOSettings(**SMALL), seed=0).build_algo()
    lay = algorithm.env_runner.layout
    assert (lay.obs_dim, lay.mask_dim, lay.critic_dim) == (30, 9, 48 + 3)
    for _ in range(2):
        result = algorithm.train()  # the core raises on any unavailable action
    runners = result["env_runners"]
    assert 0.0 <= runners["win_rate"] <= 1.0
    assert np.isfinite(result["learners"]["default_policy"]["vf_loss"])
    algorithm.stop()
