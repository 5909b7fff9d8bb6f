"""Raw env throughput per registered id: the PettingZoo env, the RLlib adapter, and the batch
of 64 that training steps (the vectorised core where the id has one).

    .venv/bin/python bench/env_throughput.py [--seconds 0.5] [--only mpe/simple_spread]

Prints one JSON line per id with env steps per second (all agents acting once is one step).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

import envs
from envs.rllib import RLlibMultiAgentEnv


def rate(step, seconds: float) -> float:
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        n += step()
    return n / (time.perf_counter() - t0)


def bench_id(env_id: str, seconds: float, batch: int) -> dict:
    env = envs.make(env_id)
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    for a in env.possible_agents:
        env.action_space(a).seed(int(rng.integers(2**31)))

    def pz_step():
        if not env.agents:
            env.reset()
        env.step({a: env.action_space(a).sample() for a in env.agents})
        return 1

    adapter = RLlibMultiAgentEnv(env_id)
    adapter.reset(seed=0)
    done = {"__all__": False}

    def adapter_step():
        nonlocal done
        if done["__all__"]:
            adapter.reset()
        _, _, terms, truncs, _ = adapter.step(
            {a: adapter.action_spaces[a].sample() for a in adapter.agents}
        )
        done = {"__all__": terms["__all__"] or truncs["__all__"]}
        return 1

    out = {
        "id": env_id,
        "pettingzoo_steps_per_s": rate(pz_step, seconds),
        "adapter_steps_per_s": rate(adapter_step, seconds),
    }
    vec = envs.make_vector(env_id, batch, seed=0)
    vec.reset()

    def random_actions(g):
        shape = (batch, g.num_agents) + tuple(g.action_space.shape or ())
        if hasattr(g.action_space, "n"):
            return rng.integers(0, g.action_space.n, shape)
        return rng.random(shape, dtype=np.float32)

    def vec_step():
        vec.step({g.name: random_actions(g) for g in vec.groups.values()})
        return batch

    out[f"vector{batch}_steps_per_s"] = rate(vec_step, seconds)
    out["vectorised_core"] = envs.spec(env_id).vector is not None
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seconds", type=float, default=0.5)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--only", default="", help="substring of the ids to measure")
    args = p.parse_args()
    for env_id in envs.ids():
        if env_id.startswith(("web/", "websim/")):  # text envs: bench/web_throughput.py
            continue
        if args.only in env_id:
            print(json.dumps(bench_id(env_id, args.seconds, args.batch)), flush=True)


if __name__ == "__main__":
    main()
