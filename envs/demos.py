"""The demonstrations file an env's demonstrator writes and a PPO run starts from
(``--set demos=FILE``): one ``.npz`` with ``obs [N, D]``, ``act [N, A]``, ``reward [N]`` and
``episode [N]`` (the steps of each episode together, in order), plus whatever bookkeeping the
writer keeps to resume. Written whole to a temporary name and renamed, so a reader never sees
half a file."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from envs.files import replacing

DEMO_KEYS = ("obs", "act", "reward", "episode")


def load_demos(path: str | Path) -> dict[str, np.ndarray]:
    """A demos file as arrays; a missing or malformed file is a ValueError naming it."""
    try:
        with np.load(path) as f:
            data = {k: f[k] for k in f.files}
    except (OSError, ValueError) as e:
        raise ValueError(f"cannot read demos {path}: {e}") from None
    missing = [k for k in DEMO_KEYS if k not in data]
    if missing:
        raise ValueError(f"{path} is not a demos file: it has no {', '.join(missing)}")
    n = len(data["obs"])
    if any(len(data[k]) != n for k in DEMO_KEYS) or data["obs"].ndim != 2:
        raise ValueError(f"{path}: obs [N, D], act [N, A], reward [N], episode [N] must agree")
    return data


def save_demos(path: str | Path, data: dict[str, np.ndarray]) -> None:
    """Writes ``data`` (the demo arrays and any bookkeeping) to ``path`` atomically."""
    with replacing(path) as tmp, tmp.open("wb") as f:  # a handle: np.savez adds no ".npz"
        np.savez(f, **data)
