"""ODIS's grid cooperative navigation (``grid_mpe``) as a vectorised NumPy core and its
PettingZoo face.

Source: github.com/LAMDA-RL/ODIS at 81b6538, ``src/envs/grid_mpe/grid_mpe.py`` (the env,
cited ``gm:`` with the method) and ``utils.py`` (the matching), with ``src/config/envs/
cn_offline.yaml`` and ``cn_collect.yaml`` (``default_task: True``: a map's numbers come from
the env's ``map_config`` table, :data:`MAPS`).

- A map (``map_config``): ``n_agents`` agents and as many landmarks on a ``field_size`` grid,
  positions ``[row, col]``; the ``sight`` and ``episode_limit`` below; ``reach_range`` 2.
- Reset (gm ``reset``, ``spawn_players``, ``spawn_landmarks``): each agent on a uniformly drawn
  free cell, then each landmark on a uniformly drawn cell that holds no landmark or agent and
  lies out of every agent's reach (more than ``reach_range`` cells away in rows or columns).
- Actions (gm ``Action``): 0 stay, 1 north ``[-1, 0]``, 2 south ``[+1, 0]``, 3 west ``[0, -1]``,
  4 east ``[0, +1]``; the mask allows stay and the moves that stay on the grid
  (``_is_valid_action``), and a masked move is played as stay (gm ``step``).
- A step (gm ``step``): every agent targets a cell (its own when it stays); agents whose target
  no other agent targets move there, the others stay where they are. Agents pass through each
  other and landmarks, and two can end on one cell (a stayer whose cell was contested keeps it
  while an agent moves onto the cell it would have left: upstream's rule, kept).
- Success (gm ``_succeed`` and ``utils.matched``): every landmark is within ``reach_range``
  (in rows and in columns) of an agent of its own: a perfect matching of landmarks to agents
  over those pairs (upstream: Munkres on costs 1 and 10, success when the total is N; here
  ``scipy.optimize.linear_sum_assignment`` on the same costs). The team reward is 1 on the
  step of success, else 0, the same for every agent; success ends the episode (terminated,
  ``battle_won`` true), the ``episode_limit``-th step without it truncates it.
- Observation (gm ``get_obs_agent``): the agent's position, then every other agent's, then
  every landmark's, each ``[row + 1, col + 1]``, an entity out of ``sight`` (more than
  ``sight`` cells away in rows or columns) as ``[0, 0]``: ``2 * (N + N)`` numbers. On ODIS's
  maps the sight spans the grid, so every entity is seen.
- State (gm ``get_state``): every agent's then every landmark's ``[row + 1, col + 1]``.

Differences from upstream, none of which a policy can see: the draws come from NumPy
Generators seeded per world, not the global ``np.random``; upstream also keeps an agent off
the cell the agent held in the last episode while it places the agents one by one (its
``_is_empty_location`` reads the stale positions), and here the agents take distinct free
cells of the empty grid; where the agents leave fewer free cells out of their reach than there
are landmarks (upstream gives up after 1,000 draws and fails on the missing landmark), the
agents are drawn again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import gymnasium as gym
import numpy as np
from gymnasium.utils import seeding
from scipy.optimize import linear_sum_assignment

from envs.vector import CoreEnv, VectorEnv, VectorStep, single_group


class GridMap(NamedTuple):
    n_agents: int  # and as many landmarks
    field_size: tuple[int, int]  # rows, columns
    sight: int
    episode_limit: int


# ODIS's map_config (gm, module level)
MAPS = {
    name: GridMap(*row)
    for name, row in {
        "cn-2": (2, (6, 6), 5, 50),
        "cn-3": (3, (8, 8), 7, 50),
        "cn-4": (4, (10, 10), 9, 50),
        "cn-5": (5, (12, 12), 11, 50),
        "cn-6": (6, (15, 15), 14, 50),
        "cn-7": (7, (15, 15), 14, 70),
        "cn-8": (8, (15, 15), 14, 70),
        "cn-9": (9, (15, 15), 14, 70),
        "cn-10": (10, (15, 15), 14, 70),
        "cn-11": (11, (18, 18), 17, 70),
        "cn-12": (12, (18, 18), 17, 70),
        "cn-15": (15, (20, 20), 19, 80),
    }.items()
}
REACH = 2  # reach_range, the same on every map
MOVES = np.array([[0, 0], [-1, 0], [1, 0], [0, -1], [0, 1]], np.int64)  # gm Action
N_ACTIONS = 5


@dataclass
class GridSpreadOptions:
    """The arguments of ``gridmpe/cn-v0``."""

    map_name: str = "cn-2"
    """ODIS's task: cn-2 .. cn-12 or cn-15 (agents, grid, sight and limit from its table)."""

    def __post_init__(self):
        if self.map_name not in MAPS:
            raise ValueError(f"map_name {self.map_name!r} is not one of ODIS's: {', '.join(MAPS)}")

    @property
    def map(self) -> GridMap:
        return MAPS[self.map_name]


