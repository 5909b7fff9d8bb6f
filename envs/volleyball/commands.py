"""``arena volleyball demos``: serve demonstrations from the planner (``envs.volleyball.planner``)
for a PPO run to start from (``--set demos=FILE``)."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    v = sub.add_parser("volleyball", help="drone volleyball: serve demonstrations")
    vsub = v.add_subparsers(dest="volleyball_command", required=True)
    d = vsub.add_parser(
        "demos",
        help="plan serves for volleyball/serve-v0 and write the successful episodes (.npz)",
        description="Plans serves with the cross-entropy method and writes the successful "
        "episodes: obs, act (rotor commands), reward, episode. Written after every batch; "
        "run the same command again to go on from where it stopped.",
    )
    d.add_argument("--episodes", type=int, default=400, help="serves to try (default 400)")
    d.add_argument("--batch", type=int, default=16, help="starts planned together (default 16)")
    d.add_argument("--seed", type=int, default=0)
    d.add_argument("--workers", type=int, default=1, help="processes planning batches (default 1)")
    d.add_argument("--out", required=True, help="the .npz file")
    d.set_defaults(arena_handler="envs.volleyball.commands:demos")


def demos(args) -> int:
    import numpy as np
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from envs.demos import DEMO_KEYS, load_demos, save_demos
    from envs.registry import EnvError
    from envs.volleyball.planner import ServePlanner

    if min(args.episodes, args.batch, args.workers) < 1:
        raise ValueError(
            f"--episodes, --batch and --workers must be >= 1, got {args.episodes}, "
            f"{args.batch}, {args.workers}"
        )
    out = Path(args.out)
    if out.suffix != ".npz":
        raise ValueError(f"--out must end in .npz, got {out}")
    out.parent.mkdir(parents=True, exist_ok=True)
    planner = ServePlanner(seed=args.seed)
    data = {k: [] for k in DEMO_KEYS}
    done = succeeded = episodes = 0
    if out.exists():
        old = load_demos(out)
        if int(old.get("seed", -1)) != args.seed:
            raise EnvError(
                f"{out} was planned with seed {int(old.get('seed', -1))}, not {args.seed}"
            )
        planner.nominal = old["nominal"]
        done, succeeded = int(old["batches"]), int(old["succeeded"])
        episodes = int(old["episode"].max()) + 1 if len(old["episode"]) else 0
        for k in DEMO_KEYS:
            data[k].append(old[k])
    batches = -(-args.episodes // args.batch)
    columns = (
        TextColumn("serves"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[ok]}"),
        TimeElapsedColumn(),
    )
    with Progress(*columns) as bar:
        job = bar.add_task("serves", total=batches * args.batch, completed=done * args.batch, ok="")
        if planner.nominal is None:
            bar.update(job, ok="searching the nominal serve")
            planner.find_nominal()
        parts = _plan(planner, args.batch, range(done, batches), args.workers)
        for b, part in zip(range(done, batches), parts, strict=True):
            part["episode"] = part["episode"] + episodes
            episodes += int(part["succeeded"])
            succeeded += int(part["succeeded"])
            for k in DEMO_KEYS:
                data[k].append(part[k])
            merged = {k: np.concatenate(v) for k, v in data.items()}
            save_demos(
                out,
                {
                    **merged,
                    "nominal": planner.nominal,
                    "batches": b + 1,
                    "succeeded": succeeded,
                    "seed": args.seed,
                },
            )
            bar.update(job, advance=args.batch, ok=f"{succeeded} succeeded")
    tried = batches * args.batch
    print(
        f"{out}: {succeeded} of {tried} planned serves succeeded "
        f"({succeeded / tried:.0%}), {sum(len(x) for x in data['obs'])} steps"
    )
    return 0


def _plan(planner, starts: int, batches: range, workers: int):
    """The demonstrations of each batch, in order (planned by ``workers`` processes)."""
    if workers == 1:
        yield from (planner.demonstrate(starts, b) for b in batches)
        return
    from concurrent.futures import ProcessPoolExecutor
    from functools import partial

    with ProcessPoolExecutor(workers) as pool:
        yield from pool.map(partial(planner.demonstrate, starts), batches)
