"""Batches of B copies of a multi-agent env, stepped as arrays.

The training sampler talks to a :class:`VectorEnv`: observations come as one ``[B, N, D]``
array (B envs, N agents), actions go in as ``[B, N]`` (discrete) or ``[B, N, A]``
(continuous), rewards come out as ``[B, N]``. A finished env is reset inside ``step`` and its
last observation is handed back in ``final_obs``, so the caller never handles per-env resets.

Two implementations: a family's own vectorised core (e.g. ``envs.mpe.batched``), which steps
all B envs in NumPy array operations, and :class:`ParallelEnvBatch`, B copies of any
PettingZoo ``ParallelEnv`` behind the same interface.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
from pettingzoo import ParallelEnv


class Unsupported(Exception):
    """Raised by a vectorised core for arguments it does not model (the caller falls back)."""


@dataclass
class VectorStep:
    """One step of B envs. Arrays are indexed [env, agent, ...].

    Attributes:
        obs: float32 ``[B, N, D]`` observations (of the next episode where an env was reset).
        state: float32 ``[B, S]`` global state for centralised critics.
        action_mask: float32 ``[B, N, A]`` legal actions, or None if every action is legal.
        rewards: float32 ``[B, N]`` (zeros after reset).
        terminated: bool ``[B]``; truncated: bool ``[B]`` (episode limit).
        final_obs / final_state: the last observation/state of the envs that ended this step
            (rows of other envs are undefined).
        info: per-env episode facts ``name -> [B]`` for the envs that ended this step (e.g.
            SMAC's ``battle_won``); rows of other envs are undefined. None if the env has none.
    """

    obs: np.ndarray
    state: np.ndarray
    action_mask: np.ndarray | None
    rewards: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    final_obs: np.ndarray
    final_state: np.ndarray
    info: dict[str, np.ndarray] | None = None


class VectorEnv(abc.ABC):
    """Interface of a batch of B envs with N agents sharing one observation and action space."""

    num_envs: int
    agents: tuple[str, ...]
    observation_space: gym.spaces.Box  # one agent's observation (the mask apart)
    action_space: gym.Space  # one agent's action
    state_space: gym.spaces.Box
    has_action_mask: bool = False

    @property
    def num_agents(self) -> int:
        return len(self.agents)

    @abc.abstractmethod
    def reset(self, seed: int | None = None) -> VectorStep:
        """Resets all B envs; env i is seeded with ``seed + i`` when a seed is given."""

    @abc.abstractmethod
    def step(self, actions: np.ndarray) -> VectorStep:
        """Steps all B envs with ``actions`` ``[B, N]`` (or ``[B, N, A]``); resets those that end."""


def shared_spaces(env: ParallelEnv) -> tuple[gym.Space, gym.Space]:
    """The one observation and action space all agents of ``env`` share, else an error."""
    agents = env.possible_agents
    obs_spaces = {repr(env.observation_space(a)) for a in agents}
    act_spaces = {repr(env.action_space(a)) for a in agents}
    if len(obs_spaces) > 1 or len(act_spaces) > 1:
        raise ValueError(
            f"{env.metadata.get('name', type(env).__name__)}: agents have different spaces "
            f"({len(obs_spaces)} observation, {len(act_spaces)} action spaces); one shared "
            "policy needs agents with equal spaces"
        )
    return env.observation_space(agents[0]), env.action_space(agents[0])


class ParallelEnvBatch(VectorEnv):
    """B copies of a PettingZoo ParallelEnv, stepped one after another.

    Args:
        make_env: builds one env.
        num_envs: B.
        seed: env i is first reset with ``seed + i``; later resets continue its own RNG.
    """

    def __init__(self, make_env: Callable[[], ParallelEnv], num_envs: int, seed: int | None):
        self.envs = [make_env() for _ in range(num_envs)]
        self.num_envs = num_envs
        first = self.envs[0]
        self.agents = tuple(first.possible_agents)
        obs_space, self.action_space = shared_spaces(first)
        self.has_action_mask = isinstance(obs_space, gym.spaces.Dict)
        self.observation_space = obs_space["observations"] if self.has_action_mask else obs_space
        self._has_state = callable(getattr(first, "state", None))
        self._seed = seed
        probe, _ = first.reset(seed=seed)  # sizes the buffers; reset() seeds it again
        x, m = self._split(probe)
        state_dim = self._env_state(first, x).shape[0]
        self.state_space = gym.spaces.Box(-np.inf, np.inf, (state_dim,), np.float32)
        self._obs = np.zeros((num_envs, *x.shape), np.float32)
        self._state = np.zeros((num_envs, state_dim), np.float32)
        self._mask = np.zeros((num_envs, *m.shape), np.float32) if m is not None else None

    def _split(self, obs: dict) -> tuple[np.ndarray, np.ndarray | None]:
        if self.has_action_mask:
            x = np.stack([obs[a]["observations"] for a in self.agents])
            return x, np.stack([obs[a]["action_mask"] for a in self.agents])
        return np.stack([obs[a] for a in self.agents]), None

    def _env_state(self, env: ParallelEnv, x: np.ndarray) -> np.ndarray:
        if self._has_state:
            try:
                return np.asarray(env.state(), dtype=np.float32).ravel()
            except NotImplementedError:
                self._has_state = False
        return x.ravel()

    def _reset_one(self, i: int, seed: int | None) -> None:
        env = self.envs[i]
        obs, _ = env.reset(seed=seed)
        x, m = self._split(obs)
        self._obs[i] = x
        self._state[i] = self._env_state(env, x)
        if m is not None:
            self._mask[i] = m

    def reset(self, seed: int | None = None) -> VectorStep:
        seed = self._seed if seed is None else seed
        B, N = self.num_envs, self.num_agents
        for i in range(B):
            self._reset_one(i, None if seed is None else seed + i)
        zeros = np.zeros((B, N), np.float32)
        no = np.zeros(B, bool)
        return VectorStep(
            self._obs.copy(),
            self._state.copy(),
            self._masks(),
            zeros,
            no,
            no.copy(),
            self._obs.copy(),
            self._state.copy(),
        )

    def _masks(self) -> np.ndarray | None:
        return None if self._mask is None else self._mask.copy()

    def step(self, actions: np.ndarray) -> VectorStep:
        B, N = self.num_envs, self.num_agents
        rewards = np.zeros((B, N), np.float32)
        terminated = np.zeros(B, bool)
        truncated = np.zeros(B, bool)
        final_obs = np.empty_like(self._obs)
        final_state = np.empty_like(self._state)
        won: np.ndarray | None = None
        for i, env in enumerate(self.envs):
            act = {a: actions[i, j] for j, a in enumerate(self.agents)}
            obs, rew, term, trunc, infos = env.step(act)
            for info in infos.values():
                if "battle_won" in info:
                    won = np.zeros(B, bool) if won is None else won
                    won[i] = bool(info["battle_won"])
            for j, a in enumerate(self.agents):
                rewards[i, j] = rew.get(a, 0.0)
            if obs:
                x, m = self._split(obs)
                self._obs[i] = x
                self._state[i] = self._env_state(env, x)
                if m is not None:
                    self._mask[i] = m
            terminated[i] = all(term.get(a, False) for a in self.agents)
            truncated[i] = not terminated[i] and all(
                term.get(a, False) or trunc.get(a, False) for a in self.agents
            )
            if terminated[i] or truncated[i] or not env.agents:
                truncated[i] = truncated[i] or not terminated[i]
                final_obs[i], final_state[i] = self._obs[i], self._state[i]
                self._reset_one(i, None)
        return VectorStep(
            self._obs.copy(),
            self._state.copy(),
            self._masks(),
            rewards,
            terminated,
            truncated,
            final_obs,
            final_state,
            None if won is None else {"battle_won": won},
        )
