"""Claus & Boutilier's climbing and penalty games as a vectorised NumPy core and its
PettingZoo face.

Sources. C. Claus and C. Boutilier, "The Dynamics of Reinforcement Learning in Cooperative
Multiagent Systems", AAAI 1998: Table 3 is the climbing game, Table 4 the penalty game with
its parameter ``k < 0``. Agent 0 picks the row (a, b, c), agent 1 the column::

    climbing            penalty
     11  -30    0        10    0    k
    -30    7    6         0    2    0
      0    0    5         k    0   10

The climbing game's unique optimum (a, a) = 11 sits beside two -30s; the penalty game's two
optima (a, a) = (c, c) = 10 sit beside k (miscoordination), and (b, b) = 2 is safe. The same
tables, in the same orientation, are the ``create_climbing_game`` and ``create_penalty_game``
in bbrighttaer/NIQL ``niql/envs/matrix_games.py`` (which says it follows
semitable/matrix-games). semitable/matrix-games itself (``matrixgames/__init__.py``, used by
EPyMARL) registers the penalty game for ``k`` in {0, -25, -50, -75, -100} with the actions
relabelled (its climbing table is Table 3 transposed, the agents' roles swapped; its penalty
table has a and c swapped for both agents): the same games. ``k = -100``, the heaviest of
those, is the default here (and that of this repository's test games, ``tests/masked_env``).

The episode is one joint action (``episode_limit = 1``) for a reward both agents share, as in
the one-step matrix game of oxwhirl/wqmix (``src/envs/matrix_game/matrix_game_simple.py``:
``episode_limit = 1``, ``terminated = True`` after the step). The observation and the state
are that file's constant (there ``np.ones(5)``, here ``[1.0]``): nothing about the game is
hidden, so the value learner sees one situation, the value of each action against its
partner's play. A normal-form game has no randomness: every seed gives the same episode.
"""

from __future__ import annotations

from dataclasses import dataclass

import gymnasium as gym
import numpy as np

from envs.vector import CoreEnv, VectorEnv, VectorStep, single_group

CLIMBING = ((11.0, -30.0, 0.0), (-30.0, 7.0, 6.0), (0.0, 0.0, 5.0))
"""Claus & Boutilier (1998), Table 3."""


def penalty(k: float = -100.0) -> tuple[tuple[float, ...], ...]:
    """Claus & Boutilier (1998), Table 4, with miscoordination penalty ``k``."""
    return ((10.0, 0.0, float(k)), (0.0, 2.0, 0.0), (float(k), 0.0, 10.0))


@dataclass
class ClimbingOptions:
    """The climbing game has no parameters."""

    def payoff(self) -> np.ndarray:
        return np.asarray(CLIMBING, np.float32)


@dataclass
class PenaltyOptions:
    """The penalty game's parameter."""

    k: float = -100.0
    """The payoff of (a, c) and (c, a): Claus & Boutilier's k, a penalty (at most 0)."""

    def __post_init__(self):
        k = self.k
        if isinstance(k, bool) or not isinstance(k, int | float) or not -1e9 <= k <= 0:
            raise ValueError(f"k must be a number in -1e9..0 (a penalty), got {k!r}")

    def payoff(self) -> np.ndarray:
        return np.asarray(penalty(self.k), np.float32)


