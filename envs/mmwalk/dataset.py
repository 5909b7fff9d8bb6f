"""An mmWalk-layout dataset: trajectories rendered in parallel by Ray actors, then VQA.

Layout (mmWalk's, KediYing/mmWalk, so its readers open ours unchanged)::

    DIR/QAFrames/<Category><NN>/{walker,dog,drone}/{rgb,depth,semantic}/NNNNNN.png
    DIR/QAFrames/<Category><NN>/imu/NNNNNN.txt       Accelerometer / Gyroscope / Compass lines
    DIR/QAFrames/<Category><NN>/action/NNNNNN.txt    W: 0|1, A:, S:, D: lines
    DIR/QAFrames/<Category><NN>/Json/NNNNNN.json     per-frame metadata (the ground truth)
    DIR/{train,val,test}_data_chat/{E1,...,H2}.jsonl  the questions, split by trajectory
    DIR/dataset.json                                  what was asked for and what is there
    DIR/generate.json                                 how the frames are rendered (size, cameras)

Nothing is lost when a run is killed: every file is written under a temporary name and moved
into place, a frame's Json is written last (a frame with its Json is complete), a trajectory
is renamed from ``.<name>.partial`` to ``<name>`` when its last frame is in, and a re-run
skips finished trajectories and finished frames (rendering is deterministic per seed).
"""

from __future__ import annotations

import json
import math
import os
import shutil
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from envs.files import write_atomic
from envs.mmwalk import render
from envs.mmwalk.scene import CATEGORIES, build
from envs.mmwalk.walk import (
    Traffic,
    action_name,
    action_text,
    corner_cases,
    imu,
    imu_text,
    risk,
    visible_objects,
    walk,
)
from envs.registry import EnvError

FRAMES = "QAFrames"
SPLITS = {"train": 93, "val": 15, "test": 12}  # mmWalk's trajectories per split


@dataclass(frozen=True)
class Job:
    """One trajectory to record."""

    name: str
    category: str
    seed: int


@dataclass
class GenerateConfig:
    """``arena mmwalk generate``'s settings.

    Args:
        trajectories: how many; categories in turn (Busstop, Corner, ...), so 7 makes one each.
        size: panorama width and height (mmWalk: 1600 x 900); cube faces are width / 4.
        seed: the first trajectory's seed (trajectory k has seed + k).
        max_frames: cap on frames per trajectory (None: the whole walk).
        actors: Ray actors rendering in parallel (0: in this process).
        camera_origin: ``actor`` (mmWalk's cameras: offsets from the CARLA walker's root, 0.9 m
            above its feet) or ``ground`` (the offsets as heights above the surface).
    """

    trajectories: int = 7
    size: tuple[int, int] = render.PANORAMA
    seed: int = 0
    max_frames: int | None = None
    actors: int = 0
    camera_origin: str = "actor"

    # Bounds far above mmWalk's own (120 trajectories of 1600 x 900), below what exhausts a
    # machine: each actor is a process with its renderer, each panorama w x h x 9 images.
    MAX_TRAJECTORIES = 10_000
    MAX_SIZE = (8192, 4096)
    MAX_FRAMES = 100_000
    MAX_ACTORS = 1024

    def __post_init__(self):
        w, h = self.size
        if not 1 <= self.trajectories <= self.MAX_TRAJECTORIES:
            raise EnvError(
                f"--trajectories must be in 1..{self.MAX_TRAJECTORIES}, got {self.trajectories}"
            )
        if not (64 <= w <= self.MAX_SIZE[0] and 32 <= h <= self.MAX_SIZE[1]) or w % 4:
            raise EnvError(
                f"--size {w}x{h}: width in 64..{self.MAX_SIZE[0]} and a multiple of 4, height "
                f"in 32..{self.MAX_SIZE[1]}"
            )
        if self.max_frames is not None and not 1 <= self.max_frames <= self.MAX_FRAMES:
            raise EnvError(f"--max-frames must be in 1..{self.MAX_FRAMES}, got {self.max_frames}")
        if not 0 <= self.actors <= self.MAX_ACTORS:
            raise EnvError(f"--actors must be in 0..{self.MAX_ACTORS}, got {self.actors}")
        render.check_camera_origin(self.camera_origin, "--camera-origin")

    @property
    def face(self) -> int:
        return self.size[0] // 4


