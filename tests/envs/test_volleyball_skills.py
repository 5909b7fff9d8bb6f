"""The hierarchical 3v3 team's hitting drills (``envs.volleyball.skills``): where the ball
comes from, what the observation says, and how a skill's attempt ends and is scored."""

import numpy as np
import pytest

from envs.volleyball import skills
from envs.volleyball.core import HOVER_COMMAND
from envs.volleyball.physics import GRAVITY
from envs.volleyball.scene import NET_HEIGHT
from tests.envs.volleyball_helpers import hover, place_ball

DRILLS = (skills.Serve, skills.Pass, skills.Set, skills.Attack)


def _until_end(core, steps=300):
    for _ in range(steps):
        step = core.step(hover(core))
        if step.terminated[0] or step.truncated[0]:
            return step
    raise AssertionError("the drill did not end")


def test_launch_reaches_the_end_point_in_the_given_time():
    start = np.array([[-4.0, 1.0, 3.0], [5.0, 0.0, 2.2]])
    end = np.array([[4.5, 0.0, 2.0], [2.0, -2.0, 2.5]])
    t = np.array([1.2, 1.4])
    v = skills.launch(start, end, t)
    at = start + v * t[:, None] - [0, 0, 0.5 * GRAVITY] * t[:, None] ** 2
    np.testing.assert_allclose(at, end, atol=1e-9)


@pytest.mark.parametrize("cls", [skills.Pass, skills.Set, skills.Attack])
def test_the_ball_comes_down_within_reach_of_the_drone(cls):
    """MuJoCo's ball follows the launch: it passes within REACH (x, y) of where the drone
    started, above it, and a ball from the other half clears the net."""
    core = cls(64, seed=3)
    core.reset()
    drone = core.worlds.pos[:, 0].copy()
    closest = np.full(64, np.inf)
    for _ in range(80):
        x_before = core.worlds.ball_pos[:, 0].copy()
        core.worlds.step(np.full((64, 1, 4), HOVER_COMMAND))  # physics only: no rules
        ball = core.worlds.ball_pos
        crossing = (x_before < 0) & (ball[:, 0] >= 0)
        assert (ball[crossing, 2] > NET_HEIGHT).all()
        above = ball[:, 2] >= drone[:, 2]
        gap = np.abs(ball[:, :2] - drone[:, :2]).max(-1)
        closest = np.where(above, np.minimum(closest, gap), closest)
    assert (closest <= skills.REACH + 0.05).all(), closest.max()


def test_observation_layout():
    core = skills.Pass(2, seed=0)
    obs = core.reset().obs["drone"][:, 0]
    w = core.worlds
    assert obs.shape == (2, skills.SKILL_OBS)
    np.testing.assert_allclose(obs[:, 23:26], w.ball_pos - w.pos[:, 0], atol=1e-5)
    np.testing.assert_allclose(obs[:, 26:29], w.ball_vel, atol=1e-5)
    np.testing.assert_allclose(obs[:, 29:32], core.target - w.pos[:, 0], atol=1e-5)
    assert (obs[:, 32] == 0).all()


def test_serve_over_the_net_into_the_target_succeeds():
    core = skills.Serve(1, seed=0, auto_reset=False)
    core.reset()
    core.target[0] = [-4.0, 0.0, 0.0]
    core.touched[0] = True  # as if served: the ball flies from above the server
    start = np.array([[6.0, 0.0, 3.0]])
    place_ball(core, start, skills.launch(start, np.array([[-4.0, 0.5, 0.1]]), np.array([1.6])))
    step = _until_end(core)
    assert step.info["success"][0] == 1 and step.terminated[0]
    assert core.reward_terms["placement"][0, 0] > 10.0  # 5 for inside + the closeness
    assert core.reward_terms["fault"][0, 0] == 0


