"""VMAS Dispersion and Navigation (envs.mpe.vmas) against the rules of VMAS's scenarios:
eating, rewards, termination, spawning, observations, collisions, lidar and the point-mass
physics (proroklab/VectorizedMultiAgentSimulator: vmas/scenarios/dispersion.py,
navigation.py, vmas/simulator/core.py)."""

import numpy as np
import pytest

import envs
from envs.mpe.vmas import DISCRETE_FORCE, DispersionBatch, NavigationBatch, VMASNavigationBatch

STAY = 0  # VMAS's flat discrete action 3 * ax + ay, each axis 0 stay, 1 -1, 2 +1


def stay(core) -> dict:
    return {"agent": np.full((core.num_envs, core.n), STAY)}


def test_discrete_actions_are_vmas_stay_decrement_increment_per_axis():
    assert DISCRETE_FORCE.shape == (9, 2)
    np.testing.assert_array_equal(DISCRETE_FORCE[0], [0, 0])
    np.testing.assert_array_equal(DISCRETE_FORCE[1], [0, -1])  # ax stay, ay -1
    np.testing.assert_array_equal(DISCRETE_FORCE[2], [0, 1])
    np.testing.assert_array_equal(DISCRETE_FORCE[3], [-1, 0])
    np.testing.assert_array_equal(DISCRETE_FORCE[8], [1, 1])


def test_point_mass_physics_drag_then_force_then_position():
    core = DispersionBatch(1, seed=0, n_agents=1)
    core.reset()
    core.food[:] = 0.9  # out of the way
    core.vel[0, 0] = [0.4, 0.0]
    core.step({"agent": np.array([[8]])})  # force (+1, +1)
    v = np.array([0.4 * 0.75 + 0.1, 0.1])  # v <- 0.75 v + F dt
    np.testing.assert_allclose(core.vel[0, 0], v)
    np.testing.assert_allclose(core.pos[0, 0], v * 0.1)
    core.pos[0, 0] = [0.999, 0.0]
    core.vel[0, 0] = [5.0, 0.0]
    core.step(stay(core))
    assert core.pos[0, 0, 0] == 1.0  # clamped to the world's half-width


def test_navigation_takes_two_substeps():
    core = NavigationBatch(1, seed=0, n_agents=1)
    core.reset()
    p0 = core.pos[0, 0].copy()
    core.step({"agent": np.array([[8]])})
    # substep: v += F dt/2, p += v dt/2, twice
    v1 = 0.05
    v2 = v1 + 0.05
    np.testing.assert_allclose(core.pos[0, 0] - p0, [(v1 + v2) * 0.05] * 2)
    np.testing.assert_allclose(core.vel[0, 0], [v2, v2])


def test_dispersion_reset_and_observation():
    core = DispersionBatch(3, seed=5)
    step = core.reset()
    assert (core.pos == 0).all() and (np.abs(core.food) <= 1).all()
    obs = step.obs["agent"]
    assert obs.shape == (3, 4, 16) and obs.dtype == np.float32
    np.testing.assert_allclose(obs[:, 0, 4:6], core.food[:, 0], rtol=1e-6)  # food minus own pos
    assert (obs[:, :, 6::3] == 0).all()  # nothing eaten yet
    assert step.state.shape == (3, 64)


