"""Predator-prey with the miscoordination penalty (envs.predprey) against DCG's own env
(wendelinboehmer/dcg ``src/envs/stag_hunt.py`` with ``rel_overgen.yaml``): upstream episodes
replayed step by step (predprey_upstream.json, recorded by predprey_upstream.py), and the
rules one at a time: a capture needs two predators, a lone catch costs the punishment,
capturers freeze, seeds, the episode limit."""

import json
from pathlib import Path

import numpy as np
import pytest

import envs
from envs.predprey.core import CATCH, STAY, PredPreyBatch

UPSTREAM = Path(__file__).with_name("predprey_upstream.json")
RIGHT, DOWN, LEFT, UP = 0, 1, 2, 3


class Draws:
    """Stands in for the core's step Generator: ``random`` hands out queued arrays."""

    def __init__(self, *arrays):
        self.queue = [np.asarray(a, float) for a in arrays]

    def random(self, shape):
        return self.queue.pop(0).reshape(shape)


def ranks(order) -> np.ndarray:
    """Values whose argsort is ``order``."""
    r = np.zeros(len(order))
    r[np.asarray(order)] = np.arange(len(order))
    return r


def unpack(text: str, shape) -> np.ndarray:
    bits = np.unpackbits(np.frombuffer(bytes.fromhex(text), np.uint8))
    return bits[: int(np.prod(shape))].reshape(shape)


def place(core, agents, prey) -> None:
    """Puts world 0's predators and prey on the given cells."""
    agents, prey = np.asarray(agents), np.asarray(prey)
    core.agent_pos[0], core.prey_pos[0] = agents, prey
    core.frozen[0], core.prey_alive[0] = False, True
    core.grid[0] = 0.0
    core.grid[0, agents[:, 0], agents[:, 1], 0] = 1.0
    core.grid[0, prey[:, 0], prey[:, 1], 1] = 1.0


def step(core, actions, agent_order=None, prey_order=None, flee=None):
    n, p = core.n, core.p
    core._rng = Draws(
        ranks(range(n) if agent_order is None else agent_order),
        ranks(range(p) if prey_order is None else prey_order),
        np.full(p, 0.5) if flee is None else flee,
    )
    return core.step({"predator": np.array([actions])})


@pytest.mark.parametrize("case", range(2))
def test_upstream_episodes_replay_exactly(case):
    """Every step of a recorded upstream episode (200 steps of random legal play): the team
    reward, the observations, the state, the available actions and the ending agree."""
    rec = json.loads(UPSTREAM.read_text())[case]
    core = PredPreyBatch(1, auto_reset=False, miscapture_punishment=rec["miscapture_punishment"])
    core.reset(seed=0)
    place(core, rec["agents"], rec["prey"])
    obs, state, mask = core._observe()
    np.testing.assert_array_equal(obs[0], unpack(rec["obs"], (8, 75)))
    np.testing.assert_array_equal(state[0], unpack(rec["state"], (300,)))
    np.testing.assert_array_equal(mask[0], unpack(rec["avail"], (8, 6)))
    total = 0.0
    for t, s in enumerate(rec["steps"]):
        agent_order, prey_order = s["order"]
        flee = np.full(8, 0.5)
        turn = {p: k for k, p in enumerate(prey_order)}
        for p, n, c in s["moves"]:  # upstream's randint(n) = c: the c-th free neighbour
            flee[turn[p]] = (c + 0.5) / n
        out = step(core, s["actions"], agent_order, prey_order, flee)
        assert out.rewards[0, 0] == s["reward"], t
        np.testing.assert_array_equal(out.obs["predator"][0], unpack(s["obs"], (8, 75)))
        np.testing.assert_array_equal(out.state[0], unpack(s["state"], (300,)))
        np.testing.assert_array_equal(out.action_mask["predator"][0], unpack(s["avail"], (8, 6)))
        assert bool(out.terminated[0] or out.truncated[0]) == s["terminated"], t
        assert bool(out.truncated[0]) == s["episode_limit"], t
        total += float(out.rewards[0, 0])
    assert len(rec["steps"]) == 200 and total == sum(s["reward"] for s in rec["steps"])
    assert core.miscaptures[0] > 0 and core.caught[0] > 0  # both rules were exercised


def small(**options):
    core = PredPreyBatch(1, auto_reset=False, **{"world_shape": (5, 5), **options})
    core.reset(seed=0)
    return core


def test_two_catching_predators_capture_and_freeze():
    core = small(n_agents=3, n_prey=2)
    place(core, [[2, 1], [2, 3], [0, 0]], [[2, 2], [4, 4]])
    assert core._observe()[2][0, 0, CATCH] == 1 and core._observe()[2][0, 2, CATCH] == 0
    out = step(core, [CATCH, CATCH, STAY])
    assert out.rewards[0].tolist() == [10.0] * 3  # the team's reward, for every predator
    assert not core.prey_alive[0, 0] and core.grid[0, 2, 2, 1] == 0
    assert core.frozen[0].tolist() == [True, True, False]
    assert core.grid[0, 2, 1, 0] == 0 and core.grid[0, 2, 3, 0] == 0  # removed from the grid
    assert out.active["predator"][0].tolist() == [False, False, True]
    obs, mask = out.obs["predator"][0], out.action_mask["predator"][0]
    assert not obs[:2].any() and obs[2].any()  # a frozen predator observes zeros
    assert mask[0].tolist() == [0, 0, 0, 0, 1, 0]  # and may only stay
    assert not out.terminated[0]  # a prey is left and a predator is free
    assert core.caught[0] == 1 and core.miscaptures[0] == 0


