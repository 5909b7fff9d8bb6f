"""Greedy test episodes during training: the numbers a SMAC paper reports.

PyMARL and EPyMARL (``src/run.py``) play ``test_nepisode`` episodes with greedy actions every
``test_interval`` env steps, starting at step 0, and log ``test_return_mean`` (the team's
return: every agent receives SMAC's shared reward, so it is the mean over agents) and
``test_battle_won_mean``. :func:`greedy_test` plays them for any algorithm's modules;
:class:`GreedyTests` does it for an RLlib Algorithm whose ``learner_config_dict`` names the
cadence under ``"greedy_tests"`` (the PPO family; the value-based trainer calls
:func:`greedy_test` from its own loop). Arena's first test comes after the first iteration
(an RLlib callback sees a result, not the start), PyMARL's before any update.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from ray.rllib.callbacks.callbacks import RLlibCallback

import envs
from policies.modules import stacked_seeds

TEST_METRICS = ("test_return_mean", "test_battle_won_mean")
"""The columns greedy tests add to ``metrics.csv`` (NaN win rate where the env has no battles)."""

TEST_SEED = 1_000_000
"""Test episodes' envs are seeded from here, apart from the training envs."""

SMAC_TEST_INTERVAL = 10_000
"""PyMARL's ``test_interval`` (``src/config/default.yaml``), the default on SMAC envs."""


BATTLE_FAMILIES = ("smac", "smacv2")
"""Env families whose papers report the greedy test win rate."""


def has_battles(env_id: str) -> bool:
    """Whether ``env_id``'s family plays battles that a greedy test counts as won or lost."""
    return env_id.split("/", 1)[0] in BATTLE_FAMILIES


def default_interval(env_id: str) -> int:
    """Env steps between tests when a run does not say: PyMARL's on SMAC and SMACv2 (their
    papers report the greedy test win rate), none elsewhere (a test of long episodes costs more
    than it tells)."""
    return SMAC_TEST_INTERVAL if has_battles(env_id) else 0


def policy_of(modules: dict[str, Any]):
    """A :class:`policies.inference.Policy` of live RLModules (module id -> module)."""
    from policies.inference import ModulePolicy, Policy

    return Policy({mid: ModulePolicy(module) for mid, module in modules.items()})


def greedy_test(policy, vec) -> dict[str, float]:
    """One greedy episode of ``policy`` (a :class:`policies.inference.Policy`) in each env of
    ``vec`` (from :func:`make_test_envs`): the mean team return and, where the env reports battles,
    the share won (else NaN)."""
    from policies.inference import test_episodes

    with torch.no_grad():
        played = test_episodes(policy, vec)
    won = played["won"]
    return {
        "test_return_mean": float(played["team_return"].mean()),
        "test_battle_won_mean": math.nan if won is None else float(won.mean()),
    }


def make_test_envs(env_id: str, env_config: dict, episodes: int, seed: int | None):
    """The vector env tests play in: ``episodes`` envs, seeded apart from training."""
    return envs.make_vector(env_id, episodes, seed=TEST_SEED + int(seed or 0), **env_config)


def is_due(env_steps: int, last_steps: int | None, interval: int) -> bool:
    """Whether a test is due at ``env_steps`` (the first time asked, then once ``interval`` env
    steps have passed since the last test)."""
    return interval > 0 and (last_steps is None or env_steps - last_steps >= interval)


class GreedyTests(RLlibCallback):
    """Adds :data:`TEST_METRICS` to ``result["arena"]`` when a test is due; between tests the
    last test's numbers (as PyMARL's logger shows them). A resumed run tests at its first
    iteration."""

    def on_algorithm_init(self, *, algorithm, **kwargs) -> None:
        cadence = algorithm.config.learner_config_dict.get("greedy_tests") or {}
        self.interval = int(cadence.get("interval", 0))
        if stacked_seeds(algorithm.config.rl_module_spec) > 1:
            self.interval = 0  # test envs are not split into one block per seed (not yet)
        self.episodes = int(cadence.get("episodes", 0))
        self.last_steps, self.last, self.vec = None, {}, None

    def on_train_result(self, *, algorithm, result: dict, **kwargs) -> None:
        if not self.interval or not self.episodes:
            return
        steps = int(result.get("env_runners", {}).get("num_env_steps_sampled_lifetime", 0))
        if is_due(steps, self.last_steps, self.interval):
            cfg = algorithm.config
            if self.vec is None:
                self.vec = make_test_envs(cfg.env, dict(cfg.env_config), self.episodes, cfg.seed)
            specs = cfg.rl_module_spec.rl_module_specs
            acting = [mid for mid, spec in specs.items() if not spec.learner_only]
            modules = {mid: algorithm.get_module(mid) for mid in acting}
            self.last = greedy_test(policy_of(modules), self.vec)
            self.last_steps = steps
        result.setdefault("arena", {}).update(self.last)


def wilson(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of a binomial proportion."""
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, float(centre - half)), min(1.0, float(centre + half))


def mean_ci95(values) -> tuple[float, float]:
    """The normal-approximation 95% interval of a mean (many i.i.d. episodes' returns)."""
    v = np.asarray(values, dtype=float)
    half = 1.96 * v.std(ddof=1) / math.sqrt(v.size) if v.size > 1 else float("inf")
    return float(v.mean() - half), float(v.mean() + half)
