import numpy as np
import pytest
from ray.rllib.core.columns import Columns
from ray.rllib.env.single_agent_episode import SingleAgentEpisode

from cluster.sampling import EpisodeFactory
from policies.algorithms import PPOSettings, build

SMALL = dict(train_batch_size=400, minibatch_size=128, num_epochs=1, num_envs_per_env_runner=8)


def test_episode_factory_equals_the_constructor():
    rng = np.random.default_rng(0)
    obs, act = rng.random((6, 4), dtype=np.float32), rng.integers(0, 3, 5)
    rew, logp = rng.random(5, dtype=np.float32), rng.random(5, dtype=np.float32)
    dist = rng.random((5, 3), dtype=np.float32)
    fast = EpisodeFactory()(obs, act, rew, logp, dist, terminated=False, truncated=True)
    slow = SingleAgentEpisode(
        observations=obs,
        actions=act,
        rewards=rew,
        infos=[{}] * 6,
        truncated=True,
        extra_model_outputs={Columns.ACTION_LOGP: logp, Columns.ACTION_DIST_INPUTS: dist},
        len_lookback_buffer=0,
    )
    fast.validate()
    a, b = fast.get_state(), slow.get_state()
    a.pop("id_"), b.pop("id_")
    assert a.keys() == b.keys()
    for key in a:
        assert repr(a[key]) == repr(b[key]), key
    assert len(fast) == 5 and fast.is_done and fast.get_return() == pytest.approx(rew.sum())


@pytest.fixture(scope="module")
def runner(ray_session):
    algo = build("mpe/simple_spread-v3", "mappo", PPOSettings(**SMALL), seed=1).build_algo()
    yield algo.env_runner
    algo.stop()


def test_runner_cuts_episodes_at_resets_and_counts_steps(runner):
    episodes = runner.sample(num_timesteps=8 * 30)  # 30 steps of 8 envs: one reset at 25
    assert sum(len(e) for e in episodes) == 8 * 30 * 3
    done = [e for e in episodes if e.is_done]
    assert len(done) == 8 * 3 and all(len(e) == 25 and e.is_truncated for e in done)
    ongoing = [e for e in episodes if not e.is_done]
    assert len(ongoing) == 8 * 3 and all(len(e) == 5 for e in ongoing)
    for e in episodes:
        assert len(e.get_observations()) == len(e) + 1
        assert e.get_extra_model_outputs(Columns.ACTION_LOGP).shape == (len(e),)
    m = runner.get_metrics()
    peek = lambda k: m[k].peek() if hasattr(m[k], "peek") else m[k]  # noqa: E731
    assert peek("num_env_steps_sampled") == 240
    assert peek("num_episodes") == 8


def test_runner_mappo_inputs_carry_state_and_agent_id(runner):
    episodes = runner.sample(num_timesteps=8)
    lay = runner.layout
    assert (lay.obs_dim, lay.critic_dim, lay.size) == (18, 54 + 3, 18 + 57)
    x = episodes[0].get_observations()
    assert x.shape[1] == lay.size
    # the critic's state is all agents' observations; the agent's own one is in it
    own, state = x[0, :18], x[0, 18:72].reshape(3, 18)
    assert any(np.allclose(own, s) for s in state)
    assert x[0, 72:].sum() == 1.0
