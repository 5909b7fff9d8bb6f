"""Multi-page flows (envs/web/flow.py): the scripted experts on the twin and the real pages.

    .venv/bin/python bench/web_flows.py [--twin 500] [--real 10] [--error-rate 0.1]

One JSON line per flow and backend: success, reward, steps per episode, the share of pages
solved (partial credit), episodes per second of wall time and per CPU-second of this process
(the twin's cost on a shared machine; a browser's work is in Chromium's processes);
``slip`` lines are the expert clicking a random element
``--error-rate`` of the time (as ``arena web traces --error-rate``).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

import envs
from envs.web import FLOWS
from envs.web.browser import chrome_missing
from envs.web.env import AGENT
from envs.web.teachers import ScriptedTeacher


def measure(env_id: str, flow: str, seeds: int, error_rate: float) -> dict:
    env = envs.make(env_id)
    env.reset(seed=0)  # a browser starts here, outside the timing
    rewards, steps, share = [], [], []
    t0, c0 = time.perf_counter(), time.process_time()
    for seed in range(seeds):
        teacher, history = ScriptedTeacher(flow, error_rate, seed), []
        obs, _ = env.reset(seed=seed, options={"task_seed": seed})
        while env.agents:
            history.append(teacher.act(obs[AGENT], history).action)
            obs, rew, _, _, info = env.step({AGENT: history[-1]})
        rewards.append(rew[AGENT])
        steps.append(len(history))
        share.append(info[AGENT]["pages_solved"] / info[AGENT]["pages"])
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    env.close()
    return {
        "env": env_id,
        "teacher": f"slip {error_rate}" if error_rate else "expert",
        "episodes": seeds,
        "success": round(float(np.mean(np.array(rewards) > 0.5)), 3),
        "reward": round(float(np.mean(rewards)), 3),
        "steps_per_episode": round(float(np.mean(steps)), 2),
        "pages_solved_share": round(float(np.mean(share)), 3),
        "episodes_per_s": round(seeds / dt, 2),
        "episodes_per_cpu_s": round(seeds / cpu, 2),  # this process's (not Chromium's)
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--twin", type=int, default=500, help="seeds per flow on the twin")
    p.add_argument("--real", type=int, default=10, help="seeds per flow on real pages (0: none)")
    p.add_argument("--error-rate", type=float, default=0.1)
    args = p.parse_args()
    for flow in FLOWS:
        print(json.dumps(measure(f"websim/{flow}-v0", flow, args.twin, 0.0)), flush=True)
        if args.error_rate:
            line = measure(f"websim/{flow}-v0", flow, args.twin, args.error_rate)
            print(json.dumps(line), flush=True)
        if args.real and not chrome_missing():
            print(json.dumps(measure(f"web/{flow}-v1", flow, args.real, 0.0)), flush=True)


if __name__ == "__main__":
    main()