def test_a_lone_catch_is_punished_and_the_prey_flees():
    core = small(n_agents=2, n_prey=1)
    place(core, [[2, 1], [0, 0]], [[2, 2]])
    out = step(core, [CATCH, STAY], flee=[0.0])  # the first free neighbour: right
    assert out.rewards[0].tolist() == [-2.0, -2.0]
    assert core.prey_alive[0, 0] and not core.frozen[0].any()
    assert core.prey_pos[0, 0].tolist() == [2, 3] and core.miscaptures[0] == 1
    # A predator beside two prey that catches alone is punished once for each.
    core = small(n_agents=2, n_prey=2, miscapture_punishment=-0.5)
    place(core, [[2, 2], [4, 4]], [[2, 1], [2, 3]])
    assert step(core, [CATCH, STAY]).rewards[0, 0] == -1.0
    # No punishment: p = 0 makes the lone attempt free (the task without the penalty).
    core = small(n_agents=2, n_prey=1, miscapture_punishment=0.0)
    place(core, [[2, 1], [0, 0]], [[2, 2]])
    assert step(core, [CATCH, STAY]).rewards[0, 0] == 0.0


def test_catch_counts_only_beside_the_prey_and_after_the_moves():
    core = small(n_agents=2, n_prey=1)
    # The second predator steps beside the prey first, then both catch: no; catch is its
    # own action. One moves this step and catches the next: a lone catch each time.
    place(core, [[2, 1], [2, 4]], [[0, 2]])
    out = step(core, [CATCH, LEFT], flee=[0.0])  # predator 0 not beside the prey: nothing
    assert out.rewards[0, 0] == 0.0 and core.agent_pos[0, 1].tolist() == [2, 3]
    # Diagonal neighbours do not count.
    place(core, [[1, 1], [1, 3]], [[2, 2]])
    assert step(core, [CATCH, CATCH]).rewards[0, 0] == 0.0


def test_moves_are_blocked_by_anything_and_by_the_walls():
    core = small(n_agents=2, n_prey=1)
    place(core, [[0, 0], [0, 1]], [[4, 4]])
    step(core, [RIGHT, UP], agent_order=[0, 1])  # 0 is blocked by 1, 1 by the wall
    assert core.agent_pos[0].tolist() == [[0, 0], [0, 1]]
    place(core, [[0, 0], [0, 1]], [[4, 4]])
    step(core, [RIGHT, DOWN], agent_order=[1, 0])  # 1 leaves first: 0 follows
    assert core.agent_pos[0].tolist() == [[0, 1], [1, 1]]
    mask = core._observe()[2][0]
    assert mask[0].tolist() == [1, 1, 1, 0, 1, 0]  # up leaves the grid from row 0


def test_the_episode_ends_when_every_prey_is_caught_or_at_the_limit():
    core = small(n_agents=2, n_prey=1)
    place(core, [[2, 1], [2, 3]], [[2, 2]])
    out = step(core, [CATCH, CATCH])
    assert out.terminated[0] and not out.truncated[0]
    core = small(n_agents=2, n_prey=1, episode_limit=3)
    place(core, [[0, 0], [4, 4]], [[2, 2]])
    ends = [bool(step(core, [STAY, STAY]).truncated[0]) for _ in range(3)]
    assert ends == [False, False, True] and core.steps[0] == 3
    env = envs.make("predprey/punish-v0")
    env.reset(seed=0)
    for t in range(200):
        assert env.agents, t
        _, _, term, trunc, info = env.step(dict.fromkeys(env.agents, STAY))
    assert all(trunc.values()) and not any(term.values()) and not env.agents
    assert info["predator_0"] == {"prey_caught": 0, "miscaptures": 0}


def test_seeds_decide_the_episode():
    def run(seed):
        core = PredPreyBatch(4, seed=seed)
        out = [core.reset().state]
        rng = np.random.default_rng(0)
        for _ in range(30):
            out.append(core.step({"predator": rng.integers(0, 6, (4, 8))}).state)
        return np.stack(out)

    np.testing.assert_array_equal(run(1), run(1))
    assert not np.array_equal(run(1), run(2))
    # world i starts from seed + i: world 1 of seed 1 starts as world 0 of seed 2
    a, b = PredPreyBatch(2, seed=1).reset().state, PredPreyBatch(1, seed=2).reset().state
    np.testing.assert_array_equal(a[1], b[0])


def test_the_defaults_are_rel_overgen_yaml():
    core = PredPreyBatch(2, seed=0)
    step0 = core.reset()
    o = core.options
    assert (o.n_agents, o.n_prey, o.world_shape, o.agent_obs) == (8, 8, (10, 10), (2, 2))
    assert (o.episode_limit, o.miscapture_punishment, o.reward_stag) == (200, -2.0, 10.0)
    assert step0.obs["predator"].shape == (2, 8, 75) and step0.state.shape == (2, 300)
    assert step0.state.reshape(2, 10, 10, 3).sum(axis=(1, 2)).tolist() == [[8, 8, 0]] * 2
    assert step0.action_mask["predator"].shape == (2, 8, 6)


@pytest.mark.parametrize(
    "bad, match",
    [
        ({"n_agents": 1}, "n_agents"),
        ({"world_shape": (3, 3)}, "need more than"),
        ({"world_shape": 7}, "two integers"),
        ({"miscapture_punishment": float("nan")}, "finite"),
        ({"episode_limit": 0}, "episode_limit"),
    ],
)
def test_bad_arguments_say_what_is_allowed(bad, match):
    with pytest.raises(envs.EnvError, match=match):
        envs.make("predprey/punish-v0", **bad)
