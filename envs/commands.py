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

    # Ids are what users copy: never cut them; the other columns fold on a narrow terminal.
    width = max(len(r["id"]) for r in rows)
    table = Table(
        Column("id", no_wrap=True, min_width=width),
        *(Column(name, overflow="fold") for name in ("agents", "observation", "action", "core")),
    )
    for r in rows:
        obs = sorted(set(r["observation_spaces"].values()))
        act = sorted(set(r["action_spaces"].values()))
        table.add_row(
            r["id"],
            str(len(r["agents"])),
            " / ".join(obs),
            " / ".join(act),
            "batched" if r["vectorised_core"] else "",
        )
    Console().print(table)
    return 0