def test_eating_rewards_individual_shares_and_flags():
    core = DispersionBatch(1, seed=0, max_steps=50)
    core.reset()
    core.food[0] = [[0.5, 0.5], [-0.5, 0.5], [0.5, -0.5], [-0.5, -0.5]]
    core.pos[0] = [[0.5, 0.5], [0.52, 0.5], [0.0, 0.0], [0.0, 0.0]]  # agents 0, 1 on food 0
    step = core.step(stay(core))
    np.testing.assert_allclose(step.rewards[0], [0.5, 0.5, 0, 0])
    assert core.eaten[0].tolist() == [True, False, False, False]
    assert (step.obs["agent"][0, :, 6] == 1).all()  # every agent sees food 0 eaten
    step = core.step(stay(core))  # still on it: eaten food pays nothing
    np.testing.assert_allclose(step.rewards[0], 0)
    # reach: within 0.035 + 0.05 of the food's centre
    core.pos[0, 2] = [-0.5 + 0.084, 0.5]
    core.pos[0, 3] = [0.5 + 0.086, -0.5]
    step = core.step(stay(core))
    np.testing.assert_allclose(step.rewards[0], [0, 0, 1, 0])
    assert not step.terminated[0]
    core.pos[0, 3] = [0.5, -0.5]
    core.pos[0, 0] = [-0.5, -0.5]
    step = core.step(stay(core))
    np.testing.assert_allclose(step.rewards[0], [1, 0, 0, 1])
    assert step.terminated[0] and not step.truncated[0]  # all food eaten
    assert (step.final_obs["agent"][0, :, 6::3] == 1).all()
    assert (core.pos[0] == 0).all() and not core.eaten[0].any()  # reset for the next episode


def test_shared_reward_and_time_penalty():
    core = DispersionBatch(1, seed=0, share_reward=True)
    core.reset()
    core.food[0] = [[0.5, 0.5], [-0.5, 0.5], [0.9, 0.9], [-0.9, -0.9]]
    core.pos[0] = [[0.5, 0.5], [0.5, 0.5], [-0.5, 0.5], [0.0, 0.0]]
    step = core.step(stay(core))
    np.testing.assert_allclose(step.rewards[0], [2, 2, 2, 2])  # two foods eaten this step
    core = DispersionBatch(1, seed=0, penalise_by_time=True)
    core.reset()
    core.food[0] = 0.9
    step = core.step(stay(core))
    np.testing.assert_allclose(step.rewards[0], -0.01)


def test_dispersion_truncates_at_max_steps():
    core = DispersionBatch(2, seed=0, max_steps=3)
    core.reset()
    core.food[:] = 0.9
    for _ in range(3):
        step = core.step(stay(core))
    assert step.truncated.all() and not step.terminated.any()


def test_navigation_spawn_rewards_and_end():
    core = NavigationBatch(16, seed=3)
    step = core.reset()
    assert (core.goal == core.goal[:, :1]).all()  # one goal for all agents
    everything = np.concatenate([core.pos, core.goal[:, :1]], axis=1)  # [B, N + 1, 2]
    d = np.linalg.norm(everything[:, :, None] - everything[:, None], axis=-1)
    assert (d[:, ~np.eye(5, dtype=bool)] >= 0.25).all() and (np.abs(everything) <= 1).all()
    np.testing.assert_allclose(
        step.obs["agent"][..., 4:], core.pos - core.goal, rtol=1e-5, atol=1e-6
    )
    before = np.linalg.norm(core.pos - core.goal, axis=-1)
    actions = np.random.default_rng(0).integers(0, 9, (16, 4))
    step = core.step({"agent": actions})
    after = np.linalg.norm(core.pos - core.goal, axis=-1)
    shared = (before - after).sum(axis=1)  # every agent gets the team's progress
    np.testing.assert_allclose(step.rewards, np.repeat(shared[:, None], 4, axis=1), atol=1e-6)
    # all agents on the goal: final reward and the episode ends
    core.pos[0], core.vel[0] = core.goal[0], 0.0
    core.shaping[0] = 0.0
    step = core.step(stay(core))
    assert step.terminated[0]
    np.testing.assert_allclose(step.rewards[0], 0.01, atol=1e-6)


def still(core) -> dict:
    return {"agent": np.zeros((core.num_envs, core.n, 2))}


