"""Cross-play of a self-play run's population (VolleyBots' ``train_psro_cross_play.py``):
every pair of members plays ``games`` games, half with each member on each side, and the
results give a win-rate matrix and Elo ratings: VolleyBots' sequential Elo (start 1000, K 84,
games taken in a seeded interleaved order so no pair's games come in one block), which with K
84 moves a lot with the order of the last games, and an order-free Bradley-Terry fit on the
same scale."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from policies.selfplay.league import ELO_START, Population, bradley_terry, elo, play


def crossplay(run: str | Path, games: int = 100, num_envs: int = 64, seed: int = 0) -> dict:
    from policies.inference import ModulePolicy
    from training.checkpoints import RunError, load_config, write_atomic
    from training.evaluation import module_specs

    run = Path(run)
    cfg = load_config(run)
    pop_dir = run / "population"
    if not (pop_dir / "league.json").exists():
        raise RunError(f"{run}: no population/ (cross-play needs a run of --algo selfplay)")
    population = Population(pop_dir)
    if population.size < 2:
        raise RunError(f"{run}: the population has {population.size} member; cross-play needs 2")
    spec = module_specs(run).rl_module_specs["near"]

    def member(k: int) -> ModulePolicy:
        module = spec.build()
        module.load_state_dict(population.weights(k))
        return ModulePolicy(module)

    members = [member(k) for k in range(population.size)]
    env_config = {"random_serve": True, **cfg.env_args}
    K = population.size
    wins = np.zeros((K, K), int)
    draws = np.zeros((K, K), int)
    per_pair: dict[tuple[int, int], list[float]] = {}
    half = max(1, games // 2)
    for i in range(K):
        for j in range(i + 1, K):
            scores = []
            for near, far in ((i, j), (j, i)):
                out = play(
                    cfg.env,
                    members[near],
                    members[far],
                    half,
                    num_envs=min(num_envs, half),
                    seed=seed + 1000 * near + far,
                    env_config=env_config,
                )
                wins[near, far] += out["wins"]
                wins[far, near] += out["losses"]
                draws[i, j] += out["draws"]
                scores += [(1.0 + r) / 2 if near == i else (1.0 - r) / 2 for r in out["results"]]
            per_pair[(i, j)] = scores
    draws = draws + draws.T
    # Elo over every game, the pairs' games interleaved in a seeded order.
    order = [(i, j, s) for (i, j), scores in per_pair.items() for s in scores]
    np.random.default_rng(seed).shuffle(order)
    ratings = elo(order, K)
    decided = wins + wins.T
    fitted = bradley_terry(wins + draws / 2, decided + draws)
    win_rate = np.where(decided > 0, wins / np.maximum(decided, 1), np.nan)
    report = {
        "run": str(run),
        "env": cfg.env,
        "members": K,
        "games_per_pair": 2 * half,
        "win_rate": [
            [None if np.isnan(x) else round(float(x), 4) for x in row] for row in win_rate
        ],
        "wins": wins.tolist(),
        "draws": draws.tolist(),
        "elo": [round(float(r), 1) for r in ratings],
        "elo_start": ELO_START,
        "elo_bradley_terry": [round(float(r), 1) for r in fitted],
        "latest_vs_first": {
            "win_rate": None if np.isnan(win_rate[K - 1, 0]) else float(win_rate[K - 1, 0]),
            "wins": int(wins[K - 1, 0]),
            "losses": int(wins[0, K - 1]),
            "draws": int(draws[K - 1, 0]),
        },
    }
    path = run / "crossplay.json"
    write_atomic(path, json.dumps(report, indent=2))
    report["path"] = str(path)
    return report
