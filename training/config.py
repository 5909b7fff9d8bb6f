"""Typed configuration of a training run, filled from defaults, YAML and ``--set key=value``.

``--set`` keys are the fields of :class:`TrainConfig` (``checkpoint_every=5``), of the chosen
algorithm's settings dataclass (``lr=3e-4``; also spelled ``mappo.lr=3e-4``), of any nested
group of its settings by a dotted path (``model.hidden=[128,128]``, ``model.recurrent=true``,
``hyper.embedding_dim=8``) and the env's own arguments prefixed by ``env.``
(``env.max_cycles=50``). An unknown key or a value of the wrong type is a
:class:`ConfigError` that names what is allowed.

In YAML the algorithm's settings sit under the algorithm's name::

    env: smac/3m-v0
    algo: mappo
    mappo: {lr: 0.0005, model: {recurrent: true}}
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

import envs
from policies import algorithm as algorithms
from policies.mapping import SHARING


class ConfigError(ValueError):
    """A bad configuration key or value; the message names what is allowed."""


def settings_for(algo: str, old: Any = None) -> Any:
    """Fresh settings of ``algo``, carrying over the same-named fields of ``old``."""
    try:
        cls = algorithms.get(algo).settings
    except ValueError as e:
        raise ConfigError(str(e)) from None
    new = cls()
    if old is not None:
        names = {f.name for f in dataclasses.fields(cls)}
        untouched = type(old)()
        for f in dataclasses.fields(old):
            value = getattr(old, f.name)
            # Only what was set carries over (not the old algorithm's defaults), and a group
            # of settings only into the same kind of group (PPO's network is no LM).
            if (
                f.name in names
                and value != getattr(untouched, f.name)
                and type(value) is type(getattr(new, f.name))
            ):
                setattr(new, f.name, value)
    return new


@dataclass
class TrainConfig:
    """One training run."""

    env: str
    """Env id, ``family/name-vN`` (``arena envs`` lists them)."""
    algo: str = "mappo"
    """Algorithm (``policies.algorithm.PACKAGES`` lists them)."""
    seed: int = 0
    """Seed of envs, sampling and network initialisation."""
    env_runners: int = 0
    """Remote EnvRunner actors (0: sample in the driver process)."""
    learners: int = 0
    """Remote Learner actors (0: learn in the driver process)."""
    gpus_per_learner: float = 0.0
    """GPUs per Learner (a GPU worker group on a cluster; 0 on CPUs)."""
    policies: str = "auto"
    """Policy sharing: auto, shared, per_group or per_agent (``policies.mapping``)."""
    frozen: list[str] = field(default_factory=list)
    """Modules that act but are not trained (weights set from outside, e.g. self-play)."""
    iterations: int | None = None
    """Training iterations to run (alternative to ``timesteps``)."""
    timesteps: int | None = None
    """Env steps to train for (default 200,000 when neither this nor ``iterations`` is set)."""
    stop_test_win_rate: float | None = None
    """Stop as soon as a greedy test's win rate (``test_battle_won_mean``) reaches this, and
    checkpoint there: ODIS's ``stop_winrate``, how its medium datasets' policies are made
    (LAMDA-RL/ODIS ``src/data_collect.py``); 0 stops at the first test. Needs an env with test
    battles (SMAC, SMACv2)."""
    checkpoint_every: int = 10
    """Checkpoint every K iterations (and always at the end); 0: only at the end (a run that
    needs no resume or branch points part-way, e.g. a sweep's trial)."""
    keep_checkpoints: int = 3
    """How many of the newest checkpoints to keep."""
    env_args: dict[str, Any] = field(default_factory=dict)
    """The env's own arguments (``--set env.NAME=VALUE``)."""
    loggers: list[str] = field(default_factory=lambda: ["csv", "tensorboard"])
    """Where each iteration's metrics go: csv (``metrics.csv``), tensorboard (``tb/``), wandb
    (Weights & Biases, offline unless ``WANDB_MODE=online``), mlflow (``mlruns/`` in the run,
    or ``MLFLOW_TRACKING_URI``)."""
    callbacks: list[str] = field(default_factory=list)
    """More callbacks (``training.run.Callback`` subclasses) as ``module:Class``."""
    settings: Any = None
    """The algorithm's settings (its dataclass; stored in YAML under the algorithm's name)."""

    def __post_init__(self):
        if self.settings is None:
            self.settings = settings_for(self.algo)

    def set_algo(self, algo: str) -> None:
        """Switches the algorithm, keeping the settings both algorithms have."""
        self.settings = settings_for(algo, self.settings)
        self.algo = algo

    def validate(self) -> None:
        envs.registry.check_args(envs.spec(self.env), self.env_args)
        if self.algo not in algorithms.names():
            raise ConfigError(
                f"unknown algorithm {shorten(self.algo)}; allowed: {', '.join(algorithms.names())}"
            )
        for name in ("iterations", "timesteps"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ConfigError(f"{name} must be a positive integer, got {value}")
        stop = self.stop_test_win_rate
        if stop is not None and not 0 <= stop <= 1:
            raise ConfigError(f"stop_test_win_rate must be in [0, 1], got {stop}")
        if not 0 <= self.seed < 2**31:
            raise ConfigError(f"seed must be in [0, 2**31), got {self.seed}")
        for name in ("env_runners", "learners", "gpus_per_learner"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.policies not in SHARING:
            raise ConfigError(
                f"policies must be one of {', '.join(SHARING)}, got {shorten(self.policies)}"
            )
        if self.checkpoint_every < 0 or self.keep_checkpoints <= 0:
            raise ConfigError(
                f"checkpoint_every must be >= 0 (0: only at the end) and keep_checkpoints "
                f"positive, got {self.checkpoint_every} and {self.keep_checkpoints}"
            )
        unknown = sorted(set(self.loggers) - set(LOGGERS))
        if unknown:
            raise ConfigError(
                f"unknown logger(s) {shorten(unknown)}; loggers: {', '.join(LOGGERS)}"
            )
        for ref in self.callbacks:
            if not CALLBACK_REF.match(ref):
                raise ConfigError(f"callback {shorten(ref)} must read module:Class")
        if getattr(getattr(self.settings, "model", None), "seeds", 1) != 1:
            check_stacked(self.algo)
        try:
            self.settings.validate()
        except ValueError as e:
            raise ConfigError(str(e)) from None

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out.pop("settings")
        out["env_args"] = dict(self.env_args)
        out["frozen"] = list(self.frozen)
        out["loggers"] = list(self.loggers)
        out["callbacks"] = list(self.callbacks)
        out[self.algo] = dataclasses.asdict(self.settings)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        data = dict(data)
        if "env" not in data:
            raise ConfigError("config has no 'env' (give one in the file or as ENV)")
        cfg = cls(env=data.pop("env"))
        cfg.set_algo(data.pop("algo", cfg.algo))
        # Settings sit under the algorithm's name; runs before v2 kept PPO's under 'ppo'.
        settings = data.pop(cfg.algo, None) or data.pop("ppo", None) or {}
        if not isinstance(settings, dict):
            raise ConfigError(
                f"'{cfg.algo}' must be a mapping of settings, got {shorten(settings)}"
            )
        for name in algorithms.names():
            if name in data:
                raise ConfigError(f"settings for {name!r} but the algorithm is {cfg.algo!r}")
        for key, value in data.items():
            set_value(cfg, key, value)
        for key, value in settings.items():
            if key in ("hidden", "activation"):  # v1 kept these beside the PPO settings
                key = f"model.{key}"
            set_value(cfg, key, value)
        return cfg


_TOP = ("settings", "env_args", "algo")
LOGGERS = ("csv", "tensorboard", "wandb", "mlflow")
CALLBACK_REF = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


def _allowed_keys(cfg: TrainConfig) -> list[str]:
    top = [f.name for f in dataclasses.fields(TrainConfig) if f.name not in _TOP]
    return top + _setting_keys(cfg.settings, nested_as="{}.<key>") + ["env.<argument>"]


def _setting_keys(settings: Any, prefix: str = "", nested_as: str = "") -> list[str]:
    """Every settable key of a settings dataclass: its fields, then each nested group's as
    ``group.key`` (``model.hidden``, ``hyper.embedding_dim``), or with ``nested_as`` one
    entry per group (``model.<key>``) so the top-level list stays one readable line."""
    own, nested = [], []
    for f in dataclasses.fields(settings):
        value = getattr(settings, f.name)
        if not dataclasses.is_dataclass(value):
            own.append(f"{prefix}{f.name}")
        elif nested_as:
            nested.append(nested_as.format(f"{prefix}{f.name}"))
        else:
            nested += _setting_keys(value, f"{prefix}{f.name}.")
    return own + nested


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
            raise ConfigError(f"{name} must be a list of {item.__name__}, got {shorten(value)}")
        return [_coerce(name, item, v) for v in value]
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{name} must be a mapping, got {shorten(value)}")
        return value
    if annotation is float and isinstance(value, str):
        try:  # PyYAML reads 1e-3 (no dot) as a string
            return float(value)
        except ValueError:
            pass
    if annotation is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if annotation is bool and not isinstance(value, bool):
        raise ConfigError(f"{name} must be true or false, got {shorten(value)}")
    if annotation is int and isinstance(value, bool):
        raise ConfigError(f"{name} must be an integer, got {shorten(value)}")
    if dataclasses.is_dataclass(annotation):
        raise ConfigError(f"{name} is a group of settings; set its keys as {name}.KEY=VALUE")
    if not isinstance(value, annotation):
        raise ConfigError(f"{name} must be {annotation.__name__}, got {shorten(value)}")
    return value


def _set_field(target: Any, key: str, value: Any, label: str) -> bool:
    hints = typing.get_type_hints(type(target))
    if key not in hints:
        return False
    if dataclasses.is_dataclass(hints[key]) and isinstance(value, dict):
        for k, v in value.items():
            if not _set_field(getattr(target, key), k, v, f"{label}{key}."):
                raise ConfigError(f"unknown config key {label}{key}.{shorten(k)}")
        return True
    setattr(target, key, _coerce(f"{label}{key}", hints[key], value))
    return True


def set_field(target: Any, key: str, value: Any) -> None:
    """Sets field ``key`` of any typed dataclass config to ``value``, type-checked; an unknown
    key is an error that names the allowed ones."""
    if not _set_field(target, key, value, ""):
        allowed = ", ".join(f.name for f in dataclasses.fields(target))
        raise ConfigError(f"unknown key {shorten(key)}; allowed: {allowed}")


STACKED_ALGOS = ("ippo", "mappo")
"""The algorithms that train stacked seeds (``arena train --seeds N``, ``model.seeds``)."""


def check_stacked(algo: str) -> None:
    """Refuses stacked seeds for an algorithm whose learner does not train them."""
    if algo not in STACKED_ALGOS:
        raise ConfigError(
            f"--seeds (model.seeds) stacks seeds of {' or '.join(STACKED_ALGOS)} runs, not "
            f"{shorten(algo)}"
        )


def set_value(cfg: TrainConfig, key: str, value: Any) -> None:
    """Sets ``key`` (a TrainConfig or settings key, a key of a nested group of settings as
    ``group.key``, or ``env.NAME``) to ``value``, type-checked."""
    if key.startswith("env."):
        cfg.env_args[key[4:]] = value
        return
    if key == "env_args":
        cfg.env_args.update(_coerce(key, dict, value))
        return
    if key == "algo":
        cfg.set_algo(_coerce(key, str, value))
        return
    head, dot, rest = key.partition(".")
    if dot and head == cfg.algo:
        key = rest
    *groups, leaf = key.split(".")
    if not groups and key != "settings" and _set_field(cfg, key, value, ""):
        return
    target, label = cfg.settings, ""
    for group in groups:  # a nested group of settings (model., hyper., ...)
        inner = getattr(target, group, None) if group in _field_names(target) else None
        if not dataclasses.is_dataclass(inner):
            target = None
            break
        target, label = inner, f"{label}{group}."
    if target is not None and _set_field(target, leaf, value, label):
        return
    if not groups:
        allowed = _allowed_keys(cfg)
    elif target is not None:
        allowed = _setting_keys(target, label)
    else:  # an unknown group: name the groups, not every key
        allowed = [k for k in _allowed_keys(cfg) if k.endswith(">")]
    raise ConfigError(f"unknown config key {shorten(key)}; allowed: {', '.join(allowed)}")


def _field_names(target: Any) -> set[str]:
    return (
        {f.name for f in dataclasses.fields(target)} if dataclasses.is_dataclass(target) else set()
    )


def parse_overrides(pairs: list[str]) -> list[tuple[str, Any]]:
    """``key=value`` strings as (key, value); values are read as YAML (``1e-3``, ``[64, 64]``,
    ``true``)."""
    out = []
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise ConfigError(f"--set takes key=value, got {shorten(pair)}")
        try:
            value = yaml.load(raw, Loader=_NoAliases)  # noqa: S506 - a SafeLoader
        except ConfigError:
            raise
        except (yaml.YAMLError, ValueError, RecursionError) as e:
            # ValueError: an integer of over 4,300 digits; RecursionError: nested too deep
            raise ConfigError(
                f"--set {shorten(key, 40)}: cannot read value {shorten(raw)} ({type(e).__name__})"
            ) from None
        out.append((key.strip(), value))
    return out


def apply_overrides(cfg: TrainConfig, pairs: list[str]) -> None:
    """Applies ``key=value`` strings (:func:`parse_overrides`) to a train config."""
    for key, value in parse_overrides(pairs):
        set_value(cfg, key, value)


MAX_CONFIG_BYTES = 1024 * 1024


class _NoAliases(yaml.SafeLoader):
    """``yaml.safe_load`` without anchors and aliases: a 1 KB alias bomb expands to gigabytes,
    and no Arena config needs them."""

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            mark = self.peek_event().start_mark
            raise ConfigError(f"YAML aliases are not allowed (line {mark.line + 1})")
        return super().compose_node(parent, index)


def shorten(value: Any, limit: int = 80) -> str:
    """``repr(value)`` cut to ``limit`` characters, for error messages."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def read_config_file(path: str | Path) -> dict[str, Any]:
    """A config file's mapping; an unreadable, oversized, non-UTF-8, aliased or non-mapping
    file is a :class:`ConfigError` naming it."""
    path = Path(path)
    try:
        with path.open("rb") as f:  # at most one byte past the limit: /dev/zero never ends
            raw = f.read(MAX_CONFIG_BYTES + 1)
    except OSError as e:
        raise ConfigError(f"{path}: cannot read ({e.strerror})") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(
            f"{path}: more than {MAX_CONFIG_BYTES} bytes; a config is at most {MAX_CONFIG_BYTES}"
        )
    try:
        data = yaml.load(raw.decode("utf-8"), Loader=_NoAliases)  # noqa: S506 - a SafeLoader
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML ({str(e).splitlines()[0][:120]})") from None
    except ConfigError as e:
        raise ConfigError(f"{path}: {e}") from None
    except ValueError as e:  # an integer of over 4,300 digits (Python's int limit)
        raise ConfigError(f"{path}: not a valid config ({shorten(str(e), 120)})") from None
    except RecursionError:  # PyYAML composes nested collections recursively
        raise ConfigError(
            f"{path}: YAML nested too deep (Python's recursion limit); a config nests a few levels"
        ) from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of config keys, got {type(data).__name__}")
    return data


def load_yaml(path: str, env: str | None = None) -> TrainConfig:
    """The config of a YAML file; ``env`` (the command line's ENV) replaces the file's."""
    data = read_config_file(path)
    if env:
        data["env"] = env
    return TrainConfig.from_dict(data)