def test_vmas_navigation_spawns_a_goal_per_agent_and_observes_lidar():
    core = VMASNavigationBatch(8, seed=0, continuous_actions=True)
    step = core.reset()
    everything = np.concatenate([core.pos, core.goal], axis=1)  # [B, 2N, 2]: all distinct
    d = np.linalg.norm(everything[:, :, None] - everything[:, None], axis=-1)
    assert (d[:, ~np.eye(8, dtype=bool)] >= 0.25).all()
    assert step.obs["agent"].shape == (8, 4, 4 + 2 + 12)  # pos, vel, own goal, 12 rays
    np.testing.assert_allclose(step.obs["agent"][..., 4:6], core.pos - core.goal, atol=1e-6)
    # who shares which goal (navigation.py reset_world_at)
    assert VMASNavigationBatch(1, n_agents=4).goal_index.tolist() == [0, 1, 2, 3]
    same = NavigationBatch(1, n_agents=4, agents_with_same_goal=2)
    assert same.goal_index.tolist() == [0, 0, 2, 3]
    split = NavigationBatch(1, n_agents=8, agents_with_same_goal=4, split_goals=True)
    assert split.goal_index.tolist() == [0, 0, 0, 0, 1, 1, 1, 1]
    split.reset()
    assert (split.goal[0, :4] == split.goal[0, 0]).all() and (
        split.goal[0, 4:] == split.goal[0, 4]
    ).all()
    assert not np.allclose(split.goal[0, 0], split.goal[0, 4])
    every = NavigationBatch(1, n_agents=2, observe_all_goals=True)
    every.reset()
    obs = every._observe()[0]
    np.testing.assert_allclose(
        obs[0, 4:8],
        np.concatenate([every.pos[0, 0] - every.goal[0, 0], every.pos[0, 0] - every.goal[0, 1]]),
        rtol=1e-5,
    )


def test_vmas_navigation_lidar_by_hand():
    """Agent 0 at the origin, agent 1 at (0.3, 0): ray 0 (angle 0) meets agent 1's disc at
    0.3 - 0.1 = 0.2, so it reads 0.35 - 0.2 = 0.15; the ray at 30 degrees passes 0.15 from its
    centre (a miss, reads 0); agent 1's ray 6 (angle pi) reads 0.15 too."""
    core = VMASNavigationBatch(1, seed=0, n_agents=3, continuous_actions=True)
    core.reset()
    core.pos[0] = [[0.0, 0.0], [0.3, 0.0], [-0.9, 0.9]]
    lidar = core.lidar()[0]
    np.testing.assert_allclose(core.options.lidar_range - lidar[0, 0], 0.15)
    assert lidar[0, 1] == 0.35 and lidar[2].min() == 0.35
    np.testing.assert_allclose(lidar[1, 6], 0.2)
    # off-centre hit: agent 1 at (0.3, 0.06), ray 0 enters at x = 0.3 - sqrt(0.01 - 0.0036)
    core.pos[0, 1] = [0.3, 0.06]
    np.testing.assert_allclose(core.lidar()[0, 0, 0], 0.3 - np.sqrt(0.01 - 0.0036))
    obs = core._observe()[0]
    np.testing.assert_allclose(obs[0, 6:], 0.35 - core.lidar()[0, 0], rtol=1e-6)