def jobs(cfg: GenerateConfig) -> list[Job]:
    counts: Counter = Counter()
    out = []
    for k in range(cfg.trajectories):
        category = CATEGORIES[k % len(CATEGORIES)]
        counts[category] += 1
        out.append(Job(f"{category}{counts[category]:02d}", category, cfg.seed + k))
    return out


def frames_of(job: Job, max_frames: int | None) -> int:
    return len(walk(build(job.category, job.seed))[:max_frames])


def frames_on_disk(root: Path) -> int:
    """Finished frames under ``root/QAFrames`` (a frame is finished when its Json is there)."""
    return sum(1 for _ in (root / FRAMES).glob("*/Json/*.json"))


def record(
    job: Job,
    root: Path,
    size: tuple[int, int],
    max_frames: int | None,
    on_frame: Callable[[], None] | None = None,
    camera_origin: str = "actor",
) -> dict:
    """Renders and writes trajectory ``job`` under ``root/QAFrames``; returns its summary.
    Finished trajectories and frames are skipped."""
    frames_dir = root / FRAMES
    final = frames_dir / job.name
    if (final / "trajectory.json").exists():
        return json.loads((final / "trajectory.json").read_text())
    work = frames_dir / f".{job.name}.partial"
    for stale in work.rglob(".*.tmp"):  # a killed run's half-written files (envs.files)
        stale.unlink(missing_ok=True)
    scene = build(job.category, job.seed)
    poses = walk(scene)[:max_frames]
    traffic = Traffic(scene, poses)
    width, height = size
    min_pixels = max(3, round(100 * width * height / (1600 * 900)))
    for view in render.VIEW_FACES:
        for m in render.MODALITIES:
            (work / view / m).mkdir(parents=True, exist_ok=True)
    for sub in ("imu", "action", "Json"):
        (work / sub).mkdir(parents=True, exist_ok=True)
    pano = None
    try:
        for i, pose in enumerate(poses):
            movers = traffic.state
            meta_path = work / "Json" / f"{i:06d}.json"
            if not meta_path.exists():
                if pano is None:
                    pano = render.Panoramas(scene, size, width // 4, camera_origin)
                meta = _frame(job, scene, pano, poses, i, movers, work, min_pixels)
                write_atomic(meta_path, json.dumps(meta))
                if on_frame:
                    on_frame()
            traffic.step(pose)
    finally:
        if pano is not None:
            pano.close()
    summary = {
        "trajectory": job.name,
        "category": job.category,
        "seed": job.seed,
        "weather": scene.weather,
        "frames": len(poses),
        "size": list(size),
        "camera_origin": camera_origin,
        "route": scene.route,
        "hazards": [h.case for h in scene.hazards],
        "landmarks": sorted({t.landmark for t in scene.landmarks()}),
    }
    write_atomic(work / "trajectory.json", json.dumps(summary, indent=1))
    if final.exists():  # a stale copy without its trajectory.json
        shutil.rmtree(final)
    os.replace(work, final)
    return summary


def _frame(job, scene, pano, poses, i, movers, work: Path, min_pixels: int) -> dict:
    pose = poses[i]
    pano.place((pose.x, pose.y), pose.yaw, movers)
    name = f"{i:06d}"
    views, objects = {}, {}
    for view in render.VIEW_FACES:
        out = pano.view(view)
        views[view] = {}
        for m in render.MODALITIES:
            rel = f"{view}/{m}/{name}.png"
            render.write_png(work / rel, render.encode(m, out[m]))
            views[view][m] = rel
        objects[view] = visible_objects(scene, out["geom"], pano.owner, pose, movers, min_pixels)
    record_imu = imu(poses, i)
    write_atomic(work / "imu" / f"{name}.txt", imu_text(record_imu))
    write_atomic(work / "action" / f"{name}.txt", action_text(pose.keys))
    cases = corner_cases(scene, pose)
    return {
        "trajectory": job.name,
        "frame": name,
        "scenario": job.category,
        "views": views,
        "weather": scene.weather.capitalize(),
        "action": action_name(pose.keys),
        "keys": {k: int(k in pose.keys) for k in "WASD"},
        "imu": record_imu,
        "pose": {
            "x": round(pose.x, 3),
            "y": round(pose.y, 3),
            "yaw_deg": round(math.degrees(pose.yaw), 2),
        },
        "corner_cases": cases,
        "risk": risk(scene.weather, cases),
        "pedestrian_light": scene.pedestrian_light or None,
        "objects": objects,
    }


def split_of(names: list[str], seed: int = 0) -> dict[str, str]:
    """Trajectory -> train/val/test in mmWalk's proportions (93/15/12); with three or more
    trajectories val and test get at least one each."""
    order = sorted(names)
    np.random.default_rng(seed).shuffle(order)
    n = len(order)
    total = sum(SPLITS.values())
    test = round(n * SPLITS["test"] / total)
    val = round(n * SPLITS["val"] / total)
    if n >= 3:
        test, val = max(test, 1), max(val, 1)
    out = {}
    for k, name in enumerate(order):
        out[name] = "test" if k < test else "val" if k < test + val else "train"
    return out


def generate(
    cfg: GenerateConfig,
    out: str | Path,
    address: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> dict:
    """Records ``cfg.trajectories`` trajectories into ``out`` (resuming what is there) on
    ``cfg.actors`` Ray actors (of the cluster at ``address``, else a local Ray), then writes
    the VQA files and ``dataset.json``. ``progress(frames done, frames in all)`` is called as
    frames land."""
    from envs.mmwalk import vqa

    root = Path(out)
    cpus = os.cpu_count() or 1
    if cfg.actors > cpus and not address:  # a local Ray would start them all regardless
        raise EnvError(f"--actors {cfg.actors}: this machine has {cpus} CPUs (at most {cpus})")
    (root / FRAMES).mkdir(parents=True, exist_ok=True)
    _claim(root, cfg)
    todo = jobs(cfg)
    total = sum(frames_of(j, cfg.max_frames) for j in todo)
    done = []

    def tick():
        if progress:
            progress(min(frames_on_disk(root), total), total)

    tick()
    for summary in _run(todo, root, cfg, address, tick):
        done.append(summary)
        tick()
    done.sort(key=lambda s: s["trajectory"])
    splits = split_of([s["trajectory"] for s in done], cfg.seed)
    questions = vqa.write(root, splits, seed=cfg.seed)
    manifest = {
        "config": {**asdict(cfg), "size": list(cfg.size)},
        "trajectories": done,
        "splits": splits,
        "questions": questions,
    }
    write_atomic(root / "dataset.json", json.dumps(manifest, indent=1))
    return manifest


def _claim(root: Path, cfg: GenerateConfig) -> None:
    """Writes how ``root``'s frames are rendered (``generate.json``), or refuses to resume a
    dataset whose frames were rendered otherwise: one dataset never mixes two renderings."""
    path = root / "generate.json"
    wanted = {"size": list(cfg.size), "camera_origin": cfg.camera_origin}
    if path.exists():
        had = json.loads(path.read_text())
    elif (root / "dataset.json").exists():  # written before generate.json, or by hand
        config = json.loads((root / "dataset.json").read_text())["config"]
        had = {"size": config["size"], "camera_origin": config.get("camera_origin", "ground")}
    else:
        write_atomic(path, json.dumps(wanted))
        return
    if had != wanted:
        raise EnvError(
            f"{root} holds frames rendered with --size {had['size'][0]}x{had['size'][1]} "
            f"--camera-origin {had['camera_origin']}; resume it with those, or give a new --out"
        )


def _run(
    todo: list[Job], root: Path, cfg: GenerateConfig, address: str | None, tick: Callable[[], None]
) -> Iterator[dict]:
    if cfg.actors == 0:
        for job in todo:
            yield record(job, root, cfg.size, cfg.max_frames, tick, cfg.camera_origin)
        return
    import ray

    if not ray.is_initialized():
        if address:
            ray.init(address=address, log_to_driver=False)
        else:
            ray.init(
                address="local", num_cpus=cfg.actors, include_dashboard=False, log_to_driver=False
            )
    cpus = ray.cluster_resources().get("CPU", 0)
    if cfg.actors > cpus:
        raise EnvError(f"{cfg.actors} actors need {cfg.actors} CPUs; Ray has {cpus:g}")
    worker = ray.remote(num_cpus=1, max_restarts=1)(_Recorder)
    actors = [
        worker.remote(str(root.resolve()), cfg.size, cfg.max_frames, cfg.camera_origin)
        for _ in range(cfg.actors)
    ]
    queue, running, free = list(todo), {}, list(actors)
    try:
        while queue or running:
            while queue and free:
                actor, job = free.pop(), queue.pop(0)
                running[actor.record.remote(job)] = (actor, job)
            ready, _ = ray.wait(list(running), num_returns=1, timeout=2.0)
            tick()
            if not ready:
                continue
            actor, job = running.pop(ready[0])
            free.append(actor)
            try:
                yield ray.get(ready[0])
            except ray.exceptions.RayActorError:
                queue.append(job)  # the actor restarts; its frames on disk are kept
    finally:
        for a in actors:
            ray.kill(a)


class _Recorder:
    """A Ray actor recording trajectories into one dataset directory."""

    def __init__(self, root: str, size, max_frames, camera_origin: str):
        os.environ.setdefault("MUJOCO_GL", "egl")
        self.root, self.size, self.max_frames = Path(root), tuple(size), max_frames
        self.camera_origin = camera_origin

    def record(self, job: Job) -> dict:
        return record(job, self.root, self.size, self.max_frames, None, self.camera_origin)


def stats(root: str | Path) -> dict:
    """Counts of a dataset: trajectories, frames and questions per category and split, the
    landmarks seen, corner cases and risk levels over the frames."""
    root = Path(root)
    if not (root / FRAMES).is_dir():
        raise FileNotFoundError(f"{root}: no {FRAMES}/ here (not an mmWalk dataset)")
    trajectories = sorted(
        p for p in (root / FRAMES).iterdir() if p.is_dir() and not p.name.startswith(".")
    )
    per_category: Counter = Counter()
    frames: Counter = Counter()
    landmarks: Counter = Counter()
    cases: Counter = Counter()
    levels: Counter = Counter()
    weather: Counter = Counter()
    for t in trajectories:
        metas = sorted((t / "Json").glob("*.json"))
        category = t.name.rstrip("0123456789ABC")
        per_category[category] += 1
        frames[category] += len(metas)
        for path in metas:
            meta = json.loads(path.read_text())
            weather[meta["weather"]] += 1
            levels[meta["risk"]["level"]] += 1
            cases.update(meta["corner_cases"])
            landmarks.update({o["landmark"] for o in meta["objects"]["walker"] if o["landmark"]})
    questions = {}
    for split in SPLITS:
        d = root / f"{split}_data_chat"
        if d.is_dir():
            questions[split] = {p.stem: sum(1 for _ in p.open()) for p in sorted(d.glob("*.jsonl"))}
    partial = [p.name for p in (root / FRAMES).iterdir() if p.name.startswith(".")]
    return {
        "trajectories": dict(per_category),
        "frames": dict(frames),
        "frames_total": sum(frames.values()),
        "panoramas": sum(frames.values()) * 9,
        "questions": questions,
        "weather_frames": dict(weather),
        "risk_frames": dict(levels),
        "corner_case_frames": dict(cases),
        "landmark_frames_walker": dict(landmarks.most_common()),
        "unfinished": partial,
    }
