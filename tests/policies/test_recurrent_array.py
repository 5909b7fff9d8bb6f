"""Recurrent PPO on the array path: the sampler's rollout cut into chunks of ``max_seq_len``
steps (``policies.ppo.array_path.chunked``) replays exactly what the sampler computed, and one
update of ``ArrayPPOLearner`` equals a hand-rolled loop of per-step GRU calls."""

import copy
import json

import numpy as np
import pytest
import torch
from ray.rllib.core.columns import Columns
from ray.rllib.evaluation.postprocessing import Postprocessing
from rich.console import Console

import envs
import training
from policies import algorithm
from policies.modules import SEQ_RESETS, gru_unroll
from policies.ppo.array_path import gae_batch
from policies.ppo.learner import LossSettings, _chunk_rows
from policies.value_norm import value_norm_of
from training.config import TrainConfig, apply_overrides

SMALL = dict(train_batch_size=256, minibatch_size=128, num_epochs=1, num_envs_per_env_runner=8)
L = 8


def build(env_id: str, algo: str = "mappo", model: dict | None = None, **settings):
    info = algorithm.get(algo)
    s = info.settings(**{**SMALL, **settings})
    s.model.recurrent, s.model.max_seq_len = True, L
    for key, value in (model or {}).items():
        setattr(s.model, key, value)
    return info.build(env_id, s, seed=5).build_algo()


def step_loop(module, b, done, K):
    """The reference: every row stepped one step at a time from the rollout's first state,
    reset where its episode ended. Returns per step the states before it, the distribution
    inputs and the values, and the values of every final observation."""
    T, R = b.rewards.shape
    h = {k: torch.from_numpy(v.copy()) for k, v in b.state0.items()}
    before, logits, values, finals = [], [], [], {}
    with torch.no_grad():
        for t in range(T):
            before.append({k: v.clone() for k, v in h.items()})
            x = {k: torch.from_numpy(v[t]) for k, v in b.inputs.items()}
            out, h = module.step(x, h)
            batch = {Columns.OBS: x, Columns.STATE_IN: before[-1]}
            logits.append(out.numpy())
            values.append(module.critic(batch)[0].numpy())
            ended = np.flatnonzero(done[t])
            if len(ended):
                rows = (ended[:, None] * K + np.arange(K)).reshape(-1)
                x = {k: torch.from_numpy(v.reshape(len(rows), *v.shape[2:])) for k, v in
                     b.final[t].items()}  # fmt: skip
                state = {k: v[rows] for k, v in h.items()}
                finals[t] = module.critic({Columns.OBS: x, Columns.STATE_IN: state})[0].numpy()
                for v in h.values():
                    v[rows] = 0.0
        x = {k: torch.from_numpy(v[T]) for k, v in b.inputs.items()}
        last = module.critic({Columns.OBS: x, Columns.STATE_IN: h})[0].numpy()
    return before, np.stack(logits), np.stack(values), finals, last


def reference_gae(rew, values, last, finals, done, term, K, gamma, lam):
    """GAE row by row, as a textbook loop."""
    T, R = rew.shape
    adv = np.zeros((T, R))
    for r in range(R):
        env = r // K
        running = 0.0
        for t in range(T - 1, -1, -1):
            if done[t, env]:
                k = list(np.flatnonzero(done[t])).index(env) * K + r % K
                nxt, running = (0.0 if term[t, env] else finals[t][k]), 0.0
            else:
                nxt = values[t + 1, r] if t + 1 < T else last[r]
            running = rew[t, r] + gamma * nxt - values[t, r] + gamma * lam * running
            adv[t, r] = running
    return adv


