"""Renders one mmWalk frame's nine panoramas as pictures for docs/mmwalk.md: RGB as it is,
semantic in CARLA's palette, depth on a log scale (the dataset stores class ids and metres x 256).

    MUJOCO_GL=egl .venv/bin/python bench/mmwalk_frames.py --out docs/img/mmwalk \\
        --category Cross --seed 4 --frame 150

Prints JSON: the frame's pose, its views' camera heights above the walker's feet and the files.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import numpy as np

os.environ.setdefault("MUJOCO_GL", "egl")

from envs.mmwalk import render  # noqa: E402
from envs.mmwalk.scene import build  # noqa: E402
from envs.mmwalk.tags import colorize  # noqa: E402
from envs.mmwalk.walk import Traffic, walk  # noqa: E402


def log_depth(depth: np.ndarray, far: float = 100.0) -> np.ndarray:
    """Metres to 0-255, log-scaled from 0.5 m to ``far`` (unrendered and sky: black)."""
    d = np.clip(depth, 0.5, far)
    img = 255 * (1 - np.log(d / 0.5) / np.log(far / 0.5))
    return np.where((depth > 0) & (depth < far), img, 0).astype(np.uint8)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--category", default="Cross")
    p.add_argument("--seed", type=int, default=4)
    p.add_argument("--frame", type=int, default=150)
    p.add_argument("--size", default="640x360")
    p.add_argument("--camera-origin", default="actor", choices=render.CAMERA_ORIGINS)
    args = p.parse_args()
    w, h = (int(v) for v in args.size.split("x"))
    scene = build(args.category, args.seed)
    poses = walk(scene)
    if not 0 <= args.frame < len(poses):
        raise SystemExit(f"--frame {args.frame}: this walk has frames 0..{len(poses) - 1}")
    traffic = Traffic(scene, poses)
    for pose in poses[: args.frame]:
        traffic.step(pose)
    pose = poses[args.frame]
    pano = render.Panoramas(scene, (w, h), w // 4, args.camera_origin)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    files = []
    try:
        pano.place((pose.x, pose.y), pose.yaw, traffic.state)
        feet = pano.ground((pose.x, pose.y))
        heights = {
            view: round(float(pano.data.mocap_pos[mocap][2] - feet), 3)
            for view, mocap in pano.rigs.items()
        }
        for view in render.VIEW_FACES:
            views = pano.view(view)
            pictures = {
                "rgb": views["rgb"],
                "semantic": colorize(views["semantic"]),
                "depth": log_depth(views["depth"]),
            }
            for modality, img in pictures.items():
                path = out / f"{view}_{modality}.png"
                render.write_png(path, img)
                files.append(str(path))
    finally:
        pano.close()
    print(
        json.dumps(
            {
                "category": args.category,
                "seed": args.seed,
                "frame": args.frame,
                "weather": scene.weather,
                "pose": {"x": round(pose.x, 2), "y": round(pose.y, 2)},
                "camera_origin": args.camera_origin,
                "heights_above_feet": heights,
                "files": files,
            }
        )
    )


if __name__ == "__main__":
    main()
