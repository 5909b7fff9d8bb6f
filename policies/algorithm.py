"""What an algorithm is to Arena: a package in ``policies/`` that declares everything a run
needs (:class:`AlgorithmInfo`: typed settings, capabilities, its modules, the RLlib config
that trains them, its metric columns); and the one registry of them.

Adding an algorithm is one package (``policies/<name>/__init__.py`` defining ``ALGORITHM``)
plus one line in :data:`PACKAGES`. The CLI's ``--algo`` choices, the config loader, the tests
and sweeps all read :func:`names` / :func:`get`; ``training`` builds every algorithm through
:meth:`AlgorithmInfo.build`, which checks its capabilities against the env first.
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
    "iql": "policies.iql",
    "vdn": "policies.vdn",
    "qmix": "policies.qmix",
}
"""Algorithm name -> the package defining its ``ALGORITHM``."""


class AlgorithmMismatch(ValueError):
    """An algorithm that cannot train an env (or a setting it does not support)."""


@dataclass(frozen=True)
class Capabilities:
    """What an algorithm can train; :meth:`AlgorithmInfo.check` refuses anything else.

    Attributes:
        action_kinds: ``discrete``, ``continuous`` and/or ``text`` (a language model's answer).
        action_masks: envs that mask illegal actions.
        groups: envs whose agents form several groups (one module per group or agent).
        obs_kinds: observation kinds its modules read (``vector``, ``image``, ``tokens``,
            ``text``).
        recurrent: recurrent modules (``model.recurrent=true``).
        needs_state: the env must give a global state (a centralised critic, a mixer).
    """

    action_kinds: frozenset[str] = frozenset({"discrete", "continuous"})
    action_masks: bool = True
    groups: bool = True
    obs_kinds: frozenset[str] = frozenset({"vector", "image", "tokens"})
    recurrent: bool = True
    needs_state: bool = False


@dataclass(frozen=True)
class EnvFacts:
    """What the capability check needs to know of an env: the kinds of its observations and
    actions, whether it masks actions, its agent groups and its global state."""

    env_id: str
    action_kinds: frozenset[str]
    masked: bool
    num_groups: int
    obs_kinds: frozenset[str]
    state_dim: int

    @classmethod
    def of(cls, env_id: str, vec) -> EnvFacts:
        """The facts of a built vector env (``envs.vector.VectorEnv``)."""
        return cls._of_groups(env_id, vec.groups.values(), int(vec.state_space.shape[-1]))

    @classmethod
    def probe(cls, env_id: str, env_config: dict | None = None) -> EnvFacts:
        """The facts of ``env_id`` with ``env_config``, read off one built env: a vector env
        where its spaces are arrays, the PettingZoo env where they are text (a web page and
        its answer), which no vector env holds."""
        import envs
        from envs.vector import agent_groups

        config = dict(env_config or {})
        env = envs.make(env_id, **config)
        try:
            groups = list(agent_groups(env).values())
        finally:
            env.close()
        if any(_is_text(g.observation_space) or _is_text(g.action_space) for g in groups):
            return cls._of_groups(env_id, groups, 0)
        return cls.of(env_id, envs.make_vector(env_id, 1, **config))

    @classmethod
    def _of_groups(cls, env_id: str, groups, state_dim: int) -> EnvFacts:
        groups = list(groups)
        return cls(
            env_id,
            frozenset(_action_kind(g.action_space) for g in groups),
            any(g.has_action_mask for g in groups),
            len(groups),
            frozenset(_obs_kind(g.observation_space) for g in groups),
            state_dim,
        )


def _is_text(space) -> bool:
    import gymnasium as gym

    return isinstance(space, gym.spaces.Text)


def _action_kind(space) -> str:
    import gymnasium as gym

    if _is_text(space):
        return "text"
    return "discrete" if isinstance(space, gym.spaces.Discrete) else "continuous"


def _obs_kind(space) -> str:
    from policies.batch import BatchSpec

    return "text" if _is_text(space) else BatchSpec.for_space(space).kind


@dataclass(frozen=True)
class RunOptions:
    """How a run uses an algorithm, apart from the algorithm's own settings.

    Attributes:
        env_config: the env's own arguments.
        num_env_runners: remote EnvRunner actors (0: sample in the driver).
        seed: seed of envs, sampling and network initialisation.
        sharing: ``auto``, ``shared``, ``per_group`` or ``per_agent`` (``policies.mapping``).
        frozen: modules that act but are not trained (their weights are set from outside).
        learners: 0 learns in the driver; N > 0 in N remote Learner actors.
        gpus_per_learner: GPUs each Learner uses.
    """

    env_config: dict = field(default_factory=dict)
    num_env_runners: int = 0
    seed: int | None = 0
    sharing: str = "auto"
    frozen: tuple[str, ...] = ()
    learners: int = 0
    gpus_per_learner: float = 0.0

    def __post_init__(self):
        object.__setattr__(self, "env_config", dict(self.env_config or {}))
        object.__setattr__(self, "frozen", tuple(self.frozen))
        if self.learners < 0 or self.gpus_per_learner < 0 or self.num_env_runners < 0:
            raise AlgorithmMismatch(
                "env runners, learners and gpus_per_learner must be >= 0, got "
                f"{self.num_env_runners}, {self.learners}, {self.gpus_per_learner}"
            )


PPO_LOSSES = ("policy_loss", "vf_loss", "entropy")
"""The learner metrics of PPO-family algorithms (a column per module in metrics.csv)."""


@dataclass(frozen=True)
class AlgorithmInfo:
    """One algorithm: everything a run needs from it, declared in its package.

    Attributes:
        name: the ``--algo`` name.
        description: one line for ``--help`` and the docs.
        settings: the typed settings dataclass (``--set key=value`` fills it, nested groups by
            dotted keys).
        capabilities: what it can train; checked by :meth:`build` before anything is built.
        declare: ``declare(env_id, settings, options) -> MultiRLModuleSpec``: its modules, the
            one declaration that the learner, the EnvRunners, eval and serve all build from.
        configure: ``configure(env_id, settings, modules, options) -> AlgorithmConfig``: the RLlib
            config that trains those modules (its sampler, learner, exploration and what it does
            with sampled arrays are the algorithm's own).
        prepare: optional ``prepare(env_id, settings) -> settings``: fills in what the settings
            imply for this env (a paper's preset, a run to start from), before anything else.
        env_options: optional ``env_options(env_id, settings, env_config) -> env_config``: the
            env's arguments with those the settings imply added (a paper's env setup; a
            conflicting one the user gave is an :class:`AlgorithmMismatch`). A run stores the
            result as its env arguments (``training.run.Run``), so eval and serve build the
            same env.
        metrics: columns it adds to ``metrics.csv``, read from ``result["arena"]``.
        losses: its learner metrics, a column per trained module (``<module>/<name>``) in
            ``metrics.csv``, TensorBoard and the progress bar; a run whose losses stop being
            finite is stopped (``training.run.NanWatch``).
        default_iterations: the iterations a run trains when given no target (else the
            run's default env steps).
        warm_start: ``warm_start(algo, settings) -> str | None``, called once on a new run's
            built algorithm (never on a resumed one) before its first iteration; what it
            returns is printed (PPO: clone demonstrations, ``policies.ppo.demos``).
        evaluate: optional ``evaluate(modules, weights_dir, env_id, settings, episodes,
            real_episodes) -> dict``: how ``arena eval`` scores a run of this algorithm where
            playing its modules in the env is not the measure (a language model's held-out
            pages).
        status: optional ``status(row) -> (text, warning)``: a few words for the progress bar
            from an iteration's ``metrics.csv`` row, and a line to print when the iteration
            did something the user must know (GRPO: every group flat, so no update), or None.
        example_env: a small env it trains (the docs' example; tests build it there).
    """

    name: str
    description: str
    settings: type
    capabilities: Capabilities
    declare: Callable[..., Any] = field(repr=False)
    configure: Callable[..., Any] = field(repr=False)
    prepare: Callable[[str, Any], Any] | None = field(default=None, repr=False)
    env_options: Callable[[str, Any, dict], dict] | None = field(default=None, repr=False)
    metrics: tuple[str, ...] = ()
    losses: tuple[str, ...] = PPO_LOSSES
    default_iterations: int | None = None
    warm_start: Callable[[Any, Any], str | None] | None = field(default=None, repr=False)
    evaluate: Callable[..., dict] | None = field(default=None, repr=False)
    status: Callable[[dict], tuple[str, str | None]] | None = field(default=None, repr=False)
    example_env: str = "mpe/simple_spread-v3"

    def prepared(self, env_id: str, settings: Any) -> Any:
        """``settings`` checked (a bad value is an :class:`AlgorithmMismatch`) and with what
        they imply for ``env_id`` filled in."""
        if self.prepare is not None:
            settings = self.prepare(env_id, settings)
        try:
            settings.validate()
        except ValueError as e:
            raise AlgorithmMismatch(f"{self.name}: {e}") from None
        return settings

    def env_config(self, env_id: str, settings: Any, env_config: dict | None) -> dict:
        """``env_config`` with the env arguments ``settings`` imply (``env_options``)."""
        env_config = dict(env_config or {})
        if self.env_options is None:
            return env_config
        return self.env_options(env_id, settings, env_config)

    def modules(self, env_id: str, settings: Any, **options) -> Any:
        """The ``MultiRLModuleSpec`` of a run of ``env_id`` (``options``: :class:`RunOptions`'
        fields): how eval and serve rebuild a run's modules around saved weights without
        unpickling anything. A run's stored settings were prepared when it trained; what
        preparing them needs may be gone since (the run a GRPO run started from), and then
        they are declared as stored."""
        try:
            settings = self.prepared(env_id, settings)
        except AlgorithmMismatch:
            pass
        env_config = self.env_config(env_id, settings, options.pop("env_config", None))
        return self.declare(env_id, settings, RunOptions(env_config=env_config, **options))

    def build(self, env_id: str, settings: Any, **options) -> Any:
        """The RLlib ``AlgorithmConfig`` that trains ``env_id`` (``options``:
        :class:`RunOptions`' fields). Settings, capabilities and options are checked first,
        before Ray starts: a mismatch is one :class:`AlgorithmMismatch` naming it."""
        env_config = self.env_config(env_id, settings, options.pop("env_config", None))
        opts = RunOptions(env_config=env_config, **options)
        settings = self.prepared(env_id, settings)
        self.check(EnvFacts.probe(env_id, opts.env_config), recurrent_of(settings))
        modules = self.declare(env_id, settings, opts)
        names = list(modules.rl_module_specs)
        unknown = sorted(set(opts.frozen) - set(names))
        if unknown:
            raise AlgorithmMismatch(f"cannot freeze {unknown}: the modules are {names}")
        if not [m for m in names if m not in opts.frozen and not _learner_only(modules, m)]:
            raise AlgorithmMismatch(f"every module is frozen ({names}); nothing would train")
        return self.configure(env_id, settings, modules, opts)

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
            problems.append("no global state (it reads one)")
        if problems:
            raise AlgorithmMismatch(
                f"{self.name} cannot train {env.env_id}: {'; '.join(problems)} "
                f"(it supports {_describe(cap)})"
            )


def recurrent_of(settings: Any) -> bool:
    """Whether ``settings`` ask for recurrent modules (``model.recurrent``)."""
    return bool(getattr(getattr(settings, "model", None), "recurrent", False))


def _learner_only(modules, mid: str) -> bool:
    return bool(getattr(modules.rl_module_specs[mid], "learner_only", False))


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