class MatrixGameBatch(VectorEnv):
    """B copies of a two-agent, one-step cooperative matrix game.

    Args:
        num_envs: B. seed: unused (the game has no randomness); taken for the interface.
        auto_reset: start the next episode inside ``step`` (the training sampler's contract);
            the PettingZoo face turns it off.
        options: the game's (:class:`ClimbingOptions` or :class:`PenaltyOptions`).
    """

    OPTIONS: type = ClimbingOptions
    OBS = np.ones(1, np.float32)

    def __init__(self, num_envs: int, seed: int | None = None, auto_reset: bool = True, **options):
        self.options = self.OPTIONS(**options)
        self.payoff = self.options.payoff()
        self.num_envs, self.auto_reset = num_envs, auto_reset
        self.agents = ("agent_0", "agent_1")
        n_actions = self.payoff.shape[0]
        self.groups = single_group(
            self.agents,
            gym.spaces.Box(0.0, 1.0, self.OBS.shape, np.float32),
            gym.spaces.Discrete(n_actions),
        )
        self.state_space = gym.spaces.Box(0.0, 1.0, self.OBS.shape, np.float32)
        self.last = np.full((num_envs, 2), -1, np.int64)  # the last joint action (render)

    def _obs(self) -> np.ndarray:
        return np.broadcast_to(self.OBS, (self.num_envs, 2, self.OBS.size)).copy()

    def reset(self, seed: int | None = None) -> VectorStep:
        B = self.num_envs
        self.last[:] = -1
        obs = self._obs()
        zeros, no = np.zeros((B, 2), np.float32), np.zeros(B, bool)
        state = obs[:, 0].copy()
        return VectorStep({"agent": obs}, state, {}, zeros, no, no.copy(), {"agent": obs}, state)

    def step(self, actions: dict[str, np.ndarray]) -> VectorStep:
        a = np.asarray(actions["agent"], np.int64).reshape(self.num_envs, 2)
        n = self.payoff.shape[0]
        if a.min() < 0 or a.max() >= n:
            raise ValueError(f"actions are 0..{n - 1}, got {a.min()}..{a.max()}")
        self.last[:] = a
        team = self.payoff[a[:, 0], a[:, 1]]
        rewards = np.repeat(team[:, None], 2, axis=1).astype(np.float32)
        obs = self._obs()
        state = obs[:, 0].copy()
        B = self.num_envs
        done, no = np.ones(B, bool), np.zeros(B, bool)
        return VectorStep({"agent": obs}, state, {}, rewards, done, no, {"agent": obs}, state)


class ClimbingBatch(MatrixGameBatch):
    """The climbing game (Claus & Boutilier 1998, Table 3)."""

    OPTIONS = ClimbingOptions


class PenaltyBatch(MatrixGameBatch):
    """The penalty game (Claus & Boutilier 1998, Table 4) with its ``k``."""

    OPTIONS = PenaltyOptions


class MatrixGameEnv(CoreEnv):
    """The PettingZoo face of one copy (B = 1) of a :class:`MatrixGameBatch`: agents
    ``agent_0`` (the row) and ``agent_1`` (the column), ``Discrete(3)`` actions, observation
    ``[1.0]``, both rewarded the payoff of their joint action; the episode ends after it."""

    core_class: type = ClimbingBatch
    options: type = ClimbingOptions
    metadata = {"name": "matrix", "render_modes": ["rgb_array"], "is_parallelizable": True}

    def render(self, cell: int = 16) -> np.ndarray:
        """The payoff table as a grid of cells, green for positive payoffs and red for
        negative ones (brighter the larger), the last joint action's cell outlined white."""
        payoff = self.core.payoff
        n = payoff.shape[0]
        scale = float(np.abs(payoff).max()) or 1.0
        img = np.zeros((n * cell, n * cell, 3), np.uint8)
        for i in range(n):
            for j in range(n):
                v = payoff[i, j] / scale
                colour = (int(200 * -v), 0, 0) if v < 0 else (0, int(60 + 195 * v), 0)
                img[i * cell + 1 : (i + 1) * cell - 1, j * cell + 1 : (j + 1) * cell - 1] = colour
        i, j = self.core.last[0]
        if i >= 0:
            box = img[i * cell : (i + 1) * cell, j * cell : (j + 1) * cell]
            box[[0, -1], :] = 255
            box[:, [0, -1]] = 255
        return img


class ClimbingEnv(MatrixGameEnv):
    """``matrix/climbing-v0``."""

    core_class, options = ClimbingBatch, ClimbingOptions
    metadata = {**MatrixGameEnv.metadata, "name": "climbing"}


class PenaltyEnv(MatrixGameEnv):
    """``matrix/penalty-v0`` (``k``: the miscoordination penalty, default -100)."""

    core_class, options = PenaltyBatch, PenaltyOptions
    metadata = {**MatrixGameEnv.metadata, "name": "penalty"}
