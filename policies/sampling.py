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
of the agents mapped to it in one batched forward pass over its rows. Each agent's trajectory
is a single-agent trajectory of its module (tagged with the agent and module id), so RLlib's
own learners (PPO's loss, GAE, value bootstrapping on truncation, its multi-agent connectors)
train on these episodes unchanged. Frozen modules (not in ``policies_to_train``) act but hand
no episodes to the learner. Recurrent modules carry their hidden state from step to step and
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
from ray.rllib.evaluation.postprocessing import Postprocessing
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
from policies.mapping import ModuleSlot
from policies.modules import FLOAT_MIN

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
class _Rollout:
    """One rollout of the runner: per-module buffers and the ``[T, B]`` episode flags."""

    bufs: dict[str, dict]
    done: np.ndarray
    term: np.ndarray
    started: np.ndarray  # steps each env's running episode had before the rollout


@dataclass
class ArrayRollout:
    """What :meth:`VectorEnvRunner.sample_arrays` returns: per trained module a flat
    training batch (numpy), and the steps it covers."""

    batches: dict[str, dict]
    num_env_steps: int
    num_agent_steps: int

    @staticmethod
    def merge(rollouts: list[ArrayRollout]):
        """One ``MultiAgentBatch`` of several runners' rollouts."""
        import tree
        from ray.rllib.policy.sample_batch import MultiAgentBatch, SampleBatch

        batches = {}
        for mid in rollouts[0].batches:
            parts = [r.batches[mid] for r in rollouts]
            joined = (
                parts[0]
                if len(parts) == 1
                else tree.map_structure(lambda *a: np.concatenate(a), *parts)
            )
            batches[mid] = SampleBatch(joined)
        return MultiAgentBatch(batches, env_steps=sum(r.num_env_steps for r in rollouts))


@dataclass
class _Module:
    """What the runner keeps per module: its slot, input spec and sampling state."""

    slot: ModuleSlot
    spec: BatchSpec
    module: Any
    trained: bool
    discrete: bool
    dist_cls: Any
    # agent columns of the env's reward array, or None when they are all of them in order
    reward_cols: np.ndarray | None
    state: dict | None = None  # recurrent: hidden state per row (torch), carried across calls

    @property
    def agents_per_env(self) -> int:
        return self.slot.num_agents

    def gather(self, per_group: dict[str, np.ndarray]) -> np.ndarray | None:
        """This module's agents' slice ``[B, K, ...]`` of per-group arrays."""
        if not per_group:
            return None
        parts = []
        for group, idx in self.slot.members:
            arr = per_group[group]
            parts.append(arr if len(idx) == arr.shape[1] else arr[:, list(idx)])
        return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=1)

    def write(self, dst: dict, step_obs, step_mask, state) -> None:
        self.spec.write(dst, self.gather(step_obs), self.gather(step_mask), state)


def gumbel_max(logp: torch.Tensor) -> torch.Tensor:
    """One draw per row from the categorical of log-probabilities ``logp`` ``[N, A]``: Gumbel-max
    draws exactly from it without torch.multinomial's per-call overhead. torch.rand can return
    exactly 0, whose Gumbel noise is -inf: it would sink a legal action below the masked ones (a
    dead SMAC agent then "chose" stop, about once in 10^7 draws), so the uniforms start at the
    tiniest float."""
    u = torch.rand_like(logp).clamp_(min=torch.finfo(logp.dtype).tiny)
    return (logp - torch.log(-torch.log(u))).argmax(dim=-1)