def chunk(a, R):
    """``[T, R, ...]`` as the learner's chunks ``[T / L * R, L, ...]``."""
    T = a.shape[0]
    return a.reshape(T // L, L, R, *a.shape[2:]).swapaxes(1, 2).reshape(T // L * R, L, *a.shape[2:])


@pytest.mark.parametrize(
    "env_id, warmup, model",
    [
        ("mpe/simple_spread-v3", 20, {}),  # 25-step truncated episodes, started mid-way
        ("test/masked_grid-v0", 3, {}),  # episodes end by termination, at uneven steps
        # the MAPPO paper's network: LayerNorm after each GRU, values normalised
        ("mpe/simple_spread-v3", 20, {"init": "onpolicy", "value_norm": True}),
    ],
)
def test_chunks_replay_the_samplers_states_log_probs_and_values(ray_session, env_id, warmup, model):
    algo = build(env_id, model=model)
    try:
        runner = algo.env_runner
        norm = value_norm_of(runner.modules["shared"].module)
        if norm is not None:  # statistics away from the identity: denormalising matters
            norm.update(torch.linspace(-4.0, 10.0, 64))
        runner.rollout(8 * warmup)
        roll = runner.rollout(8 * 4 * L)  # T = 32: four chunks a row
        m = runner.modules["shared"]
        b, K = roll.modules["shared"], m.agents_per_env
        T, R = b.rewards.shape
        assert roll.done.any() and (b.state0["actor"] != 0).any()
        ends = np.flatnonzero(roll.done.any(1))
        assert any(t % L != L - 1 for t in ends)  # some chunk spans an episode boundary
        gamma, lam = runner.config.gamma, runner.config.lambda_
        batch = gae_batch(m.module, b, roll.done, roll.terminated, gamma, lam)
        before, logits, values, finals, last = step_loop(m.module, b, roll.done, K)

        # the state at each chunk's start is the sampler's
        starts = {k: np.stack([before[t][k].numpy() for t in range(0, T, L)]) for k in before[0]}
        for k, v in batch[Columns.STATE_IN].items():
            np.testing.assert_array_equal(v, starts[k].reshape(-1, v.shape[-1]))
        # ... which the sampler recorded: the state after each step is the loop's next one
        for t in range(1, T):
            carried = b.states["actor"][t - 1] * np.repeat(~roll.done[t - 1], K)[:, None]
            np.testing.assert_allclose(carried, before[t]["actor"].numpy(), atol=1e-6)
        resets = chunk(np.concatenate([np.zeros((1, R)), np.repeat(roll.done[:-1], K, 1)]), R)
        np.testing.assert_array_equal(batch[SEQ_RESETS], resets)
        assert resets[:, 1:].any()  # resets inside chunks

        # the learner's module unrolls the chunks to the sampler's outputs and values
        learner = algo.learner_group._learner
        mb = _chunk_rows(learner._tensors(batch))
        module = learner.module["shared"]
        with torch.no_grad():
            replayed = module._forward_train(mb)[Columns.ACTION_DIST_INPUTS].numpy()
            replayed_values = module.compute_values(mb).numpy()
        np.testing.assert_allclose(replayed, chunk(logits, R).reshape(T * R, -1), atol=1e-5)
        np.testing.assert_allclose(
            replayed, batch[Columns.ACTION_DIST_INPUTS].reshape(T * R, -1), atol=1e-5
        )
        logp = torch.log_softmax(torch.from_numpy(replayed), -1)
        logp = logp.gather(-1, mb[Columns.ACTIONS].long()[:, None])[:, 0].numpy()
        np.testing.assert_allclose(logp, mb[Columns.ACTION_LOGP].numpy(), atol=1e-5)
        np.testing.assert_allclose(replayed_values, chunk(values, R).reshape(-1), atol=1e-5)
        np.testing.assert_allclose(batch[Columns.VF_PREDS], chunk(values, R), atol=1e-5)

        # GAE from the sampled values and the final observations' ones, in the rewards' units
        if norm is not None:
            den = lambda v: norm.denormalize(torch.from_numpy(v)).numpy()  # noqa: E731
            values, last = den(values), den(last)
            finals = {t: den(v) for t, v in finals.items()}
        adv = reference_gae(b.rewards, values, last, finals, roll.done, roll.terminated, K,
                            gamma, lam)  # fmt: skip
        np.testing.assert_allclose(batch[Postprocessing.ADVANTAGES], chunk(adv, R), atol=1e-4)
        np.testing.assert_allclose(
            batch[Postprocessing.VALUE_TARGETS], chunk(adv + values, R), atol=1e-4
        )
    finally:
        algo.stop()


def test_the_unroll_and_its_gradients_equal_torchs_gru_step_by_step():
    """:func:`gru_unroll` (a hand-written backward) against ``nn.GRU`` called one step at a
    time with the state zeroed at each reset: outputs, last state and every gradient."""
    torch.manual_seed(0)
    gru = torch.nn.GRU(3, 4, batch_first=True)
    seq = torch.randn(5, 6, 3, requires_grad=True)
    h0 = torch.randn(5, 4, requires_grad=True)
    resets = torch.zeros(5, 6)
    resets[1, 3] = resets[4, 1] = resets[2, 0] = 1.0
    weights = torch.randn(5, 6, 4)

    def grads(out, h):
        for p in (seq, h0, *gru.parameters()):
            p.grad = None
        ((out * weights).sum() + h.pow(2).sum()).backward()
        return [p.grad.clone() for p in (seq, h0, *gru.parameters())]

    out, h = gru_unroll(gru, seq, h0, resets)
    ours = grads(out, h)
    steps, last = [], []
    for c in range(5):
        state = h0[c : c + 1]
        for t in range(6):
            y, s = gru(seq[c : c + 1, t : t + 1], (state * (1 - resets[c, t]))[None])
            state = s[0]
            steps.append(y[0, 0])
        last.append(state[0])
    ref_out, ref_h = torch.stack(steps).view(5, 6, 4), torch.stack(last)
    torch.testing.assert_close(out, ref_out)
    torch.testing.assert_close(h, ref_h)
    for a, b in zip(ours, grads(ref_out, ref_h), strict=True):
        torch.testing.assert_close(a, b)
    # ... and without resets, one fused call of torch's GRU
    torch.testing.assert_close(gru_unroll(gru, seq, h0, 0 * resets)[0], gru(seq, h0[None])[0])


def test_one_update_equals_a_hand_rolled_loop(ray_session):
    """Two epochs of one minibatch (all chunks: ``num_minibatches=1``, on-policy's
    ``num_mini_batch``) of ``ArrayPPOLearner`` against per-step GRU calls, PPO's loss written
    out, torch's gradient clipping and Adam."""
    algo = build("smac/3m-v0", num_epochs=2, num_minibatches=1)
    try:
        runner = algo.env_runner
        roll = runner.rollout(8 * 4 * L)
        m = runner.modules["shared"]
        batch = gae_batch(m.module, roll.modules["shared"], roll.done, roll.terminated,
                          runner.config.gamma, runner.config.lambda_)  # fmt: skip
        assert batch[SEQ_RESETS][:, 1:].any()  # episodes end inside chunks
        learner = algo.learner_group._learner
        ref = copy.deepcopy(learner.module["shared"])
        start = ref.state_dict()["pi_gru.weight_hh_l0"].clone()
        loss = LossSettings.of(learner.config)
        opt = torch.optim.Adam(ref.parameters(), lr=learner.config.lr, eps=loss.adam_eps)
        data = learner._tensors(batch)
        C = len(data[SEQ_RESETS])
        for _ in range(2):
            logits, values = [], []
            for c in range(C):
                h = {k: v[c : c + 1] for k, v in data[Columns.STATE_IN].items()}
                for t in range(L):
                    h = {k: v * (1 - data[SEQ_RESETS][c, t]) for k, v in h.items()}
                    x = {k: v[c, t : t + 1] for k, v in data[Columns.OBS].items()}
                    values.append(ref.critic({Columns.OBS: x, Columns.STATE_IN: h})[0])
                    out, h = ref.step(x, h)
                    logits.append(out)
            logits, values = torch.cat(logits), torch.cat(values)
            flat = {k: v.reshape(C * L) for k, v in data.items() if v is not None and
                    not isinstance(v, dict) and v.dim() == 2}  # fmt: skip
            logp_all = torch.log_softmax(logits, -1)
            logp = logp_all.gather(-1, flat[Columns.ACTIONS].long()[:, None])[:, 0]
            ratio = torch.exp(logp - flat[Columns.ACTION_LOGP])
            adv = flat[Postprocessing.ADVANTAGES]
            adv = (adv - adv.mean()) / (adv.std() + 1e-8)
            surrogate = torch.min(adv * ratio, adv * ratio.clamp(0.8, 1.2)).mean()
            old, target = flat[Columns.VF_PREDS], flat[Postprocessing.VALUE_TARGETS]
            clipped = old + (values - old).clamp(-0.2, 0.2)
            vf = 0.5 * torch.max((values - target) ** 2, (clipped - target) ** 2).mean()
            p = logp_all.exp()
            entropy = -(p * logp_all.masked_fill(p == 0, 0.0)).sum(-1).mean()
            total = -surrogate + 0.5 * vf - 0.01 * entropy
            opt.zero_grad()
            total.backward()
            torch.nn.utils.clip_grad_norm_(list(ref.parameters()), 0.5)
            opt.step()
        # num_minibatches wins over a minibatch_size that would cut the chunks into many
        learner._fit("shared", batch, loss, num_epochs=2, minibatch_size=L)
        got = learner.module["shared"].state_dict()
        for k, v in ref.state_dict().items():
            torch.testing.assert_close(got[k], v, atol=1e-5, rtol=1e-4, msg=k)
        assert not torch.equal(got["pi_gru.weight_hh_l0"], start)
    finally:
        algo.stop()


def test_a_recurrent_mappo_run_resumes_evaluates_and_serves(ray_session, tmp_path):
    """``arena train`` with a GRU on the array path, as a user has it: saved, resumed,
    evaluated, and served with the client carrying the state."""
    cfg = TrainConfig(env="test/masked_grid-v0", algo="mappo", iterations=1, checkpoint_every=1)
    apply_overrides(cfg, ["model.recurrent=true", "model.max_seq_len=4", "train_batch_size=128",
                          "minibatch_size=64", "num_envs_per_env_runner=8", "num_epochs=2"])  # fmt: skip
    quiet = Console(quiet=True)
    run = training.train(cfg, out=str(tmp_path), name="rnn", console=quiet)
    training.train(None, resume=str(run), more={"iterations": 2}, console=quiet)
    summary = training.evaluate(run, episodes=4)
    assert np.isfinite(summary["return_mean"])

    from serve.policy import Api, load, spec_from_run

    api = Api({"rnn": load(spec_from_run(run, name="rnn"))})
    obs, _ = envs.make("test/masked_grid-v0").reset(seed=3)
    body = {
        "observations": {
            a: {k: np.asarray(v).tolist() for k, v in o.items()} for a, o in obs.items()
        }
    }
    first = api.answer("POST", "/v1/policies/rnn/act", json.dumps(body).encode())
    assert first.status == 200 and set(first.payload["state"]["a0"]) == {"actor", "critic"}
    body["state"] = first.payload["state"]
    second = api.answer("POST", "/v1/policies/rnn/act", json.dumps(body).encode())
    assert second.status == 200 and second.payload["state"] != first.payload["state"]
