"""JaxMARL's published IPPO baseline on MPE simple_spread, with Arena's PPO settings: speed and
learning, for the comparison row of ``bench/train_throughput.py``.

    bench/.jaxmarl-venv/bin/python bench/jaxmarl_ippo.py --speed [--runs 3] [--updates 50]
    bench/.jaxmarl-venv/bin/python bench/jaxmarl_ippo.py --learn --seeds 0,1,2,3 \\
        --env-steps 1000000 [--out bench/results/jaxmarl_ippo_learn.json]

Runs in its own venv (``make jaxmarl-venv``: jaxmarl 0.2.0, jax/jaxlib 0.10.2, flax 0.12.8,
optax 0.2.8, distrax 0.1.9), never in the project's. On the CPU unless ``JAX_PLATFORMS`` says
otherwise.

Source. ``make_train`` below is a port of ``baselines/IPPO/ippo_ff_mpe.py`` (config
``baselines/IPPO/config/ippo_ff_mpe.yaml``) of github.com/FLAIROx/JaxMARL at commit
c793d095618c6d3edfb5632802348f57b70a4b94 (2026-07-21), Copyright 2023 FLAIR, licensed under
the Apache License 2.0 (http://www.apache.org/licenses/LICENSE-2.0; see
THIRD_PARTY_NOTICES.md). The baselines folder is not in the jaxmarl wheel, hence the copy.
Upstream's structure and maths are kept as they are; the changes, all marked ``# Arena:``,
are: no wandb, hydra or matplotlib; no ``io_callback`` (the metrics come back as the scan's
output); the config comes from the flags below, not the YAML; and one extra metric,
``ended_episode_return`` (the mean return of the episodes that ended in the update). The
jaxmarl 0.2.0 wheel's ``jaxmarl/environments/mpe`` and ``jaxmarl/wrappers`` are identical to
that commit's.

Settings: Arena's PPO defaults (``policies.ppo``, ``bench/bare_ppo.py``), not upstream's YAML
(LR 2.5e-4 annealed, 16 envs x 128 steps, 4 epochs of 4 minibatches): 64 envs x 63 steps
(4,032 env steps an update), 5 epochs of 24 minibatches, Adam at 1e-3 (eps 1e-5, upstream's)
without annealing, gamma 0.99, GAE lambda 0.95, clip 0.2, entropy 0.01, value coefficient
0.5, gradient norm 0.5, actor and critic 64-64 tanh, one network shared by the 3 agents
(upstream's IPPO always shares it). What still differs from Arena's PPO:

* Episodes. JaxMARL's MPE episodes are 26 env steps (``done`` once ``step >= 25``, checked
  before the step counter moves) and end as *terminal*: GAE does not bootstrap them. Arena's
  (mpe2's) are 25 steps and end as a *truncation*, bootstrapped from the last value.
* Returns logged. Upstream logs ``returned_episode_returns`` averaged over every step and
  actor of the update: each actor holds the return of its env's last finished episode (0
  before the first one ends), so the number lags the policy by up to one episode. Upstream's
  ``MPELogWrapper`` multiplies each agent's reward by the number of agents "as per the
  on-policy codebase", so the mean over the 3 agents is the team's summed reward, the unit of
  Arena's ``episode_return_mean`` (over 26 rewards, not 25).
* The value loss clips the value's change at CLIP_EPS (0.2); Arena clips the squared error at
  10. Advantages are standardised per minibatch (Arena: over the batch). A minibatch is
  192 x 63 / 24 = 504 agent rows (Arena: 512 rows, 23.6 minibatches an epoch).

Modes:

* ``--speed``: compiles ``train`` for ``--updates`` updates with
  ``jax.jit(train).lower(key).compile()`` (``compile_s``), then times ``--runs`` runs of it
  (``block_until_ready``). Prints one JSON line: env steps/s (env steps, not agent steps:
  4,032 an update) per run and their mean, compile and import times, the versions.
* ``--learn``: compiles once for ``--env-steps`` (whole updates), then trains one seed at a
  time (no vmap over seeds). Prints one JSON line per seed (the return at 500k env steps and
  at the end, each the mean of upstream's per-update return over the last 10% of the updates
  up to there; wall times) and a summary (mean, sample std and a 95% t-interval over seeds),
  and writes all of it with each seed's per-update curve to ``--out``.

``--one-thread`` sets ``XLA_FLAGS=--xla_cpu_multi_thread_eigen=false
intra_op_parallelism_threads=1`` before jax loads (Arena's benches run one thread per
process); without it XLA uses every core it sees.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
from pathlib import Path

T_PROCESS = time.perf_counter()
JAXMARL_COMMIT = "c793d095618c6d3edfb5632802348f57b70a4b94"
ROOT = Path(__file__).resolve().parents[1]
ONE_THREAD_FLAGS = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"

# Arena's PPO settings, in upstream's config keys (the flags below change them).
DEFAULTS = {
    "LR": 1e-3,
    "NUM_ENVS": 64,
    "NUM_STEPS": 63,
    "UPDATE_EPOCHS": 5,
    "NUM_MINIBATCHES": 24,
    "GAMMA": 0.99,
    "GAE_LAMBDA": 0.95,
    "CLIP_EPS": 0.2,
    "ENT_COEF": 0.01,
    "VF_COEF": 0.5,
    "MAX_GRAD_NORM": 0.5,
    "ACTIVATION": "tanh",
    "ENV_NAME": "MPE_simple_spread_v3",
    "ENV_KWARGS": {},
    "ANNEAL_LR": False,
}


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--speed", action="store_true", help="compile and time --runs runs")
    mode.add_argument("--learn", action="store_true", help="train --seeds, report returns")
    p.add_argument("--runs", type=int, default=3, help="--speed: timed runs")
    p.add_argument("--updates", type=int, default=50, help="--speed: updates per run")
    p.add_argument("--seeds", default="0,1,2,3", help="--learn: comma-separated seeds")
    p.add_argument("--env-steps", type=int, default=1_000_000, help="--learn: per seed")
    p.add_argument("--mid-env-steps", type=int, default=500_000, help="--learn: midpoint")
    p.add_argument(
        "--out", help="JSON file (--learn default: bench/results/jaxmarl_ippo_learn.json)"
    )
    p.add_argument("--one-thread", action="store_true", help="XLA on one CPU thread")
    p.add_argument("--env", default=DEFAULTS["ENV_NAME"])
    p.add_argument("--num-envs", type=int, default=DEFAULTS["NUM_ENVS"])
    p.add_argument("--num-steps", type=int, default=DEFAULTS["NUM_STEPS"])
    p.add_argument("--update-epochs", type=int, default=DEFAULTS["UPDATE_EPOCHS"])
    p.add_argument("--num-minibatches", type=int, default=DEFAULTS["NUM_MINIBATCHES"])
    p.add_argument("--lr", type=float, default=DEFAULTS["LR"])
    p.add_argument("--anneal-lr", action="store_true", help="upstream's linear LR decay")
    p.add_argument("--gamma", type=float, default=DEFAULTS["GAMMA"])
    p.add_argument("--gae-lambda", type=float, default=DEFAULTS["GAE_LAMBDA"])
    p.add_argument("--clip-eps", type=float, default=DEFAULTS["CLIP_EPS"])
    p.add_argument("--ent-coef", type=float, default=DEFAULTS["ENT_COEF"])
    p.add_argument("--vf-coef", type=float, default=DEFAULTS["VF_COEF"])
    p.add_argument("--max-grad-norm", type=float, default=DEFAULTS["MAX_GRAD_NORM"])
    p.add_argument("--activation", choices=("tanh", "relu"), default=DEFAULTS["ACTIVATION"])
    return p.parse_args()  # upstream's assert checks that the minibatches divide the batch


ARGS = parse_args() if __name__ == "__main__" else None
os.environ.setdefault("JAX_PLATFORMS", "cpu")
if ARGS is not None and ARGS.one_thread:
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + ONE_THREAD_FLAGS).strip()

T_IMPORT = time.perf_counter()
from typing import NamedTuple, Sequence  # noqa: E402, UP035

import distrax  # noqa: E402
import flax.linen as nn  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import jaxlib  # noqa: E402
import jaxmarl  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
from flax.linen.initializers import constant, orthogonal  # noqa: E402
from flax.training.train_state import TrainState  # noqa: E402
from jaxmarl.wrappers.baselines import MPELogWrapper as LogWrapper  # noqa: E402

IMPORT_S = time.perf_counter() - T_IMPORT


# ---- From here to make_train's end: upstream's ippo_ff_mpe.py (Apache-2.0), ported. ----


class ActorCritic(nn.Module):
    action_dim: Sequence[int]
    activation: str = "tanh"

    @nn.compact
    def __call__(self, x):
        if self.activation == "relu":
            activation = nn.relu
        else:
            activation = nn.tanh
        actor_mean = nn.Dense(64, kernel_init=orthogonal(np.sqrt(2)), bias_init=constant(0.0))(x)
        actor_mean = activation(actor_mean)
        actor_mean = nn.Dense(64, kernel_init=orthogonal(np.sqrt(2)), bias_init=constant(0.0))(
            actor_mean
        )
        actor_mean = activation(actor_mean)
        actor_mean = nn.Dense(
            self.action_dim, kernel_init=orthogonal(0.01), bias_init=constant(0.0)
        )(actor_mean)
        pi = distrax.Categorical(logits=actor_mean)

        critic = nn.Dense(64, kernel_init=orthogonal(np.sqrt(2)), bias_init=constant(0.0))(x)
        critic = activation(critic)
        critic = nn.Dense(64, kernel_init=orthogonal(np.sqrt(2)), bias_init=constant(0.0))(critic)
        critic = activation(critic)
        critic = nn.Dense(1, kernel_init=orthogonal(1.0), bias_init=constant(0.0))(critic)

        return pi, jnp.squeeze(critic, axis=-1)


class Transition(NamedTuple):
    done: jnp.ndarray
    action: jnp.ndarray
    value: jnp.ndarray
    reward: jnp.ndarray
    log_prob: jnp.ndarray
    obs: jnp.ndarray
    info: jnp.ndarray


def batchify(x: dict, agent_list, num_actors):
    max_dim = max([x[a].shape[-1] for a in agent_list])

    def pad(z, length):
        return jnp.concatenate([z, jnp.zeros(z.shape[:-1] + [length - z.shape[-1]])], -1)

    # Arena: upstream calls pad(x[a]) without its length; unreached on simple_spread, where
    # every agent's observation has the same size.
    x = jnp.stack([x[a] if x[a].shape[-1] == max_dim else pad(x[a]) for a in agent_list])
    return x.reshape((num_actors, -1))


def unbatchify(x: jnp.ndarray, agent_list, num_envs, num_actors):
    x = x.reshape((num_actors, num_envs, -1))
    return {a: x[i] for i, a in enumerate(agent_list)}


def make_train(config):
    env = jaxmarl.make(config["ENV_NAME"], **config["ENV_KWARGS"])
    config["NUM_ACTORS"] = env.num_agents * config["NUM_ENVS"]
    config["NUM_UPDATES"] = config["TOTAL_TIMESTEPS"] // config["NUM_STEPS"] // config["NUM_ENVS"]
    config["MINIBATCH_SIZE"] = (
        config["NUM_ACTORS"] * config["NUM_STEPS"] // config["NUM_MINIBATCHES"]
    )

    env = LogWrapper(env)

    def linear_schedule(count):
        frac = (
            1.0
            - (count // (config["NUM_MINIBATCHES"] * config["UPDATE_EPOCHS"]))
            / config["NUM_UPDATES"]
        )
        return config["LR"] * frac

    def train(rng):
        # INIT NETWORK
        network = ActorCritic(env.action_space(env.agents[0]).n, activation=config["ACTIVATION"])
        rng, _rng = jax.random.split(rng)
        init_x = jnp.zeros(env.observation_space(env.agents[0]).shape)
        network_params = network.init(_rng, init_x)
        if config["ANNEAL_LR"]:
            tx = optax.chain(
                optax.clip_by_global_norm(config["MAX_GRAD_NORM"]),
                optax.adam(learning_rate=linear_schedule, eps=1e-5),
            )
        else:
            tx = optax.chain(
                optax.clip_by_global_norm(config["MAX_GRAD_NORM"]),
                optax.adam(config["LR"], eps=1e-5),
            )

        train_state = TrainState.create(
            apply_fn=network.apply,
            params=network_params,
            tx=tx,
        )

        # INIT ENV
        rng, _rng = jax.random.split(rng)
        reset_rng = jax.random.split(_rng, config["NUM_ENVS"])
        obsv, env_state = jax.vmap(env.reset)(reset_rng)

        # TRAIN LOOP
        def _update_step(runner_state, unused):
            # COLLECT TRAJECTORIES
            def _env_step(runner_state, unused):
                train_state, env_state, last_obs, rng = runner_state

                obs_batch = batchify(last_obs, env.agents, config["NUM_ACTORS"])
                # SELECT ACTION
                rng, _rng = jax.random.split(rng)

                pi, value = network.apply(train_state.params, obs_batch)
                action = pi.sample(seed=_rng)
                log_prob = pi.log_prob(action)
                env_act = unbatchify(action, env.agents, config["NUM_ENVS"], env.num_agents)

                # STEP ENV
                rng, _rng = jax.random.split(rng)
                rng_step = jax.random.split(_rng, config["NUM_ENVS"])
                obsv, env_state, reward, done, info = jax.vmap(env.step)(
                    rng_step,
                    env_state,
                    env_act,
                )

                info = jax.tree.map(lambda x: x.reshape((config["NUM_ACTORS"])), info)  # noqa: UP034
                transition = Transition(
                    batchify(done, env.agents, config["NUM_ACTORS"]).squeeze(),
                    action,
                    value,
                    batchify(reward, env.agents, config["NUM_ACTORS"]).squeeze(),
                    log_prob,
                    obs_batch,
                    info,
                )
                runner_state = (train_state, env_state, obsv, rng)
                return runner_state, transition

            runner_state, traj_batch = jax.lax.scan(
                _env_step, runner_state, None, config["NUM_STEPS"]
            )

            # CALCULATE ADVANTAGE
            train_state, env_state, last_obs, rng = runner_state
            last_obs_batch = batchify(last_obs, env.agents, config["NUM_ACTORS"])
            _, last_val = network.apply(train_state.params, last_obs_batch)

            def _calculate_gae(traj_batch, last_val):
                def _get_advantages(gae_and_next_value, transition):
                    gae, next_value = gae_and_next_value
                    done, value, reward = (
                        transition.done,
                        transition.value,
                        transition.reward,
                    )
                    delta = reward + config["GAMMA"] * next_value * (1 - done) - value
                    gae = delta + config["GAMMA"] * config["GAE_LAMBDA"] * (1 - done) * gae
                    return (gae, value), gae

                _, advantages = jax.lax.scan(
                    _get_advantages,
                    (jnp.zeros_like(last_val), last_val),
                    traj_batch,
                    reverse=True,
                    unroll=8,
                )
                return advantages, advantages + traj_batch.value

            advantages, targets = _calculate_gae(traj_batch, last_val)

            # UPDATE NETWORK
            def _update_epoch(update_state, unused):
                def _update_minbatch(train_state, batch_info):
                    traj_batch, advantages, targets = batch_info

                    def _loss_fn(params, traj_batch, gae, targets):
                        # RERUN NETWORK
                        pi, value = network.apply(params, traj_batch.obs)
                        log_prob = pi.log_prob(traj_batch.action)

                        # CALCULATE VALUE LOSS
                        value_pred_clipped = traj_batch.value + (value - traj_batch.value).clip(
                            -config["CLIP_EPS"], config["CLIP_EPS"]
                        )
                        value_losses = jnp.square(value - targets)
                        value_losses_clipped = jnp.square(value_pred_clipped - targets)
                        value_loss = 0.5 * jnp.maximum(value_losses, value_losses_clipped).mean()

                        # CALCULATE ACTOR LOSS
                        ratio = jnp.exp(log_prob - traj_batch.log_prob)
                        gae = (gae - gae.mean()) / (gae.std() + 1e-8)
                        loss_actor1 = ratio * gae
                        loss_actor2 = (
                            jnp.clip(
                                ratio,
                                1.0 - config["CLIP_EPS"],
                                1.0 + config["CLIP_EPS"],
                            )
                            * gae
                        )
                        loss_actor = -jnp.minimum(loss_actor1, loss_actor2)
                        loss_actor = loss_actor.mean()
                        entropy = pi.entropy().mean()

                        total_loss = (
                            loss_actor
                            + config["VF_COEF"] * value_loss
                            - config["ENT_COEF"] * entropy
                        )
                        return total_loss, (value_loss, loss_actor, entropy, ratio)

                    grad_fn = jax.value_and_grad(_loss_fn, has_aux=True)
                    total_loss, grads = grad_fn(train_state.params, traj_batch, advantages, targets)
                    train_state = train_state.apply_gradients(grads=grads)

                    loss_info = {
                        "total_loss": total_loss[0],
                        "actor_loss": total_loss[1][1],
                        "critic_loss": total_loss[1][0],
                        "entropy": total_loss[1][2],
                        "ratio": total_loss[1][3],
                    }

                    return train_state, loss_info

                train_state, traj_batch, advantages, targets, rng = update_state
                rng, _rng = jax.random.split(rng)
                batch_size = config["MINIBATCH_SIZE"] * config["NUM_MINIBATCHES"]
                assert batch_size == config["NUM_STEPS"] * config["NUM_ACTORS"], (
                    "batch size must be equal to number of steps * number of actors"
                )
                permutation = jax.random.permutation(_rng, batch_size)
                batch = (traj_batch, advantages, targets)
                batch = jax.tree.map(lambda x: x.reshape((batch_size,) + x.shape[2:]), batch)
                shuffled_batch = jax.tree.map(lambda x: jnp.take(x, permutation, axis=0), batch)
                minibatches = jax.tree.map(
                    lambda x: jnp.reshape(x, [config["NUM_MINIBATCHES"], -1] + list(x.shape[1:])),
                    shuffled_batch,
                )
                train_state, loss_info = jax.lax.scan(_update_minbatch, train_state, minibatches)
                update_state = (train_state, traj_batch, advantages, targets, rng)
                return update_state, loss_info

            # Arena: upstream's wandb callback (and its io_callback, below) left out.
            update_state = (train_state, traj_batch, advantages, targets, rng)
            update_state, loss_info = jax.lax.scan(
                _update_epoch, update_state, None, config["UPDATE_EPOCHS"]
            )
            train_state = update_state[0]
            metric = traj_batch.info
            rng = update_state[-1]

            r0 = {"ratio0": loss_info["ratio"][0, 0].mean()}
            # Arena: the mean return of the episodes that ended in this update (NaN if none).
            ended = metric["returned_episode"]
            ended_return = {
                "ended_episode_return": jnp.where(
                    ended, metric["returned_episode_returns"], 0
                ).sum()
                / ended.sum(),
                "ended_episodes": ended.sum() / env.num_agents,
            }
            loss_info = jax.tree.map(lambda x: x.mean(), loss_info)
            metric = jax.tree.map(lambda x: x.mean(), metric)
            metric = {**metric, **loss_info, **r0, **ended_return}
            # Arena: no jax.experimental.io_callback(callback, None, metric).
            runner_state = (train_state, env_state, last_obs, rng)
            return runner_state, metric

        rng, _rng = jax.random.split(rng)
        runner_state = (train_state, env_state, obsv, _rng)
        runner_state, metric = jax.lax.scan(_update_step, runner_state, None, config["NUM_UPDATES"])
        return {"runner_state": runner_state, "metrics": metric}

    return train


# ---- End of the port. ----


def config_from(a: argparse.Namespace, total_timesteps: int) -> dict:
    return {
        **DEFAULTS,
        "ENV_NAME": a.env,
        "NUM_ENVS": a.num_envs,
        "NUM_STEPS": a.num_steps,
        "UPDATE_EPOCHS": a.update_epochs,
        "NUM_MINIBATCHES": a.num_minibatches,
        "LR": a.lr,
        "ANNEAL_LR": a.anneal_lr,
        "GAMMA": a.gamma,
        "GAE_LAMBDA": a.gae_lambda,
        "CLIP_EPS": a.clip_eps,
        "ENT_COEF": a.ent_coef,
        "VF_COEF": a.vf_coef,
        "MAX_GRAD_NORM": a.max_grad_norm,
        "ACTIVATION": a.activation,
        "TOTAL_TIMESTEPS": total_timesteps,
    }


def compiled(config: dict):
    """``train`` compiled for ``config``, and the seconds that took (trace, lower, compile)."""
    t0 = time.perf_counter()
    train = make_train(config)
    exe = jax.jit(train).lower(jax.random.PRNGKey(0)).compile()
    return exe, time.perf_counter() - t0


def about(a: argparse.Namespace, config: dict) -> dict:
    return {
        "jax": jax.__version__,
        "jaxlib": jaxlib.__version__,
        "jaxmarl": getattr(jaxmarl, "__version__", None),
        "jaxmarl_commit": JAXMARL_COMMIT,
        "backend": jax.default_backend(),
        "cpu_count": os.cpu_count(),
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "one_thread": a.one_thread,
        "python": platform.python_version(),
        "settings": {k: v for k, v in config.items() if k != "ENV_KWARGS"},
    }


def speed(a: argparse.Namespace) -> dict:
    config = config_from(a, a.updates * a.num_steps * a.num_envs)
    exe, compile_s = compiled(config)
    steps = config["NUM_UPDATES"] * config["NUM_STEPS"] * config["NUM_ENVS"]
    runs = []
    for i in range(a.runs):
        t0 = time.perf_counter()
        out = exe(jax.random.PRNGKey(i))
        jax.block_until_ready(out)
        dt = time.perf_counter() - t0
        runs.append({"seconds": round(dt, 3), "env_steps_per_s": round(steps / dt, 1)})
    rates = [r["env_steps_per_s"] for r in runs]
    return {
        "config": "jaxmarl_ippo",
        "env_steps_per_s": round(sum(rates) / len(rates), 1),
        "runs": runs,
        "env_steps_per_run": steps,
        "updates_per_run": config["NUM_UPDATES"],
        "compile_s": round(compile_s, 2),
        "import_s": round(IMPORT_S, 2),
        **about(a, config),
    }


def tail_mean(curve: list[float], upto: int) -> float:
    """Mean of ``curve[:upto]``'s last 10% (at least one value)."""
    n = max(1, round(0.1 * upto))
    return float(np.mean(curve[upto - n : upto]))