def covered(agents: np.ndarray, landmarks: np.ndarray) -> np.ndarray:
    """``[..., L, N]`` whether landmark l is within reach of agent n (gm ``_within_reach``)."""
    gap = np.abs(landmarks[..., :, None, :] - agents[..., None, :, :])
    return (gap <= REACH).all(-1)


def matched(reach: np.ndarray) -> bool:
    """Whether every landmark can have an agent of its own in reach (ODIS's ``matched``:
    the least total cost with cost 1 in reach and 10 out of it is N)."""
    cost = np.where(reach, 1, 10)
    rows, cols = linear_sum_assignment(cost)
    return int(cost[rows, cols].sum()) == reach.shape[0]


class GridSpreadBatch(VectorEnv):
    """B grids of ODIS's cooperative navigation stepped in array operations (the module
    docstring has the rules); only resets and the matching of worlds whose every landmark is
    in some agent's reach loop over worlds.

    Args:
        num_envs: B.
        seed: world i is first reset with ``seed + i``.
        auto_reset: reset a world inside ``step`` when its episode ends (the training
            sampler's contract); off for the PettingZoo face.
        options: :class:`GridSpreadOptions`.
    """

    def __init__(self, num_envs: int, seed: int | None = None, auto_reset: bool = True, **options):
        self.options = GridSpreadOptions(**options)
        self.map = o = self.options.map
        self.num_envs, self.auto_reset, self._seed = num_envs, auto_reset, seed
        self.n = o.n_agents
        self.shape = np.array(o.field_size, np.int64)
        self.agents = tuple(f"agent_{i}" for i in range(self.n))
        self.obs_dim = 4 * self.n
        high = float(max(o.field_size))
        self.groups = single_group(
            self.agents,
            gym.spaces.Box(0.0, high, (self.obs_dim,), np.float32),
            gym.spaces.Discrete(N_ACTIONS),
            masked=True,
        )
        self.state_space = gym.spaces.Box(1.0, high, (self.obs_dim,), np.float32)
        B = num_envs
        self.agent_pos = np.zeros((B, self.n, 2), np.int64)
        self.landmark_pos = np.zeros((B, self.n, 2), np.int64)
        self.steps = np.zeros(B, np.int64)
        self._rngs: list[np.random.Generator] = []
        rows, cols = o.field_size
        self._cells = np.stack(np.divmod(np.arange(rows * cols), cols), -1)  # [cells, 2]
        # agent i sees itself, the other agents in order, then the landmarks (gm get_obs_agent)
        n = self.n
        self._seen = np.array([[i] + [j for j in range(2 * n) if j != i] for i in range(n)])

    # -- reset ----------------------------------------------------------------------------------

    def _reset_worlds(self, idx) -> None:
        cols = self.map.field_size[1]
        for i in idx:
            rng = self._rngs[i]
            while True:
                agents = self._cells[rng.choice(len(self._cells), self.n, replace=False)]
                free = ~covered(agents, self._cells).any(-1)  # out of every agent's reach
                if free.sum() >= self.n:
                    break
            # one landmark at a time on a uniform free cell, as upstream's rejection draws
            cells = rng.choice(np.flatnonzero(free), self.n, replace=False)
            self.agent_pos[i] = agents
            self.landmark_pos[i] = np.stack(np.divmod(cells, cols), -1)
        self.steps[idx] = 0

    def reset(self, seed: int | None = None) -> VectorStep:
        """Resets every world; a seed reseeds (world i with ``seed + i``), no seed goes on
        with the worlds' own Generators (seeded from the constructor's seed at first)."""
        if seed is not None or not self._rngs:
            s = self._seed if seed is None else seed
            self._rngs = [
                seeding.np_random(None if s is None else s + i)[0] for i in range(self.num_envs)
            ]
        self._reset_worlds(range(self.num_envs))
        B = self.num_envs
        obs, state, mask = self._observe()
        zeros, no = np.zeros((B, self.n), np.float32), np.zeros(B, bool)
        return VectorStep(
            {"agent": obs}, state, {"agent": mask}, zeros, no, no.copy(), {"agent": obs.copy()},
            state.copy(),
        )  # fmt: skip

    # -- a step ---------------------------------------------------------------------------------

    def step(self, actions: dict[str, np.ndarray]) -> VectorStep:
        B = self.num_envs
        a = np.asarray(actions["agent"], np.int64).reshape(B, self.n)
        if a.min() < 0 or a.max() >= N_ACTIONS:
            raise ValueError(f"actions are 0..{N_ACTIONS - 1}, got {a.min()}..{a.max()}")
        target = self.agent_pos + MOVES[a]
        on_grid = ((target >= 0) & (target < self.shape)).all(-1)
        target = np.where(on_grid[..., None], target, self.agent_pos)  # a masked move: stay
        same = (target[:, :, None] == target[:, None, :]).all(-1)  # [B, N, N]
        alone = same.sum(-1) == 1
        self.agent_pos = np.where(alone[..., None], target, self.agent_pos)
        won = self._success()
        self.steps += 1
        truncated = ~won & (self.steps >= self.map.episode_limit)
        ended = won | truncated
        obs, state, mask = self._observe()
        final_obs, final_state = obs, state
        if self.auto_reset and ended.any():
            final_obs, final_state = obs.copy(), state.copy()
            self._reset_worlds(np.flatnonzero(ended))
            obs, state, mask = self._observe()
        rewards = np.repeat(won.astype(np.float32)[:, None], self.n, axis=1)
        return VectorStep(
            {"agent": obs}, state, {"agent": mask}, rewards, won, truncated,
            {"agent": final_obs}, final_state, {"battle_won": won.copy()},
        )  # fmt: skip

    def _success(self) -> np.ndarray:
        """gm ``_succeed``: each agent reaches a landmark, and the landmarks match the agents."""
        reach = covered(self.agent_pos, self.landmark_pos)  # [B, L, N]
        won = reach.any(1).all(1) & reach.any(2).all(1)  # needed for a perfect matching
        for b in np.flatnonzero(won):
            won[b] = matched(reach[b])
        return won

    # -- what the agents see --------------------------------------------------------------------

    def _observe(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``[B, N, 4N]`` observations, ``[B, 4N]`` states and ``[B, N, 5]`` action masks."""
        B, n = self.num_envs, self.n
        ents = np.concatenate([self.agent_pos, self.landmark_pos], 1)  # [B, 2N, 2]
        seen = ents[:, self._seen]  # [B, N, 2N, 2]
        near = (np.abs(seen - self.agent_pos[:, :, None]) <= self.map.sight).all(-1)
        obs = np.where(near[..., None], seen + 1, 0).reshape(B, n, self.obs_dim)
        state = (ents + 1).reshape(B, self.obs_dim)
        to = self.agent_pos[:, :, None] + MOVES  # [B, N, 5, 2]
        mask = ((to >= 0) & (to < self.shape)).all(-1)
        return obs.astype(np.float32), state.astype(np.float32), mask.astype(np.float32)


class GridSpreadEnv(CoreEnv):
    """The PettingZoo face of one grid (B = 1) of :class:`GridSpreadBatch`: agents
    ``agent_0..N-1``, dict observations ``{"observations", "action_mask"}``, the team reward for
    each, ``state()`` every position; ``battle_won`` in every agent's info on its last step."""

    core_class = GridSpreadBatch
    options = GridSpreadOptions
    metadata = {
        "name": "gridmpe_cn",
        "render_modes": ["rgb_array"],
        "is_parallelizable": True,
        "render_fps": 4,
    }

    def render(self, cell: int = 16) -> np.ndarray:
        """The grid from above: landmarks black, agents blue (drawn over a landmark)."""
        core = self.core
        rows, cols = core.map.field_size
        img = np.full((rows * cell, cols * cell, 3), 235, np.uint8)
        img[::cell] = img[:, ::cell] = 200
        for (r, c), colour in [(p, (30, 30, 30)) for p in core.landmark_pos[0]] + [
            (p, (50, 90, 200)) for p in core.agent_pos[0]
        ]:
            img[r * cell + 3 : (r + 1) * cell - 2, c * cell + 3 : (c + 1) * cell - 2] = colour
        return img
