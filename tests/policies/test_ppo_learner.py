"""PPO's fused learner (policies/ppo/learner.py): the loss choices, RLlib's loss by name, the
minibatch count and the optimiser."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from ray.rllib.algorithms.ppo.torch.ppo_torch_learner import PPOTorchLearner
from ray.rllib.core.columns import Columns
from ray.rllib.evaluation.postprocessing import Postprocessing

from policies import algorithm
from policies.ppo import PPOSettings
from policies.ppo.array_path import train_batches
from policies.ppo.learner import LossSettings, value_loss

SMALL = dict(train_batch_size=400, minibatch_size=128, num_epochs=2, num_envs_per_env_runner=8)


def test_change_clip_is_ppo2s_the_larger_error_with_the_move_clipped():
    """CleanRL/JaxMARL: 0.5 max((v - R)^2, (v_old + clip(v - v_old) - R)^2); where the clipped
    error is the larger one the value gets no gradient."""
    v = torch.tensor([0.5, 0.1], requires_grad=True)
    old, target = torch.tensor([0.0, 0.0]), torch.tensor([1.0, 1.0])
    loss = value_loss(v, old, target, LossSettings(value_clip="change", vf_clip_param=0.2))
    # row 0 moved 0.5 > 0.2: clipped to 0.2, error 0.64 > 0.25; row 1 moved 0.1: error 0.81
    assert loss.item() == pytest.approx(0.5 * (0.64 + 0.81) / 2)
    loss.backward()
    assert v.grad[0] == 0 and v.grad[1] == pytest.approx(0.5 * 2 * (0.1 - 1.0) / 2)


def test_loss_clip_is_rllibs_clamp_and_none_is_the_squared_error():
    v, target = torch.tensor([0.0, 5.0]), torch.tensor([0.0, 0.0])
    clamp = LossSettings(value_clip="loss", vf_clip_param=10.0)
    assert value_loss(v, None, target, clamp).item() == pytest.approx((0 + 10) / 2)
    assert value_loss(v, None, target, LossSettings(value_clip="none")).item() == 12.5


@pytest.mark.parametrize(
    "key, value",
    [
        ("value_clip", "ppo2"),
        ("advantage_norm", "epoch"),
        ("adam_eps", 0.0),
        ("learner_threads", 0),
    ],
)
def test_bad_loss_choices_are_refused_with_the_allowed_values(key, value):
    with pytest.raises(ValueError, match=key) as err:
        PPOSettings(**{key: value}).validate()
    message = str(err.value)
    assert "change/loss/none" in message and "minibatch/batch/active_batch/none" in message


def _algo(**settings):
    info = algorithm.get("ippo")
    return info.build("mpe/simple_spread-v3", info.settings(**SMALL, **settings), seed=2)


def test_rllibs_loss_is_reachable_by_name(ray_session):
    """value_clip=loss with advantages standardised beforehand is RLlib's PPO loss, number for
    number, on the same minibatch."""
    algo = _algo(value_clip="loss", vf_clip_param=10.0, advantage_norm="none").build_algo()
    try:
        learner = algo.learner_group._learner
        batch = train_batches(algo.env_runner).batches["shared"]
        mb = learner._tensors(batch)
        adv = mb[Postprocessing.ADVANTAGES]
        mb[Postprocessing.ADVANTAGES] = (adv - adv.mean()) / adv.std()
        module = learner.module["shared"]
        config = learner.config.get_config_for_module("shared")
        entropy = learner.entropy_coeff_schedulers_per_module["shared"].get_current_value()
        ours, _ = learner.ppo_loss(
            module, mb, LossSettings.of(learner.config), entropy, None, log=False
        )
        theirs = PPOTorchLearner.compute_loss_for_module(
            learner, module_id="shared", config=config, batch=mb, fwd_out=module.forward_train(mb)
        )
        assert ours.item() == pytest.approx(theirs.item(), rel=1e-5)
    finally:
        algo.stop()


def test_an_update_takes_epochs_times_equal_minibatches_with_adams_eps(ray_session):
    algo = _algo(adam_eps=1e-6, learner_threads=2).build_algo()
    try:
        learner = algo.learner_group._learner
        optimizer = learner.get_optimizer("shared")
        assert optimizer.defaults["eps"] == 1e-6
        sizes = []
        step = optimizer.step

        def counted(*a, **k):
            sizes.append(1)
            return step(*a, **k)

        optimizer.step = counted
        before = {k: v.clone() for k, v in learner.module["shared"].state_dict().items()}
        threads = []
        fit = learner._fit
        learner._fit = lambda *a: (threads.append(torch.get_num_threads()), fit(*a))
        result = algo.train()
        assert threads == [2] and torch.get_num_threads() == 1  # the sampler's one thread
        rows = 400 // 8 * 8 * 3  # 50 steps of 8 envs, 3 agents
        assert len(sizes) == SMALL["num_epochs"] * round(rows / SMALL["minibatch_size"])
        after = learner.module["shared"].state_dict()
        assert any(not torch.equal(before[k], after[k]) for k in before)
        stats = result["learners"]["shared"]
        assert np.isfinite(stats["vf_loss"]) and np.isfinite(stats["policy_loss"])
        assert stats["num_module_steps_trained"] == SMALL["num_epochs"] * rows
    finally:
        algo.stop()


def test_num_minibatches_splits_every_modules_batch_into_that_many(ray_session):
    """JaxMARL's NUM_MINIBATCHES: the shared module's 3 agents' rows in 2 minibatches."""
    algo = _algo(num_minibatches=2).build_algo()
    try:
        learner = algo.learner_group._learner
        optimizer = learner.get_optimizer("shared")
        steps = []
        step = optimizer.step
        optimizer.step = lambda *a, **k: (steps.append(1), step(*a, **k))[1]
        algo.train()
        assert len(steps) == SMALL["num_epochs"] * 2
    finally:
        algo.stop()


