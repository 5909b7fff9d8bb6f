"""Learning regressions: PPO must still learn. Each test trains 3-20 s on a small task and
asserts that the trained policy beats a uniformly random one on the same env by a margin far
outside seed noise, on each of PPO's three paths: one module
shared by all agents (ippo and mappo), one module per agent or per group, and a GRU module
on a task that cannot be solved without memory.

Both scores come from the run's own EnvRunner on freshly reset envs: the trained policy
samples its actions (``explore=True``: the greedy action of an untrained network can be
right by chance; its samples are near uniform), the random baseline draws uniformly among the legal
actions (``random_actions=True``). A score is the mean return per episode of a module (the
sum over its agents), over ``EPISODES_PER_ENV`` full episodes of every env.

Thresholds were set from 10 seeds per configuration (trained vs random; seed 0 is the one
tested); the numbers are next to each threshold. A learner whose policy-gradient term has its
sign flipped, or whose loss is zeroed, fails every test here.
"""

import numpy as np
import pytest

from policies import algorithm

EPISODES_PER_ENV = 4
SMALL = dict(
    train_batch_size=512, minibatch_size=256, num_epochs=4, num_envs_per_env_runner=32, lr=3e-3
)


RECALL = "test/recall-v0"  # tests.masked_env.Recall, registered in conftest


def scores(algo, episode_len: int, random_actions: bool = False) -> dict[str, float]:
    """Module -> mean return per episode (summed over the module's agents), over
    ``EPISODES_PER_ENV`` full episodes of each of the runner's envs, sampled with the trained
    policy or uniformly among legal actions."""
    runner = algo.env_runner
    B = runner.num_envs
    episodes = runner.sample(
        num_timesteps=B * episode_len * EPISODES_PER_ENV,
        explore=True,
        random_actions=random_actions,
        force_reset=True,
    )
    total: dict[str, float] = {}
    for e in episodes:
        total[e.module_id] = total.get(e.module_id, 0.0) + float(np.sum(e.get_rewards()))
    return {mid: ret / (B * EPISODES_PER_ENV) for mid, ret in total.items()}


def train(env_id, *, iterations, episode_len, algo="ippo", settings=SMALL, model=None, **options):
    """Random and trained scores (see :func:`scores`) of a run of ``iterations``."""
    info = algorithm.get(algo)
    s = info.settings(**settings)
    for key, value in (model or {}).items():
        setattr(s.model, key, value)
    algo_ = info.build(env_id, s, seed=0, **options).build_algo()
    try:
        random = scores(algo_, episode_len, random_actions=True)
        for _ in range(iterations):
            algo_.train()
        return random, scores(algo_, episode_len)
    finally:
        algo_.stop()


def check(random: dict, trained: dict, *, margin: float, floor: float) -> None:
    print({mid: f"trained {trained[mid]:.2f} vs random {random[mid]:.2f}" for mid in trained})
    assert set(random) == set(trained), (random, trained)
    for mid in trained:
        msg = f"{mid}: trained {trained[mid]:.2f} vs random {random[mid]:.2f}"
        assert trained[mid] >= random[mid] + margin, f"{msg}: not {margin} better"
        assert trained[mid] >= floor, f"{msg}: under {floor}"


@pytest.mark.parametrize("algo", ["ippo", "mappo"])
def test_a_shared_module_learns_the_masked_grid(ray_session, algo):
    # Both agents walk right to the last cell (+1 a step there), actions masked at the ends;
    # the best policy scores ~17.6 a team episode. Seeds 0-9, 10 iterations, ~3 s each:
    # ippo trained 17.04-17.44 vs random 2.91-3.72; mappo 16.92-17.42 vs 2.75-3.59.
    random, trained = train("test/masked_grid-v0", algo=algo, iterations=10, episode_len=10)
    assert set(trained) == {"shared"}
    check(random, trained, margin=10.0, floor=14.0)


def test_a_module_per_agent_each_learns_the_masked_grid(ray_session):
    # Seeds 0-9, 10 iterations, ~3 s each: trained a0 8.48-8.81, a1 8.26-8.51 vs random
    # 1.35-1.80 (best ~8.8 per agent). A module that acted for or learned from the other
    # agent's observations or rewards could not learn its own.
    random, trained = train(
        "test/masked_grid-v0", iterations=10, episode_len=10, sharing="per_agent"
    )
    assert set(trained) == {"a0", "a1"}
    check(random, trained, margin=5.0, floor=6.5)


def test_a_module_per_group_learns_speaker_listener(ray_session):
    # Two groups with different spaces (speaker: 3 obs, 3 words; listener: 11 obs, 5 moves),
    # one team reward (minus the listener's squared distance to the target). Seeds 0-9, 25
    # iterations of 1024 steps, 16-19 s each: trained -21.00..-18.00 vs random -43.76..-39.05
    # (smallest gain 19.9). A listener that stands still scores -34.4; a run with the
    # policy-gradient sign flipped scored -31.9 (10.2 over random): the floor stops both.
    random, trained = train(
        "mpe/simple_speaker_listener-v4",
        iterations=25,
        episode_len=25,
        settings={
            **SMALL,
            "train_batch_size": 1024,
            "minibatch_size": 512,
            "num_envs_per_env_runner": 64,
        },
        sharing="per_group",
        env_config={"max_cycles": 25},
    )
    assert set(trained) == {"speaker", "listener"}
    check(random, trained, margin=12.0, floor=-26.0)


def test_a_recurrent_module_learns_to_recall_a_cue(ray_session):
    # 8-step episodes, 12 steps of 32 envs a batch: episodes run on across iterations, so the
    # sampler's carried state is used too. Seeds 0-9, 20 iterations, 9-17 s each: trained
    # 13.93-13.98 vs random 6.82-7.24 (the best is 14; without memory nothing beats 7 in
    # expectation: feed-forward modules trained the same way scored 6.63-6.95). At lr 3e-3
    # seed 9 learned the cue, then lost it (trained 7.91 after 15 iterations, 12.27 after
    # 20): hence 1e-3, stable on all ten seeds.
    random, trained = train(
        RECALL,
        iterations=20,
        episode_len=8,
        settings={**SMALL, "train_batch_size": 384, "minibatch_size": 192, "lr": 1e-3},
        model={"recurrent": True, "max_seq_len": 8},
    )
    assert set(trained) == {"shared"}
    check(random, trained, margin=4.0, floor=11.0)
