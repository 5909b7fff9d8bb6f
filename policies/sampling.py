"""The fast multi-agent sampling path: an RLlib EnvRunner over a batch of envs.

RLlib's default multi-agent path steps one PettingZoo env at a time and books every agent
step into ``MultiAgentEpisode`` objects; here most of the time went to that bookkeeping, not
to the env or the policy. :class:`VectorEnvRunner` instead

* steps a :class:`envs.vector.VectorEnv` of B envs (a vectorised NumPy core where the family
  has one),
* computes the actions of all B x N agents in one batched forward pass,
* writes the rollout into preallocated ``[T, B*N, ...]`` arrays, and
* only at the end cuts the arrays into one ``SingleAgentEpisode`` per agent and episode
  (work per episode, none per step).

Any number of modules act in one env (``policies.mapping``): each module computes the actions
of the agents mapped to it in one batched forward pass over its rows, exploring as its class
declares (``policies.inference.choose``: sampling, or epsilon-greedy for Q-values).

The sampler hands arrays and knows no algorithm: :meth:`VectorEnvRunner.rollout` gives a
:class:`Rollout` (per module its inputs, actions, log-probabilities, outputs, rewards and
recurrent states; the envs' done flags and global states), and the algorithm decides what it
becomes: PPO's advantages (``policies.ppo.array_path``), whole episodes for a replay
(:meth:`VectorEnvRunner.sample_episodes`, ``policies.q``), or RLlib's episodes
(:meth:`VectorEnvRunner.sample`): each agent's trajectory is a single-agent trajectory of its
module (tagged with the agent and module id), so RLlib's own learners (PPO's loss, GAE,
value bootstrapping on truncation, its multi-agent connectors) train on them unchanged.
Frozen modules (not in ``policies_to_train``) act but hand no episodes to the learner. Recurrent modules carry their hidden state from step to step and
across ``sample`` calls, reset it where an episode ends, and record ``STATE_OUT`` the way
RLlib's stateful-module conventions expect (the state before a chunk in its lookback).
Env steps are counted as env steps (B per batched step), agent steps as B x N.
"""

from __future__ import annotations

import math
import time
import uuid
from collections import defaultdict, deque
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
import ray
import torch
from ray.rllib.core import COMPONENT_RL_MODULE
from ray.rllib.core.columns import Columns
from ray.rllib.env.env_runner import EnvRunner
from ray.rllib.env.single_agent_episode import SingleAgentEpisode
from ray.rllib.env.utils.infinite_lookback_buffer import InfiniteLookbackBuffer
from ray.rllib.utils.checkpoints import Checkpointable
from ray.rllib.utils.metrics import (
    EPISODE_AGENT_RETURN_MEAN,
    EPISODE_LEN_MEAN,
    EPISODE_MODULE_RETURN_MEAN,
    EPISODE_RETURN_MAX,
    EPISODE_RETURN_MEAN,
    EPISODE_RETURN_MIN,
    NUM_AGENT_STEPS_SAMPLED,
    NUM_AGENT_STEPS_SAMPLED_LIFETIME,
    NUM_ENV_STEPS_SAMPLED,
    NUM_ENV_STEPS_SAMPLED_LIFETIME,
    NUM_EPISODES,
    NUM_EPISODES_LIFETIME,
    NUM_MODULE_STEPS_SAMPLED,
    NUM_MODULE_STEPS_SAMPLED_LIFETIME,
    WEIGHTS_SEQ_NO,
)

import envs
from policies.batch import BatchSpec
from policies.inference import act
from policies.mapping import ModuleSlot, slot_from_dict
from policies.modules import stacked_seeds

# Seconds spent per part of sampling, summed per iteration (bench/train_throughput.py reads
# them): stepping the envs, the policy's forward pass and sampling, and the whole call.
TIME_ENV, TIME_POLICY, TIME_TOTAL = "sampler_env_s", "sampler_policy_s", "sampler_total_s"


_SLOTS = [n for c in SingleAgentEpisode.__mro__ for n in getattr(c, "__slots__", ())]


