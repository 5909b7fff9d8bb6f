"""The pieces of population self-play, after VolleyBots (``volley_bots/utils/psro/``,
``scripts/train_psro*.py``, ``utils/volleyball/elopy.py``):

* the freezing rule: the last ``window`` training win rates have mean >= 0.9 and std <=
  0.02 after at least ``min_iterations`` (or the member has trained ``max_iterations``);
* meta-solvers over the population: ``sp`` (the latest member), ``fsp`` (uniform), ``nash``
  (the Nash equilibrium of the symmetric zero-sum game on the payoff matrix, as PSRO-Nash);
* the payoff of member i against j: 2 wr - 1 with wr = wins / (wins + losses), draws ignored;
* Elo: start 1000, expected score 1 / (1 + 10^((Rb - Ra) / 400)), K = 84, a draw scores 0.5;
* :class:`Population`: members' weights and the payoff matrix on disk, written atomically,
  so a resumed run keeps its population;
* :func:`play`: games between two modules on a batched two-team env (``near`` against
  ``far``).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

from envs.files import replacing, write_atomic

META_SOLVERS = ("sp", "fsp", "nash")
ELO_START, ELO_K = 1000.0, 84.0


def should_freeze(
    win_rates: list[float],
    iterations: int,
    window: int = 10,
    threshold: float = 0.9,
    max_std: float = 0.02,
    min_iterations: int = 50,
    max_iterations: int = 5000,
) -> bool:
    """VolleyBots' convergence rule for the member being trained."""
    if iterations > max_iterations:
        return True
    recent = win_rates[-window:]
    return (
        iterations >= min_iterations
        and len(recent) == window
        and float(np.mean(recent)) >= threshold
        and float(np.std(recent)) <= max_std
    )


def nash(payoff: np.ndarray) -> np.ndarray:
    """The maximin mixture of the symmetric zero-sum game whose row player gets ``payoff``
    (antisymmetric, ``[K, K]``): maximise v subject to payoff^T x >= v, x in the simplex."""
    from scipy.optimize import linprog

    k = payoff.shape[0]
    if k == 1:
        return np.ones(1)
    # Variables (x_1..x_k, v); minimise -v.
    c = np.r_[np.zeros(k), -1.0]
    a_ub = np.c_[-payoff.T, np.ones(k)]  # v - (payoff^T x)_j <= 0
    res = linprog(
        c,
        A_ub=a_ub,
        b_ub=np.zeros(k),
        A_eq=np.r_[np.ones(k), 0.0][None],
        b_eq=[1.0],
        bounds=[(0, None)] * k + [(None, None)],
        method="highs",
    )
    x = np.clip(res.x[:k], 0.0, None) if res.success else np.ones(k)
    return x / x.sum()


def meta_strategy(solver: str, payoff: np.ndarray) -> np.ndarray:
    """The distribution over the K members that opponents are drawn from."""
    k = payoff.shape[0]
    if solver == "sp":
        return np.eye(k)[-1]
    if solver == "fsp":
        return np.full(k, 1.0 / k)
    if solver == "nash":
        return nash(payoff)
    raise ValueError(f"unknown meta_solver {solver!r}; allowed: {', '.join(META_SOLVERS)}")


def payoff_value(wins: int, losses: int) -> float:
    """2 wr - 1 with wr = wins / (wins + losses); 0 when every game was drawn."""
    return 0.0 if wins + losses == 0 else 2.0 * wins / (wins + losses) - 1.0


def elo(games: list[tuple[int, int, float]], players: int) -> np.ndarray:
    """Ratings after ``games`` ``(a, b, score of a)`` in order (1 win, 0.5 draw, 0 loss)."""
    rating = np.full(players, ELO_START)
    for a, b, score in games:
        expected = 1.0 / (1.0 + 10 ** ((rating[b] - rating[a]) / 400.0))
        rating[a] += ELO_K * (score - expected)
        rating[b] -= ELO_K * (score - expected)
    return rating


