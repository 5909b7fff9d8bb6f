"""What ``arena envs`` shows of each id (agents, spaces), cached on disk.

Describing an id builds its env once (no reset, no step) to read its spaces; the results are
cached in ``$XDG_CACHE_HOME/arena/envs-<digest>.json`` (default ``~/.cache``), where the digest
covers the source of ``envs/`` and the versions of the packages the families wrap, so a code or
package change rebuilds the cache and a listing never builds heavy envs twice.
"""

from __future__ import annotations

import hashlib
import json
import os
from importlib import metadata
from pathlib import Path

import envs
from envs.files import write_atomic

WRAPPED = ("mpe2", "pettingzoo", "gymnasium")


def space_text(space) -> str:
    import gymnasium as gym

    if isinstance(space, gym.spaces.Discrete):
        return f"Discrete({space.n})"
    if isinstance(space, gym.spaces.Box):
        return f"Box{tuple(space.shape)}"
    if isinstance(space, gym.spaces.Dict):
        return "Dict(" + ", ".join(f"{k}: {space_text(v)}" for k, v in space.spaces.items()) + ")"
    return str(space)


def describe(env_id: str) -> dict:
    """One id's row: agents and their spaces, read from a freshly built env."""
    env = envs.make(env_id)
    try:
        agents = list(env.possible_agents)
        return {
            "id": env_id,
            "description": envs.spec(env_id).description,
            "agents": agents,
            "observation_spaces": {a: space_text(env.observation_space(a)) for a in agents},
            "action_spaces": {a: space_text(env.action_space(a)) for a in agents},
            "vectorised_core": envs.spec(env_id).vector is not None,
        }
    finally:
        env.close()


def _digest() -> str:
    h = hashlib.sha256()
    root = Path(envs.__file__).parent
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    for name in WRAPPED:
        try:
            h.update(f"{name}={metadata.version(name)}".encode())
        except metadata.PackageNotFoundError:
            pass
    return h.hexdigest()[:16]


def cache_path() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "arena" / f"envs-{_digest()}.json"


def summaries(use_cache: bool = True) -> list[dict]:
    """Every id's row, from the cache where it has them."""
    path = cache_path()
    cached: dict[str, dict] = {}
    if use_cache and path.is_file():
        try:
            cached = {r["id"]: r for r in json.loads(path.read_text())}
        except (OSError, ValueError, KeyError, TypeError):
            cached = {}  # a damaged cache is rebuilt
    rows = [cached.get(i) or describe(i) for i in envs.ids()]
    if use_cache and any(r["id"] not in cached for r in rows):
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(path, json.dumps(rows))
            for stale in path.parent.glob("envs-*.json"):  # caches of older code
                if stale != path:
                    stale.unlink(missing_ok=True)
        except OSError:
            pass  # a read-only home only costs the next listing its time
    return rows
