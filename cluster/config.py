"""Typed configuration of a training run, filled from defaults, YAML and ``--set key=value``.

``--set`` keys are the fields of :class:`TrainConfig` (``checkpoint_every=5``), of the
algorithm's :class:`policies.algorithms.PPOSettings` (``lr=3e-4``, ``hidden=[128,128]``) and the
env's own arguments prefixed by ``env.`` (``env.max_cycles=50``). An unknown key or a value of
the wrong type is a :class:`ConfigError` that names what is allowed.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from typing import Any

import yaml

import envs
from policies.algorithms import ALGORITHMS, PPOSettings


class ConfigError(ValueError):
    """A bad configuration key or value; the message names what is allowed."""


@dataclass
class TrainConfig:
    """One training run."""

    env: str
    """Env id, ``family/name-vN`` (``arena envs`` lists them)."""
    algo: str = "mappo"
    """Algorithm: ippo or mappo."""
    seed: int = 0
    """Seed of envs, sampling and network initialisation."""
    env_runners: int = 0
    """Remote EnvRunner actors (0: sample in the driver process)."""
    iterations: int | None = None
    """Training iterations to run (alternative to ``timesteps``)."""
    timesteps: int | None = None
    """Env steps to train for (default 200,000 when neither this nor ``iterations`` is set)."""
    checkpoint_every: int = 10
    """Checkpoint every K iterations (and always at the end)."""
    keep_checkpoints: int = 3
    """How many of the newest checkpoints to keep."""
    env_args: dict[str, Any] = field(default_factory=dict)
    """The env's own arguments (``--set env.NAME=VALUE``)."""
    ppo: PPOSettings = field(default_factory=PPOSettings)
    """Algorithm hyper-parameters."""

    def validate(self) -> None:
        envs.registry.check_args(envs.spec(self.env), self.env_args)
        if self.algo not in ALGORITHMS:
            raise ConfigError(f"unknown algorithm {self.algo!r}; allowed: {', '.join(ALGORITHMS)}")
        for name in ("iterations", "timesteps"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ConfigError(f"{name} must be a positive integer, got {value}")
        if self.env_runners < 0:
            raise ConfigError(f"env_runners must be >= 0, got {self.env_runners}")
        if self.checkpoint_every <= 0 or self.keep_checkpoints <= 0:
            raise ConfigError("checkpoint_every and keep_checkpoints must be positive")
        try:
            self.ppo.validate()
        except ValueError as e:
            raise ConfigError(str(e)) from None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        data = dict(data)
        if "env" not in data:
            raise ConfigError("config has no 'env'")
        ppo = data.pop("ppo", {}) or {}
        cfg = cls(env=data.pop("env"))
        for key, value in data.items():
            set_value(cfg, key, value)
        for key, value in ppo.items():
            set_value(cfg, key, value)
        return cfg


def _allowed_keys() -> list[str]:
    top = [f.name for f in dataclasses.fields(TrainConfig) if f.name not in ("env_args", "ppo")]
    return top + [f.name for f in dataclasses.fields(PPOSettings)] + ["env.<argument>"]


def _coerce(name: str, annotation: Any, value: Any) -> Any:
    """``value`` checked (and widened int -> float) against the field's type annotation."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(annotation)
        if value is None and type(None) in options:
            return None
        annotation = next(a for a in options if a is not type(None))
        origin = typing.get_origin(annotation)
    if origin is list:
        (item,) = typing.get_args(annotation)
        if not isinstance(value, list):
            raise ConfigError(f"{name} must be a list of {item.__name__}, got {value!r}")
        return [_coerce(name, item, v) for v in value]
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{name} must be a mapping, got {value!r}")
        return value
    if annotation is float and isinstance(value, str):
        try:  # PyYAML reads 1e-3 (no dot) as a string
            return float(value)
        except ValueError:
            pass
    if annotation is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if annotation is bool and not isinstance(value, bool):
        raise ConfigError(f"{name} must be true or false, got {value!r}")
    if annotation is int and isinstance(value, bool):
        raise ConfigError(f"{name} must be an integer, got {value!r}")
    if not isinstance(value, annotation):
        raise ConfigError(f"{name} must be {annotation.__name__}, got {value!r}")
    return value


_HINTS = {
    TrainConfig: typing.get_type_hints(TrainConfig),
    PPOSettings: typing.get_type_hints(PPOSettings),
}


def set_value(cfg: TrainConfig, key: str, value: Any) -> None:
    """Sets ``key`` (a TrainConfig, PPOSettings or ``env.`` key) to ``value``, type-checked."""
    if key.startswith("env."):
        cfg.env_args[key[4:]] = value
        return
    if key == "env_args":
        cfg.env_args.update(_coerce(key, dict, value))
        return
    for target, hints in ((cfg, _HINTS[TrainConfig]), (cfg.ppo, _HINTS[PPOSettings])):
        if key in hints and key not in ("ppo", "env_args"):
            setattr(target, key, _coerce(key, hints[key], value))
            return
    raise ConfigError(f"unknown config key {key!r}; allowed: {', '.join(_allowed_keys())}")


def apply_overrides(cfg: TrainConfig, pairs: list[str]) -> None:
    """Applies ``key=value`` strings; values are read as YAML (``1e-3``, ``[64, 64]``, ``true``)."""
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise ConfigError(f"--set takes key=value, got {pair!r}")
        try:
            value = yaml.safe_load(raw)
        except yaml.YAMLError as e:
            raise ConfigError(f"--set {key}: cannot read value {raw!r}: {e}") from None
        set_value(cfg, key.strip(), value)


def load_yaml(path: str) -> TrainConfig:
    with open(path) as f:
        data = yaml.safe_load(f) or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of config keys")
    return TrainConfig.from_dict(data)
