"""``seeds``: one (env, algorithm, settings) trained over N seeds, for any family.

    arena sweep seeds --set env=smac/3m-v0 --set algo=mappo --samples 5
    arena sweep seeds --set env=mpe/simple_spread-v3 --set algo=mappo --set stacked=true

With ``stacked`` (ippo, mappo) one trial trains all the seeds side by side in one process
(``arena train --seeds N``) and the report splits its per-seed columns into one row per seed.
The report gives the final return (and win rate, where the env has one) with a bootstrap
interval over seeds, and the learning curve's mean with a band over seeds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tune.sweeps import Stage

STACKED_METRICS = ("episode_return_mean", "win_rate")
"""The columns a stacked run logs per seed (``<column>_seed<k>``)."""


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
    (``test_battle_won_mean``, what SMAC papers report) on SMAC, else ``episode_return_mean``
    (stacked: ``win_rate`` on SMAC, as stacked runs play no greedy tests)."""
    stacked: bool = False
    """One trial of ``model.seeds = samples`` (ippo, mappo) instead of ``samples`` trials."""

    stage_names = ("train",)

    def run_config(self, seed: int) -> dict[str, Any]:
        stack = {"model.seeds": self.samples} if self.stacked else {}
        return {"env": self.env, "algo": self.algo, "iterations": self.iterations,
                **self.settings, **stack, "seed": seed}  # fmt: skip

    def validate(self) -> None:
        from training.config import ConfigError, check_stacked
        from tune.trainable import trial_config

        if self.samples < 1 or self.iterations < 1:
            raise ConfigError(f"samples={self.samples}, iterations={self.iterations} (>= 1)")
        if self.stacked and self.lead not in STACKED_METRICS:
            raise ConfigError(
                f"stacked=true logs {' and '.join(STACKED_METRICS)} per seed, not {self.lead}"
            )
        if self.stacked:
            check_stacked(self.algo)
        trial_config(self.run_config(0))

    def stage(self, name: str, trials, rows, sweep_dir) -> Stage:
        runs = [
            {"run": self.run_config(s), "study": {"seed": s}, "stop": {}}
            for s in range(1 if self.stacked else self.samples)
        ]
        return Stage(name, runs, metric=self.lead)

    def report(self, trials, rows, figures) -> list:
        from tune import analysis

        if self.stacked:
            trials, rows = analysis.unstack_seeds(trials, rows, self.samples, STACKED_METRICS)
        return analysis.seed_sections(trials, rows, self.lead, figures)

    @property
    def lead(self) -> str:
        """The metric the table and report lead with (``metric``, or the family's own)."""
        if self.metric:
            return self.metric
        from policies.testing import has_battles

        if not has_battles(self.env):
            return "episode_return_mean"
        return "win_rate" if self.stacked else "test_battle_won_mean"
