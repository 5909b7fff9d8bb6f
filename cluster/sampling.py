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

With one policy shared by all agents, each agent's trajectory is a single-agent trajectory of
that policy, so RLlib's own PPO learner (loss, GAE, value bootstrapping on truncation) trains
on these episodes unchanged. Env steps are counted as env steps (B per batched step), agent
steps as B x N.
"""

from __future__ import annotations

import math
import time
import uuid
from collections import defaultdict, deque
from typing import Any

import gymnasium as gym
import numpy as np
import ray
import torch
from ray.rllib.core import COMPONENT_RL_MODULE, DEFAULT_MODULE_ID
from ray.rllib.core.columns import Columns
from ray.rllib.env.env_runner import EnvRunner
from ray.rllib.env.single_agent_episode import SingleAgentEpisode
from ray.rllib.env.utils.infinite_lookback_buffer import InfiniteLookbackBuffer
from ray.rllib.utils.checkpoints import Checkpointable
from ray.rllib.utils.metrics import (
    EPISODE_LEN_MEAN,
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
from policies.modules import FLOAT_MIN, ObsLayout

# Seconds spent per part of sampling, summed per iteration (bench/train_throughput.py reads
# them): stepping the envs, the policy's forward pass and sampling, and the whole call.
TIME_ENV, TIME_POLICY, TIME_TOTAL = "sampler_env_s", "sampler_policy_s", "sampler_total_s"


def layout_for(vec: envs.vector.VectorEnv, centralised_critic: bool) -> ObsLayout:
    """The module input layout for a vector env (``centralised_critic``: MAPPO)."""
    mask_dim = int(vec.action_space.n) if vec.has_action_mask else 0
    critic_dim = vec.state_space.shape[0] + vec.num_agents if centralised_critic else 0
    return ObsLayout(vec.observation_space.shape[0], mask_dim, critic_dim, vec.num_agents)


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

    def __call__(self, obs, actions, rewards, logp, dist_inputs, *, terminated, truncated):
        ep = object.__new__(SingleAgentEpisode)
        for name in _SLOTS:
            setattr(ep, name, getattr(self.template, name))
        self._count += 1
        ep.id_ = f"{self._prefix}{self._count}"
        ep.observations = self._buffer(self._buf["observations"], obs)
        ep.actions = self._buffer(self._buf["actions"], actions)
        ep.rewards = self._buffer(self._buf["rewards"], rewards)
        ep.infos = self._buffer(self._buf["infos"], [{}] * len(obs))
        ep.extra_model_outputs = {
            Columns.ACTION_LOGP: self._buffer(self._extra[Columns.ACTION_LOGP], logp),
            Columns.ACTION_DIST_INPUTS: self._buffer(
                self._extra[Columns.ACTION_DIST_INPUTS], dist_inputs
            ),
        }
        ep.is_terminated, ep.is_truncated = terminated, truncated
        ep.t_started, ep.t = 0, len(rewards)
        ep._custom_data = {}
        return ep


class VectorEnvRunner(EnvRunner, Checkpointable):
    """Samples ``num_envs_per_env_runner`` copies of ``config.env`` with one shared RLModule.

    ``config.env_config`` holds the env's own arguments; the module's ``model_config`` holds
    the :class:`ObsLayout`, which says whether to append the critic input (MAPPO).
    """

    def __init__(self, *, config, **kwargs):
        super().__init__(config=config, **kwargs)
        torch.set_num_threads(1)
        self.tune_trial_id = kwargs.get("tune_trial_id")
        self.spaces = kwargs.get("spaces") or {}
        self.num_envs = self.config.num_envs_per_env_runner
        self.vec: envs.vector.VectorEnv | None = None
        self.module = None
        if self.worker_index is None or self.worker_index > 0 or self.config.num_env_runners == 0:
            self.make_env()
        self.make_module()
        self._weights_seq_no = 0
        self._step = None  # the last VectorStep: where the next sample() goes on from
        self._episode_factory = EpisodeFactory()
        self._returns = self._lengths = None
        window = self.config.metrics_num_episodes_for_smoothing
        self._recent: deque = deque(maxlen=max(1, math.ceil(window / (self.num_workers or 1))))
        self._wins: deque = deque(maxlen=self._recent.maxlen)  # envs that report battle_won

    # -- construction -----------------------------------------------------------------------

    def make_env(self) -> None:
        self.vec = envs.make_vector(
            self.config.env, self.num_envs, seed=self._seed, **dict(self.config.env_config)
        )
        self._step = None

    def make_module(self) -> None:
        spec = self.config.get_rl_module_spec(spaces=self.get_spaces(), inference_only=True)
        self.module = spec.build()
        self.layout = ObsLayout(**{k: spec.model_config[k] for k in ObsLayout.__dataclass_fields__})
        self._dist_cls = self.module.get_exploration_action_dist_cls()
        self._discrete = isinstance(self.module.action_space, gym.spaces.Discrete)
        self._agent_ids = np.eye(self.layout.num_agents, dtype=np.float32)

    def get_spaces(self) -> dict[str, Any]:
        spec = self.config.rl_module_spec
        return {DEFAULT_MODULE_ID: (spec.observation_space, spec.action_space), **self.spaces}

    def assert_healthy(self) -> None:
        assert self.vec is not None and self.module is not None

    # -- sampling -----------------------------------------------------------------------------

    def _write_features(self, dst: np.ndarray, obs, mask, state) -> None:
        """Writes module inputs for a step's observations, masks and states into ``dst``
        (``[B*N, size]``; the agent one-hot columns are filled once per buffer)."""
        lay = self.layout
        B, N = obs.shape[:2]
        view = dst.reshape(B, N, lay.size)
        view[..., : lay.obs_dim] = obs
        if lay.mask_dim:
            view[..., lay.obs_dim : lay.obs_dim + lay.mask_dim] = mask
        if lay.critic_dim:
            view[..., lay.obs_dim + lay.mask_dim : lay.size - N] = state[:, None, :]

    def _buffer(self, *shape: int) -> np.ndarray:
        """An input buffer ``[*shape, B*N... , size]`` with the agent one-hot ids filled in."""
        buf = np.empty((*shape, self.layout.size), np.float32)
        if self.layout.critic_dim:
            N = self.layout.num_agents
            view = buf.reshape(*shape[:-1], -1, N, self.layout.size)
            view[..., self.layout.size - N :] = self._agent_ids
        return buf

    def _act(self, x: np.ndarray, explore: bool, random_actions: bool):
        """Actions, their log-probabilities and the distribution inputs for rows ``x``."""
        with torch.no_grad():
            inputs = self.module.action_dist_inputs(torch.from_numpy(x))
            if random_actions:
                inputs = torch.where(inputs > FLOAT_MIN, 0.0, inputs)  # uniform over legal
            if self._discrete:
                # Gumbel-max draws exactly from the categorical, without torch.multinomial's
                # per-call overhead.
                logp_all = torch.log_softmax(inputs, dim=-1)
                scores = logp_all - torch.log(-torch.log(torch.rand_like(logp_all)))
                actions = (scores if explore else inputs).argmax(dim=-1)
                logp = logp_all.gather(-1, actions[:, None])[:, 0]
            else:
                dist = self._dist_cls.from_logits(inputs)
                actions = dist.sample() if explore else dist.to_deterministic().sample()
                logp = dist.logp(actions)
        return actions.numpy(), logp.numpy(), inputs.numpy()

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
        length) and returns one episode chunk per agent and episode."""
        if num_episodes is not None:
            raise ValueError("VectorEnvRunner samples by timesteps; num_episodes is not supported")
        t0 = time.perf_counter()
        explore = self.config.explore if explore is None else explore
        vec, B, N = self.vec, self.num_envs, self.vec.num_agents
        T = (
            math.ceil(num_timesteps / B)
            if num_timesteps
            else self.config.get_rollout_fragment_length(self.worker_index)
        )
        if self._step is None or force_reset:
            self._step = vec.reset()
            self._returns = np.zeros((B, N), np.float64)
            self._lengths = np.zeros(B, np.int64)
        rows = B * N
        x_buf = self._buffer(T + 1, rows)
        rew_buf = np.empty((T, rows), np.float32)
        done_buf = np.zeros((T, B), bool)
        term_buf = np.zeros((T, B), bool)
        final_x: dict[int, np.ndarray] = {}
        act_buf = logp_buf = dist_buf = None
        t_env = t_pol = 0.0
        step = self._step
        self._write_features(x_buf[0], step.obs, step.action_mask, step.state)
        for t in range(T):
            tp = time.perf_counter()
            actions, logp, dist_in = self._act(x_buf[t], explore, random_actions)
            if act_buf is None:
                act_buf = np.empty((T, *actions.shape), actions.dtype)
                logp_buf = np.empty((T, rows), np.float32)
                dist_buf = np.empty((T, *dist_in.shape), np.float32)
            act_buf[t], logp_buf[t], dist_buf[t] = actions, logp, dist_in
            env_actions = actions.reshape(B, N) if self._discrete else actions.reshape(B, N, -1)
            te = time.perf_counter()
            step = vec.step(env_actions)
            t_env += time.perf_counter() - te
            t_pol += te - tp
            rew_buf[t] = step.rewards.reshape(rows)
            done = step.terminated | step.truncated
            self._write_features(x_buf[t + 1], step.obs, step.action_mask, step.state)
            if done.any():
                done_buf[t], term_buf[t] = done, step.terminated
                ended = np.flatnonzero(done)
                if step.info is not None and "battle_won" in step.info:
                    self._wins.extend(step.info["battle_won"][ended].tolist())
                final = final_x[t] = self._buffer(len(ended) * N)
                self._write_features(
                    final,
                    step.final_obs[ended],
                    None if step.action_mask is None else step.action_mask[ended],
                    step.final_state[ended],
                )
                final_x[t] = final.reshape(len(ended), N, -1)
        self._step = step
        episodes = self._cut_episodes(
            x_buf, act_buf, rew_buf, logp_buf, dist_buf, done_buf, term_buf, final_x
        )
        self._log_sampled(T * B, N, rew_buf.reshape(T, B, N), done_buf)
        self.metrics.log_value(TIME_ENV, t_env, reduce="sum")
        self.metrics.log_value(TIME_POLICY, t_pol, reduce="sum")
        self.metrics.log_value(TIME_TOTAL, time.perf_counter() - t0, reduce="sum")
        return episodes

    def _cut_episodes(self, x, act, rew, logp, dist, done, term, final_x):
        """Cuts the ``[T, B*N]`` rollout into one episode chunk per agent and episode."""
        T = rew.shape[0]
        B = done.shape[1]
        N = x.shape[1] // B
        episodes = []
        ends_of = defaultdict(list)  # env -> [(t, position among the envs ended at t)]
        for t, idx in ((t, np.flatnonzero(done[t])) for t in final_x):
            for k, b in enumerate(idx):
                ends_of[int(b)].append((t, k))
        for b in range(B):
            start = 0
            for end, k in [*ends_of[b], (T - 1, None)]:
                if end < start:
                    continue
                for j in range(N):
                    r = b * N + j
                    if k is None:  # still running: its last observation is the next step's
                        obs = x[start : end + 2, r]
                    else:
                        obs = np.concatenate([x[start : end + 1, r], final_x[end][k, j][None]])
                    episodes.append(
                        self._episode_factory(
                            obs,
                            act[start : end + 1, r],
                            rew[start : end + 1, r],
                            logp[start : end + 1, r],
                            dist[start : end + 1, r],
                            terminated=k is not None and bool(term[end, b]),
                            truncated=k is not None and not term[end, b],
                        )
                    )
                start = end + 1
        return episodes

    # -- metrics ------------------------------------------------------------------------------

    def _log_sampled(self, env_steps: int, N: int, rewards, done) -> None:
        m = self.metrics
        agent_steps = env_steps * N
        m.log_value(NUM_ENV_STEPS_SAMPLED, env_steps, reduce="sum")
        m.log_value(
            NUM_ENV_STEPS_SAMPLED_LIFETIME, env_steps, reduce="lifetime_sum", with_throughput=True
        )
        for agent in self.vec.agents:
            m.log_value((NUM_AGENT_STEPS_SAMPLED, agent), env_steps, reduce="sum")
            m.log_value((NUM_AGENT_STEPS_SAMPLED_LIFETIME, agent), env_steps, reduce="lifetime_sum")
        m.log_value((NUM_MODULE_STEPS_SAMPLED, DEFAULT_MODULE_ID), agent_steps, reduce="sum")
        m.log_value(
            (NUM_MODULE_STEPS_SAMPLED_LIFETIME, DEFAULT_MODULE_ID),
            agent_steps,
            reduce="lifetime_sum",
        )
        self.num_env_steps_sampled_lifetime += env_steps
        n_done = 0
        for t in range(rewards.shape[0]):
            self._returns += rewards[t]
            self._lengths += 1
            for b in np.flatnonzero(done[t]):
                self._recent.append((self._returns[b].copy(), int(self._lengths[b])))
                self._returns[b] = 0.0
                self._lengths[b] = 0
                n_done += 1
        m.log_value(NUM_EPISODES, n_done, reduce="sum")
        m.log_value(NUM_EPISODES_LIFETIME, n_done, reduce="lifetime_sum")
        if self._recent:
            # One value per metric and sample call, over this runner's recent episodes: the
            # return of a multi-agent episode is the sum over its agents (RLlib's rule).
            per_agent = np.array([ret for ret, _ in self._recent])
            totals = per_agent.sum(axis=1)
            m.log_value(EPISODE_RETURN_MEAN, float(totals.mean()), window=1)
            m.log_value(EPISODE_RETURN_MIN, float(totals.min()), reduce="min", window=1)
            m.log_value(EPISODE_RETURN_MAX, float(totals.max()), reduce="max", window=1)
            m.log_value(EPISODE_LEN_MEAN, float(np.mean([n for _, n in self._recent])), window=1)
            for j, agent in enumerate(self.vec.agents):
                m.log_value(
                    ("agent_episode_return_mean", agent), float(per_agent[:, j].mean()), window=1
                )
        if self._wins:
            m.log_value("win_rate", float(np.mean(self._wins)), window=1)

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
                module_state = module_state.get(DEFAULT_MODULE_ID, module_state)
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
