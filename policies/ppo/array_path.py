"""PPO whose learner trains on the sampler's arrays: no episode objects in between.

RLlib's PPO hands the learner episodes; its learner connectors then gather them into a batch
and run GAE (a Python loop over episodes and columns). For feed-forward modules
:class:`ArrayPPO` has each EnvRunner run :func:`train_batches` instead: a rollout
(``VectorEnvRunner.rollout``) turned into flat training batches with GAE advantages and value
targets computed over whole arrays, where the rollout was sampled. Loss, optimiser,
minibatching, metrics and weight sync are RLlib's PPO. Recurrent modules keep the episode path
(RLlib's sequence handling).
"""

from __future__ import annotations

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
    module (:func:`gae_batch`)."""
    t0 = time.perf_counter()
    roll = runner.rollout()
    gamma, lam = runner.config.gamma, runner.config.lambda_
    batches = {
        mid: gae_batch(m.module, roll.modules[mid], roll.done, roll.terminated, gamma, lam)
        for mid, m in runner.modules.items()
        if m.trained
    }
    runner.metrics.log_value(TIME_TOTAL, time.perf_counter() - t0, reduce="sum")
    return ArrayBatch(batches, roll.num_env_steps)


def gae_batch(
    module, b: ModuleRollout, done: np.ndarray, term: np.ndarray, gamma: float, lam: float
) -> dict:
    """One module's rollout as a flat PPO training batch (rows time-major), with GAE
    advantages and value targets over whole arrays: the value after a step is 0 where its
    episode terminated and the final observation's value where it was truncated (no credit
    across episodes). The sampled values travel along (the value clip's reference); the
    learner standardises the advantages (``policies.ppo.learner``). A module of several
    stacked seeds gets its rows seed by seed (the sampler's rows are env-major and the envs
    seed by seed, so each time step's rows hold one block per seed).

    A module with a value normaliser (``model.value_norm``) predicts normalised values: GAE
    reads them denormalised and the targets are in the rewards' units; the sampled values
    travel normalised, as the critic predicts them (on-policy's ``value_preds``). The rows'
    active masks (``ModuleRollout.active``) travel as the ``active_mask`` column."""
    T, B = done.shape
    R = b.rewards.shape[1]
    K = R // B
    S = seeds_of(module)
    x = b.inputs
    values = _values(module, x, S)  # [T + 1, R]
    following = values[1:].copy()  # the value after each step, within the episode
    for t, ended, rows, boot in _final_values(module, b, done, K, S):
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
    batch = {
        Columns.OBS: {k: seed_major(v[:T], S) for k, v in x.items()},
        Columns.ACTIONS: seed_major(b.actions, S),
        Columns.ACTION_LOGP: seed_major(b.logp, S),
        Columns.ACTION_DIST_INPUTS: seed_major(b.outputs, S),
        Postprocessing.ADVANTAGES: seed_major(adv, S),
        Postprocessing.VALUE_TARGETS: seed_major(targets.astype(np.float32), S),
        Columns.VF_PREDS: seed_major(sampled.astype(np.float32), S),
    }
    if b.active is not None:
        batch[ACTIVE] = seed_major(b.active[:T], S)
    return batch


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
