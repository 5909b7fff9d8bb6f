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
    g.add_argument(
        "--camera-origin",
        default="actor",
        choices=["actor", "ground"],
        help="actor: mmWalk's cameras, 0.9 m above the nominal heights (CARLA's walker root); "
        "ground: walker 1.5 m, dog 0.1 m, drone 3 m above the surface",
    )
    g.set_defaults(arena_handler="envs.mmwalk.commands:generate")
    s = msub.add_parser("stats", help="summarise a dataset: counts per category, split, risk")
    s.add_argument("dir")
    s.add_argument("--json", action="store_true")
    s.set_defaults(arena_handler="envs.mmwalk.commands:stats")
    e = msub.add_parser("eval-vqa", help="score VQA predictions per category and scenario")
    e.add_argument("predictions", help="a directory of <category>.jsonl, or one JSONL file")
    e.add_argument("dataset")
    e.add_argument("--split", default="test", choices=["train", "val", "test"])
    e.add_argument(
        "--judge", default="overlap", help="free text: overlap, openai, or module:function"
    )
    e.add_argument("--judge-url", default="", help="openai judge: base URL (.../v1)")
    e.add_argument("--judge-model", default="", help="openai judge: model name")
    e.add_argument(
        "--judge-max-tokens", type=int, default=0, help="openai judge: reply cap (0: none)"
    )
    e.add_argument(
        "--score",
        default="exact",
        choices=["exact", "judge"],
        help="exact: match exact answers, judge free text; judge: judge every answer (mmWalk's)",
    )
    e.add_argument("--samples", default=None, help="write the scored samples here (JSONL)")
    e.add_argument("--json", action="store_true")
    e.set_defaults(arena_handler="envs.mmwalk.commands:eval_vqa")
    b = msub.add_parser("baseline", help="predictions from train answers: majority or random")
    b.add_argument("kind", choices=["majority", "random"])
    b.add_argument("dataset")
    b.add_argument("--out", required=True, help="directory for <category>.jsonl")
    b.add_argument("--split", default="test", choices=["train", "val", "test"])
    b.add_argument("--seed", type=int, default=0)
    b.set_defaults(arena_handler="envs.mmwalk.commands:baseline")


def parse_size(text: str) -> tuple[int, int]:
    from envs.registry import EnvError

    try:
        w, h = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise EnvError(f"--size {text[:40]!r}: write it as WIDTHxHEIGHT, e.g. 1600x900") from None
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
        args.trajectories,
        parse_size(args.size),
        args.seed,
        args.max_frames,
        actors,
        args.camera_origin,
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


def eval_vqa(args) -> int:
    from envs.mmwalk import scoring

    judge = scoring.load_judge(args.judge, args.judge_url, args.judge_model, args.judge_max_tokens)
    result = scoring.evaluate(args.predictions, args.dataset, args.split, judge, args.score)
    samples = result.pop("samples")
    if args.samples:
        with open(args.samples, "w") as fh:
            fh.writelines(json.dumps(s) + "\n" for s in samples)
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    print(
        f"{args.predictions} on {args.dataset} ({args.split}, {len(samples)} questions; "
        "score = (mean - 1) / 4 x 100 of 1-5 scores)"
    )
    for title, rows in (("category", result["per_category"]), ("scenario", result["per_scenario"])):
        print(
            f"  {title:10s}  "
            + "  ".join(f"{k} {v['standardized_score']:5.1f}" for k, v in rows.items())
        )
    print(f"  overall     {result['overall']['standardized_score']:.1f}")
    return 0


def baseline(args) -> int:
    from envs.mmwalk import scoring

    out = scoring.baseline(args.dataset, args.kind, args.out, args.split, args.seed)
    print(f"{args.kind} predictions for {args.split}: {out}")
    return 0
