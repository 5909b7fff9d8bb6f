"""The learned high level's env (``volleyball/3v3_high-v0``): options over the shipped team's
frozen skills, their masks, and the reward of a point."""

import numpy as np
import pytest

from envs.volleyball.high_level import CHOICES, GOTO_O, PASS_O, SERVE_O, HighLevel3v3


def test_it_is_registered_with_the_options_as_actions():
    import envs

    env = envs.make("volleyball/3v3_high-v0")
    assert env.action_space("near_0").n == len(CHOICES)


@pytest.fixture(scope="module")
def env():
    e = HighLevel3v3(8, seed=0)
    return e


def test_observation_and_masks_at_the_start(env):
    step = env.reset(seed=0)
    assert step.obs["near"].shape == (8, 3, 57 + len(CHOICES))
    mask = step.action_mask["near"]
    serving = env.core.serving == 0
    assert serving.any() and (~serving).any()
    assert (mask[..., GOTO_O] == 1).all()
    np.testing.assert_array_equal(mask[:, 2, SERVE_O], serving)  # only the server, only then
    assert (mask[:, :2, SERVE_O] == 0).all()
    assert (mask[..., PASS_O:] == 0).all()  # nobody may touch the ball yet


def test_a_masked_choice_flies_to_the_drones_point(env):
    env.reset(seed=1)
    env.step({"near": np.full((8, 3), PASS_O)})
    assert (env.option == GOTO_O).all()
    assert (env.team.skill == 0).all()


def test_the_point_ends_with_the_result_and_the_touches_as_reward(env):
    step = env.reset(seed=2)
    rng = np.random.default_rng(0)
    ended = np.zeros(8, bool)
    total = np.zeros(8)
    for _ in range(env.max_steps):
        mask = step.action_mask["near"]
        pick = np.array([[rng.choice(np.flatnonzero(m)) for m in row] for row in mask])
        hits_before = env.core.hits.copy()
        step = env.step({"near": pick})
        assert (step.rewards == step.rewards[:, :1]).all()  # one team reward
        now = (step.terminated | step.truncated) & ~ended
        total += np.where(~ended, step.rewards[:, 0], 0.0)
        if now.any():
            result = step.info["result"][now]
            assert set(result) <= {-1.0, 0.0, 1.0}
            # the reward beyond the touches' 0.1s is the result
            frac = total[now] - result
            np.testing.assert_allclose(frac * 10, np.round(frac * 10), atol=1e-4)
            assert (hits_before >= 0).all()
        ended |= now
        if ended.all():
            break
    assert ended.all()


def test_bad_options_are_refused():
    with pytest.raises(ValueError, match="decision_steps"):
        HighLevel3v3(1, decision_steps=0)
    with pytest.raises(Exception, match="cannot read"):
        HighLevel3v3(1, team="/nonexistent/team.yaml")
