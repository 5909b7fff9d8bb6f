"""Claus & Boutilier's climbing and penalty games (envs.matrix): the payoff tables of the paper
(Tables 3 and 4), their optima, one joint action per episode, the shared reward."""

import itertools

import numpy as np
import pytest

import envs
from envs.matrix.games import ClimbingBatch, PenaltyBatch

CLIMBING = [[11, -30, 0], [-30, 7, 6], [0, 0, 5]]


def table(env_id: str, **cfg) -> np.ndarray:
    """The payoff of every joint action, played through the PettingZoo face."""
    env = envs.make(env_id, **cfg)
    out = np.zeros((3, 3))
    for i, j in itertools.product(range(3), range(3)):
        env.reset(seed=0)
        _, rew, term, trunc, _ = env.step({"agent_0": i, "agent_1": j})
        assert rew["agent_0"] == rew["agent_1"]  # one team reward
        assert all(term.values()) and not any(trunc.values()) and not env.agents
        out[i, j] = rew["agent_0"]
    return out


def test_climbing_table_and_optimum():
    t = table("matrix/climbing-v0")
    np.testing.assert_array_equal(t, CLIMBING)
    assert np.unravel_index(t.argmax(), t.shape) == (0, 0) and t.max() == 11
    # Against a uniformly random partner, c is each agent's best action (-6.3, -5.7, 1.7):
    # the safe (c, c) = 5, relative overgeneralisation's trap.
    np.testing.assert_allclose(t.mean(axis=1), [-19 / 3, -17 / 3, 5 / 3])


@pytest.mark.parametrize("k", [-100, -25, 0])
def test_penalty_table_and_optima(k):
    cfg = {} if k == -100 else {"k": k}
    t = table("matrix/penalty-v0", **cfg)
    np.testing.assert_array_equal(t, [[10, 0, k], [0, 2, 0], [k, 0, 10]])
    assert t.max() == 10 and sorted(zip(*np.nonzero(t == 10), strict=True)) == [(0, 0), (2, 2)]


def test_observation_is_a_constant_and_the_game_has_no_randomness():
    env = envs.make("matrix/climbing-v0")
    a, _ = env.reset(seed=1)
    b, _ = env.reset(seed=2)
    assert all(np.array_equal(a[x], [1.0]) and np.array_equal(b[x], [1.0]) for x in a)
    assert np.array_equal(env.state(), [1.0])


def test_the_core_plays_a_batch_and_starts_again():
    core = ClimbingBatch(9, seed=0)
    core.reset()
    joint = np.array(list(itertools.product(range(3), range(3))))
    out = core.step({"agent": joint})
    np.testing.assert_array_equal(out.rewards[:, 0], np.ravel(CLIMBING))
    assert out.terminated.all() and not out.truncated.any()
    assert PenaltyBatch(1, k=-7).payoff[0, 2] == -7
    with pytest.raises(ValueError, match="actions are 0..2"):
        core.step({"agent": np.full((9, 2), 3)})


def test_k_is_a_penalty_and_climbing_takes_none():
    with pytest.raises(envs.EnvError, match="k must be"):
        envs.make("matrix/penalty-v0", k=5)
    with pytest.raises(envs.EnvError, match="takes no argument k"):
        envs.make("matrix/climbing-v0", k=-5)
