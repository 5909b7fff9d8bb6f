"""The text EnvRunner: a language model playing web envs (the twin's, or real pages in
Chromium), as a Ray actor like any EnvRunner. ``sample_groups`` plays GRPO's groups (``G``
attempts at the same task and page seed), and where the run names a process reward model
(``prm``) that model scores every step of them here, beside the envs; ``evaluate`` plays
given seeds greedily."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from ray.rllib.env.env_runner import EnvRunner
from ray.rllib.utils.checkpoints import Checkpointable

import envs
from policies.lm.module import MODULE_ID
from policies.lm.play import TRAIN_SEEDS, EnvPool, episode_record, play
from policies.sampling import VectorEnvRunner


def curriculum_weights(success: list[float]) -> np.ndarray:
    """How often to pick each task for a group, from its recent success p: p(1 - p), so
    tasks neither mastered nor hopeless (the ones whose groups are mixed, not flat) come up
    most, plus 0.05 so that no task drops out for good."""
    p = np.asarray(success, dtype=float)
    return p * (1 - p) + 0.05


class TextEnvRunner(EnvRunner, Checkpointable):
    """Plays web envs with the student (see the module docstring)."""

    def __init__(self, *, config, **kwargs):
        super().__init__(config=config, **kwargs)
        torch.set_num_threads(1)
        self.settings = config.learner_config_dict
        seed = int(config.seed or 0) * 1000 + int(self.worker_index or 0)
        self.rng = np.random.default_rng(seed)
        self.generator = torch.Generator().manual_seed(seed)
        self.module = None
        self.make_module()
        self.prm = None
        if self.settings.get("prm"):
            from policies.prm import load_prm

            self.prm = load_prm(self.settings["prm"])
        self.pool = EnvPool(lambda env_id: envs.make(env_id, **config.env_config))
        self._weights_seq_no = 0
        self.num_env_steps_sampled_lifetime = 0
        # curriculum: each task's recent success (an average over its last groups' episodes)
        self.task_success = dict.fromkeys(self.settings["tasks"], 0.5)

    def make_module(self) -> None:
        self.module = self.config.rl_module_spec.build()
        self.student = self.module[MODULE_ID].student

    def get_spaces(self) -> dict[str, Any]:
        specs = self.config.rl_module_spec.rl_module_specs
        return {mid: (s.observation_space, s.action_space) for mid, s in specs.items()}

    def assert_healthy(self) -> None:
        assert self.module is not None

    def sample_groups(self, groups: int, group_size: int, temperature: float) -> list[dict]:
        """``groups`` x ``group_size`` episodes on random (task, training seed) pages."""
        tasks = self.settings["tasks"]
        weights = np.ones(len(tasks))
        if self.settings.get("curriculum"):
            weights = curriculum_weights([self.task_success[t] for t in tasks])
        pages = []
        for g in range(groups):
            task = tasks[int(self.rng.choice(len(tasks), p=weights / weights.sum()))]
            seed = int(self.rng.integers(TRAIN_SEEDS))
            pages += [(task, seed, g)] * group_size
        backend = self.settings.get("backend", "twin")
        # a browser is a few busy processes: play real pages a few at a time
        at_once = len(pages) if backend == "twin" else self.settings["browsers"]
        episodes = []
        for i in range(0, len(pages), at_once):
            jobs = self.pool.jobs(pages[i : i + at_once], backend)
            episodes += play(self.student, jobs, temperature, self.generator)
        self.num_env_steps_sampled_lifetime += sum(len(e.turns) for e in episodes)
        records = [episode_record(e) for e in episodes]
        if self.prm is not None:
            self.score_steps(episodes, records)
        for task in {page[0] for page in pages}:
            won = [r["success"] for r, page in zip(records, pages, strict=True) if page[0] == task]
            self.task_success[task] = 0.5 * self.task_success[task] + 0.5 * float(np.mean(won))
        return records

    def score_steps(self, episodes: list, records: list[dict]) -> None:
        """Adds the PRM's ``step_rewards`` to each record, and its share of their FLOPs."""
        from policies.lm.student import forward_flops
        from policies.prm import episode_step_rewards

        before = self.prm.tokens_read
        rewards = episode_step_rewards(self.prm, episodes, self.settings["prm_checklist"])
        flops = forward_flops(self.prm.student.params, self.prm.tokens_read - before)
        for record, steps in zip(records, rewards, strict=True):
            record["step_rewards"] = steps
            record["reward_flops"] = flops / len(records)

    def evaluate(
        self, tasks: list[str], seeds: list[int], temperature: float = 0.0, backend="twin"
    ) -> list[dict]:
        """One episode per (task, seed), at ``temperature`` (0: greedy), ``batch`` at a time."""
        out = []
        pages = [(t, s, 0) for t in tasks for s in seeds]
        step = 64 if backend == "twin" else 4
        for i in range(0, len(pages), step):
            chunk = pages[i : i + step]
            eps = play(self.student, self.pool.jobs(chunk, backend), temperature, self.generator)
            out += [episode_record(e) for e in eps]
        return out

    def sample(self, **kwargs):
        raise NotImplementedError("the text runner samples through sample_groups()")

    def get_metrics(self) -> dict:
        return {}

    # Weight sync and checkpoints work as in the vector runner (same attributes).
    get_state = VectorEnvRunner.get_state
    set_state = VectorEnvRunner.set_state
    get_ctor_args_and_kwargs = VectorEnvRunner.get_ctor_args_and_kwargs
    get_checkpointable_components = VectorEnvRunner.get_checkpointable_components

    def stop(self) -> None:
        self.pool.close()
