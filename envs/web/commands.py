"""``arena web traces``: teacher traces for behaviour cloning."""

from __future__ import annotations

import argparse

MAX_WORKERS = 64
"""Ray actors ``arena web traces`` may start (each holds its own browsers)."""


def register(sub: argparse._SubParsersAction) -> None:
    web = sub.add_parser("web", help="web environments: teacher traces")
    wsub = web.add_subparsers(dest="web_command", required=True)
    t = wsub.add_parser("traces", help="play teacher episodes and write them as JSONL")
    t.add_argument("--teacher", choices=["scripted", "openai"], default="scripted")
    t.add_argument(
        "--tasks",
        nargs="+",
        required=True,
        help="task names (click-test-2 ...) or env ids (web/click-test-2-v1)",
    )
    t.add_argument(
        "--backend",
        choices=["twin", "browser"],
        default="twin",
        help="for bare task names: websim/<task>-v0 (twin) or web/<task>-v1",
    )
    t.add_argument("--episodes", type=int, default=100, help="seeds per task")
    t.add_argument("--seed", type=int, default=0, help="first page seed")
    t.add_argument(
        "--error-rate",
        type=float,
        default=0.0,
        help="scripted teacher: chance of a random click instead of its action",
    )
    t.add_argument("--url", default="", help="openai teacher: base URL (…/v1)")
    t.add_argument("--model", default="", help="openai teacher: model name")
    t.add_argument("--temperature", type=float, default=0.25)
    t.add_argument(
        "--params",
        type=float,
        default=None,
        help="openai teacher: parameter count, to count its FLOPs",
    )
    t.add_argument("--workers", type=int, default=0, help="Ray actors to play in (0: here)")
    t.add_argument("--out", required=True, help="directory; traces.jsonl is appended to")
    t.set_defaults(arena_handler="envs.web.commands:traces")


def _env_ids(tasks: list[str], backend: str) -> list[str]:
    import envs

    out = []
    for t in tasks:
        env_id = t if "/" in t else (f"websim/{t}-v0" if backend == "twin" else f"web/{t}-v1")
        envs.spec(env_id)  # an unknown id is an EnvError naming the close ones
        out.append(env_id)
    return out


def traces(args) -> int:
    from pathlib import Path

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from envs.registry import EnvError
    from envs.web.teachers import experts
    from envs.web.traces import TeacherSpec, task_of, write_traces

    if args.episodes < 1:
        raise EnvError(f"--episodes must be >= 1, got {args.episodes}")
    if not 0.0 <= args.error_rate <= 1.0:
        raise EnvError(f"--error-rate must be in [0, 1], got {args.error_rate}")
    if not 0 <= args.workers <= MAX_WORKERS:
        raise EnvError(f"--workers must be in 0..{MAX_WORKERS} (0: play here), got {args.workers}")
    env_ids = _env_ids(args.tasks, args.backend)
    if args.teacher == "scripted":
        known = experts()
        missing = [e for e in env_ids if task_of(e) not in known]
        if missing:
            raise EnvError(
                f"no scripted expert for {', '.join(missing)}; experts exist for {', '.join(known)}"
            )
    elif not (args.url and args.model):
        raise EnvError("--teacher openai needs --url and --model")
    elif not args.url.startswith(("http://", "https://")):
        raise EnvError(f"--url must be an http:// or https:// URL (…/v1), got {args.url!r}")
    spec = TeacherSpec(
        args.teacher, args.error_rate, args.url, args.model, args.temperature, args.params
    )
    with Progress(
        TextColumn("traces"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("success {task.fields[rate]:.3f}"),
    ) as bar:
        job = bar.add_task("traces", total=None, rate=0.0)

        def progress(n, total, rate):
            bar.update(job, completed=n, total=total, rate=rate)

        result = write_traces(
            env_ids,
            args.episodes,
            Path(args.out),
            spec,
            seed=args.seed,
            workers=args.workers,
            progress=progress,
        )
    rate = result["successes"] / result["written"] if result["written"] else float("nan")
    print(
        f"{result['written']} episodes written ({result['skipped']} already there), "
        f"success {rate:.3f}: {result['path']}"
    )
    return 0
