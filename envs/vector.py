"""Batches of B copies of a multi-agent env, stepped as arrays.

The training sampler talks to a :class:`VectorEnv`. Agents come in *groups*: agents that share
one observation and one action space and one role (``adversary_0..2`` of simple_tag are one
group, ``agent_0`` another). Per group, observations come as one ``[B, N_g, *obs_shape]`` array
in the observation space's own dtype (float vectors, uint8 images, integer tokens) and actions
go in as ``[B, N_g]`` (discrete) or ``[B, N_g, A]`` (continuous). Rewards come out as
``[B, N]`` over all agents in env order. A finished env is reset inside ``step`` and its last
observation is handed back in ``final_obs``, so the caller never handles per-env resets.

Two implementations: a family's own vectorised core (e.g. ``envs.mpe.batched``), which steps
all B envs in NumPy array operations, and :class:`ParallelEnvBatch`, B copies of any
PettingZoo ``ParallelEnv`` behind the same interface.
"""

from __future__ import annotations

import abc
import re
from collections.abc import Callable
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
from pettingzoo import ParallelEnv


class Unsupported(Exception):
    """Raised by a vectorised core for arguments it does not model (the caller falls back)."""


@dataclass(frozen=True)
class AgentGroup:
    """Agents of one role with one observation and one action space.

    Attributes:
        name: the role (the agents' common name prefix, e.g. ``adversary``).
        agents: the group's agents, in env order.
        index: each agent's position in the env's agent order (its column in ``rewards``).
        observation_space: one agent's observation (the action mask apart).
        action_space: one agent's action.
        has_action_mask: whether the env says which actions are legal.
    """

    name: str
    agents: tuple[str, ...]
    index: tuple[int, ...]
    observation_space: gym.spaces.Box
    action_space: gym.Space
    has_action_mask: bool = False

    @property
    def num_agents(self) -> int:
        return len(self.agents)


@dataclass
class VectorStep:
    """One step of B envs. Per-group arrays are ``group -> [env, agent of the group, ...]``.

    Attributes:
        obs: ``group -> [B, N_g, *obs_shape]`` observations (of the next episode where an env
            was reset).
        state: float32 ``[B, S]`` global state for centralised critics (``S = 0``: none), or
            ``[B, N, S]`` where the env gives each agent its own (``state_space`` of shape
            ``(N, S)``, agents in env order: SMAC's ``use_state_agent``).
        action_mask: ``group -> float32 [B, N_g, A]`` legal actions, for masked groups only.
        rewards: float32 ``[B, N]`` over all agents in env order (zeros after reset).
        terminated: bool ``[B]``; truncated: bool ``[B]`` (episode limit).
        final_obs / final_state: the last observation/state of the envs that ended this step
            (rows of other envs are undefined).
        info: per-env episode facts ``name -> [B]`` for the envs that ended this step (e.g.
            SMAC's ``battle_won``); rows of other envs are undefined. None if the env has none.
        active: ``group -> bool [B, N_g]`` whether each agent is alive at this observation
            (MAPPO's active masks: a dead agent's steps do not count in its loss); None: every
            agent always is.
    """

    obs: dict[str, np.ndarray]
    state: np.ndarray
    action_mask: dict[str, np.ndarray]
    rewards: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    final_obs: dict[str, np.ndarray]
    final_state: np.ndarray
    info: dict[str, np.ndarray] | None = None
    active: dict[str, np.ndarray] | None = None


class VectorEnv(abc.ABC):
    """Interface of a batch of B envs whose agents form one or more :class:`AgentGroup`."""

    num_envs: int
    agents: tuple[str, ...]
    groups: dict[str, AgentGroup]
    state_space: gym.spaces.Box
    FACTS: tuple[str, ...] = ()
    """Episode facts the env reports in ``VectorStep.info`` (a column each in metrics.csv)."""

    @property
    def num_agents(self) -> int:
        return len(self.agents)

    @abc.abstractmethod
    def reset(self, seed: int | None = None) -> VectorStep:
        """Resets all B envs; env i is seeded with ``seed + i`` when a seed is given."""

    @abc.abstractmethod
    def step(self, actions: dict[str, np.ndarray]) -> VectorStep:
        """Steps all B envs with ``group -> [B, N_g]`` (or ``[B, N_g, A]``) actions; resets
        those that end."""


def role(agent: str) -> str:
    """An agent's role: its name without the trailing index (``adversary_2`` -> ``adversary``)."""
    return re.sub(r"_?\d+$", "", agent) or agent


def _split_space(space: gym.Space) -> tuple[gym.Space, bool]:
    if isinstance(space, gym.spaces.Dict) and "action_mask" in space.spaces:
        return space["observations"], True
    return space, False


