"""The fast sampler: episode chunks equal RLlib's, resets, counts, module inputs of every
kind, recurrent state carried exactly as the learner replays it."""

import numpy as np
import pytest
import torch
from ray.rllib.core.columns import Columns
from ray.rllib.env.single_agent_episode import SingleAgentEpisode

from policies import algorithm
from policies.ppo.array_path import gae_batch
from policies.sampling import EpisodeFactory

SMALL = dict(train_batch_size=400, minibatch_size=128, num_epochs=1, num_envs_per_env_runner=8)


def build(env_id, algo, seed=1, **model):
    info = algorithm.get(algo)
    settings = info.settings(**SMALL)
    for k, v in model.items():
        setattr(settings.model, k, v)
    return info.build(env_id, settings, seed=seed).build_algo()


def test_episode_factory_equals_the_constructor():
    rng = np.random.default_rng(0)
    obs = {"obs": rng.random((6, 4), dtype=np.float32), "state": rng.random((6, 2), np.float32)}
    act = rng.integers(0, 3, 5)
    rew, logp = rng.random(5, dtype=np.float32), rng.random(5, dtype=np.float32)
    dist = rng.random((5, 3), dtype=np.float32)
    fast = EpisodeFactory()(
        obs, act, rew, logp, dist, terminated=False, truncated=True, agent_id="a", module_id="m"
    )
    slow = SingleAgentEpisode(
        observations=[{k: v[i] for k, v in obs.items()} for i in range(6)],
        actions=act,
        rewards=rew,
        infos=[{}] * 6,
        truncated=True,
        extra_model_outputs={Columns.ACTION_LOGP: logp, Columns.ACTION_DIST_INPUTS: dist},
        len_lookback_buffer=0,
        agent_id="a",
        module_id="m",
    )
    slow.to_numpy()
    fast.validate()
    a, b = fast.get_state(), slow.get_state()
    for key in ("id_", "multi_agent_episode_id", "observations"):
        a.pop(key), b.pop(key)
    assert a.keys() == b.keys()
    for key in a:
        assert repr(a[key]) == repr(b[key]), key
    for k in obs:
        np.testing.assert_array_equal(fast.get_observations()[k], slow.get_observations()[k])
    assert len(fast) == 5 and fast.is_done and fast.get_return() == pytest.approx(rew.sum())


@pytest.fixture(scope="module")
def runner(ray_session):
    algo = build("mpe/simple_spread-v3", "mappo")
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
        assert len(e.get_observations()["obs"]) == len(e) + 1
        assert e.get_extra_model_outputs(Columns.ACTION_LOGP).shape == (len(e),)
        assert e.module_id == "shared" and e.agent_id.startswith("agent_")
    m = runner.get_metrics()
    peek = lambda k: m[k].peek() if hasattr(m[k], "peek") else m[k]  # noqa: E731
    assert peek("num_env_steps_sampled") == 240
    assert peek("num_episodes") == 8


def test_runner_mappo_inputs_carry_state_and_agent_id(runner):
    episodes = runner.sample(num_timesteps=8)
    spec = runner.modules["shared"].spec
    assert (spec.obs_shape, spec.state_dim, spec.num_ids) == ((18,), 54, 3)
    x = episodes[0].get_observations()
    assert set(x) == {"obs", "state", "agent_id"}
    # the critic's state is all agents' observations; the agent's own one is in it
    own, state = x["obs"][0], x["state"][0].reshape(3, 18)
    assert any(np.allclose(own, s) for s in state)
    assert x["agent_id"][0].sum() == 1.0
    agent = int(episodes[0].agent_id.split("_")[1])
    assert x["agent_id"][0, agent] == 1.0 and np.allclose(own, state[agent])


def test_two_groups_sample_into_their_own_modules(ray_session):
    algo = build("mpe/simple_tag-v3", "mappo")
    episodes = algo.env_runner.sample(num_timesteps=8 * 4)
    by_module = {}
    for e in episodes:
        by_module.setdefault(e.module_id, set()).add(e.agent_id)
    assert by_module == {
        "adversary": {"adversary_0", "adversary_1", "adversary_2"},
        "agent": {"agent_0"},
    }
    obs_dims = {e.module_id: e.get_observations()["obs"].shape[1] for e in episodes}
    assert obs_dims == {"adversary": 16, "agent": 14}
    algo.stop()


