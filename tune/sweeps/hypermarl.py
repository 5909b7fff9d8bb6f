"""``hypermarl``: HyperMARL against FuPS, FuPS+ID and NoPS, the method and the seed as the
two axes of a grid (HyperMARL, Tessera et al., NeurIPS 2025).

    arena sweep hypermarl --set env=mpe/dispersion-v0 --samples 10 --set timesteps=1000000
    arena report SWEEP_DIR

Every method is MAPPO (:data:`METHODS`), with HyperMARL's Dispersion hyper-parameters
(:data:`UPSTREAM`: KaleabTessera/HyperMARL@03fea2a49903af2b2da2c6f23534917ed8293d00,
baselines/MAPPO/config/mappo_ff_shared_weights_vmas_dispersion.yaml), so each module's batch
is split into upstream's 2 minibatches whatever its number of agents. Every trial plays
greedy test episodes every 100,000 env steps (upstream's ``EVAL_INTERVAL``; 32 episodes, its
``EVAL_EPISODES``) and logs SND every iteration. The report gives, per method, the final
score's IQM and mean with 95% bootstrap intervals over seeds (rliable's IQM, the repo's
bootstrap), the final SND, and the curves.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tune.sweeps import Stage

METHODS: dict[str, dict[str, Any]] = {
    "FuPS": {"algo": "mappo", "policies": "shared"},
    "FuPS+ID": {"algo": "mappo", "policies": "shared", "model.agent_id": True},
    "NoPS": {"algo": "mappo", "policies": "per_agent"},
    "HyperMARL": {"algo": "hypermarl-mappo", "policies": "shared"},
}
"""Method -> its ``arena train`` keys (``--algo``, ``--policies``, ``--set``)."""

UPSTREAM: dict[str, Any] = {
    "lr": 5e-4,
    "train_batch_size": 16 * 128,  # NUM_ENVS x NUM_STEPS
    "num_envs_per_env_runner": 16,
    "num_epochs": 4,
    "num_minibatches": 2,
    "gamma": 0.99,
    "gae_lambda": 0.95,
    "clip_param": 0.2,
    "entropy_coeff": 0.01,
    "vf_loss_coeff": 0.5,
    "grad_clip": 0.5,
    "model.activation": "relu",
    "model.hidden": [64, 64],  # ACTOR_LAYERS, CRITIC_LAYERS
    "test_interval": 100_000,
    "test_nepisode": 32,
}
"""HyperMARL's MAPPO settings on Dispersion, as ``arena train --set`` keys."""


@dataclass
class HyperMARLSweep:
    """``methods`` x ``samples`` seeds on one env, ``timesteps`` env steps each."""

    env: str = "mpe/dispersion-v0"
    """Env id (``arena envs``); env arguments as ``settings: {env.n_agents: 8}``."""
    methods: list[str] = field(default_factory=lambda: list(METHODS))
    """Which of FuPS, FuPS+ID, NoPS, HyperMARL."""
    samples: int = 10
    """Seeds per method: 0 .. samples - 1 (``--samples``)."""
    timesteps: int = 1_000_000
    """Env steps per trial."""
    settings: dict[str, Any] = field(default_factory=dict)
    """More ``arena train --set`` keys for every trial (over :data:`UPSTREAM`); ``hyper.*``
    keys (``hyper.embedding_dim``, ``hyper.init``, ...) go to HyperMARL's trials only."""
    metric: str = "test_return_mean"
    """The score: the last greedy test's return (mean over agents, upstream's
    ``mean_episode_return ... mean_across_agents``), or any ``metrics.csv`` column."""

    stage_names = ("compare",)

    def run_config(self, method: str, seed: int) -> dict[str, Any]:
        hyper = METHODS[method]["algo"].startswith("hypermarl")
        own = {k: v for k, v in self.settings.items() if hyper or not k.startswith("hyper.")}
        return {"env": self.env, **UPSTREAM, **METHODS[method], "timesteps": self.timesteps,
                **own, "seed": seed}  # fmt: skip

    def validate(self) -> None:
        from training.config import ConfigError
        from tune.trainable import trial_config

        unknown = [m for m in self.methods if m not in METHODS]
        if not self.methods or unknown or len(set(self.methods)) != len(self.methods):
            raise ConfigError(
                f"methods={self.methods}: a non-empty list of distinct methods of "
                f"{', '.join(METHODS)}"
            )
        if self.samples < 1 or self.timesteps < 1:
            raise ConfigError(f"samples={self.samples}, timesteps={self.timesteps} (>= 1)")
        for method in self.methods:
            trial_config(self.run_config(method, 0))

    def stage(self, name: str, trials, rows, sweep_dir) -> Stage:
        runs = [
            {"run": self.run_config(m, s), "study": {"method": m, "seed": s}, "stop": {}}
            for s in range(self.samples)
            for m in self.methods
        ]
        return Stage(name, runs, metric=self.metric)

    def report(self, trials, rows, figures) -> list:
        from tune import analysis

        return analysis.method_sections(trials, rows, self.metric, self.methods, figures)
