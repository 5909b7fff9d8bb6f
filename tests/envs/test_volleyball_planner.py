"""The serve planner (``envs.volleyball.planner``): its landing score, the controller that
levels the drone after the hit, and recordings that are what flew."""

import numpy as np
import pytest

from envs.volleyball.physics import GRAVITY
from envs.volleyball.planner import (
    CLEARANCE,
    PlannerSettings,
    ServePlanner,
    hold_position,
    landing_score,
)
from envs.volleyball.skills import Serve


def test_landing_score_by_hand():
    target = np.array([[-4.0, 1.0, 0.0]])
    # from (6, 0, 3) at (-8, 1, 4): at the net after 0.75 s, 3 + 3 - g 0.75^2 / 2 = 3.24 m up
    ball, vel = np.array([[6.0, 0.0, 3.0]]), np.array([[-8.0, 1.0, 4.0]])
    t = (4.0 + np.sqrt(16.0 + 2 * GRAVITY * 3.0)) / GRAVITY
    land = np.array([6.0 - 8.0 * t, t])
    assert landing_score(ball, vel, target)[0] == pytest.approx(-np.linalg.norm(land - [-4, 1]))
    # the same ball slower, crossing lower: 3 per metre under the clearance on top
    slow = np.array([[-4.0, 0.0, 1.0]])
    t_net = 1.5
    h = 3.0 + 1.0 * t_net - 0.5 * GRAVITY * t_net**2
    t = (1.0 + np.sqrt(1.0 + 2 * GRAVITY * 3.0)) / GRAVITY
    want = -np.linalg.norm([6.0 - 4.0 * t + 4.0, -1.0]) - 3 * (CLEARANCE - h)
    assert landing_score(ball, slow, target)[0] == pytest.approx(want)


def test_hold_position_levels_a_tilted_drone_and_holds_it():
    drill = Serve(4, seed=0, auto_reset=False, max_steps=400)
    drill.reset(seed=0)
    w = drill.worlds
    tilt = np.array([[np.cos(0.3), np.sin(0.3), 0.0, 0.0]])  # 34 degrees about x
    w.reset(
        np.arange(4), np.tile([5.0, 0.0, 2.5], (4, 1, 1)), np.tile(tilt, (4, 1, 1)), np.zeros(3)
    )
    w.state[:, w.drone_qvel[0, :3]] = [-3.0, 1.0, 2.0]  # flying off as after a serve
    w.read()
    hold = np.tile([5.0, 0.0, 2.0], (4, 1))
    for _ in range(250):  # 5 s
        drill.step({"drone": drill._rate_control(hold_position(drill, hold)[:, None])})
    assert np.abs(w.pos[:, 0] - hold).max() < 0.15
    assert np.abs(w.vel[:, 0]).max() < 0.1


def test_a_recording_replays_to_the_same_observations():
    planner = ServePlanner(seed=0)
    drill, restore = planner._drill(3, 2, seed=5)
    plans = np.random.default_rng(0).uniform(-0.3, 0.3, (6, planner.s.knots, 4))
    restore()
    played = planner._play(drill, plans, 60, record=True)
    T = len(played["obs"])  # up to the last episode's end
    assert T > 20 and played["obs"].shape == (T, 6, 33) and played["act"].shape == (T, 6, 4)
    restore()
    for t in range(T):
        np.testing.assert_allclose(drill.observe().obs["drone"][:, 0], played["obs"][t], atol=1e-5)
        drill.step({"drone": played["act"][t][:, None]})


def test_planner_settings_are_checked():
    with pytest.raises(ValueError, match="knot must be an integer >= 1"):
        PlannerSettings(knot=0)
    with pytest.raises(ValueError, match="elite"):
        PlannerSettings(population=8, elite=0.1)


def _demos(tmp_path, name, *extra):
    from arena.cli import main

    out = tmp_path / name
    assert main(["volleyball", "demos", "--batch", "2", "--out", str(out), *extra]) == 0
    return out


def test_the_command_resumes_to_the_same_file(tmp_path, capsys):
    """A file cut after its first batch (as a killed run leaves it) goes on to the same
    demonstrations as one run straight through, by either number of workers."""
    from envs.demos import load_demos, save_demos

    planner = ServePlanner(
        PlannerSettings(nominal_population=64, nominal_iterations=3, iterations=2), seed=0
    )
    planner.find_nominal()
    first = planner.demonstrate(2, 0)
    cut = {k: first[k] for k in ("obs", "act", "reward", "episode")}
    for name in ("a.npz", "b.npz"):
        save_demos(tmp_path / name, {**cut, "nominal": planner.nominal, "batches": 1,
                                     "succeeded": first["succeeded"], "seed": 0})  # fmt: skip
    a = load_demos(_demos(tmp_path, "a.npz", "--episodes", "6"))
    b = load_demos(_demos(tmp_path, "b.npz", "--episodes", "6", "--workers", "2"))
    assert int(a["batches"]) == 3
    for k in ("obs", "act", "reward", "episode", "succeeded"):
        np.testing.assert_array_equal(a[k], b[k])
    n = int(a["succeeded"])
    assert n == 0 or list(np.unique(a["episode"])) == list(range(n))
    from arena.cli import main

    argv = ["volleyball", "demos", "--out", str(tmp_path / "a.npz"), "--seed", "1"]
    assert main(argv) == 2  # one line: another seed cannot go on with this file
    assert "arena: error: " + str(tmp_path / "a.npz") + " was planned with seed 0, not 1" in (
        capsys.readouterr().err
    )
