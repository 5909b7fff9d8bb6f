"""Volleyball throughput: env steps/s of every task's batched core against bare ``mj_step`` on
the same MuJoCo model, in one run.

    .venv/bin/python bench/volleyball_throughput.py [--tasks hover,solo_bump,3v3]
        [--batches 1,64,256] [--threads 0,2] [--seconds 3]

An env step is one 0.02 s control step of one world: the rotor model, drag and downwash in
NumPy over the batch, ``substeps`` MuJoCo steps of every world through ``mujoco.rollout``,
then the task's rules, rewards and observations. Actions are the hover command plus noise,
so drones fly and balls bounce; finished worlds reset inside the step.

The reference is bare MuJoCo: ``mj_step(model, data, nstep=N)`` in C on one thread, from a
world's state in play, holding hover thrust. Its rate divided by ``substeps`` is the most
control steps per second one thread could give; ``ratio`` is the core's rate over that
(the issue's goal: >= 0.5 for the single-drone tasks at one thread). With ``threads`` > 0
the rollout spreads worlds over a thread pool, so the ratio can pass 1 on several cores.

Prints one JSON line per (task, batch, threads) and a ``summary`` line.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import mujoco  # noqa: E402
import numpy as np  # noqa: E402

ALL = "hover,back_and_forth,hit_ball,solo_bump,bump_and_pass,set_and_spike_easy,set_and_spike_hard,1v1,3v3,6v6"


def bare_mj_step(core, seconds: float) -> float:
    """mj_step calls per second on one thread from world 0's state, rotors at hover."""
    w = core.worlds
    data = mujoco.MjData(w.model)
    mujoco.mj_setState(w.model, data, w.state[0], mujoco.mjtState.mjSTATE_FULLPHYSICS)
    data.ctrl[:] = w.ctrl[0].ravel()
    start = data.time
    mujoco.mj_step(w.model, data, 100)
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        mujoco.mj_step(w.model, data, 500)
        n += 500
        if data.time - start > 5:  # keep the world in play
            mujoco.mj_setState(w.model, data, w.state[0], mujoco.mjtState.mjSTATE_FULLPHYSICS)
    return n / (time.perf_counter() - t0)


def core_rate(task: str, batch: int, threads: int, seconds: float) -> tuple[float, object]:
    import envs
    from envs.volleyball.core import HOVER_COMMAND

    core = envs.make_vector(f"volleyball/{task}-v0", batch, seed=0, nthread=threads)
    core.reset()
    rng = np.random.default_rng(0)
    shapes = {name: (batch, g.num_agents, 4) for name, g in core.groups.items()}

    def once():
        core.step({k: HOVER_COMMAND + 0.1 * rng.standard_normal(s) for k, s in shapes.items()})

    for _ in range(10):
        once()
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for _ in range(5):
            once()
        n += 5
    return n * batch / (time.perf_counter() - t0), core


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tasks", default=ALL)
    p.add_argument("--batches", default="1,64,256")
    p.add_argument("--threads", default="0,2")
    p.add_argument("--seconds", type=float, default=3.0)
    args = p.parse_args()
    rows = []
    for task in args.tasks.split(","):
        bare = None
        for threads in (int(t) for t in args.threads.split(",")):
            for batch in (int(b) for b in args.batches.split(",")):
                rate, core = core_rate(task, batch, threads, args.seconds)
                if bare is None:
                    bare = bare_mj_step(core, args.seconds)
                substeps = core.worlds.substeps
                row = {
                    "task": task,
                    "batch": batch,
                    "threads": threads,
                    "drones": core.worlds.num_drones,
                    "env_steps_per_s": round(rate),
                    "bare_mj_step_per_s": round(bare),
                    "substeps": substeps,
                    "ratio": round(rate / (bare / substeps), 3),
                }
                rows.append(row)
                print(json.dumps(row), flush=True)
    single = [r for r in rows if r["drones"] == 1 and r["threads"] == 0 and r["batch"] > 1]
    print(
        json.dumps(
            {
                "summary": True,
                "single_drone_min_ratio_1_thread": min((r["ratio"] for r in single), default=None),
                "best": max(rows, key=lambda r: r["env_steps_per_s"]),
            }
        )
    )


if __name__ == "__main__":
    main()
