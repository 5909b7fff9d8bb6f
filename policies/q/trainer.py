"""Value-based MARL as an RLlib Algorithm (new API stack), PyMARL's training loop
(oxwhirl/pymarl ``src/run.py``) on Arena's sampler:

* the EnvRunners step their envs epsilon-greedily (epsilon falls linearly with the env steps
  sampled) and hand back the episodes that ended (``VectorEnvRunner.sample_episodes``);
* the episodes go into the replay (:class:`policies.q.replay.EpisodeReplay`);
* once the replay holds ``batch_size`` episodes, one update per ``batch_size_run`` episodes
  sampled, each on ``batch_size`` episodes drawn uniformly (:class:`policies.q.learner.QLearner`),
  the new weights sent back to the EnvRunners;
* every ``test_interval`` env steps, ``test_nepisode`` greedy episodes (the test win rate a
  SMAC paper reports).

Sampling and updates alternate every ``rollout_steps`` env steps per env, so the exploring
policy is never far behind the learner (PyMARL updates after every episode). The replay and
the loop's counters are part of the algorithm's state: a resumed run goes on with them.
"""

from __future__ import annotations

import numpy as np
from ray.rllib.algorithms.algorithm import Algorithm
from ray.rllib.algorithms.algorithm_config import AlgorithmConfig
from ray.rllib.core.rl_module.rl_module import RLModuleSpec
from ray.rllib.policy.sample_batch import MultiAgentBatch, SampleBatch
from ray.rllib.utils.metrics import (
    ENV_RUNNER_RESULTS,
    ENV_RUNNER_SAMPLING_TIMER,
    LEARNER_RESULTS,
    LEARNER_UPDATE_TIMER,
    NUM_ENV_STEPS_SAMPLED_LIFETIME,
    SYNCH_WORKER_WEIGHTS_TIMER,
    TIMERS,
)

from policies.batch import BatchSpec
from policies.q import MIXER
from policies.q.learner import QLearner
from policies.q.module import QNetwork
from policies.q.replay import EpisodeReplay
from policies.testing import greedy_test, make_test_envs, policy_of


def epsilon(t: int, start: float, finish: float, anneal: int) -> float:
    """PyMARL's ``DecayThenFlatSchedule`` (linear): ``start`` falling to ``finish`` over
    ``anneal`` env steps, then flat."""
    return max(finish, start - (start - finish) * t / anneal)


class QConfig(AlgorithmConfig):
    def __init__(self, algo_class=None):
        super().__init__(algo_class=algo_class or QAlgorithm)

    def get_default_learner_class(self):
        return QLearner

    def get_default_rl_module_spec(self):
        return RLModuleSpec(module_class=QNetwork)


