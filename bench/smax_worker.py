"""SMAX (JaxMARL) throughput on the CPU, run by ``bench/smac_throughput.py`` in its own venv.

Prints one JSON line per (map, batch): env steps/s with random legal actions, once with a
jitted batched step called from Python (how an RL sampler calls an env) and once with the
whole rollout inside one ``jax.lax.scan`` (SMAX's best case).
"""

import json
import os
import sys
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jaxmarl import make  # noqa: E402
from jaxmarl.environments.smax import map_name_to_scenario  # noqa: E402


def bench(map_name: str, batch: int, steps: int) -> dict:
    env = make("HeuristicEnemySMAX", scenario=map_name_to_scenario(map_name))
    agents = env.agents

    def policy(key, state):
        avail = env.get_avail_actions(state)
        keys = jax.random.split(key, len(agents))
        return {
            a: jax.random.categorical(k, jnp.log(avail[a].astype(jnp.float32) + 1e-9))
            for a, k in zip(agents, keys, strict=True)
        }

    def one(key, state):
        k1, k2 = jax.random.split(key)
        obs, state, rew, dones, info = env.step(k2, state, policy(k1, state))
        # Return the observations (and their world state) too: what jit does not return it
        # does not compute, and an RL sampler needs them, as Arena's bench computes its own.
        return state, obs

    vstep = jax.vmap(one)

    @jax.jit
    def step(key, state):  # the key split inside the jit, as a tuned sampler would do it
        keys = jax.random.split(key, batch + 1)
        state, obs = vstep(keys[1:], state)
        return keys[0], state, obs

    reset = jax.jit(jax.vmap(env.reset))
    key = jax.random.PRNGKey(0)
    _, state = reset(jax.random.split(key, batch))
    key, state, obs = step(key, state)  # compile
    jax.block_until_ready(obs)
    t = time.perf_counter()
    for _ in range(steps):
        key, state, obs = step(key, state)
    jax.block_until_ready(obs)
    python_loop = steps * batch / (time.perf_counter() - t)

    def body(carry, k):
        state, total = carry
        state, obs = vstep(jax.random.split(k, batch), state)
        # A checksum of every observation keeps them computed inside the scan.
        total = total + sum(jnp.sum(o) for o in jax.tree_util.tree_leaves(obs))
        return (state, total), None

    scan = jax.jit(lambda s, ks: jax.lax.scan(body, (s, jnp.float32(0)), ks)[0])
    ks = jax.random.split(key, steps)
    jax.block_until_ready(scan(state, ks))  # compile
    t = time.perf_counter()
    jax.block_until_ready(scan(state, ks))
    scanned = steps * batch / (time.perf_counter() - t)
    return {
        "impl": "smax",
        "map": map_name,
        "batch": batch,
        "env_steps_per_s": round(python_loop, 1),
        "env_steps_per_s_scan": round(scanned, 1),
        "jax": jax.__version__,
    }


if __name__ == "__main__":
    maps = sys.argv[1].split(",")
    batches = [int(b) for b in sys.argv[2].split(",")]
    steps = int(sys.argv[3]) if len(sys.argv) > 3 else 200
    for m in maps:
        for b in batches:
            print(json.dumps(bench(m, b, steps)), flush=True)