class EpisodeFactory:
    """Builds finished ``SingleAgentEpisode`` chunks from NumPy slices, ~10x faster than its
    constructor (which validates and builds lookback buffers item by item).

    It copies the attributes of a template episode made by the real constructor and swaps in
    the data, so every attribute RLlib sets is there; ``tests/cluster/test_sampling.py`` checks
    that its episodes equal the constructor's.
    """

    def __init__(self):
        z = np.zeros((1, 1), np.float32)
        self.template = SingleAgentEpisode(
            observations=np.zeros((2, 1), np.float32),
            actions=z[:, 0],
            rewards=z[:, 0],
            infos=[{}, {}],
            extra_model_outputs={Columns.ACTION_LOGP: z[:, 0], Columns.ACTION_DIST_INPUTS: z},
            len_lookback_buffer=0,
        )
        t = self.template
        self._buf = {
            name: getattr(t, name).__dict__
            for name in ("observations", "actions", "rewards", "infos")
        }
        self._extra = {k: v.__dict__ for k, v in t.extra_model_outputs.items()}
        self._prefix, self._count = uuid.uuid4().hex[:16] + "-", 0

    @staticmethod
    def _buffer(template: dict, data) -> InfiniteLookbackBuffer:
        buf = object.__new__(InfiniteLookbackBuffer)
        buf.__dict__.update(template)
        buf.data = data
        return buf

    def __call__(
        self,
        obs,
        actions,
        rewards,
        logp,
        dist_inputs,
        *,
        terminated: bool,
        truncated: bool,
        agent_id: str,
        module_id: str,
        state_out: dict | None = None,
        t_started: int = 0,
    ):
        """One episode chunk. ``obs`` (an array or a dict of arrays) has one row more than
        the actions; ``state_out`` (recurrent modules) has one row more too: the state before
        the chunk, kept in the lookback where RLlib reads a chunk's first ``STATE_IN``."""
        ep = object.__new__(SingleAgentEpisode)
        for name in _SLOTS:
            setattr(ep, name, getattr(self.template, name))
        self._count += 1
        ep.id_ = f"{self._prefix}{self._count}"
        ep.agent_id, ep.module_id, ep.multi_agent_episode_id = agent_id, module_id, ep.id_
        n = len(rewards)
        ep.observations = self._buffer(self._buf["observations"], obs)
        ep.actions = self._buffer(self._buf["actions"], actions)
        ep.rewards = self._buffer(self._buf["rewards"], rewards)
        ep.infos = self._buffer(self._buf["infos"], [{}] * (n + 1))
        ep.extra_model_outputs = {
            Columns.ACTION_LOGP: self._buffer(self._extra[Columns.ACTION_LOGP], logp),
            Columns.ACTION_DIST_INPUTS: self._buffer(
                self._extra[Columns.ACTION_DIST_INPUTS], dist_inputs
            ),
        }
        if state_out is not None:
            buf = self._buffer(self._extra[Columns.ACTION_LOGP], state_out)
            buf.lookback = 1
            ep.extra_model_outputs[Columns.STATE_OUT] = buf
        ep.is_terminated, ep.is_truncated = terminated, truncated
        ep.t_started, ep.t = t_started, t_started + n
        ep._custom_data = {}
        return ep


@dataclass
class ModuleRollout:
    """One module's share of a rollout of T steps of B envs: ``R = B * K`` rows, env b's
    k-th agent of the module at row ``b * K + k``.

    Attributes:
        inputs: the module's input (``BatchSpec`` fields) ``[T + 1, R, ...]``: at each step,
            and after the last (the next rollout's first; the next episode's first where an
            env was reset).
        actions: ``[T, R, ...]``; logp: their log-probabilities ``[T, R]`` (under the
            sampling distribution; 0 for epsilon-greedy); outputs: the module's outputs
            ``[T, R, ...]`` (distribution inputs or Q-values).
        rewards: ``[T, R]``.
        final: ``t -> inputs [n, K, ...]`` after the last step of the n episodes that ended at
            step t (the envs ``np.flatnonzero(done[t])``, in that order).
        state0 / states: recurrent modules: the state before the rollout ``[R, ...]`` and after
            each step ``[T, R, ...]``, per state key; else None.
        active: float32 ``[T + 1, R]``, 1 where the row's agent is alive at that step's
            observation (``VectorStep.active``), 0 where it is dead; None where the env does not
            say (every agent always is).
    """

    inputs: dict[str, np.ndarray]
    actions: np.ndarray
    logp: np.ndarray
    outputs: np.ndarray
    rewards: np.ndarray
    final: dict[int, dict[str, np.ndarray]]
    state0: dict[str, np.ndarray] | None = None
    states: dict[str, np.ndarray] | None = None
    active: np.ndarray | None = None