class QAlgorithm(Algorithm):
    """See the module docstring; ``learner_config_dict`` holds the settings."""

    @classmethod
    def get_default_config(cls) -> AlgorithmConfig:
        return QConfig()

    def setup(self, config) -> None:
        super().setup(config)
        s = self.settings = self.config.learner_config_dict
        specs = self.config.rl_module_spec.rl_module_specs
        agents = s["agents"]
        self.replay = EpisodeReplay(
            s["buffer_size"],
            {m: BatchSpec.from_dict(specs[m].model_config["batch_spec"]) for m in agents},
            {m: len(specs[m].model_config["slot"]["agents"]) for m in agents},
            int(specs[MIXER].model_config["state_dim"]) if MIXER in specs else 0,
            s["team_reward"],
        )
        self.has_mixer_module = MIXER in specs
        self.rng = np.random.default_rng(int(self.config.seed or 0))
        self.episodes = 0  # episodes sampled, lifetime (what target updates count)
        self.pending = 0  # episodes sampled since the last update
        self.updates = 0
        self.env_steps = 0
        self.next_test = 0
        self._test_env = None

    # -- state (replay and counters survive a resume) -----------------------------------------
    def get_state(self, *args, **kwargs):
        state = super().get_state(*args, **kwargs)
        state["arena_q"] = {
            "replay": self.replay.get_state(),
            "rng": self.rng.bit_generator.state,
            "counters": [self.episodes, self.pending, self.updates, self.env_steps, self.next_test],
        }
        return state

    def set_state(self, state) -> None:
        super().set_state(state)
        q = state.get("arena_q")
        if q:
            self.replay.set_state(q["replay"])
            self.rng.bit_generator.state = q["rng"]
            self.episodes, self.pending, self.updates, self.env_steps, self.next_test = q[
                "counters"
            ]

    # -- one iteration ------------------------------------------------------------------------
    def training_step(self) -> None:
        s, group = self.settings, self.env_runner_group
        stop = self.env_steps + s["env_steps_per_iteration"]
        while self.env_steps < stop:
            if not self._sample_and_learn():
                return  # every EnvRunner failed (RLlib restarts them)
        # the runners' episode metrics of the whole iteration, gathered once
        if group.num_remote_env_runners() == 0:
            metrics = [group.local_env_runner.get_metrics()]
        else:
            metrics = group.foreach_env_runner(lambda r: r.get_metrics(), local_env_runner=False)
        self.metrics.aggregate(metrics, key=ENV_RUNNER_RESULTS)
        stats = {
            "epsilon": self._epsilon(),
            "replay_episodes": float(self.replay.size),
            "updates": float(self.updates),
        }
        if s["test_interval"] and self.env_steps >= self.next_test:
            stats.update(self._test())
            self.next_test = self.env_steps + s["test_interval"]
        for key, value in stats.items():
            self.metrics.log_value(("arena", key), float(value), window=1)

    def _epsilon(self) -> float:
        s = self.settings
        return epsilon(
            self.env_steps, s["epsilon_start"], s["epsilon_finish"], s["epsilon_anneal_time"]
        )

    def _sample_and_learn(self) -> bool:
        """``rollout_steps`` steps of every env, their finished episodes into the replay, and
        the updates they are due; False where no EnvRunner answered."""
        s, group = self.settings, self.env_runner_group
        eps = self._epsilon()
        with self.metrics.log_time((TIMERS, ENV_RUNNER_SAMPLING_TIMER)):
            if group.num_remote_env_runners() == 0:
                runner = group.local_env_runner
                out = [runner.sample_episodes(s["rollout_steps"] * runner.num_envs, epsilon=eps)]
            else:
                out = group.foreach_env_runner(
                    lambda r: r.sample_episodes(s["rollout_steps"] * r.num_envs, epsilon=eps),
                    local_env_runner=False,
                    timeout_seconds=self.config.sample_timeout_s,
                )
        if not out:
            return False
        episodes = [e for part, _ in out for e in part]
        self.env_steps += sum(n for _, n in out)
        self.replay.add(episodes)
        self.episodes += len(episodes)
        if not self.replay.can_sample(s["batch_size"]):
            return True  # PyMARL trains only once the replay holds a batch
        self.pending += len(episodes)
        due, self.pending = divmod(self.pending, s["batch_size_run"])
        if due:
            with self.metrics.log_time((TIMERS, LEARNER_UPDATE_TIMER)):
                for _ in range(due):
                    self._update()
            with self.metrics.log_time((TIMERS, SYNCH_WORKER_WEIGHTS_TIMER)):
                group.sync_weights(
                    from_worker_or_learner_group=self.learner_group,
                    policies=set(s["agents"]),
                    inference_only=True,
                )
        return True

    def _update(self) -> None:
        s = self.settings
        sample = self.replay.sample(s["batch_size"], self.rng)
        batches = {mid: SampleBatch(sample[mid]) for mid in s["agents"]}
        if self.has_mixer_module:
            batches[MIXER] = SampleBatch({"state": sample["state"]})
        results = self.learner_group.update(
            batch=MultiAgentBatch(batches, env_steps=s["batch_size"]),
            timesteps={
                NUM_ENV_STEPS_SAMPLED_LIFETIME: self.env_steps,
                "episodes": self.episodes,
            },
        )
        self.metrics.aggregate(results, key=LEARNER_RESULTS)
        self.updates += 1

    # -- greedy tests -------------------------------------------------------------------------
    def _test(self) -> dict[str, float]:
        """``test_nepisode`` greedy episodes with the EnvRunners' current modules."""
        runner = self.env_runner_group.local_env_runner
        if self._test_env is None:
            cfg = self.config
            self._test_env = make_test_envs(
                cfg.env, dict(cfg.env_config), self.settings["test_nepisode"], cfg.seed
            )
        modules = {mid: runner.module[mid] for mid in runner.modules}
        return greedy_test(policy_of(modules), self._test_env)
