"""What an algorithm is to Arena: a package in ``policies/`` with typed settings, declared
capabilities and a ``build`` to an RLlib ``AlgorithmConfig``; and the one registry of them.

Adding an algorithm is one package (``policies/<name>/__init__.py`` defining ``ALGORITHM``)
plus one line in :data:`PACKAGES`. The CLI's ``--algo`` choices, the config loader, the tests
and sweeps all read :func:`names` / :func:`get`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

PACKAGES = {
    "ippo": "policies.ippo",
    "mappo": "policies.mappo",
    "bc": "policies.bc",
    "grpo": "policies.grpo",
    "hypermarl-ippo": "policies.hypermarl.ippo",
    "hypermarl-mappo": "policies.hypermarl.mappo",
    "selfplay": "policies.selfplay",
}
"""Algorithm name -> the package defining its ``ALGORITHM``."""


class AlgorithmMismatch(ValueError):
    """An algorithm that cannot train an env (or a setting it does not support)."""


@dataclass(frozen=True)
class Capabilities:
    """What an algorithm can train; :meth:`AlgorithmInfo.check` refuses anything else.

    Attributes:
        action_kinds: ``discrete`` and/or ``continuous``.
        action_masks: envs that mask illegal actions.
        groups: envs whose agents form several groups (one module per group or agent).
        obs_kinds: observation kinds its modules read (``vector``, ``image``, ``tokens``).
        recurrent: recurrent modules (``model.recurrent=true``).
        needs_state: the env must give a global state (a centralised critic).
    """

    action_kinds: frozenset[str] = frozenset({"discrete", "continuous"})
    action_masks: bool = True
    groups: bool = True
    obs_kinds: frozenset[str] = frozenset({"vector", "image", "tokens"})
    recurrent: bool = True
    needs_state: bool = False


@dataclass(frozen=True)
class EnvFacts:
    """What the capability check needs to know of an env (from its vector env)."""

    env_id: str
    action_kinds: frozenset[str]
    masked: bool
    num_groups: int
    obs_kinds: frozenset[str]
    state_dim: int

    @classmethod
    def of(cls, env_id: str, vec) -> EnvFacts:
        import gymnasium as gym

        from policies.batch import BatchSpec

        groups = list(vec.groups.values())
        return cls(
            env_id,
            frozenset(
                "discrete" if isinstance(g.action_space, gym.spaces.Discrete) else "continuous"
                for g in groups
            ),
            any(g.has_action_mask for g in groups),
            len(groups),
            frozenset(BatchSpec.for_space(g.observation_space).kind for g in groups),
            int(vec.state_space.shape[0]),
        )


@dataclass(frozen=True)
class AlgorithmInfo:
    """One algorithm.

    Attributes:
        name: the ``--algo`` name.
        description: one line for ``--help`` and the docs.
        settings: the typed settings dataclass (``--set key=value`` fills it).
        capabilities: what it can train.
        build: ``build(env_id, settings, **run options) -> AlgorithmConfig``.
        modules: ``modules(env_id, settings, *, env_config, sharing) -> MultiRLModuleSpec``,
            the modules ``build`` trains: how eval and serve rebuild them around saved weights
            without unpickling anything.
        metrics: columns it adds to ``metrics.csv``, read from ``result["arena"]``.
        default_iterations: the iterations a run trains when given no target (else the
            run's default env steps).
        warm_start: ``warm_start(algo, settings) -> str | None``, called once on a new run's
            built algorithm (never on a resumed one) before its first iteration; what it
            returns is printed (PPO: clone demonstrations, ``policies.ppo.demos``).
    """

    name: str
    description: str
    settings: type
    capabilities: Capabilities
    build: Callable[..., Any] = field(repr=False)
    modules: Callable[..., Any] | None = field(default=None, repr=False)
    metrics: tuple[str, ...] = ()
    default_iterations: int | None = None
    warm_start: Callable[[Any, Any], str | None] | None = field(default=None, repr=False)

    def check(self, env: EnvFacts, recurrent: bool = False) -> None:
        """Raises :class:`AlgorithmMismatch`, naming both, where this cannot train ``env``."""
        cap, problems = self.capabilities, []
        if not env.action_kinds <= cap.action_kinds:
            problems.append(f"{'/'.join(sorted(env.action_kinds))} actions")
        if env.masked and not cap.action_masks:
            problems.append("action masks")
        if env.num_groups > 1 and not cap.groups:
            problems.append(f"{env.num_groups} agent groups")
        if not env.obs_kinds <= cap.obs_kinds:
            problems.append(f"{'/'.join(sorted(env.obs_kinds - cap.obs_kinds))} observations")
        if recurrent and not cap.recurrent:
            problems.append("recurrent modules")
        if cap.needs_state and env.state_dim == 0:
            problems.append("no global state (its critic reads one)")
        if problems:
            raise AlgorithmMismatch(
                f"{self.name} cannot train {env.env_id}: {'; '.join(problems)} "
                f"(it supports {_describe(cap)})"
            )


def _describe(cap: Capabilities) -> str:
    parts = [f"{'/'.join(sorted(cap.action_kinds))} actions"]
    parts.append(f"{'/'.join(sorted(cap.obs_kinds))} observations")
    if cap.action_masks:
        parts.append("masks")
    if cap.groups:
        parts.append("agent groups")
    if cap.recurrent:
        parts.append("recurrence")
    if cap.needs_state:
        parts.append("envs with a global state")
    return ", ".join(parts)


def names() -> list[str]:
    return list(PACKAGES)


def get(name: str) -> AlgorithmInfo:
    """The algorithm called ``name``; an unknown one is an error naming the known ones."""
    if name not in PACKAGES:
        raise AlgorithmMismatch(f"unknown algorithm {name!r}; allowed: {', '.join(PACKAGES)}")
    return importlib.import_module(PACKAGES[name]).ALGORITHM