@dataclass
class Rollout:
    """What :meth:`VectorEnvRunner.rollout` hands the algorithm: arrays, no episodes.

    Attributes:
        modules: module id -> :class:`ModuleRollout`.
        done / terminated: ``[T, B]`` an episode ended after step t (terminated: not by the
            time limit).
        started: ``[B]`` steps each env's running episode had before the rollout.
        env_state: the envs' global state ``[T + 1, B, S]`` (S = 0: none; ``[T + 1, B, N, S]``
            where each agent has its own).
        final_state: ``t -> [n, S]`` (or ``[n, N, S]``), the last state of the episodes that
            ended at t.
        rewards: ``[T, B, N]`` every agent's reward, in env order.
    """

    modules: dict[str, ModuleRollout]
    done: np.ndarray
    terminated: np.ndarray
    started: np.ndarray
    env_state: np.ndarray
    final_state: dict[int, np.ndarray]
    rewards: np.ndarray

    @property
    def num_env_steps(self) -> int:
        return int(self.done.size)


@dataclass
class Episode:
    """One whole episode of L steps (:meth:`VectorEnvRunner.sample_episodes`).

    Attributes:
        inputs: module id -> its input fields ``[L + 1, K, ...]`` (the last row after the last
            step).
        actions: module id -> ``[L, K, ...]``.
        rewards: ``[L, N]`` every agent's reward, in env order.
        state: the env's global state ``[L + 1, S]``.
        terminated: whether it ended by termination (else by the time limit).
    """

    inputs: dict[str, dict[str, np.ndarray]]
    actions: dict[str, np.ndarray]
    rewards: np.ndarray
    state: np.ndarray
    terminated: bool

    @property
    def length(self) -> int:
        return len(self.rewards)


class EpisodeStitcher:
    """Joins rollouts into whole episodes: an episode's steps may span several rollouts, so
    each env's unfinished steps wait here (work per episode and rollout, none per step)."""

    def __init__(self, num_envs: int):
        self.pieces: list[list[dict]] = [[] for _ in range(num_envs)]

    def add(self, roll: Rollout) -> list[Episode]:
        """The episodes that ended in ``roll``; keeps the steps of those still running."""
        T, B = roll.done.shape
        start = np.zeros(B, int)  # where each env's unfinished steps begin in this rollout
        out = []
        for t in sorted(roll.final_state):
            for k, b in enumerate(np.flatnonzero(roll.done[t])):
                pieces = [*self.pieces[b], self._piece(roll, b, start[b], t + 1)]
                self.pieces[b] = []
                start[b] = t + 1
                inputs = {
                    mid: {
                        key: np.concatenate(
                            [p["inputs"][mid][key] for p in pieces] + [m.final[t][key][k][None]]
                        )
                        for key in m.inputs
                    }
                    for mid, m in roll.modules.items()
                }
                actions = {
                    mid: np.concatenate([p["actions"][mid] for p in pieces]) for mid in roll.modules
                }
                out.append(
                    Episode(
                        inputs,
                        actions,
                        np.concatenate([p["rewards"] for p in pieces]),
                        np.concatenate(
                            [p["state"] for p in pieces] + [roll.final_state[t][k][None]]
                        ),
                        bool(roll.terminated[t, b]),
                    )
                )
        for b in range(B):
            if start[b] < T:
                self.pieces[b].append(self._piece(roll, b, start[b], T))
        return out

    @staticmethod
    def _piece(roll: Rollout, b: int, t0: int, t1: int) -> dict:
        """Steps ``t0 .. t1 - 1`` of env ``b`` (copies: the rollout's buffers are reused)."""
        piece = {"inputs": {}, "actions": {}}
        B = roll.done.shape[1]
        for mid, m in roll.modules.items():
            K = m.rewards.shape[1] // B
            rows = slice(b * K, (b + 1) * K)
            piece["inputs"][mid] = {k: v[t0:t1, rows].copy() for k, v in m.inputs.items()}
            piece["actions"][mid] = m.actions[t0:t1, rows].copy()
        piece["rewards"] = roll.rewards[t0:t1, b].copy()
        piece["state"] = roll.env_state[t0:t1, b].copy()
        return piece


