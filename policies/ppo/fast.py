"""PPO whose learner trains on the sampler's arrays: no episode objects in between.

RLlib's PPO hands the learner episodes; its learner connectors then gather them into a batch
and run GAE (a Python loop over episodes and columns). For feed-forward modules
:class:`ArrayPPO` asks each EnvRunner for :meth:`VectorEnvRunner.sample_arrays` instead (the
same rollout, with advantages and value targets computed over whole arrays) and gives the
learner that batch. Loss, optimiser, minibatching, metrics and weight sync are RLlib's PPO.
Recurrent modules keep the episode path (RLlib's sequence handling).
"""

from __future__ import annotations

from ray.rllib.algorithms.ppo import PPO
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

from policies.sampling import ArrayRollout


class ArrayPPO(PPO):
    """RLlib's PPO, sampling :class:`ArrayRollout` batches (see the module docstring)."""

    def training_step(self) -> None:
        group = self.env_runner_group
        with self.metrics.log_time((TIMERS, ENV_RUNNER_SAMPLING_TIMER)):
            if group.num_remote_env_runners() == 0:
                runner = group.local_env_runner
                out = [(runner.sample_arrays(), runner.get_metrics())]
            else:
                out = group.foreach_env_runner(
                    lambda r: (r.sample_arrays(), r.get_metrics()),
                    local_env_runner=False,
                    timeout_seconds=self.config.sample_timeout_s,
                )
            if not out:  # every EnvRunner failed (RLlib restarts them)
                return
            self.metrics.aggregate([m for _, m in out], key=ENV_RUNNER_RESULTS)
            batch = ArrayRollout.merge([r for r, _ in out])

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
