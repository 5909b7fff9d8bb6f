"""Cross-play (VolleyBots' ``train_psro_cross_play.py``): every pair of players plays
``games`` games, half with each player on each side, and the results give a win-rate matrix
and Elo ratings: VolleyBots' sequential Elo (start 1000, K 84, games taken in a seeded
interleaved order so no pair's games come in one block), which with K 84 moves a lot with the
order of the last games, and an order-free Bradley-Terry fit on the same scale.

The players are a self-play run's population members (or, for a run without a population,
its module ``near``) and, on ``volleyball/3v3-v0``, VolleyBots' released populations
(:mod:`policies.volleybots`): as in VolleyBots' cross-play each of those draws one member per
game from its meta-policy, and every game starts on the anchors (its ``init_on_the_spot``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from policies.selfplay.league import ELO_START, Population, bradley_terry, elo, play

VOLLEYBOTS_ENV = "volleyball/3v3-v0"


@dataclass(frozen=True)
class Player:
    """A name and the team it fields on a side (0 near, 1 far) for a seed."""

    name: str
    team: Callable[[int, int], object]


def run_players(run: Path) -> tuple[list[Player], str, dict]:
    """The players of a run (its population's members, else its module ``near``), its env
    and env options."""
    from policies.inference import ModulePolicy
    from training.checkpoints import RunError, load_config
    from training.evaluation import module_specs

    cfg = load_config(run)
    spec = module_specs(run).rl_module_specs["near"]
    pop_dir = run / "population"
    if (pop_dir / "league.json").exists():
        population = Population(pop_dir)

        def member(k: int) -> ModulePolicy:
            module = spec.build()
            module.load_state_dict(population.weights(k))
            return ModulePolicy(module)

        policies = [member(k) for k in range(population.size)]
        names = [str(k) for k in range(population.size)]
    else:
        from training.hierarchy.team import only_module

        try:
            policies = [only_module(run, "near")]
        except (RunError, KeyError, ValueError) as e:
            raise RunError(f"{run}: no population/ and no module 'near' to play ({e})") from None
        names = [run.name]
    players = [Player(n, lambda side, seed, p=p: p) for n, p in zip(names, policies, strict=True)]
    return players, cfg.env, dict(cfg.env_args)


def volleybots_players(names: Sequence[str]) -> list[Player]:
    from policies.volleybots import VolleyBotsTeam

    return [
        Player(f"volleybots:{n}", lambda side, seed, n=n: VolleyBotsTeam(n, side=side, seed=seed))
        for n in names
    ]


def crossplay(
    run: str | Path | None,
    games: int = 100,
    num_envs: int = 64,
    seed: int = 0,
    volleybots: Sequence[str] = (),
    out: str | Path | None = None,
) -> dict:
    """Cross-play of ``run``'s players and VolleyBots' populations ``volleybots``; the report
    goes to ``out`` (default ``RUN/crossplay.json``)."""
    from policies.volleybots import POPULATIONS
    from training.checkpoints import RunError, write_atomic

    unknown = [n for n in volleybots if n not in POPULATIONS]
    if unknown:
        raise RunError(
            f"unknown VolleyBots population(s) {unknown}; known: {', '.join(POPULATIONS)}"
        )
    players: list[Player] = []
    env, env_args = VOLLEYBOTS_ENV, {}
    if run is not None:
        run = Path(run)
        players, env, env_args = run_players(run)
        if (
            run.joinpath("population", "league.json").exists()
            and len(players) < 2
            and not volleybots
        ):
            raise RunError(f"{run}: the population has {len(players)} member; cross-play needs 2")
    n_run = len(players)
    if volleybots:
        if env != VOLLEYBOTS_ENV:
            raise RunError(f"VolleyBots' policies play {VOLLEYBOTS_ENV}; {run} trained on {env}")
        players += volleybots_players(volleybots)
        env_args = {**env_args, "start_noise": 0.0}  # VolleyBots' games start on the anchors
    if len(players) < 2:
        raise RunError("cross-play needs 2 players: a run with a population, or --volleybots")
    if out is None:
        if run is None:
            raise RunError("give --out for a cross-play of VolleyBots' populations alone")
        out = run / "crossplay.json"
    env_config = {**env_args, "random_serve": True}
    K = len(players)
    wins = np.zeros((K, K), int)
    draws = np.zeros((K, K), int)
    per_pair: dict[tuple[int, int], list[float]] = {}
    half = max(1, games // 2)
    for i in range(K):
        for j in range(i + 1, K):
            scores = []
            for near, far in ((i, j), (j, i)):
                match_seed = seed + 1000 * near + far
                out_ = play(
                    env,
                    players[near].team(0, match_seed),
                    players[far].team(1, match_seed + 1),
                    half,
                    num_envs=min(num_envs, half),
                    seed=match_seed,
                    env_config=env_config,
                )
                wins[near, far] += out_["wins"]
                wins[far, near] += out_["losses"]
                draws[i, j] += out_["draws"]
                scores += [(1.0 + r) / 2 if near == i else (1.0 - r) / 2 for r in out_["results"]]
            per_pair[(i, j)] = scores
    draws = draws + draws.T
    # Elo over every game, the pairs' games interleaved in a seeded order.
    order = [(i, j, s) for (i, j), scores in per_pair.items() for s in scores]
    np.random.default_rng(seed).shuffle(order)
    ratings = elo(order, K)
    decided = wins + wins.T
    fitted = bradley_terry(wins + draws / 2, decided + draws)
    win_rate = np.where(decided > 0, wins / np.maximum(decided, 1), np.nan)
    from policies.testing import wilson

    interval = [
        [None if i == j else [round(x, 4) for x in wilson(int(wins[i, j]), int(decided[i, j]))]
         for j in range(K)]
        for i in range(K)
    ]  # fmt: skip
    report = {
        "run": None if run is None else str(run),
        "env": env,
        "players": [p.name for p in players],
        "members": K,
        "games_per_pair": 2 * half,
        "start_noise": env_config.get("start_noise"),
        "win_rate": [
            [None if np.isnan(x) else round(float(x), 4) for x in row] for row in win_rate
        ],
        "win_rate_ci95": interval,
        "wins": wins.tolist(),
        "draws": draws.tolist(),
        "elo": [round(float(r), 1) for r in ratings],
        "elo_start": ELO_START,
        "elo_bradley_terry": [round(float(r), 1) for r in fitted],
    }
    if n_run >= 2:  # the run's latest member against its first
        last = n_run - 1
        report["latest_vs_first"] = {
            "win_rate": None if np.isnan(win_rate[last, 0]) else float(win_rate[last, 0]),
            "wins": int(wins[last, 0]),
            "losses": int(wins[0, last]),
            "draws": int(draws[last, 0]),
        }
    path = Path(out)
    write_atomic(path, json.dumps(report, indent=2))
    report["path"] = str(path)
    return report
