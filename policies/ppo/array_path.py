"""PPO whose learner trains on the sampler's arrays: no episode objects in between.

RLlib's PPO hands the learner episodes; its learner connectors then gather them into a batch
and run GAE (a Python loop over episodes and columns). :class:`ArrayPPO` has each EnvRunner
run :func:`train_batches` instead: a rollout (``VectorEnvRunner.rollout``) turned into
training batches with GAE advantages and value targets computed over whole arrays, where the
rollout was sampled; the learner is ``policies.ppo.learner.ArrayPPOLearner``.

A feed-forward module's batch is flat rows. A recurrent module's is chunks, MAPPO's
``onpolicy`` way (marlbenchmark/on-policy@de66d7a: onpolicy/utils/shared_buffer.py:499-600,
``recurrent_generator``): each row's T steps cut into T / L chunks of ``L = max_seq_len``
steps (the rollout is rounded up to a multiple of L, as ``onpolicy``'s episode length is of
its ``data_chunk_length``), each with the recorded state at its start and a reset wherever an
episode starts inside it; no padding, no episodes. The values are the sampled ones: a GRU's
output is its next state, so the critic's recorded states through its head are the values the
sampler's critic computed.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import torch
from ray.rllib.algorithms.ppo import PPO
from ray.rllib.core.columns import Columns
from ray.rllib.evaluation.postprocessing import Postprocessing
from ray.rllib.utils.metrics import (
    ALL_MODULES,
    ENV_RUNNER_RESULTS,
    ENV_RUNNER_SAMPLING_TIMER,
    LEARNER_RESULTS,
    LEARNER_UPDATE_TIMER,
    NUM_ENV_STEPS_SAMPLED_LIFETIME,
    NUM_MODULE_STEPS_TRAINED_LIFETIME,
    SYNCH_WORKER_WEIGHTS_TIMER,
    TIMERS,
)

from policies.modules import SEQ_RESETS
from policies.ppo.learner import ACTIVE, seeds_of
from policies.sampling import TIME_TOTAL, ModuleRollout
from policies.value_norm import value_norm_of


@dataclass
class ArrayBatch:
    """What :func:`train_batches` returns: per trained module a flat training batch (numpy),
    and the env steps it covers."""

    batches: dict[str, dict]
    num_env_steps: int

    @staticmethod
    def merge(parts: list[ArrayBatch]):
        """One ``MultiAgentBatch`` of several runners' batches."""
        import tree
        from ray.rllib.policy.sample_batch import MultiAgentBatch, SampleBatch

        batches = {}
        for mid in parts[0].batches:
            each = [p.batches[mid] for p in parts]
            joined = (
                each[0]
                if len(each) == 1
                else tree.map_structure(lambda *a: np.concatenate(a), *each)
            )
            batches[mid] = SampleBatch(joined)
        return MultiAgentBatch(batches, env_steps=sum(p.num_env_steps for p in parts))


