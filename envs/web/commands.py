"""``arena web traces``: teacher traces for behaviour cloning; ``arena web prm-data``: step
labels, checklists and preference pairs for a process reward model (:mod:`envs.web.prm`)."""

from __future__ import annotations

import argparse

MAX_WORKERS = 64
"""Ray actors ``arena web traces`` may start (each holds its own browsers)."""


def register(sub: argparse._SubParsersAction) -> None:
    web = sub.add_parser("web", help="web environments: teacher traces, reward-model data")
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
    p = wsub.add_parser(
        "prm-data",
        help="label teacher episodes step by step; write checklists and preference pairs",
    )
    p.add_argument(
        "--tasks",
        nargs="+",
        default=[],
        help="twin tasks or flows (login-user, flow-search ...) or env ids; web/ ids use their twin",
    )
    p.add_argument("--episodes", type=int, default=20, help="seeds per task")
    p.add_argument("--seed", type=int, default=0, help="first page seed")
    p.add_argument(
        "--error-rate",
        type=float,
        default=0.1,
        help="the scripted teacher's chance of a random click (as arena web traces)",
    )
    p.add_argument(
        "--traces", default="", help="label the episodes of this traces.jsonl instead of playing"
    )
    p.add_argument("--rejected", type=int, default=3, help="rejected actions per state")
    p.add_argument("--pair-seed", type=int, default=0, help="seed of the rejected actions' draw")
    p.add_argument("--out", required=True, help="directory; its four files are replaced")
    p.set_defaults(arena_handler="envs.web.commands:prm_data")


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


def prm_data(args) -> int:
    from pathlib import Path

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from envs.registry import EnvError
    from envs.web.prm import build, read_traces, teacher_policy, twin_id
    from envs.web.traces import task_of

    if args.episodes < 1:
        raise EnvError(f"--episodes must be >= 1, got {args.episodes}")
    if not 0.0 <= args.error_rate <= 1.0:
        raise EnvError(f"--error-rate must be in [0, 1], got {args.error_rate}")
    if args.rejected < 0:
        raise EnvError(f"--rejected must be >= 0, got {args.rejected}")
    if args.traces:
        path = Path(args.traces)
        if not path.is_file():
            raise EnvError(f"no traces file {path}")
        episodes = list(read_traces(path))
        wanted = {twin_id(e) for e in _env_ids(args.tasks, "twin")} if args.tasks else None
        episodes = [e for e in episodes if wanted is None or twin_id(e[0]) in wanted]
    elif not args.tasks:
        raise EnvError("give --tasks (to play the scripted teacher) or --traces")
    else:
        env_ids = [twin_id(e) for e in _env_ids(args.tasks, "twin")]
        episodes = [
            (e, s, teacher_policy(task_of(e), args.error_rate, s))
            for e in env_ids
            for s in range(args.seed, args.seed + args.episodes)
        ]
    for env_id in {twin_id(e) for e, _, _ in episodes}:
        import envs

        envs.spec(env_id)  # a web/ task without a twin is an EnvError naming the close ones
    with Progress(TextColumn("prm-data"), BarColumn(), MofNCompleteColumn()) as bar:
        job = bar.add_task("prm-data", total=len(episodes))
        summary = build(
            episodes,
            Path(args.out),
            rejected=args.rejected,
            pair_seed=args.pair_seed,
            progress=lambda n: bar.update(job, completed=n),
        )
    share = summary["advancing"] / summary["steps"] if summary["steps"] else float("nan")
    print(
        f"{summary['episodes']} episodes ({summary['skipped']} the expert cannot solve), "
        f"{summary['steps']} steps, {share:.3f} advancing, {summary['records']} states with "
        f"{summary['pairs']} preference pairs in {summary['seconds']:.1f} s: {args.out}"
    )
    return 0
