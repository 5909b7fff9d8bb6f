"""Vectorised NumPy cores of MPE scenarios: B worlds stepped in array operations.

Each core reproduces mpe2 exactly (same physics constants, force and integration order, the
same reset draws from the same per-env RNG, observations cast to float32), which
``tests/envs/test_mpe_batched.py`` checks step by step against mpe2 itself. Arguments a core
does not model raise ``Unsupported`` and the registry falls back to B mpe2 envs.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from gymnasium.utils import seeding

from envs.vector import Unsupported, VectorEnv, VectorStep, single_group

# mpe2 core.World and SimpleEnv constants.
DT = 0.1
DAMPING = 0.25
CONTACT_FORCE = 1e2
CONTACT_MARGIN = 1e-3
SENSITIVITY = 5.0
# Discrete action -> unit force: no-op, left, right, down, up (SimpleEnv._set_action).
DISCRETE_U = np.array([[0, 0], [-1, 0], [1, 0], [0, -1], [0, 1]], dtype=np.float64)


class ParticleWorlds(VectorEnv):
    """B particle worlds of one agent group, each reset from its own seeded RNG (world i first
    from ``seed + i``, as mpe2 and VMAS envs reset one by one). A subclass sets ``num_envs``,
    ``n`` (agents) and ``_seed`` and defines ``_reset_worlds(idx)`` and ``_observe()``; the
    global state is the agents' observations side by side."""

    def reset(self, seed: int | None = None) -> VectorStep:
        seed = self._seed if seed is None else seed
        self._rngs = [
            seeding.np_random(None if seed is None else seed + i)[0] for i in range(self.num_envs)
        ]
        self._reset_worlds(range(self.num_envs))
        obs = self._observe()
        state = obs.reshape(self.num_envs, -1)
        zeros, no = np.zeros((self.num_envs, self.n), np.float32), np.zeros(self.num_envs, bool)
        return VectorStep({"agent": obs}, state, {}, zeros, no, no.copy(), {"agent": obs}, state)