def train_batches(runner) -> ArrayBatch:
    """On a ``VectorEnvRunner``: one rollout fragment as PPO training batches, one per trained
    module (:func:`gae_batch`); with recurrent modules the fragment is rounded up to a multiple
    of their chunk length."""
    t0 = time.perf_counter()
    T = runner.config.get_rollout_fragment_length(runner.worker_index)
    L = math.lcm(*[chunk_length(m.module) or 1 for m in runner.modules.values() if m.trained])
    roll = runner.rollout(-(-T // L) * L * runner.num_envs)
    gamma, lam = runner.config.gamma, runner.config.lambda_
    batches = {
        mid: gae_batch(m.module, roll.modules[mid], roll.done, roll.terminated, gamma, lam)
        for mid, m in runner.modules.items()
        if m.trained
    }
    runner.metrics.log_value(TIME_TOTAL, time.perf_counter() - t0, reduce="sum")
    return ArrayBatch(batches, roll.num_env_steps)


def chunk_length(module) -> int | None:
    """The chunk length of a recurrent module's training batches (``model.max_seq_len``);
    None for a feed-forward module."""
    return module.settings.max_seq_len if getattr(module, "recurrent", False) else None


def gae_batch(
    module, b: ModuleRollout, done: np.ndarray, term: np.ndarray, gamma: float, lam: float
) -> dict:
    """One module's rollout as a PPO training batch, with GAE advantages and value targets
    over whole arrays: the value after a step is 0 where its episode terminated and the final
    observation's value where it was truncated (no credit across episodes). The sampled values
    travel along (the value clip's reference); the learner standardises the advantages
    (``policies.ppo.learner``).

    Feed-forward: flat rows, time-major; a module of several stacked seeds gets its rows seed
    by seed (the sampler's rows are env-major and the envs seed by seed, so each time step's
    rows hold one block per seed). Recurrent: :func:`chunked` (T a multiple of
    ``max_seq_len``).

    A module with a value normaliser (``model.value_norm``) predicts normalised values: GAE
    reads them denormalised and the targets are in the rewards' units; the sampled values
    travel normalised, as the critic predicts them (on-policy's ``value_preds``). The rows'
    active masks (``ModuleRollout.active``) travel as the ``active_mask`` column."""
    T, B = done.shape
    R = b.rewards.shape[1]
    K = R // B
    S = seeds_of(module)
    x = b.inputs
    L = chunk_length(module)
    if L is None:
        values = _values(module, x, S)  # [T + 1, R]
        finals = _final_values(module, b, done, K, S)
    else:
        values, finals = _recurrent_values(module, b, done, K)
    following = values[1:].copy()  # the value after each step, within the episode
    for t, ended, rows, boot in finals:
        # where an episode ended: 0 if terminated, else its last observation's value
        following[t, rows] = np.where(np.repeat(term[t, ended], K), 0.0, boot)
    delta = b.rewards + gamma * following - values[:T]
    carry = 1.0 - np.repeat(done, K, axis=1).astype(np.float32)  # no credit across episodes
    adv = np.empty((T, R), np.float32)
    last = np.zeros(R, np.float32)
    for t in range(T - 1, -1, -1):
        last = delta[t] + gamma * lam * carry[t] * last
        adv[t] = last
    targets = adv + values[:T]
    norm = value_norm_of(module)
    sampled = values[:T] if norm is None else _normalised(norm, values[:T])
    steps = {
        Columns.OBS: {k: v[:T] for k, v in x.items()},
        Columns.ACTIONS: b.actions,
        Columns.ACTION_LOGP: b.logp,
        Columns.ACTION_DIST_INPUTS: b.outputs,
        Postprocessing.ADVANTAGES: adv,
        Postprocessing.VALUE_TARGETS: targets.astype(np.float32),
        Columns.VF_PREDS: sampled.astype(np.float32),
    }
    if b.active is not None:
        steps[ACTIVE] = b.active[:T]
    if L is not None:
        return chunked(steps, b, carry, L)
    return {k: _map(v, lambda a: seed_major(a, S)) for k, v in steps.items()}


def _map(x, fn):
    """``fn`` on an array or on each array of a dict of them."""
    return {k: fn(v) for k, v in x.items()} if isinstance(x, dict) else fn(x)


def chunked(steps: dict, b: ModuleRollout, carry: np.ndarray, L: int) -> dict:
    """A recurrent module's ``[T, R, ...]`` columns ``steps`` as C = T / L * R chunks of L
    steps, ``[C, L, ...]`` (chunk ``j * R + r``: row r's steps ``j * L .. j * L + L - 1``),
    with ``STATE_IN`` ``[C, H]`` per state key (the state each chunk starts from: the
    rollout's first, or the recorded one after the step before, reset where an episode ended
    there) and :data:`~policies.modules.SEQ_RESETS` ``[C, L]`` (1 where the state restarts
    before a step: the step after an episode's end). ``carry`` ``[T, R]``: 0 where an
    episode ended after a step."""
    T, R = carry.shape
    if T % L:
        raise ValueError(f"a rollout of {T} steps does not cut into chunks of {L}")

    def chunks(a: np.ndarray) -> np.ndarray:
        a = a.reshape(T // L, L, R, *a.shape[2:]).swapaxes(1, 2)
        return np.ascontiguousarray(a).reshape(T // L * R, L, *a.shape[3:])

    out = {k: _map(v, chunks) for k, v in steps.items()}
    resets = np.zeros((T, R), np.float32)
    resets[1:] = 1.0 - carry[:-1]
    out[SEQ_RESETS] = chunks(resets)
    ends = np.arange(L - 1, T - 1, L)  # the step before each chunk but the first
    out[Columns.STATE_IN] = {
        k: np.concatenate([b.state0[k][None], h[ends] * carry[ends, :, None]]).reshape(
            T // L * R, *h.shape[2:]
        )
        for k, h in b.states.items()
    }
    return out


def _normalised(norm, values: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        return norm.normalize(torch.from_numpy(values)).numpy()


def seed_major(a: np.ndarray, seeds: int) -> np.ndarray:
    """``[L, R, ...]`` (R rows a step, one block per seed) as flat rows, seed by seed: the
    order a stacked module's layers take (time-major when ``seeds`` is 1)."""
    L, R = a.shape[:2]
    if seeds == 1:
        return a.reshape(L * R, *a.shape[2:])
    a = a.reshape(L, seeds, R // seeds, *a.shape[2:]).swapaxes(0, 1)
    return np.ascontiguousarray(a).reshape(L * R, *a.shape[3:])


def _final_values(module, b: ModuleRollout, done: np.ndarray, K: int, S: int):
    """Per step t where episodes ended: (t, the ended envs, their rows, the values of their
    final observations). One seed: a forward pass over just those rows. Stacked seeds need
    whole steps (a block of rows per seed): the step after t with the final observations in
    the ended rows."""
    ts = sorted(b.final)
    if not ts:
        return []
    ends = [np.flatnonzero(done[t]) for t in ts]
    rows = [(e[:, None] * K + np.arange(K)).reshape(-1) for e in ends]
    if S == 1:
        finals = {
            k: np.concatenate([b.final[t][k].reshape(-1, *b.final[t][k].shape[2:]) for t in ts])
            for k in b.inputs
        }
        cuts = np.cumsum([len(r) for r in rows])[:-1]
        boots = np.split(_values(module, {k: v[:, None] for k, v in finals.items()}, 1)[:, 0], cuts)
    else:
        steps = {k: v[[t + 1 for t in ts]].copy() for k, v in b.inputs.items()}  # [n, R, ...]
        for i, t in enumerate(ts):
            for k, v in steps.items():
                v[i, rows[i]] = b.final[t][k].reshape(-1, *v.shape[2:])
        whole = _values(module, steps, S)
        boots = [whole[i, r] for i, r in enumerate(rows)]
    return list(zip(ts, ends, rows, boots, strict=True))


def _recurrent_values(module, b: ModuleRollout, done: np.ndarray, K: int):
    """A recurrent module's values ``[T + 1, R]`` and :func:`_final_values`' list, from the
    critic's states recorded while sampling: the value of step t is the critic's head on its
    state after step t (a GRU's output is its new state); after the last step, and of each
    final observation, one critic step from the state before it."""
    T, R = b.rewards.shape
    h = b.states["critic"]  # [T, R, H]
    carry = 1.0 - np.repeat(done[-1], K).astype(np.float32)
    ts = sorted(b.final)
    ends = [np.flatnonzero(done[t]) for t in ts]
    rows = [(e[:, None] * K + np.arange(K)).reshape(-1) for e in ends]
    # one critic step for the rollout's next step and every final observation at once
    obs = {
        k: np.concatenate([v[T], *[b.final[t][k].reshape(-1, *v.shape[2:]) for t in ts]])
        for k, v in b.inputs.items()
    }
    state = np.concatenate(
        [h[T - 1] * carry[:, None], *[h[t, r] for t, r in zip(ts, rows, strict=True)]]
    )
    values = np.empty((T + 1, R), np.float32)
    with torch.no_grad():
        flat = {
            k: torch.from_numpy(v[:T].reshape(T * R, *v.shape[2:])) for k, v in b.inputs.items()
        }
        z = module.vf_gru_norm(torch.from_numpy(h.reshape(T * R, -1)))
        recorded = module.vf_out(z, {Columns.OBS: flat}).reshape(T, R)
        step = {Columns.OBS: _torch(obs), Columns.STATE_IN: {"critic": torch.from_numpy(state)}}
        after = module.critic(step)[0]
        norm = value_norm_of(module)  # values in the rewards' units, as _values gives them
        if norm is not None:
            recorded, after = norm.denormalize(recorded), norm.denormalize(after)
        values[:T], after = recorded.numpy(), after.numpy()
    values[T] = after[:R]
    boots = np.split(after[R:], np.cumsum([len(r) for r in rows])[:-1]) if ts else []
    return values, list(zip(ts, ends, rows, boots, strict=True))


def _torch(x: dict) -> dict:
    return {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in x.items()}


def _values(module, steps: dict[str, np.ndarray], seeds: int) -> np.ndarray:
    """The module's values of ``steps`` (``[L, R, ...]`` inputs) as ``[L, R]``, in the
    rewards' units (denormalised where the module has a value normaliser)."""
    L, R = next(iter(steps.values())).shape[:2]
    with torch.no_grad():
        obs = {
            k: torch.from_numpy(np.ascontiguousarray(seed_major(v, seeds)))
            for k, v in steps.items()
        }
        v = module.compute_values({Columns.OBS: obs})
        norm = value_norm_of(module)
        v = (v if norm is None else norm.denormalize(v)).numpy()
    return v.reshape(seeds, L, R // seeds).swapaxes(0, 1).reshape(L, R)


class ArrayPPO(PPO):
    """RLlib's PPO, learning from :func:`train_batches` (see the module docstring)."""

    def training_step(self) -> None:
        group = self.env_runner_group
        with self.metrics.log_time((TIMERS, ENV_RUNNER_SAMPLING_TIMER)):
            if group.num_remote_env_runners() == 0:
                runner = group.local_env_runner
                out = [(train_batches(runner), runner.get_metrics())]
            else:
                out = group.foreach_env_runner(
                    lambda r: (train_batches(r), r.get_metrics()),
                    local_env_runner=False,
                    timeout_seconds=self.config.sample_timeout_s,
                )
            if not out:  # every EnvRunner failed (RLlib restarts them)
                return
            self.metrics.aggregate([m for _, m in out], key=ENV_RUNNER_RESULTS)
            batch = ArrayBatch.merge([r for r, _ in out])

        with self.metrics.log_time((TIMERS, LEARNER_UPDATE_TIMER)):
            trained = self.metrics.peek(
                (LEARNER_RESULTS, ALL_MODULES, NUM_MODULE_STEPS_TRAINED_LIFETIME), default=0
            )
            learner_results = self.learner_group.update(
                batch=batch,
                timesteps={
                    NUM_ENV_STEPS_SAMPLED_LIFETIME: self.metrics.peek(
                        (ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME)
                    ),
                    NUM_MODULE_STEPS_TRAINED_LIFETIME: trained,
                },
                num_epochs=self.config.num_epochs,
                minibatch_size=self.config.minibatch_size,
                shuffle_batch_per_epoch=self.config.shuffle_batch_per_epoch,
            )
            self.metrics.aggregate(learner_results, key=LEARNER_RESULTS)

        with self.metrics.log_time((TIMERS, SYNCH_WORKER_WEIGHTS_TIMER)):
            group.sync_weights(
                from_worker_or_learner_group=self.learner_group,
                policies=set(learner_results[0].keys()) - {ALL_MODULES},
                inference_only=True,
            )