def test_images_stay_uint8_from_env_to_learner(ray_session):
    algo = build("test/image_grid-v0", "ippo")
    episodes = algo.env_runner.sample(num_timesteps=16)
    obs = episodes[0].get_observations()["obs"]
    assert obs.dtype == np.uint8 and obs.shape[1:] == (8, 8, 3)
    result = algo.train()
    assert np.isfinite(result["learners"]["shared"]["policy_loss"])
    algo.stop()
    algo = build("test/image_grid-v0", "mappo")  # the critic reads the state, not the pictures
    assert algo.env_runner.modules["shared"].spec.state_dim == 2
    assert np.isfinite(algo.train()["learners"]["shared"]["vf_loss"])
    algo.stop()


def rllib_batch(learner, episodes) -> dict:
    """What RLlib's learner connectors (GAE, sequence padding, ...) make of ``episodes``."""
    return learner._learner_connector(
        rl_module=learner.module,
        batch={},
        episodes=episodes,
        shared_data={},
        metrics=learner.metrics,
    )


def test_recurrent_sampling_equals_the_learners_sequence_replay(ray_session):
    """The hidden state carried through sampling (across resets and sample calls) is the one
    the learner rebuilds from STATE_IN at each sequence start: the learner's forward pass over
    the batch gives the distribution inputs recorded while sampling."""
    algo = build("mpe/simple_spread-v3", "mappo", recurrent=True, max_seq_len=8)
    runner = algo.env_runner
    learner = algo.learner_group._learner
    weights = learner.module["shared"].state_dict()
    for k, v in runner.module["shared"].state_dict().items():
        assert torch.equal(v, weights[k])
    runner.sample(num_timesteps=8 * 20)  # leaves every episode 20 steps in
    episodes = runner.sample(num_timesteps=8 * 20)  # continues them, resets at 25
    assert {e.t_started for e in episodes} == {0, 20}
    recorded = [e.get_extra_model_outputs(Columns.ACTION_DIST_INPUTS) for e in episodes]
    batch = rllib_batch(learner, episodes)["shared"]
    with torch.no_grad():
        out = learner.module["shared"].forward_train(batch)[Columns.ACTION_DIST_INPUTS]
    mask = batch[Columns.LOSS_MASK].bool()
    replayed = out[mask].numpy()
    expected = np.concatenate(recorded)
    assert replayed.shape == expected.shape
    np.testing.assert_allclose(replayed, expected, atol=1e-5)
    # ... and a plain step-by-step loop over one continued episode gives the same.
    module = runner.module["shared"]
    e = next(e for e in episodes if e.t_started == 20 and len(e) > 3)
    h = {
        k: torch.from_numpy(v[None])
        for k, v in e.get_extra_model_outputs(
            Columns.STATE_OUT, -1, neg_index_as_lookback=True
        ).items()
    }
    obs = e.get_observations()
    for t in range(len(recorded[episodes.index(e)])):  # the learner added one step to e
        row = {k: torch.from_numpy(v[t : t + 1]) for k, v in obs.items()}
        with torch.no_grad():
            logits, h = module.step(row, h)
        np.testing.assert_allclose(logits[0].numpy(), recorded[episodes.index(e)][t], atol=1e-5)
    algo.stop()


def episode_order(done: np.ndarray, K: int) -> list[int]:
    """Time-major row numbers in the order the episode path lists them: by env, episode
    chunk and agent, then time."""
    T, B = done.shape
    order = []
    for env in range(B):
        start = 0
        for end in [*np.flatnonzero(done[:, env]), T - 1]:
            if end < start:
                continue
            for j in range(K):
                order += [t * B * K + env * K + j for t in range(start, end + 1)]
            start = end + 1
    return order