def test_the_batch_carries_the_sampled_values_and_raw_advantages(ray_session):
    algo = _algo().build_algo()
    try:
        batch = train_batches(algo.env_runner).batches["shared"]
        adv = batch[Postprocessing.ADVANTAGES]
        assert abs(float(adv.mean())) > 1e-3 or abs(float(adv.std()) - 1) > 1e-3
        np.testing.assert_allclose(
            batch[Columns.VF_PREDS] + adv, batch[Postprocessing.VALUE_TARGETS], atol=1e-5
        )
    finally:
        algo.stop()


def test_stacked_seeds_learn_each_as_its_own_run(ray_session):
    """One update of a module of 2 stacked seeds moves each seed's weights as an update of a
    plain module with that seed's weights on that seed's rows alone (one full-batch minibatch,
    so the shuffle cannot tell them apart). Adam's eps of 1 and no gradient clipping make its
    step follow the gradient's size, so the loss scale shows too."""
    from policies.modules import seed_state_dict

    info = algorithm.get("ippo")

    def built(seeds: int):
        settings = info.settings(**SMALL, adam_eps=1.0, grad_clip=1e9)
        settings.model.seeds = seeds
        return info.build("mpe/simple_spread-v3", settings, seed=4).build_algo()

    stacked, solo = built(2), built(1)
    try:
        learner = stacked.learner_group._learner
        batch = train_batches(stacked.env_runner).batches["shared"]
        n = len(batch[Postprocessing.ADVANTAGES]) // 2
        start = {k: v.detach().clone() for k, v in learner.module["shared"].state_dict().items()}
        loss = LossSettings.of(learner.config)
        learner._fit("shared", batch, loss, 1, n)
        moved = {k: v.detach() for k, v in learner.module["shared"].state_dict().items()}
        solo_learner = solo.learner_group._learner
        for k in (0, 1):
            solo_learner.module["shared"].load_state_dict(seed_state_dict(start, k, 2))
            solo_learner.configure_optimizers()  # fresh Adam, as the stacked one was
            rows = {
                key: ({c: v[k * n : (k + 1) * n] for c, v in col.items()} if isinstance(col, dict)
                      else col[k * n : (k + 1) * n])
                for key, col in batch.items()
            }  # fmt: skip
            solo_learner._fit("shared", rows, loss, 1, n)
            want = seed_state_dict(moved, k, 2)
            for key, value in solo_learner.module["shared"].state_dict().items():
                torch.testing.assert_close(value, want[key], rtol=1e-4, atol=1e-5, msg=key)
            assert not torch.equal(
                want["pi_head.weight"], seed_state_dict(start, k, 2)["pi_head.weight"]
            )
    finally:
        stacked.stop()
        solo.stop()


