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

from policies.ppo.learner import seeds_of
from policies.sampling import TIME_TOTAL, ModuleRollout


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
    seed by seed, so each time step's rows hold one block per seed)."""
    T, B = done.shape
    R = b.rewards.shape[1]
    K = R // B
    x = b.inputs
    values = _values(module, {k: v.reshape((T + 1) * R, *v.shape[2:]) for k, v in x.items()})
    values = values.reshape(T + 1, R)
    following = values[1:].copy()  # the value after each step, within the episode
    if b.final:  # where an episode ended: 0 if terminated, else its last obs's value
        ts = sorted(b.final)
        finals = {
            k: np.concatenate([b.final[t][k].reshape(-1, *b.final[t][k].shape[2:]) for t in ts])
            for k in x
        }
        v_final, at = _values(module, finals), 0
        for t in ts:
            ended = np.flatnonzero(done[t])
            rows = (ended[:, None] * K + np.arange(K)).reshape(-1)
            boot = v_final[at : at + len(rows)]
            at += len(rows)
            following[t, rows] = np.where(np.repeat(term[t, ended], K), 0.0, boot)
    delta = b.rewards + gamma * following - values[:T]
    carry = 1.0 - np.repeat(done, K, axis=1).astype(np.float32)  # no credit across episodes
    adv = np.empty((T, R), np.float32)
    last = np.zeros(R, np.float32)
    for t in range(T - 1, -1, -1):
        last = delta[t] + gamma * lam * carry[t] * last
        adv[t] = last
    targets = adv + values[:T]
    S = seeds_of(module)

    def rows(a: np.ndarray) -> np.ndarray:
        """``[T, R, ...]`` as flat rows, seed by seed (each seed's rows one block)."""
        if S == 1:
            return a.reshape(T * R, *a.shape[2:])
        a = a.reshape(T, S, R // S, *a.shape[2:]).swapaxes(0, 1)
        return np.ascontiguousarray(a).reshape(T * R, *a.shape[3:])

    return {
        Columns.OBS: {k: rows(v[:T]) for k, v in x.items()},
        Columns.ACTIONS: rows(b.actions),
        Columns.ACTION_LOGP: rows(b.logp),
        Columns.ACTION_DIST_INPUTS: rows(b.outputs),
        Postprocessing.ADVANTAGES: rows(adv),
        Postprocessing.VALUE_TARGETS: rows(targets.astype(np.float32)),
        Columns.VF_PREDS: rows(values[:T].astype(np.float32)),
    }


def _values(module, rows: dict[str, np.ndarray]) -> np.ndarray:
    with torch.no_grad():
        obs = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in rows.items()}
        return module.compute_values({Columns.OBS: obs}).numpy()


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