@dataclass
class _Module:
    """What the runner keeps per module: its slot, input spec and sampling state."""

    slot: ModuleSlot
    spec: BatchSpec
    module: Any
    trained: bool
    # agent columns of the env's reward array, or None when they are all of them in order
    reward_cols: np.ndarray | None
    state: dict | None = None  # recurrent: hidden state per row (torch), carried across calls

    @property
    def agents_per_env(self) -> int:
        return self.slot.num_agents

    def gather(self, per_group: dict[str, np.ndarray]) -> np.ndarray | None:
        """This module's agents' slice ``[B, K, ...]`` of per-group arrays."""
        return self.slot.gather(per_group)

    def write(self, dst: dict, step_obs, step_mask, state) -> None:
        self.spec.write(dst, self.gather(step_obs), self.gather(step_mask), self.own(state))

    def own(self, state: np.ndarray) -> np.ndarray:
        """The global state ``[B, S]`` as it is, or this module's agents' rows ``[B, K, S]`` of
        a per-agent state ``[B, N, S]``."""
        return state[:, list(self.slot.env_index)] if state.ndim == 3 else state

    def write_active(self, dst: np.ndarray, active: dict[str, np.ndarray] | None) -> None:
        """This module's agents' active masks ``[B * K]`` (float, 1 = alive) into ``dst``."""
        dst[:] = self.gather(active).reshape(-1)


