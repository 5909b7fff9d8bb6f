"""``arena envs``: every env id with its agents and spaces."""

from __future__ import annotations

import argparse
import json


def register(sub: argparse._SubParsersAction) -> None:
    e = sub.add_parser("envs", help="list every env id with its agents and spaces")
    e.add_argument("--json", action="store_true")
    e.add_argument("--no-cache", action="store_true", help="rebuild every env to read its spaces")
    e.set_defaults(arena_handler="envs.commands:run")


def run(args) -> int:
    from envs.summary import summaries

    rows = summaries(use_cache=not args.no_cache)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    from rich.console import Console
    from rich.table import Column, Table

    console = Console()
    # Ids are what users copy: never cut them. The other columns wrap between words; a narrow
    # terminal (80 columns) gets the table without its box, so each row stays a line or two.
    width = max(len(r["id"]) for r in rows)
    narrow = console.width < 110
    names = (
        ("n", "obs", "act", "fast") if narrow else ("agents", "observation", "action", "batched")
    )
    table = Table(
        Column("id", no_wrap=True, min_width=width),
        *(Column(name) for name in names),
        box=None if narrow else Table().box,
        padding=(0, 1, 0, 0) if narrow else (0, 1),
        show_edge=not narrow,
    )
    for r in rows:
        obs = sorted({_masked(space) for space in r["observation_spaces"].values()})
        act = sorted(set(r["action_spaces"].values()))
        table.add_row(
            r["id"],
            str(len(r["agents"])),
            " / ".join(obs),
            " / ".join(act),
            "yes" if r["vectorised_core"] else "",
        )
    console.print(table)
    return 0


def _masked(space: str) -> str:
    """``Box(30,) masked`` for ``Dict(action_mask: Box(9,), observations: Box(30,))``."""
    head, mark, rest = space.partition("observations: ")
    if head.startswith("Dict(action_mask:") and mark:
        return f"{rest.removesuffix(')')} masked"
    return space