def agent_groups(env: ParallelEnv) -> dict[str, AgentGroup]:
    """The agents of ``env`` grouped by role; a role whose agents' spaces differ is split by
    space (``role``, ``role_1``, ...)."""
    members: dict[tuple[str, str, str], list[tuple[int, str]]] = {}
    for i, agent in enumerate(env.possible_agents):
        key = (role(agent), repr(env.observation_space(agent)), repr(env.action_space(agent)))
        members.setdefault(key, []).append((i, agent))
    groups: dict[str, AgentGroup] = {}
    for (name, _, _), pairs in members.items():
        unique, k = name, 0
        while unique in groups:
            k += 1
            unique = f"{name}_{k}"
        first = pairs[0][1]
        obs_space, masked = _split_space(env.observation_space(first))
        groups[unique] = AgentGroup(
            unique,
            tuple(a for _, a in pairs),
            tuple(i for i, _ in pairs),
            obs_space,
            env.action_space(first),
            masked,
        )
    return groups


def single_group(
    agents: tuple[str, ...], obs_space: gym.Space, action_space: gym.Space, masked: bool = False
) -> dict[str, AgentGroup]:
    """The groups of a core whose agents all share one role and spaces."""
    name = role(agents[0])
    return {
        name: AgentGroup(name, agents, tuple(range(len(agents))), obs_space, action_space, masked)
    }


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
        self.groups = agent_groups(first)
        self._has_state = callable(getattr(first, "state", None))
        self._seed = seed
        probe, _ = first.reset(seed=seed)  # sizes the buffers; reset() seeds it again
        state_dim = self._env_state(first, probe).shape[0]
        self.state_space = gym.spaces.Box(-np.inf, np.inf, (state_dim,), np.float32)
        B = num_envs
        self._obs = {
            g.name: np.zeros(
                (B, g.num_agents, *g.observation_space.shape), g.observation_space.dtype
            )
            for g in self.groups.values()
        }
        self._mask = {
            g.name: np.zeros((B, g.num_agents, int(g.action_space.n)), np.float32)
            for g in self.groups.values()
            if g.has_action_mask
        }
        self._state = np.zeros((B, state_dim), np.float32)

    def _write(self, i: int, obs: dict) -> None:
        for g in self.groups.values():
            for j, agent in enumerate(g.agents):
                if agent not in obs:
                    continue
                o = obs[agent]
                if g.has_action_mask:
                    self._mask[g.name][i, j] = o["action_mask"]
                    o = o["observations"]
                self._obs[g.name][i, j] = o

    def _env_state(self, env: ParallelEnv, obs: dict) -> np.ndarray:
        """``env.state()``; without one, the agents' flat vector observations side by side
        (never images or tokens: those envs have no global state, S = 0)."""
        if self._has_state:
            try:
                return np.asarray(env.state(), dtype=np.float32).ravel()
            except NotImplementedError:
                self._has_state = False
        parts = []
        for g in self.groups.values():
            space = g.observation_space
            if len(space.shape) != 1 or space.dtype.kind != "f":
                return np.zeros(0, np.float32)
            for a in g.agents:
                o = obs.get(a)
                if o is not None:
                    parts.append(np.asarray(o["observations"] if g.has_action_mask else o).ravel())
                else:
                    parts.append(np.zeros(space.shape, np.float32))
        return np.concatenate(parts).astype(np.float32)

    def _reset_one(self, i: int, seed: int | None) -> None:
        env = self.envs[i]
        obs, _ = env.reset(seed=seed)
        self._write(i, obs)
        self._state[i] = self._env_state(env, obs)

    def _copy(self, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {k: v.copy() for k, v in arrays.items()}

    def reset(self, seed: int | None = None) -> VectorStep:
        seed = self._seed if seed is None else seed
        B, N = self.num_envs, self.num_agents
        for i in range(B):
            self._reset_one(i, None if seed is None else seed + i)
        no = np.zeros(B, bool)
        return VectorStep(
            self._copy(self._obs),
            self._state.copy(),
            self._copy(self._mask),
            np.zeros((B, N), np.float32),
            no,
            no.copy(),
            self._copy(self._obs),
            self._state.copy(),
        )

    def step(self, actions: dict[str, np.ndarray]) -> VectorStep:
        B, N = self.num_envs, self.num_agents
        rewards = np.zeros((B, N), np.float32)
        terminated = np.zeros(B, bool)
        truncated = np.zeros(B, bool)
        final_obs = {k: np.empty_like(v) for k, v in self._obs.items()}
        final_state = np.empty_like(self._state)
        won: np.ndarray | None = None
        for i, env in enumerate(self.envs):
            act = {
                a: actions[g.name][i, j]
                for g in self.groups.values()
                for j, a in enumerate(g.agents)
                if a in env.agents
            }
            obs, rew, term, trunc, infos = env.step(act)
            for info in infos.values():
                if "battle_won" in info:
                    won = np.zeros(B, bool) if won is None else won
                    won[i] = bool(info["battle_won"])
            for j, a in enumerate(self.agents):
                rewards[i, j] = rew.get(a, 0.0)
            if obs:
                self._write(i, obs)
                self._state[i] = self._env_state(env, obs)
            terminated[i] = all(term.get(a, False) for a in self.agents)
            truncated[i] = not terminated[i] and all(
                term.get(a, False) or trunc.get(a, False) for a in self.agents
            )
            if terminated[i] or truncated[i] or not env.agents:
                truncated[i] = truncated[i] or not terminated[i]
                for k, v in self._obs.items():
                    final_obs[k][i] = v[i]
                final_state[i] = self._state[i]
                self._reset_one(i, None)
        return VectorStep(
            self._copy(self._obs),
            self._state.copy(),
            self._copy(self._mask),
            rewards,
            terminated,
            truncated,
            final_obs,
            final_state,
            None if won is None else {"battle_won": won},
        )


class CoreEnv(ParallelEnv):
    """The PettingZoo face of one world (B = 1) of a vectorised core.

    A subclass sets ``core_class`` (built as ``core_class(1, auto_reset=False, **options)``) and
    ``options`` (its options dataclass, for the registry's argument list). A group with action
    masks observes ``{"observations", "action_mask"}`` dicts. Every step's ``info`` holds the
    agent's reward terms (``reward_terms``) where the core keeps them apart; the step that
    ends the episode adds the core's episode facts (e.g. SMAC's ``battle_won``).
    """

    core_class: type
    options: type
    metadata = {"render_modes": ["rgb_array"], "is_parallelizable": True}

    def __init__(self, render_mode=None, **options):
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"render_mode {render_mode!r} is not supported; use 'rgb_array'")
        self.core = self.core_class(1, auto_reset=False, **options)
        self.render_mode = render_mode
        self.possible_agents = list(self.core.agents)
        self.agents: list[str] = []
        self._slot = {}  # agent -> (group, column)
        self._spaces = {}  # group -> (observation space, action space)
        for g in self.core.groups.values():
            obs_space = g.observation_space
            if g.has_action_mask:
                mask = gym.spaces.Box(0, 1, (int(g.action_space.n),), np.int8)
                obs_space = gym.spaces.Dict({"observations": obs_space, "action_mask": mask})
            self._spaces[g.name] = (obs_space, g.action_space)
            for j, a in enumerate(g.agents):
                self._slot[a] = (g, j)
        self._step: VectorStep | None = None

    def observation_space(self, agent):
        return self._spaces[self._slot[agent][0].name][0]

    def action_space(self, agent):
        return self._spaces[self._slot[agent][0].name][1]

    def _obs(self, step: VectorStep) -> dict:
        out = {}
        for a, (g, j) in self._slot.items():
            o = step.obs[g.name][0, j]
            if g.has_action_mask:
                o = {
                    "observations": o,
                    "action_mask": step.action_mask[g.name][0, j].astype(np.int8),
                }
            out[a] = o
        return out

    def reset(self, seed=None, options=None):
        self._step = self.core.reset(seed=seed)
        self.agents = list(self.possible_agents)
        return self._obs(self._step), {a: {} for a in self.agents}

    def step(self, actions):
        if not self.agents:
            raise RuntimeError("the episode is over; call reset()")
        missing = [a for a in self.agents if a not in actions]
        if missing:
            raise ValueError(f"no action for agents {missing}; every agent acts every step")
        act = {
            g.name: np.stack([np.asarray(actions[a]) for a in g.agents])[None]
            for g in self.core.groups.values()
        }
        step = self._step = self.core.step(act)
        term, trunc = bool(step.terminated[0]), bool(step.truncated[0])
        rewards = {a: float(step.rewards[0, i]) for i, a in enumerate(self.possible_agents)}
        terms = getattr(self.core, "reward_terms", {})
        infos = {
            a: {"reward_terms": {k: float(v[0, i]) for k, v in terms.items()}} if terms else {}
            for i, a in enumerate(self.possible_agents)
        }
        if (term or trunc) and step.info:
            for info in infos.values():
                info.update({k: v[0].item() for k, v in step.info.items()})
        terms_d, truncs = dict.fromkeys(self.agents, term), dict.fromkeys(self.agents, trunc)
        if term or trunc:
            self.agents = []
        return self._obs(step), rewards, terms_d, truncs, infos

    def state(self) -> np.ndarray:
        return self._step.state[0]

    def close(self):
        """Nothing to release: the core holds only arrays (a face that renders overrides it)."""
