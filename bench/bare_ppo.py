"""The floor for a PPO iteration: a bare single-file PPO loop, written the way CleanRL's
``ppo.py`` writes PPO, on the same batched NumPy simple_spread core Arena trains on.

    .venv/bin/python bench/bare_ppo.py [--critic local|central] [--timesteps 200000] [--seed 0]

Same numbers as Arena's PPO defaults (``policies.ppo.PPOSettings``): one module shared by the
3 agents, actor and critic MLPs 64-64 tanh with orthogonal init (gain sqrt 2; 0.01 actor
head, 1.0 critic head), 64 envs, 4,000 env steps a batch (63 steps of 64 envs), 5 epochs of
minibatches of 512 agent rows (the batch split into round(rows / 512) equal minibatches),
GAE (gamma 0.99, lambda 0.95) bootstrapped at the time limit, advantages standardised per
minibatch, clip 0.2, the value's change clipped at 0.2 (half the larger squared error, as
CleanRL), value coefficient 0.5, entropy 0.01, gradient norm 0.5, Adam at 1e-3 with eps 1e-5.
``--critic central`` is MAPPO's critic (global state and a one-hot agent id). One thread. The
SGD loop is written as Arena's learner (``policies/ppo/learner.py``) writes it: one gather
per column and epoch, contiguous minibatch views, log-softmax instead of
``torch.distributions``, foreach Adam, so the floor stays honest.

Prints one JSON line per iteration with ``--curve``, and a summary line: env steps per second
over whole iterations, the split into sampling, GAE and SGD, and the mean return of the
episodes that ended in the last 10% of the run.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

import envs  # noqa: E402

ENV_ID = "mpe/simple_spread-v3"
NUM_ENVS, BATCH, MINIBATCH, EPOCHS = 64, 4000, 512, 5
LR, GAMMA, LAMBDA, CLIP, VF_CLIP, VF_COEF, ENT_COEF, MAX_GRAD_NORM = (
    1e-3,
    0.99,
    0.95,
    0.2,
    0.2,
    0.5,
    0.01,
    0.5,
)


def layer(n_in: int, n_out: int, gain: float = math.sqrt(2)) -> nn.Linear:
    lin = nn.Linear(n_in, n_out)
    nn.init.orthogonal_(lin.weight, gain)
    nn.init.zeros_(lin.bias)
    return lin


class Agent(nn.Module):
    def __init__(self, obs_dim: int, critic_dim: int, n_actions: int):
        super().__init__()
        self.actor = nn.Sequential(
            layer(obs_dim, 64), nn.Tanh(), layer(64, 64), nn.Tanh(), layer(64, n_actions, 0.01)
        )
        self.critic = nn.Sequential(
            layer(critic_dim, 64), nn.Tanh(), layer(64, 64), nn.Tanh(), layer(64, 1, 1.0)
        )

    def value(self, x: torch.Tensor) -> torch.Tensor:
        return self.critic(x).squeeze(-1)


def train(critic: str, timesteps: int, seed: int, curve: bool) -> dict:
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    vec = envs.make_vector(ENV_ID, NUM_ENVS, seed=seed)
    (group,) = vec.groups.values()
    B, N = NUM_ENVS, len(group.agents)
    T = math.ceil(BATCH / B)
    obs_dim = int(np.prod(group.observation_space.shape))
    n_actions = int(group.action_space.n)
    ids = np.broadcast_to(np.eye(N, dtype=np.float32), (B, N, N))

    def critic_input(obs: np.ndarray, state: np.ndarray) -> np.ndarray:
        if critic == "local":
            return obs
        return np.concatenate([np.repeat(state[:, None], N, 1), ids], axis=-1)

    step = vec.reset(seed=seed)
    obs, state = step.obs[group.name], step.state
    crit_dim = critic_input(obs, state).shape[-1]
    agent = Agent(obs_dim, crit_dim, n_actions)
    params = list(agent.parameters())
    optim = torch.optim.Adam(params, lr=LR, eps=1e-5, foreach=True)

    buf_obs = np.zeros((T, B, N, obs_dim), np.float32)
    buf_crit = np.zeros((T, B, N, crit_dim), np.float32)
    buf_act = np.zeros((T, B, N), np.int64)
    buf_logp = np.zeros((T, B, N), np.float32)
    buf_val = np.zeros((T, B, N), np.float32)
    buf_rew = np.zeros((T, B, N), np.float32)
    buf_done = np.zeros((T, B), np.float32)  # the episode ended after this step
    buf_boot = np.zeros((T, B, N), np.float32)  # value of the final obs at the time limit

    ep_ret = np.zeros(B, np.float64)
    finished: list[tuple[int, float]] = []
    iterations, env_steps = math.ceil(timesteps / (T * B)), 0
    timers = {"sample_s": 0.0, "gae_s": 0.0, "sgd_s": 0.0}
    t_start = time.perf_counter()
    for it in range(1, iterations + 1):
        t0 = time.perf_counter()
        for t in range(T):
            crit = critic_input(obs, state)
            with torch.no_grad():
                logp_all = torch.log_softmax(agent.actor(torch.from_numpy(obs)), -1)
                action = torch.multinomial(logp_all.exp().reshape(-1, n_actions), 1)
                action = action.reshape(B, N)
                buf_logp[t] = logp_all.gather(-1, action[..., None])[..., 0].numpy()
                buf_val[t] = agent.value(torch.from_numpy(crit)).numpy()
            buf_obs[t], buf_crit[t], buf_act[t] = obs, crit, action.numpy()
            step = vec.step({group.name: buf_act[t]})
            buf_rew[t] = step.rewards
            ended = step.terminated | step.truncated
            buf_done[t] = ended
            buf_boot[t] = 0.0
            if step.truncated.any():  # bootstrap from the last observation at the time limit
                rows = np.flatnonzero(step.truncated & ~step.terminated)
                last = critic_input(step.final_obs[group.name], step.final_state)[rows]
                with torch.no_grad():
                    buf_boot[t, rows] = agent.value(torch.from_numpy(last)).numpy()
            ep_ret += step.rewards.sum(1)
            for b in np.flatnonzero(ended):
                finished.append((env_steps + (t + 1) * B, float(ep_ret[b])))
            ep_ret[ended] = 0.0
            obs, state = step.obs[group.name], step.state
        env_steps += T * B
        t1 = time.perf_counter()

        with torch.no_grad():
            next_val = agent.value(torch.from_numpy(critic_input(obs, state))).numpy()
        adv = np.zeros((T, B, N), np.float32)
        last = np.zeros((B, N), np.float32)
        for t in reversed(range(T)):
            nonterminal = 1.0 - buf_done[t][:, None]
            following = next_val if t == T - 1 else buf_val[t + 1]
            target = buf_rew[t] + GAMMA * (nonterminal * following + buf_boot[t])
            delta = target - buf_val[t]
            last = delta + GAMMA * LAMBDA * nonterminal * last
            adv[t] = last
        returns = adv + buf_val
        t2 = time.perf_counter()

        rows = T * B * N
        b_obs = torch.from_numpy(buf_obs.reshape(rows, obs_dim))
        b_crit = torch.from_numpy(buf_crit.reshape(rows, crit_dim))
        b_act = torch.from_numpy(buf_act.reshape(rows))
        b_logp = torch.from_numpy(buf_logp.reshape(rows))
        b_ret = torch.from_numpy(returns.reshape(rows))
        b_adv = torch.from_numpy(adv.reshape(rows))
        b_val = torch.from_numpy(buf_val.reshape(rows))
        columns = (b_obs, b_crit, b_act, b_logp, b_ret, b_adv, b_val)
        bounds = torch.arange(rows).tensor_split(max(1, round(rows / MINIBATCH)))
        for _ in range(EPOCHS):
            order = torch.randperm(rows)
            shuffled = [c[order] for c in columns]
            for part in bounds:
                at = slice(int(part[0]), int(part[-1]) + 1)
                m_obs, m_crit, m_act, m_logp, m_ret, m_adv, m_val = (c[at] for c in shuffled)
                m_adv = (m_adv - m_adv.mean()) / (m_adv.std() + 1e-8)
                logp_all = torch.log_softmax(agent.actor(m_obs), -1)
                ratio = torch.exp(logp_all.gather(-1, m_act[:, None])[:, 0] - m_logp)
                pg = torch.min(ratio * m_adv, torch.clamp(ratio, 1 - CLIP, 1 + CLIP) * m_adv).mean()
                value = agent.value(m_crit)
                moved = m_val + (value - m_val).clamp(-VF_CLIP, VF_CLIP)
                vf = 0.5 * torch.max((value - m_ret) ** 2, (moved - m_ret) ** 2).mean()
                entropy = -(logp_all.exp() * logp_all).sum(-1).mean()
                loss = -pg + VF_COEF * vf - ENT_COEF * entropy
                optim.zero_grad(set_to_none=True)
                loss.backward()
                nn.utils.clip_grad_norm_(params, MAX_GRAD_NORM, foreach=True)
                optim.step()
        t3 = time.perf_counter()
        timers["sample_s"] += t1 - t0
        timers["gae_s"] += t2 - t1
        timers["sgd_s"] += t3 - t2
        if curve:
            recent = [r for s, r in finished if s > env_steps - T * B]
            print(
                json.dumps(
                    {
                        "iteration": it,
                        "env_steps": env_steps,
                        "time_s": round(time.perf_counter() - t_start, 3),
                        "episode_return_mean": float(np.mean(recent)) if recent else None,
                    }
                ),
                flush=True,
            )
    wall = time.perf_counter() - t_start
    tail = [r for s, r in finished if s > 0.9 * env_steps]
    return {
        "config": f"bare_ppo/{'mappo' if critic == 'central' else 'ippo'}",
        "seed": seed,
        "env_steps": env_steps,
        "iterations": iterations,
        "train_env_steps_per_s": env_steps / wall,
        "split": {k: v / wall for k, v in timers.items()},
        "final_return_mean": float(np.mean(tail)) if tail else None,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--critic", choices=["local", "central"], default="local")
    p.add_argument("--timesteps", type=int, default=200_000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--curve", action="store_true", help="a JSON line per iteration")
    args = p.parse_args()
    print(json.dumps(train(args.critic, args.timesteps, args.seed, args.curve)), flush=True)


if __name__ == "__main__":
    main()
