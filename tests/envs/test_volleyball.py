"""Drone volleyball: the physics facts, the scenes, the observations, the rules and the reward
terms of VolleyBots (thu-uav/VolleyBots) as rebuilt on MuJoCo."""

import mujoco
import numpy as np
import pytest

import envs
from envs.volleyball import TASKS as FAMILY_TASKS
from envs.volleyball import coop, drills, match
from envs.volleyball.core import HOVER_COMMAND, mirror_quat
from envs.volleyball.physics import GRAVITY, HOVER_THROTTLE, KF, MASS, Worlds
from envs.volleyball.scene import NET_HEIGHT, Layout, model, xml
from tests.envs.volleyball_helpers import hover, place_ball

TASKS = [f"volleyball/{task}-v0" for task in FAMILY_TASKS]  # the learned high level (of
# training.hierarchy, a plugin id) has tests of its own


def test_all_ten_tasks_and_the_skills_are_registered():
    names = {i.split("/")[1].rsplit("-", 1)[0] for i in TASKS}
    assert names == {
        "hover", "back_and_forth", "hit_ball", "solo_bump", "bump_and_pass",
        "set_and_spike_easy", "set_and_spike_hard", "1v1", "3v3", "6v6",
        "serve", "pass", "set", "attack",
    }  # fmt: skip


@pytest.mark.parametrize("env_id", TASKS)
def test_every_scene_loads_and_steps_without_mujoco_warnings(env_id):
    core = envs.make_vector(env_id, 2, seed=0)
    core.reset()
    hover = {name: np.full((2, g.num_agents, 4), HOVER_COMMAND) for name, g in core.groups.items()}
    for _ in range(25):
        core.step(hover)
    m = core.worlds.model
    data = mujoco.MjData(m)
    mujoco.mj_setState(m, data, core.worlds.state[0], mujoco.mjtState.mjSTATE_FULLPHYSICS)
    mujoco.mj_step(m, data, 20)
    assert all(w.number == 0 for w in data.warning), [w.number for w in data.warning]
    assert np.isfinite(core.worlds.state).all()


def test_scene_xml_round_trips():
    text = xml(Layout(2, (12.0, 6.0)))
    again = mujoco.MjModel.from_xml_string(text)
    assert again.nbody == model(Layout(2, (12.0, 6.0))).nbody


# -- physics ----------------------------------------------------------------------------------


def test_drone_numbers_follow_volleybots():
    m = model(Layout(1))
    body = m.body("drone0/drone")
    assert body.mass[0] == pytest.approx(1.52)
    assert body.inertia[:2] == pytest.approx([0.0347563, 0.0458929])
    assert KF == pytest.approx(6.003, abs=1e-3)  # 838^2 x 8.54858e-6 N
    assert m.nu == 4 and m.actuator_ctrlrange[:, 1] == pytest.approx([KF] * 4, abs=1e-3)
    ball = m.body("ball")
    assert ball.mass[0] == pytest.approx(0.005)
    assert m.geom("ball").size[0] == pytest.approx(0.1)


def test_hover_throttle_holds_the_weight():
    """At the hover command the steady throttle's thrust equals m g and the drone stays put."""
    assert 4 * HOVER_THROTTLE**2 * KF == pytest.approx(MASS * GRAVITY)
    w = Worlds(Layout(1, ball=False, net=False), 1)
    w.reset(np.arange(1), np.array([[[0.0, 0.0, 2.0]]]))
    for _ in range(100):  # 2 s
        w.step(np.full((1, 1, 4), HOVER_COMMAND))
    assert w.throttle == pytest.approx(HOVER_THROTTLE)
    assert np.linalg.norm(w.pos[0, 0] - [0, 0, 2]) < 0.01
    assert abs(w.quat[0, 0, 0]) > 0.9999  # level


def test_motor_lag_and_thrust_map():
    """throttle -> throttle + 0.43 (sqrt((a + 1) / 2) - throttle) per step; thrust ~ throttle^2."""
    w = Worlds(Layout(1, ball=False, net=False), 1)
    w.reset(np.arange(1), np.array([[[0.0, 0.0, 3.0]]]))
    before = w.throttle.copy()
    w.step(np.full((1, 1, 4), 1.0))
    assert w.throttle == pytest.approx(before + 0.43 * (1.0 - before))
    assert w.ctrl[0, 0] == pytest.approx(w.throttle[0, 0] ** 2 * KF)
    z0 = w.pos[0, 0, 2]
    for _ in range(10):
        w.step(np.full((1, 1, 4), 1.0))
    assert w.pos[0, 0, 2] > z0 + 0.1  # full throttle climbs (thrust/weight about 1.6)