def bradley_terry(scores: np.ndarray, games: np.ndarray, iterations: int = 2000) -> np.ndarray:
    """Order-free ratings: the Bradley-Terry fit (minorisation-maximisation, as OpenSpiel's
    ``elo.py``) of ``scores[i, j]`` (i's wins over j, draws counted half) out of ``games[i, j]``,
    with 0.01 of a game of smoothing per pair, on Elo's scale (400 log10), mean 1000."""
    k = len(scores)
    pair = ~np.eye(k, dtype=bool)
    w = scores + 0.01 * pair
    n = games + 0.02 * pair
    strength = np.ones(k)
    for _ in range(iterations):
        denom = (n / (strength[:, None] + strength[None, :])).sum(1)
        strength = w.sum(1) / np.maximum(denom, 1e-12)
        strength /= np.exp(np.log(strength).mean())
    return ELO_START + 400 * np.log10(strength)


class Population:
    """Frozen members (``member_<k>.pt``, plain state dicts) and ``league.json`` (the payoff
    matrix and the trainer's counters) in one directory."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        meta = self.root / "league.json"
        data = json.loads(meta.read_text()) if meta.exists() else {}
        rows = data.get("payoff", [])
        self.payoff = np.asarray(rows, float).reshape(len(rows), len(rows))
        self.state: dict = data.get("state", {})
        self.size = len(self.payoff)

    def weights(self, k: int) -> dict:
        return torch.load(self.root / f"member_{k}.pt", map_location="cpu", weights_only=True)

    def add(self, weights: dict, payoff_row: np.ndarray) -> int:
        """Adds a member whose payoff against members 0..K-1 is ``payoff_row``; returns k."""
        k = self.size
        path = self.root / f"member_{k}.pt"
        with replacing(path) as tmp:
            torch.save({n: t.detach().cpu().clone() for n, t in weights.items()}, tmp)
        grown = np.zeros((k + 1, k + 1))
        grown[:k, :k] = self.payoff
        grown[k, :k], grown[:k, k] = payoff_row, -np.asarray(payoff_row)
        self.payoff, self.size = grown, k + 1
        self.save()
        return k

    def save(self) -> None:
        write_atomic(
            self.root / "league.json",
            json.dumps({"payoff": self.payoff.tolist(), "state": self.state}, indent=1),
        )


def play(
    env_id: str,
    near,
    far,
    games: int,
    *,
    num_envs: int = 64,
    seed: int = 0,
    explore: bool = True,
    env_config: dict | None = None,
    max_steps: int = 200_000,
) -> dict:
    """``games`` games of module ``near`` (the near team) against ``far`` (the far team).

    Both are :class:`policies.inference.ModulePolicy` or have its ``act_group`` (and may have
    ``episodes_ended(mask)``, told which worlds' games ended); each acts for its whole team,
    sampling its actions unless ``explore`` is false. Returns wins, losses and draws of
    ``near`` and the list of results (+1 near won, -1 lost, 0 draw) in the order the games
    ended.
    """
    import envs

    torch.manual_seed(seed)  # sampled actions: the same games for the same seed
    core = envs.make_vector(env_id, num_envs, seed=seed, **dict(env_config or {}))
    step = core.reset()
    policies = {"near": near, "far": far}
    results: list[int] = []
    for _ in range(max_steps):
        actions = {}
        for team, policy in policies.items():
            actions[team], _ = policy.act_group(step.obs[team], explore=explore)
        step = core.step(actions)
        ended = step.terminated | step.truncated
        for policy in policies.values():  # a population team draws a member per game
            if hasattr(policy, "episodes_ended"):
                policy.episodes_ended(ended)
        if ended.any():
            results += [int(r) for r in step.info["result"][ended]]
            if len(results) >= games:
                break
    results = results[:games]
    return {
        "wins": results.count(1),
        "losses": results.count(-1),
        "draws": results.count(0),
        "results": results,
    }
