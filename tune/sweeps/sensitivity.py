"""``sensitivity``: random search over an algorithm's hyperparameters on any env, with ASHA
stopping the trials that fall behind at each rung.

    arena sweep sensitivity --set env=mpe/simple_spread-v3 --set algo=ippo --samples 8

Each sampled configuration draws one value per key of ``space`` (a seeded draw, so a resumed
sweep runs the same trials). The report ranks the configurations and gives each value's
importance (:func:`tune.analysis.importance`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from tune.sweeps import ASHA, Stage

PPO_SPACE: dict[str, list] = {
    "lr": [1e-4, 3e-4, 1e-3, 3e-3],
    "gamma": [0.95, 0.99],
    "entropy_coeff": [0.0, 0.01, 0.03],
    "clip_param": [0.1, 0.2, 0.3],
    "num_epochs": [1, 3, 5],
}
"""The default space, for the PPO family (ippo, mappo, hypermarl...); keys the chosen
algorithm does not have are left out."""


@dataclass
class SensitivitySweep:
    """Random search over ``space`` for an algorithm on an env, with ASHA."""

    env: str = "mpe/simple_spread-v3"
    """Env id (``arena envs``)."""
    algo: str = "ippo"
    """Algorithm (``arena train --help``)."""
    iterations: int = 12
    """The most iterations a trial runs (ASHA's max_t)."""
    samples: int = 8
    """Configurations drawn (``--samples``)."""
    space: dict[str, list] = field(default_factory=dict)
    """Key -> values to draw from (empty: the PPO family's space)."""
    settings: dict[str, Any] = field(default_factory=dict)
    """Fixed ``arena train --set`` keys for every trial."""
    metric: str = "episode_return_mean"
    """What ASHA ranks by (higher is better)."""
    grace_period: int = 2
    """Iterations before ASHA may stop a trial."""
    reduction_factor: int = 2
    """ASHA keeps 1 / reduction_factor of the trials at each rung."""
    seed: int = 0
    """Seed of the search (the draws) and of every trial's run."""

    stage_names = ("search",)

    def search_space(self) -> dict[str, list]:
        if self.space:
            return self.space
        from tune.trainable import trial_config

        settings = trial_config({"env": self.env, "algo": self.algo}).settings
        return {k: v for k, v in PPO_SPACE.items() if hasattr(settings, k)}

    def configs(self) -> list[dict[str, Any]]:
        rng = random.Random(self.seed)
        space = self.search_space()
        return [{k: rng.choice(space[k]) for k in sorted(space)} for _ in range(self.samples)]

    def validate(self) -> None:
        from training.config import ConfigError
        from tune.trainable import trial_config

        if self.samples < 1 or self.iterations < 1 or self.grace_period < 1:
            raise ConfigError(
                f"samples={self.samples}, iterations={self.iterations}, "
                f"grace_period={self.grace_period} (>= 1)"
            )
        if self.reduction_factor < 2:
            raise ConfigError(f"reduction_factor={self.reduction_factor} (>= 2)")
        space = self.search_space()
        if not space or any(not isinstance(v, list) or not v for v in space.values()):
            raise ConfigError(f"space must map keys to non-empty lists of values, got {space}")
        base = self.configs()[0]
        for key, values in space.items():  # every value a trial could draw
            for value in values:
                trial_config(self.run_config({**base, key: value}))

    def run_config(self, config: dict[str, Any]) -> dict[str, Any]:
        return {"env": self.env, "algo": self.algo, "iterations": self.iterations,
                "seed": self.seed, **self.settings, **config}  # fmt: skip

    def stage(self, name: str, trials, rows, sweep_dir) -> Stage:
        runs = [
            {"run": self.run_config(c), "study": {"config": i, **c}, "stop": {}}
            for i, c in enumerate(self.configs())
        ]
        asha = ASHA(self.iterations, self.grace_period, self.reduction_factor)
        return Stage(name, runs, metric=self.metric, asha=asha)

    def report(self, trials, rows, figures) -> list:
        from tune import analysis

        return analysis.sensitivity_sections(
            trials, rows, self.metric, list(self.search_space()), figures
        )