@pytest.mark.parametrize("drop", [1.0, 3.0, 6.0])
def test_ball_rebounds_from_the_floor_at_restitution_0_8(drop):
    """e = v_out / v_in = sqrt(rebound height / drop height)."""
    w = Worlds(Layout(1), 1)
    w.reset(np.arange(1), np.array([[[-6.0, 0.0, 2.0]]]), ball_pos=np.array([4.0, 0.0, 0.1 + drop]))
    heights, bounced = [], False
    for _ in range(200):
        w.step(np.full((1, 1, 4), HOVER_COMMAND))
        bounced |= w.ball_vel[0, 2] > 0
        if bounced:
            heights.append(w.ball_pos[0, 2] - 0.1)
            if w.ball_vel[0, 2] < 0:
                break
    assert np.sqrt(max(heights) / drop) == pytest.approx(0.8, abs=0.05)


def test_ball_bounces_off_a_racket_and_counts_a_contact():
    w = Worlds(Layout(1), 1)
    w.reset(np.arange(1), np.array([[[4.5, 0.0, 2.0]]]), ball_pos=np.array([4.5, 0.0, 4.0]))
    touched = False
    for _ in range(40):
        w.step(np.full((1, 1, 4), HOVER_COMMAND))
        touched |= bool(w.ball_contact[0, 0])
        if w.ball_vel[0, 2] > 0:
            break
    assert touched and w.ball_vel[0, 2] > 3.0


def test_downwash_pushes_the_lower_drone_down():
    w = Worlds(Layout(2, ball=False, net=False), 1)
    w.reset(np.arange(1), np.array([[[0.0, 0.0, 1.5], [0.0, 0.0, 3.0]]]))
    push = w._downwash(np.full((1, 2), MASS * GRAVITY))
    assert push[0, 0, 2] < -1.0 and push[0, 1] == pytest.approx(0.0)


def test_court_and_net_sizes():
    for core, court in (
        (match.Match1v1, (6, 3)),
        (match.Match3v3, (12, 6)),
        (match.Match6v6, (18, 9)),
    ):
        m = core(1).worlds.model
        assert 2 * m.geom("court").size[:2] == pytest.approx(court)
        net = m.geom("net")
        assert net.pos[2] + net.size[2] == pytest.approx(NET_HEIGHT)
    assert 2 * drills.HitBall(1).worlds.model.geom("court").size[:2] == pytest.approx((18, 9))


# -- observations -------------------------------------------------------------------------------

SIZES = {
    "hover": 26, "back_and_forth": 26, "hit_ball": 32, "solo_bump": 32, "bump_and_pass": 43,
    "set_and_spike_easy": 40, "set_and_spike_hard": 40, "1v1": 37, "3v3": 57, "6v6": 78,
    "serve": 33, "pass": 33, "set": 33, "attack": 33,
}  # fmt: skip


@pytest.mark.parametrize("task", sorted(SIZES))
def test_observation_sizes(task):
    env = envs.make(f"volleyball/{task}-v0")
    obs, _ = env.reset(seed=0)
    assert {o.shape for o in obs.values()} == {(SIZES[task],)}


def test_far_team_sees_the_court_mirrored():
    """A mirrored start looks the same from both sides: each drone sees itself at its anchor."""
    core = match.Match3v3(1, start_noise=0.0)
    step = core.reset(seed=0)
    near, far = step.obs["near"][0], step.obs["far"][0]
    np.testing.assert_allclose(near[:, :3], far[:, :3], atol=1e-6)  # own position
    np.testing.assert_allclose(near[:, 3:7], far[:, 3:7], atol=1e-6)  # own orientation
    np.testing.assert_allclose(near[:, -18:], far[:, -18:], atol=1e-6)  # everybody's positions
    q = np.array([np.cos(0.3), 0.0, 0.0, np.sin(0.3)])  # yaw 0.6
    m = mirror_quat(q)
    assert np.arctan2(2 * m[0] * m[3], 1 - 2 * m[3] ** 2) == pytest.approx(0.6 + np.pi - 2 * np.pi)


# -- rules --------------------------------------------------------------------------------------


def _match(cls, **kw):
    core = cls(1, start_noise=0.0, **kw)
    core.reset(seed=0)
    return core


