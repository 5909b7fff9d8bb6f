"""The one definition of what a module reads for one agent step: :class:`BatchSpec`.

A module input is a dict of arrays, one row per agent step::

    obs          the agent's own observation in its space's shape and dtype: a float vector,
                 a uint8 image [H, W, C] (kept uint8: no float copy of every frame), or
                 integer tokens [L]
    action_mask  float32 [A], 1 = legal (only where the env masks actions)
    state        float32 [S], the env's global state, or the agent's own state where the env
                 gives one per agent (only for a centralised critic)
    agent_id     float32 one-hot [K] of the agent's place among the module's agents (only
                 where the module needs to tell its agents apart, e.g. MAPPO's critic)

The sampler, ``arena eval``, the policy server and the benches all fill these dicts through
:meth:`BatchSpec.write` or :meth:`BatchSpec.pack` and nothing else. Text observations for
language-model policies are not arrays: they take a runner of their own that generates text
(see docs/architecture.md), with the same agent -> module mapping.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import gymnasium as gym
import numpy as np

OBS, MASK, STATE, AGENT_ID = "obs", "action_mask", "state", "agent_id"


@dataclass(frozen=True)
class BatchSpec:
    """The input of one module.

    Args:
        obs_shape: shape of one agent's observation.
        obs_dtype: its dtype name (``float32``, ``uint8`` images, ``int64`` tokens).
        obs_low / obs_high: the observation space's bounds where they are one number (images:
            0/255; tokens: 0/vocabulary-1), else None.
        mask_dim: number of discrete actions where the env masks them, else 0.
        state_dim: length of the global state a centralised critic reads, else 0.
        num_ids: width of the one-hot agent id, else 0.
    """

    obs_shape: tuple[int, ...]
    obs_dtype: str = "float32"
    obs_low: float | None = None
    obs_high: float | None = None
    mask_dim: int = 0
    state_dim: int = 0
    num_ids: int = 0

    @classmethod
    def for_space(
        cls, obs_space: gym.spaces.Box, mask_dim: int = 0, state_dim: int = 0, num_ids: int = 0
    ) -> BatchSpec:
        def one(x: np.ndarray) -> float | None:
            x = np.asarray(x)
            return (
                float(x.flat[0])
                if x.size and np.isfinite(x).all() and (x == x.flat[0]).all()
                else None
            )

        return cls(
            tuple(int(d) for d in obs_space.shape),
            np.dtype(obs_space.dtype).name,
            one(obs_space.low),
            one(obs_space.high),
            mask_dim,
            state_dim,
            num_ids,
        )

    @property
    def kind(self) -> str:
        """``vector``, ``image`` or ``tokens``: which encoder reads the observation."""
        dtype = np.dtype(self.obs_dtype)
        if len(self.obs_shape) == 3:
            return "image"
        if len(self.obs_shape) == 1 and dtype.kind in "iu":
            return "tokens"
        if len(self.obs_shape) == 1:
            return "vector"
        raise ValueError(
            f"observations of shape {self.obs_shape} and dtype {self.obs_dtype}: a module reads "
            "vectors [D], images [H, W, C] or tokens [L]"
        )

    def fields(self) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
        """key -> (shape of one row, dtype), in a fixed order."""
        out = {OBS: (self.obs_shape, np.dtype(self.obs_dtype))}
        if self.mask_dim:
            out[MASK] = ((self.mask_dim,), np.dtype(np.float32))
        if self.state_dim:
            out[STATE] = ((self.state_dim,), np.dtype(np.float32))
        if self.num_ids:
            out[AGENT_ID] = ((self.num_ids,), np.dtype(np.float32))
        return out

    def space(self) -> gym.spaces.Dict:
        """The module's observation space (what RLlib's connectors and episodes see)."""
        spaces = {}
        for key, (shape, dtype) in self.fields().items():
            if key == OBS:
                low = -np.inf if self.obs_low is None else self.obs_low
                high = np.inf if self.obs_high is None else self.obs_high
            else:
                low, high = (0.0, 1.0) if key in (MASK, AGENT_ID) else (-np.inf, np.inf)
            spaces[key] = gym.spaces.Box(low, high, shape, dtype)
        return gym.spaces.Dict(spaces)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["obs_shape"] = list(self.obs_shape)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> BatchSpec:
        names = cls.__dataclass_fields__
        d = {k: v for k, v in d.items() if k in names}
        return cls(**{**d, "obs_shape": tuple(d["obs_shape"])})

    # -- filling ------------------------------------------------------------------------------

    def buffers(self, *lead: int) -> dict[str, np.ndarray]:
        """Empty input arrays ``[*lead, ...]``; the agent ids are filled in (the last lead axis
        is the module's agents, repeating every ``num_ids`` rows)."""
        out = {k: np.empty((*lead, *shape), dtype) for k, (shape, dtype) in self.fields().items()}
        if self.num_ids:
            ids = out[AGENT_ID].reshape(-1, self.num_ids, self.num_ids)
            ids[:] = np.eye(self.num_ids, dtype=np.float32)
        return out

    def write(self, dst: dict[str, np.ndarray], obs, mask=None, state=None) -> None:
        """Writes one step of B envs into ``dst`` (arrays ``[B*K, ...]`` for K module agents):
        ``obs`` ``[B, K, *obs_shape]``, ``mask`` ``[B, K, A]``, ``state`` ``[B, S]`` (one for
        all K) or ``[B, K, S]`` (each agent's own)."""
        B, K = obs.shape[:2]
        dst[OBS].reshape(B, K, *self.obs_shape)[:] = obs
        if self.mask_dim:
            dst[MASK].reshape(B, K, self.mask_dim)[:] = mask
        if self.state_dim:
            dst[STATE].reshape(B, K, self.state_dim)[:] = (
                state if state.ndim == 3 else state[:, None]
            )

    def pack(self, obs, mask=None, state=None, agent_index=None) -> dict[str, np.ndarray]:
        """Input rows for ``n`` agent steps: ``obs`` ``[n, *obs_shape]``, ``mask`` ``[n, A]``,
        ``state`` ``[n, S]`` (or ``[S]`` for all; None: zeros), ``agent_index`` ``[n]`` (the place of
        each row's agent among the module's agents)."""
        obs = np.asarray(obs)
        n = len(obs)
        out = {OBS: obs.astype(self.obs_dtype, copy=False).reshape(n, *self.obs_shape)}
        if self.mask_dim:
            if mask is None:
                raise ValueError("this module masks actions: pack needs the action masks")
            out[MASK] = np.asarray(mask, np.float32).reshape(n, self.mask_dim)
        if self.state_dim:  # only the critic reads it: acting alone may leave it out (zeros)
            state = np.zeros(self.state_dim, np.float32) if state is None else state
            out[STATE] = np.broadcast_to(np.asarray(state, np.float32), (n, self.state_dim))
        if self.num_ids:
            ids = np.zeros((n, self.num_ids), np.float32)
            if agent_index is not None:
                ids[np.arange(n), np.asarray(agent_index)] = 1.0
            out[AGENT_ID] = ids
        return out

    def rows(self, batch: dict[str, np.ndarray], index) -> dict[str, np.ndarray]:
        """The rows ``index`` of a packed batch (a slice or index array along the row axis)."""
        return {k: v[index] for k, v in batch.items()}