@pytest.mark.parametrize(
    "env_id, algo, sharing",
    [
        ("mpe/simple_spread-v3", "ippo", "auto"),
        ("mpe/simple_spread-v3", "mappo", "auto"),
        ("mpe/simple_tag-v3", "mappo", "per_group"),
        ("test/masked_grid-v0", "ippo", "auto"),  # ends by termination, not only the limit
    ],
)
def test_array_batches_equal_what_rllibs_gae_makes_of_the_episodes(
    ray_session, env_id, algo, sharing
):
    """The array path's advantages and value targets are those RLlib's learner connectors
    (GAE included) compute from the same rollout cut into episodes."""
    info = algorithm.get(algo)
    algo_ = info.build(env_id, info.settings(**SMALL), seed=3, sharing=sharing).build_algo()
    try:
        runner = algo_.env_runner
        runner.sample(num_timesteps=8 * 20)  # start mid-episode: chunks with t_started > 0
        roll = runner.rollout(8 * 30)
        learner = algo_.learner_group._learner
        for mid, m in runner.modules.items():
            if not m.trained:
                continue
            ours = gae_batch(
                m.module,
                roll.modules[mid],
                roll.done,
                roll.terminated,
                runner.config.gamma,
                runner.config.lambda_,
            )
            episodes = runner._cut_episodes(m, roll.modules[mid], roll)
            theirs = rllib_batch(learner, episodes)[mid]
            # RLlib adds one masked step to each episode chunk (for its GAE bootstrap).
            real = np.asarray(theirs[Columns.LOSS_MASK], bool)
            order = episode_order(roll.done, m.agents_per_env)
            assert len(order) == real.sum() == 30 * 8 * m.agents_per_env
            skip = (Columns.OBS, Columns.VF_PREDS)
            expected = {k: np.asarray(theirs[k])[real] for k in ours if k not in skip}
            # RLlib standardises advantages with its padding steps in the statistics; the array
            # path leaves them to the learner: the same up to an affine map.
            adv = expected["advantages"]
            expected["advantages"] = (adv - adv.mean()) / adv.std()
            ours = dict(ours)
            raw = ours["advantages"]
            # the sampled values are where the value targets start from
            np.testing.assert_allclose(
                ours[Columns.VF_PREDS] + raw, ours["value_targets"], atol=1e-5
            )
            ours["advantages"] = (raw - raw.mean()) / raw.std()
            for key, want in expected.items():
                np.testing.assert_allclose(
                    ours[key][order], want, rtol=1e-4, atol=1e-4, err_msg=key
                )
    finally:
        algo_.stop()


def test_gumbel_max_never_draws_a_masked_action_even_from_a_zero_uniform(monkeypatch):
    """torch.rand may return exactly 0 (Gumbel noise -inf): a legal action must still win over
    the masked ones, whose log-probability is about float32's minimum."""
    from policies.inference import gumbel_max

    logits = torch.full((4, 6), torch.finfo(torch.float32).min)
    logits[:, 0] = -2e-3  # a dead SMAC agent: only no-op is legal
    logits[2, 3] = 0.5  # another row with two legal actions
    logp = torch.log_softmax(logits, dim=-1)

    def zero_for_the_legal(x):  # the legal no-op's uniform is exactly 0, the others' are not
        u = torch.full_like(x, 0.5)
        u[:, 0] = 0.0
        return u

    monkeypatch.setattr(torch, "rand_like", zero_for_the_legal)
    picked = gumbel_max(logp)
    assert picked[[0, 1, 3]].tolist() == [0, 0, 0] and picked[2].item() == 3
    monkeypatch.undo()
    draws = gumbel_max(logp[2:3].expand(4000, -1))
    share = (draws == 3).float().mean().item()  # exp(0.5) / (exp(0.5) + exp(-0.002))
    assert abs(share - 0.6229) < 0.03


def test_whole_episodes_are_stitched_across_rollouts(ray_session):
    """The value-based path's episodes (``sample_episodes``): 3 masked-grid envs sampled 7
    steps at a time, so every 10-step episode spans two or three rollouts. Each episode comes
    back whole: 10 actions, 11 observations from its reset to its last, every step's move
    the action taken (stay, left, right), its reward the agent's cell, never a step of
    another episode."""
    info = algorithm.get("iql")
    s = info.settings(batch_size_run=3, test_interval=0)
    algo_ = info.build("test/masked_grid-v0", s, seed=2).build_algo()
    try:
        runner = algo_.env_runner
        episodes = []
        for _ in range(12):  # 84 steps of each env: 8 whole episodes each
            got, steps = runner.sample_episodes(7 * 3, epsilon=1.0)
            assert steps == 21
            episodes += got
        assert len(episodes) == 3 * 8
        for e in episodes:
            obs, acts = e.inputs["shared"]["obs"], e.actions["shared"]  # [11, 2, 5], [10, 2]
            assert e.length == 10 and obs.shape[:2] == (11, 2) and not e.terminated
            pos = obs.argmax(-1)
            assert (obs.sum(-1) == 1).all()
            np.testing.assert_array_equal(pos[1:] - pos[:-1], np.array([0, -1, 1])[acts])
            np.testing.assert_array_equal(e.rewards, (pos[1:] == 4).astype(np.float32))
            assert e.state.shape == (11, 10)
            np.testing.assert_array_equal(e.state.reshape(11, 2, 5), obs)
    finally:
        algo_.stop()