class VectorEnvRunner(EnvRunner, Checkpointable):
    """Samples ``num_envs_per_env_runner`` copies of ``config.env`` with the run's modules.

    ``config.env_config`` holds the env's own arguments. Each module's ``model_config`` holds
    its :class:`BatchSpec` (``batch_spec``) and its agents (``slot``: see
    ``policies.ppo.module_specs``).
    """

    def __init__(self, *, config, **kwargs):
        super().__init__(config=config, **kwargs)
        torch.set_num_threads(1)
        self.tune_trial_id = kwargs.get("tune_trial_id")
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
            slot = slot_from_config(mid, spec)
            cols = np.asarray(slot.env_index)
            in_order = (
                np.array_equal(cols, np.arange(len(cols)))
                and self.vec is not None
                and (len(cols) == self.vec.num_agents)
            )
            module = self.module[mid]
            self.modules[mid] = _Module(
                slot,
                BatchSpec.from_dict(spec.model_config["batch_spec"]),
                module,
                trained is None or mid in trained,
                isinstance(spec.action_space, gym.spaces.Discrete),
                module.get_exploration_action_dist_cls(),
                None if in_order else cols,
            )

    def get_spaces(self) -> dict[str, Any]:
        specs = self.config.rl_module_spec.rl_module_specs
        return {mid: (s.observation_space, s.action_space) for mid, s in specs.items()}

    def assert_healthy(self) -> None:
        assert self.vec is not None and self.module is not None

    # -- sampling -----------------------------------------------------------------------------

    def _act(self, m: _Module, x: dict[str, np.ndarray], explore: bool, random_actions: bool):
        """Actions, their log-probabilities and the distribution inputs for rows ``x``; the
        module's hidden state moves on one step."""
        with torch.no_grad():
            inputs, m.state = m.module.step({k: torch.from_numpy(v) for k, v in x.items()}, m.state)
            if random_actions:
                inputs = torch.where(inputs > FLOAT_MIN, 0.0, inputs)  # uniform over legal
            if m.discrete:
                logp_all = torch.log_softmax(inputs, dim=-1)
                actions = gumbel_max(logp_all) if explore else inputs.argmax(dim=-1)
                logp = logp_all.gather(-1, actions[:, None])[:, 0]
            else:
                dist = m.dist_cls.from_logits(inputs)
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
        length) and returns one episode chunk per trained agent and episode."""
        if num_episodes is not None:
            raise ValueError("VectorEnvRunner samples by timesteps; num_episodes is not supported")
        t0 = time.perf_counter()
        roll = self._rollout(num_timesteps, explore, random_actions, force_reset)
        episodes = []
        for mid, m in self.modules.items():
            if m.trained:
                episodes += self._cut_episodes(
                    m, roll.bufs[mid], roll.done, roll.term, roll.started
                )
        self.metrics.log_value(TIME_TOTAL, time.perf_counter() - t0, reduce="sum")
        return episodes

    def sample_arrays(self, explore: bool | None = None) -> ArrayRollout:
        """Samples one rollout fragment like :meth:`sample` and returns it as flat training
        batches, one per trained module, with GAE advantages and value targets computed here
        in whole-array operations: the learner trains on them without building or reading an
        episode. Advantages are standardised per module as RLlib's GAE connector does, but
        over the real steps only (RLlib's statistics include one padding step per episode
        chunk, which its loss then masks out).
        Feed-forward modules only (recurrent ones need RLlib's sequence handling)."""
        t0 = time.perf_counter()
        roll = self._rollout(None, explore, False, False)
        batches = {
            mid: self._train_batch(m, roll.bufs[mid], roll.done, roll.term)
            for mid, m in self.modules.items()
            if m.trained
        }
        self.metrics.log_value(TIME_TOTAL, time.perf_counter() - t0, reduce="sum")
        T, B = roll.done.shape
        return ArrayRollout(batches, T * B, T * B * self.vec.num_agents)

    def _rollout(self, num_timesteps, explore, random_actions, force_reset) -> _Rollout:
        """Steps all B envs T times with the modules; the per-module buffers ``[T(+1), B*K]``
        and the ``[T, B]`` done and terminated flags."""
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
            for m in self.modules.values():
                m.state = m.module.initial_state_rows(B * m.agents_per_env)
        started = self._lengths.copy()  # steps each env's running episode had before this call
        step = self._step
        bufs: dict[str, dict] = {}
        for mid, m in self.modules.items():
            rows = B * m.agents_per_env
            b = bufs[mid] = {"x": m.spec.buffers(T + 1, rows), "final": {}}
            b["rew"] = np.empty((T, rows), np.float32)
            if m.state is not None:
                b["h0"] = {k: v.numpy().copy() for k, v in m.state.items()}
                b["h"] = {k: np.empty((T, *v.shape), np.float32) for k, v in m.state.items()}
            m.write({k: v[0] for k, v in b["x"].items()}, step.obs, step.action_mask, step.state)
        env_actions = {
            g.name: np.empty(
                (B, g.num_agents, *(g.action_space.shape or ())),
                np.int64 if isinstance(g.action_space, gym.spaces.Discrete) else np.float32,
            )
            for g in vec.groups.values()
        }
        done_buf = np.zeros((T, B), bool)
        term_buf = np.zeros((T, B), bool)
        all_rewards = np.empty((T, B, vec.num_agents), np.float32)
        t_env = t_pol = 0.0
        for t in range(T):
            tp = time.perf_counter()
            for mid, m in self.modules.items():
                b = bufs[mid]
                actions, logp, dist_in = self._act(
                    m, {k: v[t] for k, v in b["x"].items()}, explore, random_actions
                )
                if "act" not in b:
                    b["act"] = np.empty((T, *actions.shape), actions.dtype)
                    b["logp"] = np.empty((T, len(logp)), np.float32)
                    b["dist"] = np.empty((T, *dist_in.shape), np.float32)
                b["act"][t], b["logp"][t], b["dist"][t] = actions, logp, dist_in
                if m.state is not None:
                    for k, v in m.state.items():
                        b["h"][k][t] = v.numpy()
                per_env = actions.reshape(B, m.agents_per_env, *actions.shape[1:])
                k0 = 0
                for group, idx in m.slot.members:
                    env_actions[group][:, list(idx)] = per_env[:, k0 : k0 + len(idx)]
                    k0 += len(idx)
            te = time.perf_counter()
            step = vec.step(env_actions)
            t_env += time.perf_counter() - te
            t_pol += te - tp
            all_rewards[t] = step.rewards
            done = step.terminated | step.truncated
            ended = np.flatnonzero(done) if done.any() else None
            for mid, m in self.modules.items():
                b = bufs[mid]
                rew = step.rewards if m.reward_cols is None else step.rewards[:, m.reward_cols]
                b["rew"][t] = rew.reshape(-1)
                m.write(
                    {k: v[t + 1] for k, v in b["x"].items()}, step.obs, step.action_mask, step.state
                )
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
                    b["final"][t] = final
                    if m.state is not None:  # a new episode starts from the initial state
                        rows = (ended[:, None] * K + np.arange(K)).reshape(-1)
                        for v in m.state.values():
                            v[rows] = 0.0
            if ended is not None:
                done_buf[t], term_buf[t] = done, step.terminated
                for key, values in (step.info or {}).items():
                    if key == "battle_won":
                        self._wins.extend(values[ended].tolist())
                    else:
                        facts = self._facts.setdefault(key, deque(maxlen=self._recent.maxlen))
                        facts.extend(values[ended].tolist())
        self._step = step
        self._log_sampled(T * B, all_rewards, done_buf)
        self.metrics.log_value(TIME_ENV, t_env, reduce="sum")
        self.metrics.log_value(TIME_POLICY, t_pol, reduce="sum")
        return _Rollout(bufs, done_buf, term_buf, started)

    def _train_batch(self, m: _Module, b: dict, done: np.ndarray, term: np.ndarray) -> dict:
        """One module's rollout as a flat PPO training batch (rows time-major)."""
        T, B = done.shape
        K = m.agents_per_env
        R = B * K
        x = b["x"]
        values = self._values(m, {k: v.reshape((T + 1) * R, *v.shape[2:]) for k, v in x.items()})
        values = values.reshape(T + 1, R)
        following = values[1:].copy()  # the value after each step, within the episode
        if b["final"]:  # where an episode ended: 0 if terminated, else its last obs's value
            ts = sorted(b["final"])
            finals = {
                k: np.concatenate(
                    [b["final"][t][k].reshape(-1, *b["final"][t][k].shape[2:]) for t in ts]
                )
                for k in x
            }
            v_final, at = self._values(m, finals), 0
            for t in ts:
                ended = np.flatnonzero(done[t])
                rows = (ended[:, None] * K + np.arange(K)).reshape(-1)
                boot = v_final[at : at + len(rows)]
                at += len(rows)
                following[t, rows] = np.where(np.repeat(term[t, ended], K), 0.0, boot)
        gamma, lam = self.config.gamma, self.config.lambda_
        delta = b["rew"] + gamma * following - values[:T]
        carry = 1.0 - np.repeat(done, K, axis=1).astype(np.float32)  # no credit across episodes
        adv = np.empty((T, R), np.float32)
        last = np.zeros(R, np.float32)
        for t in range(T - 1, -1, -1):
            last = delta[t] + gamma * lam * carry[t] * last
            adv[t] = last
        targets = adv + values[:T]
        adv = (adv - adv.mean()) / max(float(adv.std()), 1e-4)
        return {
            Columns.OBS: {k: v[:T].reshape(T * R, *v.shape[2:]) for k, v in x.items()},
            Columns.ACTIONS: b["act"].reshape(T * R, *b["act"].shape[2:]),
            Columns.ACTION_LOGP: b["logp"].reshape(T * R),
            Columns.ACTION_DIST_INPUTS: b["dist"].reshape(T * R, *b["dist"].shape[2:]),
            Postprocessing.ADVANTAGES: adv.reshape(T * R),
            Postprocessing.VALUE_TARGETS: targets.astype(np.float32).reshape(T * R),
        }

    @staticmethod
    def _values(m: _Module, rows: dict[str, np.ndarray]) -> np.ndarray:
        with torch.no_grad():
            obs = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in rows.items()}
            return m.module.compute_values({Columns.OBS: obs}).numpy()

    def _cut_episodes(self, m: _Module, b: dict, done, term, started) -> list:
        """Cuts one module's ``[T, B*K]`` rollout into one chunk per agent and episode."""
        T, B = done.shape
        K = m.agents_per_env
        x, final = b["x"], b["final"]
        recurrent = "h" in b
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
                            key: (b["h0"][key][r] if start == 0 else np.zeros_like(b["h0"][key][r]))
                            for key in b["h"]
                        }
                        state_out = {
                            key: np.concatenate([before[key][None], h[start : end + 1, r]])
                            for key, h in b["h"].items()
                        }
                    t_started = int(started[env]) if start == 0 else 0
                    episodes.append(
                        self._episode_factory(
                            obs,
                            b["act"][start : end + 1, r],
                            b["rew"][start : end + 1, r],
                            b["logp"][start : end + 1, r],
                            b["dist"][start : end + 1, r],
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
                self._recent.append((self._returns[b].copy(), int(self._lengths[b])))
                self._returns[b] = 0.0
                self._lengths[b] = 0
                n_done += 1
        m.log_value(NUM_EPISODES, n_done, reduce="sum")
        m.log_value(NUM_EPISODES_LIFETIME, n_done, reduce="lifetime_sum")
        if self._recent:
            # One value per metric and sample call, over this runner's recent episodes: the
            # return of a multi-agent episode (and of a module) is the sum over its agents
            # (RLlib's rule).
            per_agent = np.array([ret for ret, _ in self._recent])
            totals = per_agent.sum(axis=1)
            m.log_value(EPISODE_RETURN_MEAN, float(totals.mean()), window=1)
            m.log_value(EPISODE_RETURN_MIN, float(totals.min()), reduce="min", window=1)
            m.log_value(EPISODE_RETURN_MAX, float(totals.max()), reduce="max", window=1)
            m.log_value(EPISODE_LEN_MEAN, float(np.mean([n for _, n in self._recent])), window=1)
            for j, agent in enumerate(self.vec.agents):
                m.log_value(
                    (EPISODE_AGENT_RETURN_MEAN, agent), float(per_agent[:, j].mean()), window=1
                )
            for mid, mod in self.modules.items():
                ret = per_agent[:, list(mod.slot.env_index)].sum(axis=1).mean()
                m.log_value((EPISODE_MODULE_RETURN_MEAN, mid), float(ret), window=1)
        if self._wins:
            m.log_value("win_rate", float(np.mean(self._wins)), window=1)
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
    s = spec.model_config["slot"]
    return ModuleSlot(
        module_id,
        tuple((g, tuple(idx)) for g, idx in s["members"]),
        tuple(s["agents"]),
        tuple(s["env_index"]),
        spec.observation_space,
        spec.action_space,
        bool(s["masked"]),
    )


def slot_to_config(slot: ModuleSlot) -> dict:
    return {
        "members": [[g, list(idx)] for g, idx in slot.members],
        "agents": list(slot.agents),
        "env_index": list(slot.env_index),
        "masked": slot.masked,
    }
