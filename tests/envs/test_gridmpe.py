"""ODIS's grid cooperative navigation (LAMDA-RL/ODIS ``src/envs/grid_mpe``): upstream episodes
replayed step by step (gridmpe_upstream.json, recorded by gridmpe_upstream.py), ODIS's map
table, the reset's placement, the contested-cell rule and success as a matching."""

import json
from pathlib import Path

import numpy as np
import pytest

import envs
from envs.entities import entity_layout
from envs.gridmpe.core import MAPS, REACH, GridSpreadBatch

UPSTREAM = Path(__file__).with_name("gridmpe_upstream.json")


def world(map_name="cn-2", agents=None, landmarks=None) -> GridSpreadBatch:
    core = GridSpreadBatch(1, seed=0, auto_reset=False, map_name=map_name)
    core.reset()
    if agents is not None:
        core.agent_pos[0] = agents
        core.landmark_pos[0] = landmarks
    return core


def test_the_maps_are_odis_map_config():
    # grid_mpe.py map_config: agents, field_size, sight, episode_limit; reach_range 2 on all
    assert MAPS["cn-2"] == (2, (6, 6), 5, 50)
    assert MAPS["cn-4"] == (4, (10, 10), 9, 50)
    assert MAPS["cn-5"] == (5, (12, 12), 11, 50)
    assert MAPS["cn-6"] == (6, (15, 15), 14, 50)
    assert MAPS["cn-10"] == (10, (15, 15), 14, 70)
    assert MAPS["cn-15"] == (15, (20, 20), 19, 80)
    assert REACH == 2 and len(MAPS) == 12
    env = envs.make("gridmpe/cn-v0", map_name="cn-4")
    assert len(env.possible_agents) == 4
    assert env.observation_space("agent_0")["observations"].shape == (16,)
    with pytest.raises(ValueError, match="not one of ODIS's: cn-2, cn-3"):
        envs.make("gridmpe/cn-v0", map_name="cn-13")


@pytest.mark.parametrize("index", range(18))
def test_upstream_episodes_replay_exactly(index):
    """Every step of a recorded upstream episode (random actions over all five, masked moves
    included): positions, observations, available actions, reward, and how it ends."""
    ep = json.loads(UPSTREAM.read_text())["episodes"][index]
    core = world(ep["map"], ep["agents"], ep["landmarks"])
    obs, state, mask = core._observe()
    np.testing.assert_array_equal(obs[0], ep["obs"])
    np.testing.assert_array_equal(state[0], ep["state"])
    np.testing.assert_array_equal(mask[0], ep["avail"])
    for t, s in enumerate(ep["steps"]):
        step = core.step({"agent": np.array([s["actions"]])})
        np.testing.assert_array_equal(core.agent_pos[0], s["agents"], err_msg=f"step {t}")
        np.testing.assert_array_equal(step.obs["agent"][0], s["obs"], err_msg=f"step {t}")
        np.testing.assert_array_equal(step.action_mask["agent"][0], s["avail"])
        assert (step.rewards[0] == s["reward"]).all()
        assert bool(step.terminated[0]) == s["won"] == bool(step.info["battle_won"][0])
        assert bool(step.terminated[0] | step.truncated[0]) == s["done"]
    assert s["done"]


def test_the_recording_holds_successes_and_limits():
    eps = json.loads(UPSTREAM.read_text())["episodes"]
    maps = {e["map"] for e in eps if e["steps"][-1]["won"]}
    assert {"cn-2", "cn-4", "cn-5"} <= maps
    assert any(len(e["steps"]) == 50 and not e["steps"][-1]["won"] for e in eps)


@pytest.mark.parametrize("map_name", ["cn-2", "cn-3", "cn-5"])
def test_reset_places_landmarks_out_of_every_agents_reach(map_name):
    core = GridSpreadBatch(200, seed=7, map_name=map_name)
    core.reset()
    n, (rows, cols) = MAPS[map_name][0], MAPS[map_name][1]
    for a, lm in zip(core.agent_pos, core.landmark_pos, strict=True):
        assert len({tuple(p) for p in a}) == n and len({tuple(p) for p in lm}) == n
        assert ((a >= 0) & (a < (rows, cols))).all() and ((lm >= 0) & (lm < (rows, cols))).all()
        gap = np.abs(lm[:, None] - a[None]).max(-1)
        assert (gap > REACH).all()
    # the draws cover the grid: every cell holds some agent in 200 worlds of cn-2
    if map_name == "cn-2":
        assert len({tuple(p) for p in core.agent_pos.reshape(-1, 2)}) == rows * cols


def test_agents_that_target_one_cell_all_stay():
    # agent 0 moves east onto (2, 3); agent 1 moves west onto it too: both stay.
    # agent 2 stays on (4, 4); agent 3 moves north onto it: both stay (upstream's rule).
    core = world("cn-4", [[2, 2], [2, 4], [4, 4], [5, 4]], [[9, 9], [9, 0], [0, 9], [0, 0]])
    core.step({"agent": np.array([[4, 3, 0, 1]])})
    np.testing.assert_array_equal(core.agent_pos[0], [[2, 2], [2, 4], [4, 4], [5, 4]])
    # swapping cells is allowed: the targets differ
    core.step({"agent": np.array([[0, 0, 2, 1]])})
    np.testing.assert_array_equal(core.agent_pos[0], [[2, 2], [2, 4], [5, 4], [4, 4]])


def test_success_needs_a_landmark_per_agent_not_only_reach():
    # every agent reaches a landmark and every landmark is reached, but agents 0 and 1 reach
    # only landmark 0: no matching, no success
    lm = [[0, 0], [7, 7], [7, 5]]
    core = world("cn-3", [[0, 1], [1, 0], [7, 6]], lm)
    step = core.step({"agent": np.zeros((1, 3), int)})
    assert not step.terminated[0] and step.rewards[0].sum() == 0
    # agent 1 on (5, 4) reaches landmark 2 instead: each landmark has an agent of its own
    core = world("cn-3", [[0, 1], [5, 4], [7, 6]], lm)
    step = core.step({"agent": np.zeros((1, 3), int)})
    assert step.terminated[0] and step.info["battle_won"][0]
    assert (step.rewards[0] == 1.0).all()


def test_the_episode_is_cut_at_the_limit():
    core = world("cn-2", [[0, 0], [0, 1]], [[5, 5], [5, 4]])
    for t in range(50):
        step = core.step({"agent": np.zeros((1, 2), int)})
        assert bool(step.truncated[0]) == (t == 49) and not step.terminated[0]


def test_tokens_are_own_agents_and_landmarks():
    core = world("cn-3", [[1, 2], [3, 4], [5, 6]], [[7, 7], [0, 7], [7, 0]])
    obs = core._observe()[0][0]  # [3, 12]
    tok = entity_layout("gridmpe/cn-v0", {"map_name": "cn-3"}).split(obs)
    np.testing.assert_array_equal(tok["own"][1], [4, 5])
    np.testing.assert_array_equal(tok["ally"][1], [[2, 3], [6, 7]])
    np.testing.assert_array_equal(tok["landmark"][1], [[8, 8], [1, 8], [8, 1]])
    assert entity_layout("gridmpe/cn-v0", {"map_name": "cn-5"}).width("landmark") == 2