def interval(values: list[float]) -> dict:
    """Mean, sample std and a two-sided 95% Student-t interval for the mean."""
    x = np.asarray(values, dtype=np.float64)
    mean = float(x.mean())
    if len(x) < 2:
        return {"mean": round(mean, 3), "std": None, "ci95": None, "n": len(x)}
    from scipy.stats import t  # scipy comes with jax

    std = float(x.std(ddof=1))
    half = float(t.ppf(0.975, len(x) - 1)) * std / math.sqrt(len(x))
    ci = [round(mean - half, 3), round(mean + half, 3)]
    return {"mean": round(mean, 3), "std": round(std, 3), "ci95": ci, "n": len(x)}


def learn(a: argparse.Namespace) -> dict:
    config = config_from(a, a.env_steps)
    exe, compile_s = compiled(config)
    per_update = config["NUM_STEPS"] * config["NUM_ENVS"]
    n_updates = config["NUM_UPDATES"]
    mid = a.mid_env_steps // per_update
    if not 0 < mid <= n_updates:
        raise SystemExit(f"--mid-env-steps {a.mid_env_steps} is outside the run's updates")
    # Keyed by the env steps asked for; the updates end at whole updates just below them.
    mid_key, end_key = f"return_at_{a.mid_env_steps}", f"return_at_{a.env_steps}"
    head = {
        "config": "jaxmarl_ippo_learn",
        "compile_s": round(compile_s, 2),
        "env_steps_at_mid": mid * per_update,
        "env_steps_at_end": n_updates * per_update,
    }
    print(json.dumps({**head, "import_s": round(IMPORT_S, 2), **about(a, config)}), flush=True)
    seeds, curves = [], {}
    for seed in [int(s) for s in a.seeds.split(",")]:
        t0 = time.perf_counter()
        out = exe(jax.random.PRNGKey(seed))
        metrics = jax.device_get(out["metrics"])
        run_s = time.perf_counter() - t0
        curve = [float(v) for v in metrics["returned_episode_returns"]]
        ended = [float(v) for v in metrics["ended_episode_return"]]
        row = {
            "config": "jaxmarl_ippo_learn",
            "seed": seed,
            "updates": n_updates,
            "env_steps": n_updates * per_update,
            mid_key: round(tail_mean(curve, mid), 3),
            end_key: round(tail_mean(curve, n_updates), 3),
            "ended_episode_return_at_end": round(
                float(np.nanmean(ended[-max(1, round(0.1 * n_updates)) :])), 3
            ),
            "run_s": round(run_s, 2),
            "env_steps_per_s": round(n_updates * per_update / run_s, 1),
            "process_wall_s": round(time.perf_counter() - T_PROCESS, 2),
        }
        print(json.dumps(row), flush=True)
        seeds.append(row)
        curves[seed] = {
            "env_steps": [(i + 1) * per_update for i in range(n_updates)],
            "returned_episode_returns": curve,
            "ended_episode_return": ended,
            "entropy": [float(v) for v in metrics["entropy"]],
        }
    summary = {
        "config": "jaxmarl_ippo_learn",
        "summary": True,
        "seeds": [r["seed"] for r in seeds],
        mid_key: interval([r[mid_key] for r in seeds]),
        end_key: interval([r[end_key] for r in seeds]),
        "compile_s": round(compile_s, 2),
        "process_wall_s": round(time.perf_counter() - T_PROCESS, 2),
    }
    print(json.dumps(summary), flush=True)
    return {
        **head,
        "import_s": round(IMPORT_S, 2),
        **about(a, config),
        "return_metric": "returned_episode_returns averaged over the update (upstream's log); "
        "a return_at_N is its mean over the last 10% of the updates up to N env steps",
        "per_seed": seeds,
        "summary": summary,
        "curves": curves,
    }


def write(path: str, payload: dict) -> None:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(payload, indent=1) + "\n")
    os.replace(tmp, out)


def main(a: argparse.Namespace) -> None:
    if a.speed:
        row = speed(a)
        print(json.dumps(row), flush=True)
        if a.out:
            write(a.out, row)
    else:
        payload = learn(a)
        write(a.out or str(ROOT / "bench" / "results" / "jaxmarl_ippo_learn.json"), payload)


if __name__ == "__main__":
    sys.exit(main(ARGS))
