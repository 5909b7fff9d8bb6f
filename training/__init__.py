"""Training: typed configs, the embedded/remote Ray runtime, a run as an object with
callbacks, checkpoints, evaluation.

The public names below load their module on first use, so ``import training`` stays cheap
(the CLI parses arguments without importing torch or RLlib).
"""

from __future__ import annotations

import importlib

_API = {
    "ConfigError": "training.config",
    "TrainConfig": "training.config",
    "apply_overrides": "training.config",
    "RunError": "training.checkpoints",
    "latest_checkpoint": "training.checkpoints",
    "load_config": "training.checkpoints",
    "file_digests": "training.checkpoints",
    "Run": "training.run",
    "Callback": "training.run",
    "train": "training.run",
    "check_fits": "training.run",
    "NanWatch": "training.run",
    "evaluate": "training.evaluation",
    "load_policy": "training.evaluation",
    "module_specs": "training.evaluation",
    "random_baseline": "training.evaluation",
}

__all__ = sorted(_API)


def __getattr__(name: str):
    if name in _API:
        return getattr(importlib.import_module(_API[name]), name)
    raise AttributeError(f"module 'training' has no attribute {name!r}")