def test_vmas_navigation_rewards_collisions_and_done_by_hand():
    core = VMASNavigationBatch(1, seed=0, n_agents=2, shared_rew=False, continuous_actions=True)
    core.reset()
    # own progress: agent 0 from 0.5 to its goal 0.4 away after a step of force (1, 0)
    core.pos[0] = [[-0.5, 0.5], [0.5, -0.5]]
    core.goal[0] = [[0.0, 0.5], [0.5, 0.5]]
    core.vel[0] = 0.0
    core.shaping[0] = [0.5, 1.0]
    step = core.step({"agent": np.array([[[1.0, 0.0], [0.0, 0.0]]])})
    dx = (0.05 + 0.1) * 0.05  # two substeps of dt 0.05: v = 0.05 then 0.1
    np.testing.assert_allclose(step.rewards[0], [dx, 0.0], atol=1e-12)
    # touching (surfaces 0.002 apart, within 0.005): -1 each; no contact force yet (not overlapping)
    core.pos[0] = [[0.0, 0.0], [0.202, 0.0]]
    core.vel[0], core.shaping[0] = 0.0, np.linalg.norm(core.pos[0] - core.goal[0], axis=-1)
    step = core.step(still(core))
    np.testing.assert_allclose(step.rewards[0], [-1.0, -1.0], atol=1e-12)
    np.testing.assert_allclose(core.pos[0], [[0.0, 0.0], [0.202, 0.0]])
    core.pos[0] = [[0.0, 0.0], [0.21, 0.0]]  # 0.01 apart: no penalty
    core.shaping[0] = np.linalg.norm(core.pos[0] - core.goal[0], axis=-1)
    step = core.step(still(core))
    np.testing.assert_allclose(step.rewards[0], [0.0, 0.0], atol=1e-12)
    # overlapping by 0.01: VMAS's contact force 500 * k log(1 + e^(0.01 / k)), k = 1e-3, pushes
    # each away for the first substep (v = F dt', p += v dt'); apart after it, none in the second
    core.pos[0] = [[0.0, 0.0], [0.19, 0.0]]
    core.vel[0] = 0.0
    f = 500 * 1e-3 * np.logaddexp(0, 0.01 / 1e-3)
    v = f * 0.05
    core.step(still(core))
    np.testing.assert_allclose(core.vel[0], [[-v, 0], [v, 0]], rtol=1e-9)
    np.testing.assert_allclose(
        core.pos[0], [[-2 * v * 0.05, 0], [0.19 + 2 * v * 0.05, 0]], rtol=1e-9
    )
    # every agent on its goal: final reward, done
    core.pos[0], core.vel[0] = core.goal[0], 0.0
    core.shaping[0] = 0.0
    step = core.step(still(core))
    assert step.terminated[0]
    np.testing.assert_allclose(step.rewards[0], [0.01, 0.01], atol=1e-12)
    core.pos[0] = core.goal[0] + [[0.06, 0.0], [0.0, 0.0]]  # within its radius, off the goal
    core.vel[0], core.shaping[0] = 0.0, [0.06, 0.0]
    step = core.step(still(core))
    assert step.terminated[0]
    np.testing.assert_allclose(step.rewards[0], [0.0, 0.0], atol=1e-12)


def test_bad_arguments_are_clear_errors():
    with pytest.raises(envs.EnvError, match="n_agents must be an integer in 1..100"):
        envs.make("mpe/dispersion-v0", n_agents=0)
    with pytest.raises(envs.EnvError, match="food_radius must be a positive number"):
        envs.make_vector("mpe/dispersion-v0", 2, food_radius=-1)
    with pytest.raises(envs.EnvError, match="takes no argument"):
        envs.make("mpe/navigation-v0", n_food=3)
    with pytest.raises(envs.EnvError, match="cannot collide"):
        envs.make("mpe/vmas_navigation_continuous-v0", agents_with_same_goal=2)
    with pytest.raises(envs.EnvError, match="split_goals needs an even"):
        envs.make("mpe/navigation-v0", n_agents=4, agents_with_same_goal=3, split_goals=True)
    with pytest.raises(envs.EnvError, match="agents_with_same_goal must be an integer in 1..4"):
        envs.make("mpe/navigation-v0", agents_with_same_goal=5)


def test_pettingzoo_face_plays_the_core():
    env = envs.make("mpe/dispersion-v0", max_steps=5)
    obs, _ = env.reset(seed=1)
    core = DispersionBatch(1, seed=1, max_steps=5)
    np.testing.assert_array_equal(obs["agent_0"], core.reset().obs["agent"][0, 0])
    for _ in range(5):
        obs, rew, term, trunc, _ = env.step({a: 4 for a in env.agents})
    assert all(trunc.values()) and not env.agents
    assert env.render().shape == (256, 256, 3)