def _play(core, steps=200):
    for _ in range(steps):
        step = core.step(hover(core))
        if step.terminated[0] or step.truncated[0]:
            return step
    raise AssertionError("the point did not end")


def test_serve_lands_in_the_servers_half_and_the_server_loses():
    core = _match(match.Match1v1)
    place_ball(core, [1.5, 1.0, 3.0])  # falls beside the near drone, in the near half
    step = _play(core)
    assert step.info["result"][0] == -1 and step.info["battle_won"][0] == 0
    assert core.reward_terms["win"][0].tolist() == [-100.0, 100.0]


def test_ball_landing_in_the_far_half_wins_the_point():
    core = _match(match.Match3v3)
    place_ball(core, [-4.0, 2.0, 1.0])
    step = _play(core)
    assert step.info["result"][0] == 1 and step.info["battle_won"][0] == 1
    assert core.reward_terms["win"][0].tolist() == [100.0] * 3 + [-100.0] * 3


def test_racket_hit_is_counted_and_rewarded():
    core = _match(match.Match1v1)  # the ball falls 1.5 m onto the near drone's racket
    hit = False
    for _ in range(40):
        core.step(hover(core))
        if core.reward_terms["hit"][0, 0] > 0:
            hit = True
            break
    assert hit and core.hits[0] == 1 and core.turn[0] == 1  # the turn passes to the far drone
    assert core.reward_terms["hit"][0, 0] == 5.0


def test_body_touch_is_a_fault():
    """The ball hitting the drone from the side (not in the racket) loses the point."""
    core = _match(match.Match1v1)
    place_ball(core, [1.5 - 0.45, 0.0, 2.0], vel=(3.0, 0.0, 0.0))
    step = _play(core, 30)
    assert step.info["result"][0] == -1


def test_second_touch_by_one_drone_is_a_fault_in_3v3():
    core = _match(match.Match3v3)
    server = 2
    core.already_hit[0, server] = True  # as if it had already touched the ball
    for _ in range(60):
        step = core.step(hover(core))
        if step.terminated[0]:
            break
    assert step.info["result"][0] == -1


def test_drone_crossing_the_net_loses_the_point():
    core = _match(match.Match3v3)
    w = core.worlds
    w.state[0, w.drone_qpos[0, 0]] = -0.5  # near_0 steps into the far half
    w.read()
    step = core.step(hover(core))
    assert step.terminated[0] and step.info["result"][0] == -1


def test_ball_in_the_net_is_the_last_hitters_fault():
    core = _match(match.Match3v3)
    core.last_team[0] = 1
    place_ball(core, [0.1, 0.0, 2.0], vel=(0.0, 0.0, -1.0))
    step = core.step(hover(core))
    assert step.terminated[0] and step.info["result"][0] == 1


def test_out_of_bounds_in_1v1_counts_at_any_height():
    core = _match(match.Match1v1)
    core.turn[0] = 0  # the far drone hit last
    place_ball(core, [-2.0, 2.0, 3.0])  # outside the 3 m width, in the air
    step = core.step(hover(core))
    assert step.terminated[0] and step.info["result"][0] == 1


def test_crash_and_too_close_end_the_episode_undecided():
    core = _match(match.Match3v3)
    w = core.worlds
    w.state[0, w.drone_qpos[1, :3]] = w.pos[0, 0] + [0.3, 0.0, 0.0]  # near_1 beside near_0
    w.read()
    step = core.step(hover(core))
    assert step.terminated[0] and step.info["result"][0] == 0
    assert core.reward_terms["too_close"][0, :2].tolist() == [-100.0, -100.0]
    core = _match(match.Match1v1)
    w = core.worlds
    w.state[0, w.drone_qpos[1, 2]] = 0.25
    w.read()
    step = core.step(hover(core))
    assert step.terminated[0] and core.reward_terms["crash"][0, 1] == -100.0


def test_possession_flags_reset_when_the_ball_crosses():
    core = _match(match.Match3v3)
    place_ball(core, [-3.0, 0.0, 5.0])
    core.step(hover(core))
    assert core.already_hit[0].tolist() == [True] * 3 + [False] * 3


def test_hover_task_rewards_and_ends():
    core = drills.Hover(1)
    core.reset(seed=1)
    core.step({"drone": np.full((1, 1, 4), HOVER_COMMAND)})
    assert set(core.reward_terms) == {"pose", "up", "spin", "effort"}
    w = core.worlds
    w.state[0, w.drone_qpos[0, 2]] = 0.1
    w.read()
    step = core.step({"drone": np.full((1, 1, 4), HOVER_COMMAND)})
    assert step.terminated[0]