class VectorEnvRunner(EnvRunner, Checkpointable):
    """Samples ``num_envs_per_env_runner`` copies of ``config.env`` with the run's modules.

    ``config.env_config`` holds the env's own arguments. Each module's ``model_config`` holds
    its :class:`BatchSpec` (``batch_spec``) and its agents (``slot``: see
    ``policies.ppo.declare_ppo``).
    """

    def __init__(self, *, config, **kwargs):
        super().__init__(config=config, **kwargs)
        torch.set_num_threads(1)
        self.num_envs = self.config.num_envs_per_env_runner
        # Stacked seeds (model.seeds = N): env e belongs to seed e // (num_envs / N). Rows are
        # env-major, so every module's rows are N contiguous blocks, one per seed, the order
        # its GroupedLinear layers expect.
        self.seeds = stacked_seeds(self.config.rl_module_spec)
        if self.num_envs % self.seeds:
            raise ValueError(f"{self.num_envs} envs for {self.seeds} stacked seeds")
        self.envs_per_seed = self.num_envs // self.seeds
        self.vec: envs.vector.VectorEnv | None = None
        self.module = None
        if self.worker_index is None or self.worker_index > 0 or self.config.num_env_runners == 0:
            self.make_env()
        self.make_module()
        self._weights_seq_no = 0
        self._step = None  # the last VectorStep: where the next rollout goes on from
        self._episode_factory = EpisodeFactory()
        self._stitcher: EpisodeStitcher | None = None
        self._returns = self._lengths = None
        window = self.config.metrics_num_episodes_for_smoothing
        self._window = max(1, math.ceil(window / (self.num_workers or 1)))
        # per seed: its recent episodes (return per agent, length), and wins where envs
        # report battle_won
        self._recent = [deque(maxlen=self._window) for _ in range(self.seeds)]
        self._wins = [deque(maxlen=self._window) for _ in range(self.seeds)]
        self._facts: dict[str, deque] = {}  # other episode facts an env reports (info)

    # -- construction -----------------------------------------------------------------------

    def make_env(self) -> None:
        self.vec = envs.make_vector(
            self.config.env, self.num_envs, seed=self._seed, **dict(self.config.env_config)
        )
        self._step = None

    def make_module(self) -> None:
        multi = self.config.get_multi_rl_module_spec(spaces=self.get_spaces(), inference_only=True)
        self.module = multi.build()
        trained = self.config.policies_to_train
        self.modules: dict[str, _Module] = {}
        for mid, spec in multi.rl_module_specs.items():
            if getattr(spec, "learner_only", False):  # a mixer or critic that never acts
                continue
            slot = slot_from_config(mid, spec)
            cols = np.asarray(slot.env_index)
            in_order = (
                np.array_equal(cols, np.arange(len(cols)))
                and self.vec is not None
                and (len(cols) == self.vec.num_agents)
            )
            self.modules[mid] = _Module(
                slot,
                BatchSpec.from_dict(spec.model_config["batch_spec"]),
                self.module[mid],
                trained is None or mid in trained,
                None if in_order else cols,
            )

    def get_spaces(self) -> dict[str, Any]:
        specs = self.config.rl_module_spec.rl_module_specs
        return {mid: (s.observation_space, s.action_space) for mid, s in specs.items()}

    def assert_healthy(self) -> None:
        assert self.vec is not None and self.module is not None

    # -- sampling -----------------------------------------------------------------------------

    def sample(
        self,
        *,
        num_timesteps: int | None = None,
        num_episodes: int | None = None,
        explore: bool | None = None,
        random_actions: bool = False,
        force_reset: bool = False,
    ) -> list[SingleAgentEpisode]:
        """Samples T steps of all B envs (T from ``num_timesteps`` or the rollout fragment
        length) and returns one episode chunk per trained agent and episode."""
        if num_episodes is not None:
            raise ValueError("VectorEnvRunner samples by timesteps; num_episodes is not supported")
        t0 = time.perf_counter()
        roll = self.rollout(
            num_timesteps, explore=explore, random_actions=random_actions, force_reset=force_reset
        )
        episodes = []
        for mid, m in self.modules.items():
            if m.trained:
                episodes += self._cut_episodes(m, roll.modules[mid], roll)
        self.metrics.log_value(TIME_TOTAL, time.perf_counter() - t0, reduce="sum")
        return episodes

    def sample_episodes(
        self, num_timesteps: int | None = None, *, explore: bool = True, epsilon: float = 0.0
    ) -> tuple[list[Episode], int]:
        """Samples T steps of all B envs (as :meth:`rollout`) and returns the whole episodes
        that ended in them (their earlier steps were sampled by earlier calls), and the env
        steps sampled."""
        t0 = time.perf_counter()
        roll = self.rollout(num_timesteps, explore=explore, epsilon=epsilon)
        if self._stitcher is None:
            self._stitcher = EpisodeStitcher(self.num_envs)
        episodes = self._stitcher.add(roll)
        self.metrics.log_value(TIME_TOTAL, time.perf_counter() - t0, reduce="sum")
        return episodes, roll.num_env_steps

    def rollout(
        self,
        num_timesteps: int | None = None,
        *,
        explore: bool | None = None,
        epsilon: float = 0.0,
        random_actions: bool = False,
        force_reset: bool = False,
    ) -> Rollout:
        """Steps all B envs T times with the modules (T from ``num_timesteps`` or the rollout
        fragment length), going on from where the last call ended.

        Args:
            explore: act as each module explores (sampling, epsilon-greedy) or greedily.
            epsilon: the chance of a random legal action for epsilon-greedy modules.
            random_actions: every module draws uniformly among the legal actions.
            force_reset: reset every env first (episodes in progress are dropped).
        """
        explore = self.config.explore if explore is None else explore
        vec, B = self.vec, self.num_envs
        T = (
            math.ceil(num_timesteps / B)
            if num_timesteps
            else self.config.get_rollout_fragment_length(self.worker_index)
        )
        if self._step is None or force_reset:
            self._step = vec.reset()
            self._returns = np.zeros((B, vec.num_agents), np.float64)
            self._lengths = np.zeros(B, np.int64)
            self._stitcher = None
            for m in self.modules.values():
                m.state = m.module.initial_state_rows(B * m.agents_per_env)
        started = self._lengths.copy()  # steps each env's running episode had before this call
        step = self._step
        bufs: dict[str, ModuleRollout] = {}
        for mid, m in self.modules.items():
            rows = B * m.agents_per_env
            b = bufs[mid] = ModuleRollout(
                m.spec.buffers(T + 1, rows),
                None,
                np.empty((T, rows), np.float32),
                None,
                np.empty((T, rows), np.float32),
                {},
            )
            if m.state is not None:
                b.state0 = {k: v.numpy().copy() for k, v in m.state.items()}
                b.states = {k: np.empty((T, *v.shape), np.float32) for k, v in m.state.items()}
            m.write({k: v[0] for k, v in b.inputs.items()}, step.obs, step.action_mask, step.state)
            if step.active is not None:  # MAPPO's active masks: who is alive at each step
                b.active = np.empty((T + 1, rows), np.float32)
                m.write_active(b.active[0], step.active)
        env_actions = {
            g.name: np.empty(
                (B, g.num_agents, *(g.action_space.shape or ())),
                np.int64 if isinstance(g.action_space, gym.spaces.Discrete) else np.float32,
            )
            for g in vec.groups.values()
        }
        done_buf = np.zeros((T, B), bool)
        term_buf = np.zeros((T, B), bool)
        env_state = np.empty((T + 1, *step.state.shape), np.float32)
        env_state[0] = step.state
        final_state: dict[int, np.ndarray] = {}
        all_rewards = np.empty((T, B, vec.num_agents), np.float32)
        t_env = t_pol = 0.0
        for t in range(T):
            tp = time.perf_counter()
            for mid, m in self.modules.items():
                b = bufs[mid]
                x = {k: torch.from_numpy(v[t]) for k, v in b.inputs.items()}
                acted = act(m.module, x, m.state, explore, epsilon=epsilon, uniform=random_actions)
                m.state, actions = acted.state, acted.actions
                if b.actions is None:
                    b.actions = np.empty((T, *actions.shape), actions.dtype)
                    b.outputs = np.empty((T, *acted.outputs.shape), np.float32)
                b.actions[t], b.logp[t], b.outputs[t] = actions, acted.logp, acted.outputs
                if m.state is not None:
                    for k, v in m.state.items():
                        b.states[k][t] = v.numpy()
                m.slot.scatter(
                    actions.reshape(B, m.agents_per_env, *actions.shape[1:]), env_actions
                )
            te = time.perf_counter()
            step = vec.step(env_actions)
            t_env += time.perf_counter() - te
            t_pol += te - tp
            all_rewards[t] = step.rewards
            env_state[t + 1] = step.state
            done = step.terminated | step.truncated
            ended = np.flatnonzero(done) if done.any() else None
            for mid, m in self.modules.items():
                b = bufs[mid]
                rew = step.rewards if m.reward_cols is None else step.rewards[:, m.reward_cols]
                b.rewards[t] = rew.reshape(-1)
                m.write(
                    {k: v[t + 1] for k, v in b.inputs.items()},
                    step.obs,
                    step.action_mask,
                    step.state,
                )
                if b.active is not None:
                    m.write_active(b.active[t + 1], step.active)
                if ended is not None:
                    K = m.agents_per_env
                    final = m.spec.buffers(len(ended), K)
                    flat = {k: v.reshape(len(ended) * K, *v.shape[2:]) for k, v in final.items()}
                    m.write(
                        flat,
                        {g: a[ended] for g, a in step.final_obs.items()},
                        {g: a[ended] for g, a in step.action_mask.items()},
                        step.final_state[ended],
                    )
                    b.final[t] = final
                    if m.state is not None:  # a new episode starts from the initial state
                        rows = (ended[:, None] * K + np.arange(K)).reshape(-1)
                        for v in m.state.values():
                            v[rows] = 0.0
            if ended is not None:
                done_buf[t], term_buf[t] = done, step.terminated
                final_state[t] = step.final_state[ended].copy()
                for key, values in (step.info or {}).items():
                    if key == "battle_won":
                        for b, won in zip(ended, values[ended].tolist(), strict=True):
                            self._wins[b // self.envs_per_seed].append(won)
                    else:
                        facts = self._facts.setdefault(key, deque(maxlen=self._window))
                        facts.extend(values[ended].tolist())
        self._step = step
        # env steps are counted per seed: a stacked run's curves and --timesteps read as
        # each seed's, the same as one seed's run
        self._log_sampled(T * B // self.seeds, all_rewards, done_buf)
        self.metrics.log_value(TIME_ENV, t_env, reduce="sum")
        self.metrics.log_value(TIME_POLICY, t_pol, reduce="sum")
        return Rollout(bufs, done_buf, term_buf, started, env_state, final_state, all_rewards)

    def _cut_episodes(self, m: _Module, b: ModuleRollout, roll: Rollout) -> list:
        """Cuts one module's ``[T, B*K]`` rollout into one chunk per agent and episode."""
        done, term, started = roll.done, roll.terminated, roll.started
        T, B = done.shape
        K = m.agents_per_env
        x, final = b.inputs, b.final
        recurrent = b.states is not None
        episodes = []
        ends_of = defaultdict(list)  # env -> [(t, position among the envs ended at t)]
        for t in sorted(final):
            for k, env in enumerate(np.flatnonzero(done[t])):
                ends_of[int(env)].append((t, k))
        for env in range(B):
            start = 0
            for end, k in [*ends_of[env], (T - 1, None)]:
                if end < start:
                    continue
                for j in range(K):
                    r = env * K + j
                    if k is None:  # still running: its last observation is the next step's
                        obs = {key: v[start : end + 2, r] for key, v in x.items()}
                    else:
                        obs = {
                            key: np.concatenate(
                                [v[start : end + 1, r], final[end][key][k, j][None]]
                            )
                            for key, v in x.items()
                        }
                    state_out = t_started = None
                    if recurrent:
                        before = {
                            key: b.state0[key][r] if start == 0 else 0 * b.state0[key][r]
                            for key in b.states
                        }
                        state_out = {
                            key: np.concatenate([before[key][None], h[start : end + 1, r]])
                            for key, h in b.states.items()
                        }
                    t_started = int(started[env]) if start == 0 else 0
                    episodes.append(
                        self._episode_factory(
                            obs,
                            b.actions[start : end + 1, r],
                            b.rewards[start : end + 1, r],
                            b.logp[start : end + 1, r],
                            b.outputs[start : end + 1, r],
                            terminated=k is not None and bool(term[end, env]),
                            truncated=k is not None and not term[end, env],
                            agent_id=m.slot.agents[j],
                            module_id=m.slot.id,
                            state_out=state_out,
                            t_started=t_started,
                        )
                    )
                start = end + 1
        return episodes

    # -- metrics ------------------------------------------------------------------------------

    def _log_sampled(self, env_steps: int, rewards, done) -> None:
        m = self.metrics
        m.log_value(NUM_ENV_STEPS_SAMPLED, env_steps, reduce="sum")
        m.log_value(
            NUM_ENV_STEPS_SAMPLED_LIFETIME, env_steps, reduce="lifetime_sum", with_throughput=True
        )
        for agent in self.vec.agents:
            m.log_value((NUM_AGENT_STEPS_SAMPLED, agent), env_steps, reduce="sum")
            m.log_value((NUM_AGENT_STEPS_SAMPLED_LIFETIME, agent), env_steps, reduce="lifetime_sum")
        for mid, mod in self.modules.items():
            steps = env_steps * mod.agents_per_env
            m.log_value((NUM_MODULE_STEPS_SAMPLED, mid), steps, reduce="sum")
            m.log_value((NUM_MODULE_STEPS_SAMPLED_LIFETIME, mid), steps, reduce="lifetime_sum")
        self.num_env_steps_sampled_lifetime += env_steps
        n_done = 0
        for t in range(rewards.shape[0]):
            self._returns += rewards[t]
            self._lengths += 1
            for b in np.flatnonzero(done[t]):
                seed = b // self.envs_per_seed
                self._recent[seed].append((self._returns[b].copy(), int(self._lengths[b])))
                self._returns[b] = 0.0
                self._lengths[b] = 0
                n_done += 1
        m.log_value(NUM_EPISODES, n_done, reduce="sum")
        m.log_value(NUM_EPISODES_LIFETIME, n_done, reduce="lifetime_sum")
        recent = [ep for eps in self._recent for ep in eps]
        if recent:
            # One value per metric and sample call, over this runner's recent episodes: the
            # return of a multi-agent episode (and of a module) is the sum over its agents
            # (RLlib's rule).
            per_agent = np.array([ret for ret, _ in recent])
            totals = per_agent.sum(axis=1)
            m.log_value(EPISODE_RETURN_MEAN, float(totals.mean()), window=1)
            m.log_value(EPISODE_RETURN_MIN, float(totals.min()), reduce="min", window=1)
            m.log_value(EPISODE_RETURN_MAX, float(totals.max()), reduce="max", window=1)
            m.log_value(EPISODE_LEN_MEAN, float(np.mean([n for _, n in recent])), window=1)
            for j, agent in enumerate(self.vec.agents):
                m.log_value(
                    (EPISODE_AGENT_RETURN_MEAN, agent), float(per_agent[:, j].mean()), window=1
                )
            for mid, mod in self.modules.items():
                ret = per_agent[:, list(mod.slot.env_index)].sum(axis=1).mean()
                m.log_value((EPISODE_MODULE_RETURN_MEAN, mid), float(ret), window=1)
        wins = [w for ws in self._wins for w in ws]
        if wins:
            m.log_value("win_rate", float(np.mean(wins)), window=1)
        for k in range(self.seeds if self.seeds > 1 else 0):
            if self._recent[k]:
                ret = np.mean([r.sum() for r, _ in self._recent[k]])
                m.log_value(f"{EPISODE_RETURN_MEAN}_seed{k}", float(ret), window=1)
            if self._wins[k]:
                m.log_value(f"win_rate_seed{k}", float(np.mean(self._wins[k])), window=1)
        for key, values in self._facts.items():
            m.log_value(f"episode_{key}", float(np.mean(values)), window=1)

    def get_metrics(self) -> dict:
        return self.metrics.reduce()

    # -- state --------------------------------------------------------------------------------

    def get_state(self, components=None, *, not_components=None, **kwargs) -> dict:
        state = {NUM_ENV_STEPS_SAMPLED_LIFETIME: self.num_env_steps_sampled_lifetime}
        if self._check_component(COMPONENT_RL_MODULE, components, not_components):
            state[COMPONENT_RL_MODULE] = self.module.get_state(**kwargs)
            state[WEIGHTS_SEQ_NO] = self._weights_seq_no
        return state

    def set_state(self, state: dict) -> None:
        if COMPONENT_RL_MODULE in state:
            seq = state.get(WEIGHTS_SEQ_NO, 0)
            if seq == 0 or self._weights_seq_no < seq:
                module_state = state[COMPONENT_RL_MODULE]
                if isinstance(module_state, ray.ObjectRef):
                    module_state = ray.get(module_state)
                self.module.set_state(module_state)
            if seq > 0:
                self._weights_seq_no = seq
        if NUM_ENV_STEPS_SAMPLED_LIFETIME in state:
            self.num_env_steps_sampled_lifetime = state[NUM_ENV_STEPS_SAMPLED_LIFETIME]

    def get_ctor_args_and_kwargs(self):
        return (), {"config": self.config}

    def get_checkpointable_components(self):
        return [(COMPONENT_RL_MODULE, self.module)]

    def stop(self) -> None:
        self.vec = None


def slot_from_config(module_id: str, spec) -> ModuleSlot:
    """A module's :class:`ModuleSlot`, as the algorithm stored it in its ``model_config``."""
    return slot_from_dict(
        module_id, spec.model_config["slot"], spec.observation_space, spec.action_space
    )
