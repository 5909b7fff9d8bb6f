"""Throughput of the walking simulator's renderer and of the dataset builder.

    .venv/bin/python bench/mmwalk_throughput.py [--size 1600x900] [--frames 10] [--actors 1 2]

Prints one JSON object: per view and modality, panoramas per second on one core (rendering
the cube faces and stitching, PNG encoding not included) at ``--size``; the whole frame
(3 views x 3 modalities, encoded and written) per second; ``mmwalk/navigate-v0`` at
``--env-size`` (its observation frames per second, rendering alone, and env steps per
second with random actions, traffic and rules included); and for each actor count, frames
per second of ``arena mmwalk generate`` (one trajectory per actor, ``--frames`` frames each,
Ray start-up excluded). Single-threaded (OMP_NUM_THREADS=1).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MUJOCO_GL", "egl")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from envs.mmwalk import dataset, render, scene, walk  # noqa: E402
from envs.mmwalk.commands import parse_size  # noqa: E402


def per_view(size, repeats: int) -> dict:
    s = scene.build("Mixed", 0, weather="sunny")
    pano = render.Panoramas(s, size, size[0] // 4)
    poses = walk.walk(s)
    traffic = walk.Traffic(s, poses)
    out = {}
    try:
        for view in render.VIEW_FACES:
            pano.table(view)  # the stitch table is built once, on first use: not timed
            for m in render.MODALITIES:
                start = time.perf_counter()
                for k in range(repeats):
                    p = poses[10 * k]
                    pano.place((p.x, p.y), p.yaw, traffic.state)
                    pano.view(view, (m,))
                out[f"{view}/{m}"] = round(repeats / (time.perf_counter() - start), 2)
    finally:
        pano.close()
    return out


def navigate(size: int, steps: int) -> dict:
    from envs.mmwalk.navigate import NavigateBatch

    core = NavigateBatch(1, seed=0, size=size, scenes=4)
    core.reset(seed=0)
    place = core.place(int(core.place_of[0]))
    start = time.perf_counter()
    for _ in range(steps):
        place.pano.faces("walker", "rgb", ("front",))
    render_fps = steps / (time.perf_counter() - start)
    rng = np.random.default_rng(0)
    start = time.perf_counter()
    for _ in range(steps):
        core.step({"walker": rng.integers(5, size=(1, 1))})
    env_sps = steps / (time.perf_counter() - start)
    core.close()
    return {
        "size": size,
        "frames_per_s": round(render_fps, 1),
        "env_steps_per_s": round(env_sps, 1),
    }


def builder(size, frames: int, actors: list[int]) -> dict:
    import ray

    out = {}
    for n in actors:
        ray.init(address="local", num_cpus=n, include_dashboard=False, log_to_driver=False)
        try:
            with tempfile.TemporaryDirectory() as d:
                cfg = dataset.GenerateConfig(n, size, seed=0, max_frames=frames, actors=n)
                ray.get([ray.remote(lambda: 0).remote() for _ in range(n)])  # workers up
                start = time.perf_counter()
                dataset.generate(cfg, d)
                elapsed = time.perf_counter() - start
        finally:
            ray.shutdown()
        out[str(n)] = {
            "frames": n * frames,
            "seconds": round(elapsed, 1),
            "frames_per_s": round(n * frames / elapsed, 3),
        }
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", default="1600x900")
    p.add_argument("--repeats", type=int, default=5, help="panoramas per view and modality")
    p.add_argument("--frames", type=int, default=10, help="frames per trajectory (builder)")
    p.add_argument("--actors", type=int, nargs="*", default=[1, 2])
    p.add_argument("--env-size", type=int, default=84)
    p.add_argument("--env-steps", type=int, default=1000)
    args = p.parse_args()
    size = parse_size(args.size)
    result = {"size": list(size), "panoramas_per_s": per_view(size, args.repeats)}
    with tempfile.TemporaryDirectory() as d:
        job = dataset.Job("Mixed01", "Mixed", 0)
        start = time.perf_counter()
        dataset.record(job, Path(d), size, args.frames)
        result["frames_per_s_one_core_written"] = round(
            args.frames / (time.perf_counter() - start), 3
        )
    result["navigate"] = navigate(args.env_size, args.env_steps)
    if args.actors:
        result["builder"] = builder(size, args.frames, args.actors)
    result["cpus"] = os.cpu_count()
    print(json.dumps(result))


if __name__ == "__main__":
    np.set_printoptions(precision=3)
    main()
