"""The one table of Arena environments: id -> factory.

Ids read ``family/name-vN``. A family module registers its ids with :func:`register`, one
call per id (generated from the family's scenario table where there are many). Anything that
needs an env, a test, a remote RLlib EnvRunner or a benchmark, builds it by id through
:func:`make`, so the same id means the same env everywhere.

Entries are lazy: a factory (and a vectorised core) may be given as ``"module:attr"`` and is
imported on first use, so ``import envs`` and listing the ids import no family's heavy
packages (simulators, browsers, models).

An id may also name a *vectorised core*: a class that steps a batch of B copies of the env in
array operations (``envs.vector.VectorEnv``). Training uses it when present and falls back to
B copies of the PettingZoo env otherwise.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import importlib
import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pettingzoo import ParallelEnv

Ref = str | Callable[..., Any]
"""A callable, or where to import it from: ``"package.module:attr"``."""

ID_PATTERN = re.compile(r"^[a-z0-9_]+/[A-Za-z0-9_][A-Za-z0-9_-]*-v\d+$")  # MiniWoB++ names hold "-"
FAMILIES = (
    "envs.mpe",
    "envs.smac",
    "envs.volleyball",
    "envs.web",
    "envs.mmwalk",
    "envs.matrix",
    "envs.predprey",
    "envs.gridmpe",
)
PLUGINS = "arena.envs"
"""Entry-point group of envs that higher layers define (an env hosting trained policies, such
as the learned high level of ``training.hierarchy``): each entry point names a function that
calls :func:`register`. ``envs`` never imports those layers; the installed package's
metadata (pyproject's ``[project.entry-points."arena.envs"]``) says where they are."""
EXTRAS = {"mpe2": "mpe", "mujoco": "mujoco", "selenium": "web", "miniwob": "web", "Crypto": "web"}
"""A family's heavy package -> the pyproject extra that installs it."""


class EnvError(ValueError):
    """A bad env id or env argument (or argument of an envs command); the message says what
    is allowed."""


MAX_INT_ARG = 2**31 - 1
"""The largest integer env argument any env takes (a seed); larger ones overflow NumPy."""


@dataclass(frozen=True)
class EnvSpec:
    """What an id stands for.

    Args:
        id: ``family/name-vN``.
        factory: builds the PettingZoo ``ParallelEnv``; called as ``factory(**kwargs, **cfg)``
            (a :data:`Ref`: imported on first use when given as ``"module:attr"``).
        kwargs: fixed arguments of this id (e.g. ``continuous_actions=True``).
        vector: optional class of a vectorised core (a :data:`Ref`), built as
            ``vector(num_envs=B, **kwargs, **cfg)``.
        description: one line for ``arena envs``.
        validate: optional ``validate(cfg)`` raising ValueError for values the factory would
            accept but cannot mean (a negative episode length).
    """

    id: str
    factory: Ref
    kwargs: dict[str, Any] = field(default_factory=dict)
    vector: Ref | None = None
    description: str = ""
    validate: Callable[[dict[str, Any]], None] | None = None

    @property
    def family(self) -> str:
        return self.id.split("/", 1)[0]

    def allowed_args(self) -> list[str]:
        """Keyword arguments ``make`` accepts for this id (those not fixed by the id)."""
        factory = self.load_factory()
        params = inspect.signature(factory).parameters
        named = [p for p, v in params.items() if v.kind != inspect.Parameter.VAR_KEYWORD]
        # A factory taking ``**options`` names them with a dataclass in its ``options``.
        options = getattr(factory, "options", None)
        if dataclasses.is_dataclass(options):
            named += [f.name for f in dataclasses.fields(options)]
        return [p for p in named if p not in self.kwargs and p != "render_mode"]

    def load_factory(self) -> Callable[..., ParallelEnv]:
        return self._load(self.factory)

    def load_vector(self) -> Callable[..., Any] | None:
        return None if self.vector is None else self._load(self.vector)

    def _load(self, ref: Ref) -> Any:
        try:
            return resolve(ref)
        except ModuleNotFoundError as e:
            missing = (e.name or "").split(".")[0]
            if missing not in EXTRAS:
                raise
            raise EnvError(
                f"{self.id} needs the package {missing}: pip install 'arena[{EXTRAS[missing]}]'"
                " (or '.[all]' in a checkout)"
            ) from None


@functools.cache
def _import(ref: str) -> Any:
    module, _, attr = ref.partition(":")
    if not attr:
        raise EnvError(f"{ref!r} does not read 'package.module:attr'")
    return getattr(importlib.import_module(module), attr)


def resolve(ref: Ref) -> Any:
    """The object a :data:`Ref` names (imported once, on first use)."""
    return _import(ref) if isinstance(ref, str) else ref


_REGISTRY: dict[str, EnvSpec] = {}
_loaded = False


def register(
    id: str,
    factory: Ref,
    *,
    vector: Ref | None = None,
    description: str = "",
    validate: Callable[[dict[str, Any]], None] | None = None,
    **kwargs: Any,
) -> None:
    """Registers one env id. Registering the same id twice is an error."""
    if not ID_PATTERN.match(id):
        raise EnvError(f"env id {id!r} does not read 'family/name-vN'")
    if id in _REGISTRY:
        raise EnvError(f"env id {id!r} is already registered")
    _REGISTRY[id] = EnvSpec(id, factory, dict(kwargs), vector, description, validate)


def _load_families() -> None:
    global _loaded
    if not _loaded:
        _loaded = True
        for module in FAMILIES:
            importlib.import_module(module)
        from importlib.metadata import entry_points

        for plugin in entry_points(group=PLUGINS):
            plugin.load()()


def ids(family: str | None = None) -> list[str]:
    """Every registered id, sorted; only those of ``family`` when given."""
    _load_families()
    return sorted(i for i in _REGISTRY if family is None or i.split("/")[0] == family)


def spec(id: str) -> EnvSpec:
    """The spec of ``id``; an unknown id is an :class:`EnvError` naming the closest ids."""
    _load_families()
    try:
        return _REGISTRY[id]
    except KeyError:
        close = difflib.get_close_matches(id, _REGISTRY, n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise EnvError(
            f"unknown env id {id!r}{hint} (`arena envs` lists all {len(_REGISTRY)})"
        ) from None


def check_args(env_spec: EnvSpec, cfg: dict[str, Any]) -> None:
    """Raises an :class:`EnvError` for a keyword the id's factory does not take."""
    allowed = env_spec.allowed_args()
    unknown = sorted(set(cfg) - set(allowed) - {"render_mode"})
    if unknown:
        raise EnvError(
            f"{env_spec.id} takes no argument {', '.join(unknown)}; "
            f"allowed: {', '.join(allowed) or 'none'}"
        )
    for key, value in cfg.items():  # the families bound their sizes; this, any integer
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_INT_ARG:
            raise EnvError(
                f"{env_spec.id}: {key}={str(value)[:40]} is out of range; an integer env "
                f"argument is at most {MAX_INT_ARG} in size"
            )
    if env_spec.validate is not None:
        try:
            env_spec.validate(cfg)
        except ValueError as e:
            raise EnvError(f"{env_spec.id}: {e}") from None


def make(id: str, **cfg: Any) -> ParallelEnv:
    """Builds the PettingZoo ``ParallelEnv`` of ``id`` with env arguments ``cfg``."""
    env_spec = spec(id)
    check_args(env_spec, cfg)
    try:
        return env_spec.load_factory()(**env_spec.kwargs, **cfg)
    except (AssertionError, TypeError, ValueError) as e:
        raise EnvError(f"{id}: bad argument in {cfg}: {e}") from e


def make_vector(id: str, num_envs: int, seed: int | None = None, **cfg: Any):
    """Builds ``num_envs`` copies of ``id`` stepping as one batch (``envs.vector.VectorEnv``).

    Uses the id's vectorised core where it has one and supports ``cfg``; otherwise B copies of
    the PettingZoo env behind the same interface.
    """
    from envs.vector import ParallelEnvBatch, Unsupported

    env_spec = spec(id)
    check_args(env_spec, cfg)
    vector = env_spec.load_vector()
    if vector is not None:
        try:
            return vector(num_envs=num_envs, seed=seed, **env_spec.kwargs, **cfg)
        except Unsupported:
            pass
    return ParallelEnvBatch(lambda: make(id, **cfg), num_envs=num_envs, seed=seed)


def facts(id: str) -> tuple[str, ...]:
    """The episode facts ``id`` reports when an episode ends (its vectorised core's ``FACTS``;
    e.g. volleyball's ``bumps``), which training logs as ``episode_<fact>``."""
    vector = spec(id).load_vector()
    return tuple(getattr(vector, "FACTS", ()))


def register_with_ray() -> None:
    """Registers every id with Ray Tune's env registry (as an RLlib ``MultiAgentEnv``), so that
    RLlib configs and remote EnvRunners can build envs by id alone."""
    from ray.tune.registry import register_env

    from envs.rllib import RLlibMultiAgentEnv

    for env_id in ids():
        register_env(env_id, lambda cfg, _id=env_id: RLlibMultiAgentEnv(_id, dict(cfg or {})))
