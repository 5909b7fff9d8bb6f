"""SMAC battle throughput: Arena's NumPy core against JaxMARL's SMAX on the CPU, in one run.

    .venv/bin/python bench/smac_throughput.py [--maps 3m,8m,2s3z,MMM2,27m_vs_30m]
        [--batches 1,64] [--smax-python bench/.smax-venv/bin/python]

Both sides step B battles with uniformly random legal actions, 8 game frames per env step,
the enemy's scripted AI included, and produce every agent's observations (Arena also the
state and masks), auto-resetting finished battles. Env steps/s counts battles x steps.

SMAX runs in its own venv (``make smax-venv`` installs ``jaxmarl`` and ``jax`` there; never
in the project's), in a subprocess, one after the other with Arena so they do not share the
CPU. It is timed twice: its jitted batched step called from a Python loop (as an RLlib
sampler, whose policy is a torch module, drives an env) and the whole rollout inside one
``jax.lax.scan`` (SMAX's best case, where a JAX policy would live in the same XLA program).
SMAX implements a subset of the maps (no medivacs: no MMM2); the others are skipped there.

Prints one JSON line per (implementation, map, batch) and a ``summary`` line with Arena's
ratio to each SMAX mode at every shared (map, batch).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

SMAX_MAPS = {"3m", "8m", "2s3z", "3s5z", "5m_vs_6m", "10m_vs_11m", "27m_vs_30m", "25m"}
SMAX_MAPS |= {"3s5z_vs_3s6z", "3s_vs_5z", "6h_vs_8z"}  # jaxmarl's map_name_to_scenario


def arena(map_name: str, batch: int, seconds: float) -> dict:
    from envs.smac.core import BattleBatch

    core = BattleBatch(batch, seed=0, map_name=map_name)
    step = core.reset()
    rng = np.random.default_rng(0)
    noise = np.empty(step.action_mask["agent"].shape)

    def once():
        nonlocal step
        rng.random(out=noise)
        step = core.step((noise * step.action_mask["agent"]).argmax(-1))

    for _ in range(20):  # warm-up
        once()
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for _ in range(10):
            once()
        n += 10
    dt = time.perf_counter() - t0
    return {
        "impl": "arena",
        "map": map_name,
        "batch": batch,
        "env_steps_per_s": round(n * batch / dt, 1),
        "ms_per_step": round(1e3 * dt / n, 3),
    }


def smax(python: str, maps: list[str], batches: list[int], steps: int) -> list[dict]:
    cmd = [python, str(ROOT / "bench" / "smax_worker.py"), ",".join(maps)]
    cmd += [",".join(map(str, batches)), str(steps)]
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=3600)
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-5:]
        raise RuntimeError(f"SMAX worker failed ({proc.returncode}): " + " | ".join(tail))
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--maps", default="3m,8m,2s3z,MMM2,27m_vs_30m")
    p.add_argument("--batches", default="1,64")
    p.add_argument("--seconds", type=float, default=5.0, help="Arena's timing per (map, batch)")
    p.add_argument("--smax-steps", type=int, default=200, help="SMAX env steps per timing")
    p.add_argument("--smax-python", default=str(ROOT / "bench" / ".smax-venv" / "bin" / "python"))
    p.add_argument("--no-smax", action="store_true", help="Arena only")
    p.add_argument("--out", default="bench/results/smac_throughput.jsonl")
    a = p.parse_args()
    from envs.smac.maps import parse_v1_maps

    try:
        maps = parse_v1_maps(a.maps)
    except ValueError as e:
        p.error(str(e))
    try:
        batches = [int(b) for b in a.batches.split(",")]
    except ValueError:
        p.error(f"--batches takes comma-separated integers, got {a.batches!r}")
    if not a.no_smax and not Path(a.smax_python).exists():
        p.error(f"no SMAX venv at {a.smax_python}: run `make smax-venv` or pass --no-smax")

    rows = []
    for m in maps:
        for b in batches:
            rows.append(arena(m, b, a.seconds))
            print(json.dumps({"bench": "smac_throughput", **rows[-1]}), flush=True)
    shared = [m for m in maps if m in SMAX_MAPS]
    if not a.no_smax and shared:
        for row in smax(a.smax_python, shared, batches, a.smax_steps):
            rows.append(row)
            print(json.dumps({"bench": "smac_throughput", **row}), flush=True)
    ours = {(r["map"], r["batch"]): r["env_steps_per_s"] for r in rows if r["impl"] == "arena"}
    ratios = {}
    for r in rows:
        if r["impl"] == "smax":
            key = (r["map"], r["batch"])
            ratios[f"{key[0]}@{key[1]}"] = {
                "vs_smax_python_loop": round(ours[key] / r["env_steps_per_s"], 2),
                "vs_smax_scan": round(ours[key] / r["env_steps_per_s_scan"], 2),
            }
    summary = {"bench": "smac_throughput", "summary": "arena / smax", "ratios": ratios}
    print(json.dumps(summary), flush=True)
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text("".join(json.dumps(r) + "\n" for r in [*rows, summary]))
    os.replace(tmp, out)


if __name__ == "__main__":
    main()