def test_serve_into_the_net_is_a_fault():
    core = skills.Serve(1, seed=0, auto_reset=False)
    core.reset()
    core.touched[0] = True
    place_ball(core, [[4.5, 0.0, 2.2]], [[-8.0, 0.0, 0.0]])
    step = _until_end(core)
    assert step.info["success"][0] == 0
    assert core.reward_terms["fault"][0, 0] == -10.0
    assert abs(core.worlds.ball_pos[0, 0]) < 0.5  # it ended at the net


def test_pass_coming_down_at_the_setter_succeeds_and_one_across_the_net_fails():
    core = skills.Pass(1, seed=0, auto_reset=False)
    core.reset()
    core.target[0] = [2.0, -2.0, 2.0]
    core.touched[0] = True
    start = np.array([[4.5, 0.0, 2.5]])
    place_ball(core, start, skills.launch(start, np.array([[2.2, -1.8, 1.95]]), np.array([1.3])))
    step = _until_end(core)
    assert step.info["success"][0] == 1
    assert core.reward_terms["placement"][0, 0] == pytest.approx(
        10 / (1 + (np.linalg.norm(core.worlds.ball_pos[0, :2] - [2.0, -2.0]) / 2) ** 2), abs=1e-6
    )
    core.reset()
    core.touched[0] = True
    place_ball(core, start, skills.launch(start, np.array([[-2.0, 0.0, 2.0]]), np.array([1.3])))
    step = _until_end(core)
    assert step.info["success"][0] == 0 and core.reward_terms["fault"][0, 0] == -10.0


def test_a_ball_left_alone_is_a_miss():
    core = skills.Set(4, seed=1)
    core.reset()
    core.worlds.state[:, core.worlds.ball_qpos[:2]] += 1.5  # out of the drone's way
    core.worlds.read()
    for _ in range(200):
        step = core.step(hover(core))
        if step.info is not None:
            break
    assert (step.info["hit"][step.terminated] == 0).all()
    assert (core.reward_terms["fault"][step.terminated] == -10.0).all()


@pytest.mark.parametrize("cls", DRILLS)
def test_the_rule_machines_targets_lie_in_the_drills_ranges(cls):
    """The hierarchical team asks each skill for targets it was trained on."""
    from training.hierarchy import rules

    core = cls(256, seed=0)
    core.reset()
    low, high = core.target.min(0), core.target.max(0)
    machine = rules.RuleMachine(64, seed=0)
    machine.reset(np.arange(64), np.ones(64, bool))
    asked = {
        skills.Serve: machine.serve_target,
        skills.Pass: np.array([rules.PASS_TARGET]),
        skills.Set: np.array([rules.SET_TARGET]),
        skills.Attack: machine.attack_target,
    }[cls]
    assert (asked >= low - 0.05).all() and (asked <= high + 0.05).all(), (asked, low, high)


def test_intercept_is_where_the_ball_falls_through_the_height():
    start = np.array([[-3.0, 1.0, 3.0]])
    end = np.array([[4.0, -0.5, 2.1]])
    vel = skills.launch(start, end, np.array([1.4]))
    np.testing.assert_allclose(skills.intercept(start, vel, np.array([2.1])), end[:, :2], atol=1e-9)
    below = skills.intercept(
        np.array([[1.0, 2.0, 1.0]]), np.array([[3.0, 0.0, -1.0]]), np.array([2.0])
    )
    np.testing.assert_allclose(below, [[1.0, 2.0]])


def test_the_aim_of_a_serve_is_paid_at_the_hit_and_a_net_ball_gets_nothing():
    core = skills.Serve(2, seed=0, auto_reset=False)
    core.reset()
    core.target[:] = [-4.0, 0.0, 0.0]
    ball = np.array([[6.0, 0.0, 3.0], [6.0, 0.0, 3.0]])
    over = skills.launch(ball[:1], np.array([[-4.0, 0.0, 0.2]]), np.array([1.5]))
    low = np.array([[-9.0, 0.0, -1.0]])  # straight into the net
    aim = core._aim(ball, np.concatenate([over, low]))
    assert aim[0] == pytest.approx(1.0, abs=1e-6) and aim[1] == 0.0
