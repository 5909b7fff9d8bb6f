"""``arena mmwalk generate`` and ``arena mmwalk stats``: the walking-assistance dataset."""

from __future__ import annotations

import argparse
import json


def register(sub: argparse._SubParsersAction) -> None:
    mm = sub.add_parser("mmwalk", help="mmWalk-style walking dataset: generate, stats")
    msub = mm.add_subparsers(dest="mmwalk_command", required=True)
    g = msub.add_parser(
        "generate", help="render trajectories (mmWalk's layout) and their VQA in parallel"
    )
    g.add_argument("--trajectories", type=int, default=7, help="categories in turn (7: one each)")
    g.add_argument("--out", required=True, help="dataset directory (a re-run resumes it)")
    g.add_argument("--size", default="1600x900", help="panorama WxH (mmWalk: 1600x900)")
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--max-frames", type=int, default=None, help="cap on frames per trajectory")
    g.add_argument(
        "--actors", type=int, default=None, help="Ray actors (default: one per CPU; 0: here)"
    )
    g.add_argument("--address", default=None, help="Ray cluster address (default: a local Ray)")
    g.set_defaults(arena_handler="envs.mmwalk.commands:generate")
    s = msub.add_parser("stats", help="summarise a dataset: counts per category, split, risk")
    s.add_argument("dir")
    s.add_argument("--json", action="store_true")
    s.set_defaults(arena_handler="envs.mmwalk.commands:stats")


def parse_size(text: str) -> tuple[int, int]:
    try:
        w, h = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise ValueError(f"--size {text!r}: write it as WIDTHxHEIGHT, e.g. 1600x900") from None
    return w, h


def generate(args) -> int:
    import os

    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    from envs.mmwalk.dataset import GenerateConfig
    from envs.mmwalk.dataset import generate as run

    actors = args.actors
    if actors is None:
        actors = min(args.trajectories, os.cpu_count() or 1)
    cfg = GenerateConfig(
        args.trajectories, parse_size(args.size), args.seed, args.max_frames, actors
    )
    with Progress(
        TextColumn("frames"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn()
    ) as bar:
        job = bar.add_task("frames", total=None)
        manifest = run(
            cfg,
            args.out,
            args.address,
            progress=lambda n, total: bar.update(job, completed=n, total=total),
        )
    frames = sum(t["frames"] for t in manifest["trajectories"])
    questions = sum(sum(c.values()) for c in manifest["questions"].values())
    print(
        f"{len(manifest['trajectories'])} trajectories, {frames} frames, {frames * 9} "
        f"panoramas, {questions} questions: {args.out}"
    )
    return 0


def stats(args) -> int:
    from envs.mmwalk.dataset import stats as count

    s = count(args.dir)
    if args.json:
        print(json.dumps(s, indent=1))
        return 0
    print(
        f"{args.dir}: {sum(s['trajectories'].values())} trajectories, {s['frames_total']} "
        f"frames, {s['panoramas']} panoramas"
    )
    for cat, n in sorted(s["trajectories"].items()):
        print(f"  {cat:11s} {n:3d} trajectories {s['frames'][cat]:6d} frames")
    for split, per in s["questions"].items():
        print(
            f"  {split:5s} questions: "
            + ", ".join(f"{c} {n}" for c, n in per.items())
            + f" ({sum(per.values())})"
        )
    print("  risk (frames): " + ", ".join(f"{k} {v}" for k, v in sorted(s["risk_frames"].items())))
    print("  weather (frames): " + ", ".join(f"{k} {v}" for k, v in s["weather_frames"].items()))
    print(
        "  corner cases (frames): "
        + (", ".join(f"{k} {v}" for k, v in s["corner_case_frames"].items()) or "none")
    )
    print(
        "  landmarks seen by the walker (frames): "
        + ", ".join(f"{k} {v}" for k, v in s["landmark_frames_walker"].items())
    )
    if s["unfinished"]:
        print(f"  unfinished (a re-run of generate resumes them): {', '.join(s['unfinished'])}")
    return 0
