"""The hierarchical 3v3 team: VolleyBots' rule machine (states moved by hit events, the skill
and target table) and the team flying a ``Match3v3`` core through its skill policies."""

import numpy as np
import pytest
import torch

from policies import algorithm
from training.hierarchy import rules
from training.hierarchy.rules import ATTACKER, RECEIVER, SETTER, RuleMachine

NONE = np.zeros((1, 3), bool)


def _touch(role):
    t = NONE.copy()
    t[0, role] = True
    return t


def _machine(serving, rally=True):
    m = RuleMachine(1, rally=rally, seed=0)
    m.reset(np.array([0]), np.array([serving]))
    return m


def test_a_serve_then_the_wait():
    m = _machine(True)
    skill, target = m.decide()
    assert m.state[0] == rules.SERVING
    assert skill[0].tolist() == [rules.GOTO, rules.GOTO, rules.SERVE]
    np.testing.assert_allclose(target[0, RECEIVER], m.serve_target[0])
    np.testing.assert_allclose(target[0, SETTER], rules.SETTER_POINT)
    m.update(_touch(RECEIVER), np.array([False]))
    assert m.state[0] == rules.SERVED
    assert m.decide()[0][0].tolist() == [rules.GOTO] * 3


def test_receive_set_attack_follow_the_hits():
    m = _machine(False)
    assert m.state[0] == rules.WAIT
    m.update(NONE, np.array([False]))
    assert m.state[0] == rules.WAIT  # nothing happened
    m.update(NONE, np.array([True]))  # the other team served
    skill, target = m.decide()
    assert skill[0, RECEIVER] == rules.PASS
    np.testing.assert_allclose(target[0, RECEIVER], rules.PASS_TARGET)
    m.update(_touch(SETTER), np.array([False]))  # not the receiver: no change
    assert m.state[0] == rules.PASSING
    m.update(_touch(RECEIVER), np.array([False]))
    skill, target = m.decide()
    assert skill[0].tolist() == [rules.SET, rules.GOTO, rules.GOTO]
    np.testing.assert_allclose(target[0, SETTER], rules.SET_TARGET)
    m.update(_touch(SETTER), np.array([False]))
    skill, target = m.decide()
    assert skill[0, ATTACKER] == rules.ATTACK
    assert target[0, ATTACKER, 0] == -5.0 and abs(target[0, ATTACKER, 1]) == 2.0
    m.update(_touch(ATTACKER), np.array([False]))
    assert m.state[0] == rules.ATTACKED


def test_transitions_chain_within_one_step():
    """VolleyBots checks them in order, so the other team's touch and the receiver's in one
    step take the machine from waiting to setting."""
    m = _machine(False)
    m.update(_touch(RECEIVER), np.array([True]))
    assert m.state[0] == rules.SETTING


@pytest.mark.parametrize("rally", [True, False])
def test_a_returned_ball_is_played_only_with_rally(rally):
    m = _machine(True, rally)
    m.update(_touch(RECEIVER), np.array([False]))
    m.update(NONE, np.array([True]))
    assert m.state[0] == (rules.PASSING if rally else rules.SERVED)


def _skills():
    from policies.inference import ModulePolicy

    info = algorithm.get("ippo")
    torch.manual_seed(0)
    out = {}
    for name, env in (
        ("goto", "hover"), ("serve", "serve"), ("pass", "pass"), ("set", "set"),
        ("attack", "attack"),
    ):  # fmt: skip
        specs = info.modules(f"volleyball/{env}-v0", info.settings()).rl_module_specs
        out[name] = ModulePolicy(next(iter(specs.values())).build())
    return out


def test_teams_on_both_sides_fly_the_skills_the_machine_picks():
    import envs
    from training.hierarchy.team import HierarchicalTeam

    core = envs.make_vector("volleyball/3v3-v0", 6, seed=0, random_serve=True)
    step = core.reset()
    skills = _skills()
    teams = [HierarchicalTeam(core, side, skills) for side in (0, 1)]
    for t in teams:
        t.begin(np.arange(6))
    assert set(core.serving) == {0, 1}
    for _ in range(5):
        actions = {name: t.act() for name, t in zip(("near", "far"), teams, strict=True)}
        for t in teams:
            serves = t.skill[:, RECEIVER] == rules.SERVE
            np.testing.assert_array_equal(serves, core.serving == t.side)
        assert all(a.shape == (6, 3, 4) and np.isfinite(a).all() for a in actions.values())
        step = core.step(actions)
        for t in teams:
            t.observe_touches()
    assert step.obs["near"].shape == (6, 3, 57)


def test_far_team_sees_its_skills_mirrored():
    """The far team's receiver, mirrored, sees the same skill observation as the near one's
    in the mirror-image world."""
    import envs
    from envs.volleyball.skills import skill_observation

    core = envs.make_vector("volleyball/3v3-v0", 1, seed=0, start_noise=0.0)
    core.reset()
    w = core.worlds
    state = core.drone_state(core.far)
    target = np.array([[-5.0, 2.0, 0.0]])  # own frame
    near = skill_observation(
        state[:, [2]],
        w.pos[:, [2]],
        w.ball_pos,
        w.ball_vel,
        target[None],
        np.zeros((1, 1)),
        core.sign[[2]],
    )
    # the same world seen by the far receiver: the ball moved to the mirror point
    ball = w.ball_pos * [-1, -1, 1]
    far = skill_observation(
        state[:, [5]],
        w.pos[:, [5]],
        ball,
        w.ball_vel * [-1, -1, 1],
        target[None] * [-1, -1, 1],
        np.zeros((1, 1)),
        core.sign[[5]],
    )
    np.testing.assert_allclose(near, far, atol=1e-5)


