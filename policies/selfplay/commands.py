"""``arena crossplay RUN``: the population of a self-play run played against itself."""

from __future__ import annotations

import argparse
import json


def register(sub: argparse._SubParsersAction) -> None:
    c = sub.add_parser(
        "crossplay", help="play a self-play run's population members against each other (Elo)"
    )
    c.add_argument("run", help="a run directory of --algo selfplay")
    c.add_argument("--games", type=int, default=100, help="games per pair of members")
    c.add_argument("--num-envs", type=int, default=64)
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--json", action="store_true")
    c.set_defaults(arena_handler="policies.selfplay.commands:run")


def run(args) -> int:
    from policies.selfplay.crossplay import crossplay
    from training.config import ConfigError

    if args.games < 2 or args.num_envs < 1:
        raise ConfigError("--games must be >= 2 and --num-envs >= 1")
    report = crossplay(args.run, args.games, args.num_envs, args.seed)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    from rich.console import Console
    from rich.table import Table

    k = report["members"]
    table = Table(
        "member",
        "Elo (K 84)",
        "Bradley-Terry",
        *[f"vs {j}" for j in range(k)],
        title=f"{report['env']}: win rate of row against column (draws apart)",
    )
    for i in range(k):
        cells = ["-" if x is None else f"{x:.0%}" for x in report["win_rate"][i]]
        table.add_row(
            str(i), f"{report['elo'][i]:.0f}", f"{report['elo_bradley_terry'][i]:.0f}", *cells
        )
    Console().print(table)
    last = report["latest_vs_first"]
    print(
        f"latest member vs first: {last['wins']} wins, {last['losses']} losses, {last['draws']} draws"
        f"  ->  {report['path']}"
    )
    return 0
