"""Web env throughput, one JSON line per measurement.

    .venv/bin/python bench/web_throughput.py [--seconds 2] [--pools 1,2] [--episodes 40]

- ``twin``: episodes/s of each ``websim/`` task on one core, played by its scripted teacher
  (observation rendering, action parsing and the teacher's reading included);
- ``twin_mix``: the same over all twin tasks in turn, one episode each (a uniform task mix);
- ``browser``: real MiniWoB++ episodes/s for one browser in this process, with step latency
  percentiles (the action, then the DOM dump the next observation is read from);
- ``pool``: episodes/s of a Ray pool of N browser actors playing the same episodes (scaling).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

import envs
from envs.web import TWIN_TASKS
from envs.web.browser import chrome_missing
from envs.web.teachers import ScriptedTeacher
from envs.web.traces import TeacherSpec, play

REAL_TASKS = ("click-test-2", "click-button", "enter-text", "login-user")


def twin(task: str, seconds: float) -> dict:
    env_id = f"websim/{task}-v0"
    env, teacher = envs.make(env_id), ScriptedTeacher(task)
    n, steps, wins, t0 = 0, 0, 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        rows = play(env, env_id, n, teacher)
        n, steps, wins = n + 1, steps + len(rows), wins + rows[-1]["success"]
    dt = time.perf_counter() - t0
    return {
        "bench": "twin",
        "env": env_id,
        "episodes_per_s": round(n / dt, 1),
        "steps_per_episode": round(steps / n, 2),
        "success": round(wins / n, 3),
    }


def twin_mix(seconds: float) -> dict:
    players = [
        (f"websim/{t}-v0", envs.make(f"websim/{t}-v0"), ScriptedTeacher(t)) for t in TWIN_TASKS
    ]
    n, wins, t0 = 0, 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        env_id, env, teacher = players[n % len(players)]
        wins += play(env, env_id, n, teacher)[-1]["success"]
        n += 1
    dt = time.perf_counter() - t0
    return {
        "bench": "twin_mix",
        "tasks": len(players),
        "episodes_per_s": round(n / dt, 1),
        "success": round(wins / n, 3),
    }


def browser(task: str, episodes: int) -> dict:
    env_id = f"web/{task}-v1"
    env = envs.make(env_id)
    env.reset(seed=0)  # the browser starts here, outside the timing
    latencies, wins, t0 = [], 0, time.perf_counter()
    for seed in range(episodes):
        obs, _ = env.reset(seed=seed, options={"task_seed": seed})
        teacher, history = ScriptedTeacher(task), []
        while env.agents:
            action = teacher.act(obs["agent_0"], history).action
            history.append(action)
            s0 = time.perf_counter()
            obs, rew, *_ = env.step({"agent_0": action})
            latencies.append(time.perf_counter() - s0)
        wins += rew["agent_0"] > 0.5
    dt = time.perf_counter() - t0
    env.close()
    ms = np.percentile(np.array(latencies) * 1e3, [50, 90, 99])
    return {
        "bench": "browser",
        "env": env_id,
        "episodes_per_s": round(episodes / dt, 2),
        "step_ms_p50": round(ms[0], 1),
        "step_ms_p90": round(ms[1], 1),
        "step_ms_p99": round(ms[2], 1),
        "success": round(wins / episodes, 3),
    }


def pool(size: int, episodes: int) -> dict:
    from envs.web.pool import EpisodePool

    jobs = [(f"web/{t}-v1", s) for t in REAL_TASKS for s in range(episodes // len(REAL_TASKS))]
    p = EpisodePool(size)
    # warm-up: every actor starts its browsers outside the timing
    list(
        p.play(
            [(f"web/{t}-v1", 10_000 + i) for i in range(size) for t in REAL_TASKS], TeacherSpec()
        )
    )
    t0 = time.perf_counter()
    results = list(p.play(jobs, TeacherSpec()))
    dt = time.perf_counter() - t0
    p.close()
    wins = sum(r[-1]["success"] for r in results)
    return {
        "bench": "pool",
        "actors": size,
        "episodes": len(results),
        "episodes_per_s": round(len(results) / dt, 2),
        "success": round(wins / len(results), 3),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=2.0, help="per twin task")
    p.add_argument("--episodes", type=int, default=40, help="real episodes per measurement")
    p.add_argument("--pools", default="1,2", help="pool sizes to measure")
    args = p.parse_args()
    for task in TWIN_TASKS:
        print(json.dumps(twin(task, args.seconds)), flush=True)
    print(json.dumps(twin_mix(len(TWIN_TASKS) * args.seconds)), flush=True)
    if chrome_missing():
        print(json.dumps({"bench": "browser", "skipped": chrome_missing()}))
        return
    for task in REAL_TASKS:
        print(json.dumps(browser(task, args.episodes)), flush=True)
    sizes = [int(s) for s in args.pools.split(",") if s]
    if sizes:
        import ray

        ray.init(address="local", num_cpus=max(sizes), include_dashboard=False, log_to_driver=False)
    for size in sizes:
        print(json.dumps(pool(size, args.episodes)), flush=True)


if __name__ == "__main__":
    main()
