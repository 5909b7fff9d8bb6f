"""``arena sweep`` and ``arena report`` (registered by the CLI; see :mod:`arena.cli`)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    from tune.sweeps import SWEEPS

    s = sub.add_parser(
        "sweep",
        help="run a Tune sweep (seeds, sensitivity, compute_allocation, hypermarl)",
        description="Run a sweep of Arena runs as Ray Tune trials; --watch follows a running one.",
    )
    s.add_argument("name", nargs="?", choices=list(SWEEPS), help="the sweep (tune/sweeps/)")
    s.add_argument("--samples", type=int, help="seeds (seeds), configurations (the others)")
    s.add_argument(
        "--max-concurrent",
        type=int,
        default=None,
        help="trials at once (default: CPUs; kept for --resume)",
    )
    s.add_argument("--address", help="Ray cluster address (default: RAY_ADDRESS or embedded)")
    s.add_argument("--out", help="sweep directory (default: sweeps/<name>-<time>)")
    s.add_argument("--resume", action="store_true", help="go on with the sweep in --out")
    s.add_argument("--set", action="append", metavar="KEY=VALUE", help="a sweep setting")
    s.add_argument("--watch", metavar="SWEEP_DIR", help="show a running sweep's trials, live")
    s.add_argument("--interval", type=float, default=2.0, help="--watch: seconds between draws")
    s.set_defaults(arena_handler="tune.commands:run_sweep_command")

    r = sub.add_parser(
        "report",
        help="tables, bootstrap intervals and plots of a sweep",
        description="Write a sweep's report: Markdown and a self-contained HTML page.",
    )
    r.add_argument("sweep_dir")
    r.add_argument("--out", help="the HTML report (default: SWEEP_DIR/report/report.html)")
    r.set_defaults(arena_handler="tune.commands:run_report_command")


def run_sweep_command(args) -> int:
    import time
    from pathlib import Path

    from training.config import ConfigError, parse_overrides

    if args.watch:
        from tune.watch import watch

        return watch(Path(args.watch), args.interval)
    if args.resume and not args.out:
        raise ConfigError("--resume needs --out SWEEP_DIR (the sweep to go on with)")
    if not (args.name or args.resume):
        raise ConfigError("sweep needs a NAME (seeds, sensitivity, compute_allocation, hypermarl)")
    from tune.results import MAX_CONCURRENT

    k = args.max_concurrent
    if k is not None and not 0 <= k <= MAX_CONCURRENT:
        raise ConfigError(f"--max-concurrent must be in 0..{MAX_CONCURRENT} (0: CPUs), got {k}")
    values = dict(parse_overrides(args.set or []))
    if args.samples is not None:
        values["samples"] = args.samples  # bounded with the sweep's settings (make_sweep)
    out = Path(args.out or f"sweeps/{args.name}-{time.strftime('%Y%m%d-%H%M%S')}")
    from tune.runner import run_sweep

    sweep_dir = run_sweep(
        args.name,
        values,
        out,
        resume=args.resume,
        address=args.address,
        max_concurrent=args.max_concurrent,
    )
    print(f"sweep: {sweep_dir}  (arena report {sweep_dir})")
    return 0


def run_report_command(args) -> int:
    from pathlib import Path

    from tune.report import write_report

    html = write_report(Path(args.sweep_dir), Path(args.out) if args.out else None)
    print(f"report: {html}  (and {html.with_suffix('.md')})")
    return 0