class SpreadBatch(ParticleWorlds):
    """``simple_spread_v3``: N agents cover N landmarks; shared reward minus collisions.

    Args:
        num_envs: B worlds.
        seed: world i is first reset with ``seed + i`` (as ``mpe2`` ``reset(seed=seed + i)``).
        N, local_ratio, max_cycles, continuous_actions: as in mpe2.
    """

    AGENT_SIZE = 0.15

    def __init__(
        self,
        num_envs: int,
        seed: int | None = None,
        N: int = 3,
        local_ratio: float = 0.5,
        max_cycles: int = 25,
        continuous_actions: bool = False,
        dynamic_rescaling: bool = True,  # rendering only
        **unsupported,
    ):
        unsupported.pop("render_mode", None)
        modelled = {
            "curriculum": False,
            "terminate_on_success": False,
            "benchmark_data": False,
            "num_agent_neighbors": None,
            "num_landmark_neighbors": None,
        }
        for key, value in unsupported.items():
            if modelled.get(key, object()) != value:
                raise Unsupported(f"{key}={value!r}")
        self.num_envs, self.n = num_envs, N
        self.local_ratio, self.max_cycles = local_ratio, max_cycles
        self.continuous = continuous_actions
        self.agents = tuple(f"agent_{i}" for i in range(N))
        obs_dim = 4 + 2 * N + 4 * (N - 1)
        self.state_space = gym.spaces.Box(-np.inf, np.inf, (N * obs_dim,), np.float32)
        self.groups = single_group(
            self.agents,
            gym.spaces.Box(-np.inf, np.inf, (obs_dim,), np.float32),
            gym.spaces.Box(0.0, 1.0, (5,), np.float32)
            if continuous_actions
            else gym.spaces.Discrete(5),
        )
        # others[i] = indices of the agents other than i, in order.
        self._others = np.array([[j for j in range(N) if j != i] for i in range(N)], dtype=int)
        self._not_self = ~np.eye(N, dtype=bool)
        self._seed = seed
        self._rngs: list[np.random.Generator] = []
        self.pos = np.zeros((num_envs, N, 2))
        self.vel = np.zeros((num_envs, N, 2))
        self.landmarks = np.zeros((num_envs, N, 2))
        self.steps = np.zeros(num_envs, dtype=np.int64)

    def _reset_worlds(self, idx) -> None:
        for i in idx:
            rng = self._rngs[i]
            self.pos[i] = rng.uniform(-1, 1, (self.n, 2))
            self.landmarks[i] = rng.uniform(-1, 1, (self.n, 2))
        self.vel[idx] = 0.0
        self.steps[idx] = 0

    def _forces(self, actions: np.ndarray) -> np.ndarray:
        if self.continuous:
            a = np.clip(np.asarray(actions, np.float64), 0.0, 1.0)
            u = np.stack([a[..., 2] - a[..., 1], a[..., 4] - a[..., 3]], axis=-1)
        else:
            u = DISCRETE_U[np.asarray(actions, dtype=np.int64)]
        u = u * SENSITIVITY
        # Pairwise soft contact between agents (landmarks do not collide here).
        delta = self.pos[:, :, None, :] - self.pos[:, None, :, :]  # [B, i, j, 2]
        with np.errstate(invalid="ignore", divide="ignore"):
            dist = np.sqrt(np.sum(delta**2, axis=-1))
            penetration = np.logaddexp(0, -(dist - 2 * self.AGENT_SIZE) / CONTACT_MARGIN)
            pair = (
                CONTACT_FORCE * delta / dist[..., None] * (penetration * CONTACT_MARGIN)[..., None]
            )
        pair[:, ~self._not_self] = 0.0
        return u + pair.sum(axis=2)

    def _observe(self) -> np.ndarray:
        B, N = self.num_envs, self.n
        rel_lm = self.landmarks[:, None, :, :] - self.pos[:, :, None, :]  # [B, i, l, 2]
        rel_ag = self.pos[:, None, :, :] - self.pos[:, :, None, :]  # [B, i, j, 2]
        rel_others = rel_ag[:, np.arange(N)[:, None], self._others]  # [B, i, N-1, 2]
        comm = np.zeros((B, N, 2 * (N - 1)))  # agents are silent
        return np.concatenate(
            [self.vel, self.pos, rel_lm.reshape(B, N, -1), rel_others.reshape(B, N, -1), comm],
            axis=-1,
        ).astype(np.float32)

    def _rewards(self) -> np.ndarray:
        lm_dist = np.sqrt(
            np.sum((self.pos[:, :, None, :] - self.landmarks[:, None, :, :]) ** 2, axis=-1)
        )
        global_reward = -lm_dist.min(axis=1).sum(axis=1)  # [B]
        ag_dist = np.sqrt(np.sum((self.pos[:, :, None] - self.pos[:, None]) ** 2, axis=-1))
        collisions = ((ag_dist < 2 * self.AGENT_SIZE) & self._not_self).sum(axis=2)  # [B, N]
        r = global_reward[:, None] * (1 - self.local_ratio) - collisions * self.local_ratio
        return r.astype(np.float32)

    def step(self, actions: dict[str, np.ndarray]) -> VectorStep:
        force = self._forces(actions["agent"])
        self.pos += self.vel * DT
        self.vel = self.vel * (1 - DAMPING) + force * DT
        rewards = self._rewards()
        self.steps += 1
        obs = self._observe()
        truncated = self.steps >= self.max_cycles
        terminated = np.zeros(self.num_envs, bool)
        final_obs = obs
        if truncated.any():
            final_obs = obs.copy()
            done = np.flatnonzero(truncated)
            self._reset_worlds(done)
            obs = self._observe()
        B = self.num_envs
        return VectorStep(
            {"agent": obs},
            obs.reshape(B, -1),
            {},
            rewards,
            terminated,
            truncated,
            {"agent": final_obs},
            final_obs.reshape(B, -1),
        )