def test_solo_bump_counts_bumps_and_wrong_hits():
    core = drills.SoloBump(1)
    core.reset(seed=0)
    w = core.worlds
    w.state[0, w.drone_qpos[0]] = [4.5, 0.0, 2.0, 1.0, 0.0, 0.0, 0.0]  # level under the ball
    place_ball(core, [4.5, 0.0, 4.0])
    hover = {"drone": np.full((1, 1, 4), HOVER_COMMAND)}
    for _ in range(60):
        core.step(hover)
        if core.hits[0]:
            break
    assert core.hits[0] == 1 and core.reward_terms["hit"][0, 0] == 2.0
    core.touching[0] = False
    core.worlds.ball_contact[0, 0] = True  # a second contact 0.5 s too soon is a wrong hit
    true_hit, wrong = core._hits()
    assert wrong[0] and not true_hit[0]


def test_episode_facts_describe_the_episode_that_ended():
    core = drills.SoloBump(1)
    core.reset(seed=0)
    w = core.worlds
    w.state[0, w.drone_qpos[0]] = [4.5, 0.0, 2.0, 1.0, 0.0, 0.0, 0.0]
    place_ball(core, [4.5, 0.0, 4.0])
    while not core.hits[0]:
        core.step({"drone": np.full((1, 1, 4), HOVER_COMMAND)})
    w.state[0, w.drone_qpos[0, 2]] = 0.1  # crash: the episode ends and the world resets
    w.read()
    step = core.step({"drone": np.full((1, 1, 4), HOVER_COMMAND)})
    assert step.terminated[0] and step.info["bumps"][0] == 1 and core.hits[0] == 0
    assert step.info["reward_misbehave"][0] == -10.0


def test_bump_and_pass_out_of_turn_is_wrong():
    core = coop.BumpAndPass(1)
    core.reset(seed=0)
    core.turn[0] = 1  # drone 1's turn, but the ball falls on drone 0
    for _ in range(60):
        step = core.step({"drone": np.full((1, 2, 4), HOVER_COMMAND)})
        if step.terminated[0]:
            break
    assert step.terminated[0] and core.reward_terms["misbehave"][0, 0] <= -10.0


def test_reward_terms_are_in_info_and_sum_to_the_reward():
    env = envs.make("volleyball/3v3-v0")
    env.reset(seed=0)
    _, rewards, _, _, infos = env.step({a: np.full(4, HOVER_COMMAND) for a in env.agents})
    for agent, r in rewards.items():
        assert sum(infos[agent]["reward_terms"].values()) == pytest.approx(r, abs=1e-4)


def test_ctbr_mode_hovers():
    core = drills.Hover(1, action_mode="ctbr")
    core.reset(seed=0)
    w = core.worlds
    w.state[0, w.drone_qpos[0, 3:]] = [1, 0, 0, 0]
    w.read()
    thrust = 2 * MASS * GRAVITY / (4 * KF) - 1
    for _ in range(50):
        core.step({"drone": np.array([[[thrust, 0.0, 0.0, 0.0]]])})
    assert abs(w.vel[0, 0, 2]) < 0.3 and abs(w.quat[0, 0, 0]) > 0.99


def test_bad_options_are_refused_with_the_reason():
    with pytest.raises(ValueError, match="action_mode must be one of"):
        envs.make("volleyball/hover-v0", action_mode="thrust")
    with pytest.raises(ValueError, match="substeps"):
        envs.make("volleyball/1v1-v0", substeps=0)
    with pytest.raises(ValueError, match=r"nthread must be an integer in 0\.\.256"):
        envs.make("volleyball/1v1-v0", nthread=100_000)


def test_mappo_trains_on_a_cooperative_task(ray_session):
    from policies import algorithm

    info = algorithm.get("mappo")
    settings = info.settings(
        train_batch_size=256, minibatch_size=128, num_epochs=1, num_envs_per_env_runner=8
    )
    algo = info.build("volleyball/bump_and_pass-v0", settings, seed=0).build_algo()
    for _ in range(2):
        result = algo.train()
    learner = result["learners"]["shared"]
    assert np.isfinite(learner["policy_loss"]) and np.isfinite(learner["vf_loss"])
    assert "episode_success_hits" in result["env_runners"]
    algo.stop()