def test_team_config_names_what_is_missing():
    from training.config import ConfigError
    from training.hierarchy.team import TeamConfig

    with pytest.raises(ConfigError, match=r"missing \['attack'.*unknown \['atack'\]"):
        TeamConfig.from_dict(
            {"hover": "a", "serve": "b", "pass": "c", "set": "d", "atack": "e", "opponent": "f"}
        )
    cfg = TeamConfig.from_dict(
        {"hover": "a", "serve": "b", "pass": "c", "set": "d", "attack": "e", "opponent": "f"}
    )
    assert cfg.runs()["pass"] == "c" and cfg.rally


def test_wilson_interval():
    from policies.testing import wilson

    low, high = wilson(695, 1000)
    assert low == pytest.approx(0.6658, abs=1e-3) and high == pytest.approx(0.7227, abs=1e-3)
    assert wilson(0, 10)[0] == 0.0


def test_the_shipped_team_plays_points_and_exports(tmp_path):
    from training.hierarchy.team import BUNDLE, TeamConfig, export_team, play_hierarchy

    cfg = TeamConfig.from_file(BUNDLE / "team.yaml")
    served = play_hierarchy(cfg, 8, seed=0)
    assert served["wins"] + served["losses"] + served["undecided"] == 8
    assert 0 <= served["win_rate_ci95"][0] <= served["win_rate"] <= served["win_rate_ci95"][1]
    assert served["skill_share"]["serve"] > 0
    received = play_hierarchy(cfg, 8, seed=0, start="receive")
    assert received["skill_share"]["serve"] == 0 and received["skill_share"]["pass"] > 0
    again = TeamConfig.from_file(export_team(cfg, tmp_path / "team"))
    assert (tmp_path / "team" / "opponent" / "checkpoints").is_dir()
    assert play_hierarchy(again, 8, seed=0)["wins"] == served["wins"]  # the same weights


def test_the_team_plays_volleybots_and_the_sanity_opponents_by_serving_side():
    """Against VolleyBots' SP policy the points start on the anchors and the report splits
    them by the serving team; a hovering team never returns a serve."""
    from training.hierarchy.team import BUNDLE, TeamConfig, play_hierarchy

    cfg = TeamConfig.from_file(BUNDLE / "team.yaml")
    vb = play_hierarchy(cfg, 16, seed=0, opponent="volleybots:sp")
    assert vb["opponent"] == "volleybots:sp" and vb["start_noise"] == 0.0
    assert vb["team_start"] == "roles"  # VolleyBots' hierarchical env's start
    by = vb["by_server"]
    assert by["near"]["points"] + by["far"]["points"] == 16 and by["far"]["points"] > 0
    assert by["far"]["serve_over"] > 0.5  # VolleyBots' serve crosses in Arena's match
    hover = play_hierarchy(cfg, 16, seed=0, opponent="hover")
    assert hover["start_noise"] == 0.1 and hover["team_start"] == "anchors"
    assert hover["by_server"]["near"]["returned"] == 0.0  # hovering drones return nothing
    assert hover["by_server"]["far"]["serve_over"] == 0.0  # nor serve
    with pytest.raises(ValueError, match="opponent must be one of"):
        play_hierarchy(cfg, 2, opponent="volleybots:mappo")


def test_any_world_of_a_batch_renders_and_its_points_do_not_change(tmp_path):
    """The rally bench finds a point in one batch and draws it from a second run of the same
    batch: the per-point table is the same with or without rendering."""
    from training.hierarchy.team import BUNDLE, TeamConfig, play_hierarchy

    cfg = TeamConfig.from_file(BUNDLE / "team.yaml")
    plain = play_hierarchy(cfg, 4, seed=3, opponent="volleybots:sp", per_point=True)
    gif = tmp_path / "point.gif"
    drawn = play_hierarchy(
        cfg, 4, seed=3, opponent="volleybots:sp", per_point=True, render=str(gif), render_world=2
    )
    assert drawn["points"] == plain["points"] and len(plain["points"]["crossings"]) == 4
    assert gif.read_bytes()[:3] == b"GIF"
    with pytest.raises(ValueError, match="render_world must be in 0..3"):
        play_hierarchy(cfg, 4, render_world=4)


def test_the_roles_start_is_volleybots_hierarchical_start():
    """``team_start="roles"``: the near team where ``Volleyball3v3_hier.yaml`` puts it (serving:
    setter, attacker, server on its anchor; defending: the receiver at its waiting point),
    level and at rest; the far team and the ball do not move."""
    from envs.volleyball.match import Match3v3
    from training.hierarchy.team import _start_at_roles

    core = Match3v3(16, 0, auto_reset=False, random_serve=True, start_noise=0.0)
    core.reset()
    far, ball = core.worlds.pos[:, 3:].copy(), core.worlds.ball_pos.copy()
    step = _start_at_roles(core)
    serving = core.serving == 0
    assert serving.any() and (~serving).any()
    np.testing.assert_allclose(
        core.worlds.pos[serving, :3],
        np.tile([[2, -2, 1.8], [2, 1.5, 2.5], [6, 0, 2]], (serving.sum(), 1, 1)),
    )
    np.testing.assert_allclose(core.worlds.pos[~serving, 2], [[4.5, 0, 1.5]] * (~serving).sum())
    np.testing.assert_allclose(core.worlds.pos[:, 3:], far)
    np.testing.assert_allclose(core.worlds.ball_pos, ball)
    assert np.abs(core.worlds.vel).max() == 0 and np.allclose(core.worlds.quat[:, :3, 0], 1)
    np.testing.assert_allclose(step.obs["near"][..., :3], core.worlds.pos[:, :3])  # observed
