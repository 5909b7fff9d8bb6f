"""``seeds``: one (env, algorithm, settings) trained over N seeds, for any family.

    arena sweep seeds --set env=smac/3m-v0 --set algo=mappo --samples 5

The report gives the final return (and win rate, where the env has one) with a bootstrap
interval over seeds, and the learning curve's mean with a band over seeds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tune.sweeps import Stage


@dataclass
class SeedsSweep:
    """An env, an algorithm and its settings, over ``samples`` seeds."""

    env: str = "smac/3m-v0"
    """Env id (``arena envs``)."""
    algo: str = "mappo"
    """Algorithm (``arena train --help``)."""
    iterations: int = 30
    """Training iterations per seed (MAPPO wins 3m within 30 of 4,000 env steps)."""
    samples: int = 5
    """Seeds: 0 .. samples - 1 (``--samples``)."""
    settings: dict[str, Any] = field(default_factory=dict)
    """Any other ``arena train --set`` keys, e.g. ``{train_batch_size: 1000}``."""
    metric: str = ""
    """The column the live table and the report lead with; empty: the greedy test win rate
    (``test_battle_won_mean``, what SMAC papers report) on SMAC, else ``episode_return_mean``."""

    stage_names = ("train",)

    def run_config(self, seed: int) -> dict[str, Any]:
        return {"env": self.env, "algo": self.algo, "iterations": self.iterations,
                **self.settings, "seed": seed}  # fmt: skip

    def validate(self) -> None:
        from training.config import ConfigError
        from tune.trainable import trial_config

        if self.samples < 1 or self.iterations < 1:
            raise ConfigError(f"samples={self.samples}, iterations={self.iterations} (>= 1)")
        trial_config(self.run_config(0))

    def stage(self, name: str, trials, rows, sweep_dir) -> Stage:
        runs = [
            {"run": self.run_config(s), "study": {"seed": s}, "stop": {}}
            for s in range(self.samples)
        ]
        return Stage(name, runs, metric=self.lead)

    def report(self, trials, rows, figures) -> list:
        from tune import analysis

        return analysis.seed_sections(trials, rows, self.lead, figures)

    @property
    def lead(self) -> str:
        """The metric the table and report lead with (``metric``, or the family's own)."""
        if self.metric:
            return self.metric
        from policies.testing import BATTLE_FAMILIES

        battles = self.env.split("/", 1)[0] in BATTLE_FAMILIES
        return "test_battle_won_mean" if battles else "episode_return_mean"