def test_cooperative_faults_add_up():
    """Ball and drone 0 too low in one step: drone 0 pays both (-20), drone 1 the ball's."""
    core = coop.BumpAndPass(1)
    core.reset(seed=0)
    w = core.worlds
    w.state[0, w.drone_qpos[0, 2]] = 0.3
    w.read()
    place_ball(core, [4.5, 3.0, 0.15])
    core.step({"drone": np.full((1, 2, 4), HOVER_COMMAND)})
    assert core.reward_terms["misbehave"][0].tolist() == [-20.0, -10.0]


def test_a_long_contact_counts_once_in_cooperative_tasks():
    core = coop.BumpAndPass(1)
    core.reset(seed=0)
    w = core.worlds
    w.state[0, w.drone_qpos[0]] = [4.5, -2.5, 2.0, 1.0, 0.0, 0.0, 0.0]
    place_ball(core, [4.5, -2.5, 2.2])  # resting in drone 0's racket
    counted = []
    for t in (10, 11, 12, 13, 14):  # five steps of one contact
        core.t[0] = t
        w.ball_contact = np.array([[True, False]])
        success, wrong = core._hits()
        counted.append(bool(success[0, 0] or wrong[0, 0]))
    assert counted == [True, False, False, False, False]


def test_the_net_is_drawn_only_and_its_rule_ends_the_episode():
    core = coop.BumpAndPass(1, auto_reset=False)
    core.reset(seed=0)
    place_ball(core, [0.5, 0.0, 2.0], vel=(-5.0, 0.0, 0.0))  # into the net
    xs = []
    for _ in range(10):
        step = core.step({"drone": np.full((1, 2, 4), HOVER_COMMAND)})
        xs.append(core.worlds.ball_pos[0, 0])
        if step.terminated[0]:
            break
    assert step.terminated[0] and core.reward_terms["misbehave"][0, 1] == -10.0
    assert min(xs) < 0.1 and all(np.diff(xs) < 0)  # it flew on: no net body to bounce off


def test_body_touch_takes_the_blame_for_a_ball_in_the_net():
    """1v1: the drone on turn touches the ball with its body next to the net; only it
    faults (VolleyBots' rules.py: a wrong hitter takes the out and net blame)."""
    core = _match(match.Match1v1)
    w = core.worlds
    w.state[0, w.drone_qpos[0, :3]] = [0.6, 0.0, 2.0]
    w.read()
    place_ball(core, [0.6 - 0.45, 0.0, 2.0], vel=(3.0, 0.0, 0.0))
    step = _play(core, 30)
    assert step.info["result"][0] == -1


def test_3v3_ball_shaping_pays_the_team_that_played_on_the_crossing_step():
    core = _match(match.Match3v3)
    core.already_hit[0] = [True, False, True, True, True, True]  # near_1 may still hit
    place_ball(core, [-0.5, 0.0, 4.0])  # the ball is on the far side now
    core.step(hover(core))
    paid = core.reward_terms["ball_distance"][0] > 0
    assert paid.tolist() == [False, True, False, False, False, False]
    assert core.already_hit[0].tolist() == [True] * 3 + [False] * 3  # then the flags switch


def test_defender_returns_a_spike_it_reaches():
    core = coop.SetAndSpikeHard(1)
    core.reset(seed=0)
    core.turn[0] = 2  # spiked
    place_ball(core, [-1.0, 0.0, 2.5], vel=(-4.0, 0.0, -1.0))
    for _ in range(60):
        core.step({"drone": np.full((1, 2, 4), HOVER_COMMAND)})
        if core.returned[0]:
            break
    assert core.returned[0] and core.worlds.ball_vel[0, 0] > 0  # sent back towards (3, 1)


def test_with_crash_ends_off_the_point_plays_on_through_crowding_and_crashes():
    """VolleyBots' hierarchical 3v3 env only logs them."""
    core = _match(match.Match3v3, crash_ends=False)
    w = core.worlds
    w.state[0, w.drone_qpos[1, :3]] = w.pos[0, 0] + [0.3, 0.0, 0.0]
    w.state[0, w.drone_qpos[4, 2]] = 0.25  # far_1 on the floor
    w.read()
    step = core.step(hover(core))
    assert not step.terminated[0]
    assert (
        core.reward_terms["too_close"][0, 0] == -100.0 and core.reward_terms["crash"][0, 4] == -100
    )
