"""The contract every registered env keeps; the parameter list is the registry itself."""

import pickle

import gymnasium as gym
import numpy as np
import pytest
from pettingzoo.test import parallel_api_test, parallel_seed_test

import envs

IDS = envs.ids()


@pytest.mark.parametrize("env_id", IDS)
def test_parallel_api(env_id):
    parallel_api_test(envs.make(env_id), num_cycles=50)


def _masked(env) -> bool:
    space = env.observation_space(env.possible_agents[0])
    return isinstance(space, gym.spaces.Dict) and "action_mask" in space.spaces


def _rollout(env_id, seed, steps=40):
    """Observations and rewards of ``steps`` steps with seeded random legal actions."""
    env = envs.make(env_id)
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed)
    trace = []
    for _ in range(steps):
        if not env.agents:
            obs, _ = env.reset()
        actions = {}
        for a in env.agents:
            if _masked(env):
                actions[a] = int(rng.choice(np.flatnonzero(obs[a]["action_mask"])))
            else:
                space = env.action_space(a)
                space.seed(int(rng.integers(2**31)))
                actions[a] = space.sample()
        obs, rew, _, _, _ = env.step(actions)
        trace.append((pickle.dumps(obs), sorted(rew.items())))
    return trace


@pytest.mark.parametrize("env_id", IDS)
def test_seed_determinism(env_id):
    if not _masked(envs.make(env_id)):  # PettingZoo's test ignores masks
        parallel_seed_test(lambda: envs.make(env_id), num_cycles=50)
    assert _rollout(env_id, 7) == _rollout(env_id, 7)


@pytest.mark.parametrize("env_id", IDS)
def test_metadata_and_cached_spaces(env_id):
    env = envs.make(env_id)
    assert env.metadata.get("render_modes") and "is_parallelizable" in env.metadata
    assert env.possible_agents
    for agent in env.possible_agents:
        assert env.observation_space(agent) is env.observation_space(agent)
        assert env.action_space(agent) is env.action_space(agent)


@pytest.mark.parametrize("env_id", IDS)
def test_reset_is_deterministic_by_seed_and_pickles(env_id):
    env = envs.make(env_id)
    a, _ = env.reset(seed=3)
    clone = pickle.loads(pickle.dumps(env))
    b, _ = clone.reset(seed=3)
    c, _ = envs.make(env_id).reset(seed=4)

    def flat(o):
        return np.concatenate(
            [np.ravel(v["observations"] if isinstance(v, dict) else v) for v in o.values()]
        )  # noqa: E731

    np.testing.assert_array_equal(flat(a), flat(b))
    assert not np.array_equal(flat(a), flat(c))


@pytest.mark.parametrize("env_id", IDS)
def test_state_and_rgb_render(env_id):
    env = envs.make(env_id, render_mode="rgb_array")
    env.reset(seed=0)
    state = np.asarray(env.state())
    assert state.ndim == 1 and state.size > 0
    frame = env.render()
    assert frame.ndim == 3 and frame.shape[2] == 3 and frame.dtype == np.uint8
    env.close()