def test_gradients_are_clipped_per_seed_as_torch_clips_one_run():
    from policies.ppo.learner import clip_per_seed

    torch.manual_seed(0)
    params = [torch.zeros(3, 4, 5, requires_grad=True), torch.zeros(3, 1, 5, requires_grad=True)]
    for p, scale in zip(params, (1.0, 10.0), strict=True):
        p.grad = torch.randn_like(p) * scale * torch.tensor([0.01, 1.0, 5.0]).view(3, 1, 1)
    alone = [[p.grad[k].clone().requires_grad_() for p in params] for k in range(3)]
    clip_per_seed(params, 0.5, seeds=3)
    for k, grads in enumerate(alone):
        leaves = [torch.zeros_like(g, requires_grad=True) for g in grads]
        for leaf, g in zip(leaves, grads, strict=True):
            leaf.grad = g.detach().clone()
        torch.nn.utils.clip_grad_norm_(leaves, 0.5)
        for leaf, p in zip(leaves, params, strict=True):
            torch.testing.assert_close(p.grad[k], leaf.grad)
    assert params[0].grad[0].abs().max() < 0.05  # seed 0 was under the norm: untouched


def test_stacked_seeds_gae_is_each_seeds_own_with_uneven_episode_ends(ray_session):
    """On SMAC episodes end at different steps in different envs: the values (of every step
    and of the final observations) of a stacked module are each seed's own, so its batch,
    block by block, is what a plain module with that seed's weights makes of that seed's
    envs."""
    import dataclasses

    from policies.modules import seed_state_dict
    from policies.ppo.array_path import gae_batch

    info = algorithm.get("mappo")
    settings = info.settings(**{**SMALL, "test_interval": 0})
    settings.model.seeds = 2
    stacked = info.build("smac/3m-v0", settings, seed=5).build_algo()
    settings1 = info.settings(**{**SMALL, "test_interval": 0})
    solo = info.build("smac/3m-v0", settings1, seed=5).build_algo()
    try:
        runner = stacked.env_runner
        roll = runner.rollout(8 * 2 * 60)  # 60 steps of 16 envs: several episodes end
        m = runner.modules["shared"]
        b, done, term = roll.modules["shared"], roll.done, roll.terminated
        assert len(b.final) > 1 and not all(done[t].all() for t in b.final)
        ours = gae_batch(m.module, b, done, term, 0.99, 0.95)
        T, B = done.shape
        E, K = B // 2, b.rewards.shape[1] // B
        plain = solo.env_runner.modules["shared"].module
        state = {k: v.detach() for k, v in m.module.state_dict().items()}
        for s in (0, 1):
            plain.load_state_dict(seed_state_dict(state, s, 2))
            envs_, rows = slice(s * E, (s + 1) * E), slice(s * E * K, (s + 1) * E * K)
            final = {}
            for t, f in b.final.items():
                mine = [
                    i for i, e in enumerate(np.flatnonzero(done[t])) if s * E <= e < (s + 1) * E
                ]
                if mine:
                    final[t] = {k: v[mine] for k, v in f.items()}
            part = dataclasses.replace(
                b,
                inputs={k: v[:, rows] for k, v in b.inputs.items()},
                actions=b.actions[:, rows],
                logp=b.logp[:, rows],
                outputs=b.outputs[:, rows],
                rewards=b.rewards[:, rows],
                final=final,
            )
            theirs = gae_batch(plain, part, done[:, envs_], term[:, envs_], 0.99, 0.95)
            n = T * E * K
            for key in (Postprocessing.VALUE_TARGETS, Postprocessing.ADVANTAGES, Columns.VF_PREDS):
                np.testing.assert_allclose(ours[key][s * n : (s + 1) * n], theirs[key], atol=1e-5)
    finally:
        stacked.stop()
        solo.stop()
