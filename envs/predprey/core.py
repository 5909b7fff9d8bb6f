"""Predator-prey with the miscoordination penalty (Böhmer, Kurin & Whiteson, "Deep
Coordination Graphs", ICML 2020, the relative-overgeneralisation experiment) as a vectorised
NumPy core and its PettingZoo face.

Source: github.com/wendelinboehmer/dcg at 4de100c, ``src/envs/stag_hunt.py`` (the env,
cited ``sh:LINE``) with ``src/config/envs/rel_overgen.yaml`` (the experiment's arguments,
``ro:LINE``). That config's numbers are the defaults here:

- a bounded (``toroidal: False``, ro:43) grid of ``world_shape`` 10x10 (ro:44), positions
  ``[row, col]``; ``n_agents`` 8 predators (ro:21) and ``n_stags`` 8 prey (ro:23; no hares,
  ro:22); ``episode_limit`` 200 (ro:16).
- Reset (sh:158-176, ``_place_actors`` sh:437-447): every predator, then every prey, on a
  uniformly drawn free cell; here one draw of distinct cells, the same distribution.
- Actions (sh:48, 105-111): 0 right ``[0, +1]``, 1 down ``[+1, 0]``, 2 left ``[0, -1]``, 3 up
  ``[-1, 0]``, 4 stay, 5 catch (``capture_action: True``, ro:8, gives the sixth).
- A step (sh:185-335): the predators move one at a time in a random order (sh:198-207); a
  move onto a cell holding a predator or a prey (``agent_move_block: [0,1,2]``, ro:7), or off
  the grid (clipped, sh:467-474), leaves it in place. Then the prey, one at a time in a random
  order (sh:218-312): a prey with ``n`` adjacent (4-neighbourhood), unfrozen predators that
  execute ``catch`` this step is caught when ``n >= 2`` (``capture_action_conditions: [2,
  1]``, ro:10; sh:232-244): the team gets ``reward_stag`` 10 (ro:39, sh:259-265), the prey
  is removed, and every catching predator beside it is frozen (``capture_freezes``, ro:11;
  sh:267-287) and removed from the grid (``remove_frozen``, ro:37) for the rest of the
  episode. With ``0 < n < 2`` the team gets ``miscapture_punishment`` (ro:17: -2;
  sh:246-247), once per prey so tried. A prey not caught moves to a uniformly drawn free
  neighbouring cell, or stays where it has none (``p_stags_rest: 0.0``, ro:28; sh:297-312).
  Capturing does not end the episode (``capture_terminal: False``, ro:12); it ends when every
  prey is caught or every predator frozen (sh:314), or at the limit (sh:323-326).
- The reward is the team's, the same for every predator: captures and punishments only
  (``reward_time: 0``, ro:41; ``reward_collision: 0``, ro:40, which upstream also adds to a
  predator that stays).
- Observation (sh:517-582, ``agent_obs: [2, 2]``, ro:6; ``observe_walls``/``observe_ids``/
  ``observe_state``/``directed_observations`` all False, ro:13, 24-26): the 5x5 square of cells
  centred on the predator, three features per cell (an unfrozen predator, a prey, a hare),
  cells off the grid zero, flattened row-major with the features last: 75 floats. A frozen
  predator observes zeros (sh:354-355).
- State (sh:362-367): the whole grid with the same three features, 10 x 10 x 3 = 300.
- Action mask (sh:373-398): a frozen predator may only stay; otherwise the moves that stay on
  the grid, stay, and catch where a prey is on a neighbouring cell. Other actions are not
  errors: upstream they change nothing (a move off the grid is clipped, a catch with no prey
  beside it counts for none), and so here.

Differences from upstream, none of which the config's behaviour depends on: the random draws
(order of moves, prey moves, placement) come from NumPy Generators seeded per env, not the
global ``np.random``; a step that both catches the last prey and reaches the limit is
``terminated`` here (upstream marks it ``episode_limit``); hares, ghosts, mountains, toroidal
worlds and directed observations (options the config turns off) are not ported.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
from gymnasium.utils import seeding

from envs.vector import CoreEnv, VectorEnv, VectorStep, single_group

MOVES = np.array([[0, 1], [1, 0], [0, -1], [-1, 0], [0, 0], [0, 0]], np.int64)  # sh:105
STAY, CATCH = 4, 5
N_ACTIONS = 6
FEATURES = 3  # predators, prey (stags), hares (none here): sh:86, 94
CATCHERS = 2  # capture_action_conditions[stag]: ro:10
MAX_CELLS = 10_000


@dataclass
class PredPreyOptions:
    """The arguments of ``predprey/punish-v0`` (defaults: DCG's ``rel_overgen.yaml``)."""

    miscapture_punishment: float = -2.0
    """Team reward for each prey that fewer than two catching predators try to catch (p)."""
    n_agents: int = 8
    n_prey: int = 8
    world_shape: tuple[int, int] = (10, 10)
    """Rows, columns."""
    agent_obs: tuple[int, int] = (2, 2)
    """The observed square's half-size (rows, columns): (2, 2) sees 5x5."""
    episode_limit: int = 200
    reward_stag: float = 10.0
    """Team reward per prey caught."""

    def __post_init__(self):
        self.world_shape = _pair(self.world_shape, "world_shape", 2)
        self.agent_obs = _pair(self.agent_obs, "agent_obs", 0)
        cells = self.world_shape[0] * self.world_shape[1]
        if cells > MAX_CELLS:
            raise ValueError(f"world_shape has at most {MAX_CELLS} cells, got {cells}")
        for key, least, most in (
            ("n_agents", CATCHERS, 1000),
            ("n_prey", 1, 1000),
            ("episode_limit", 1, 1_000_000),
        ):
            v = getattr(self, key)
            if isinstance(v, bool) or not isinstance(v, int) or not least <= v <= most:
                raise ValueError(f"{key} must be an integer in {least}..{most}, got {v!r}")
        if self.n_agents + self.n_prey > cells:
            raise ValueError(
                f"{self.n_agents} predators and {self.n_prey} prey need more than the "
                f"{cells} cells of world_shape {self.world_shape}"
            )
        for key in ("miscapture_punishment", "reward_stag"):
            v = getattr(self, key)
            if isinstance(v, bool) or not isinstance(v, int | float) or not np.isfinite(v):
                raise ValueError(f"{key} must be a finite number, got {v!r}")


def _pair(value, key: str, least: int) -> tuple[int, int]:
    try:
        a, b = value
    except (TypeError, ValueError):
        raise ValueError(f"{key} must be two integers, got {value!r}") from None
    for v in (a, b):
        if isinstance(v, bool) or not isinstance(v, int | np.integer) or not least <= v <= 1000:
            raise ValueError(f"{key} must be two integers in {least}..1000, got {value!r}")
    return int(a), int(b)


def validate(cfg: dict) -> None:
    """The registry's check: builds the options from an env config."""
    fields = {f.name for f in dataclasses.fields(PredPreyOptions)}
    PredPreyOptions(**{k: v for k, v in cfg.items() if k in fields})


class PredPreyBatch(VectorEnv):
    """B predator-prey worlds stepped in array operations (the module docstring has the
    rules). The predators' and the prey's one-at-a-time moves are a loop over their turn
    (N + P turns a step), each turn one array operation over the B worlds.

    Args:
        num_envs: B.
        seed: world i is first reset with ``seed + i``; the step's random orders and prey
            moves come from one Generator seeded with ``(seed, 1)``.
        auto_reset: reset a world inside ``step`` when its episode ends (the training
            sampler's contract); off for the PettingZoo face.
        options: :class:`PredPreyOptions`.
    """

    FACTS = ("prey_caught", "miscaptures")

    def __init__(self, num_envs: int, seed: int | None = None, auto_reset: bool = True, **options):
        self.options = o = PredPreyOptions(**options)
        self.num_envs, self.auto_reset, self._seed = num_envs, auto_reset, seed
        self.n, self.p = o.n_agents, o.n_prey
        self.shape = np.array(o.world_shape, np.int64)
        self.agents = tuple(f"predator_{i}" for i in range(self.n))
        rows, cols = o.world_shape
        view = (2 * o.agent_obs[0] + 1, 2 * o.agent_obs[1] + 1)
        self.obs_dim = view[0] * view[1] * FEATURES
        self.groups = single_group(
            self.agents,
            gym.spaces.Box(0.0, 1.0, (self.obs_dim,), np.float32),
            gym.spaces.Discrete(N_ACTIONS),
            masked=True,
        )
        self.state_space = gym.spaces.Box(0.0, 1.0, (rows * cols * FEATURES,), np.float32)
        B = num_envs
        self._b = np.arange(B)
        self.grid = np.zeros((B, rows, cols, FEATURES), np.float32)  # sh:93-94
        self.agent_pos = np.zeros((B, self.n, 2), np.int64)
        self.frozen = np.zeros((B, self.n), bool)
        self.prey_pos = np.zeros((B, self.p, 2), np.int64)
        self.prey_alive = np.zeros((B, self.p), bool)
        self.steps = np.zeros(B, np.int64)
        self.caught = np.zeros(B, np.int64)
        self.miscaptures = np.zeros(B, np.int64)
        r0, r1 = o.agent_obs
        self._view_rows = np.arange(view[0])
        self._view_cols = np.arange(view[1])
        self._padded = np.zeros((B, rows + 2 * r0, cols + 2 * r1, FEATURES), np.float32)
        self._rngs: list[np.random.Generator] = []
        self._rng: np.random.Generator | None = None

    # -- reset ----------------------------------------------------------------------------------

    def _seed_rngs(self, seed: int | None) -> None:
        self._rngs = [
            seeding.np_random(None if seed is None else seed + i)[0] for i in range(self.num_envs)
        ]
        self._rng = np.random.default_rng(None if seed is None else (seed, 1))

    def _reset_worlds(self, idx) -> None:
        rows, cols = self.options.world_shape
        for i in idx:
            cells = self._rngs[i].choice(rows * cols, self.n + self.p, replace=False)
            pos = np.stack(np.divmod(cells, cols), axis=-1)
            self.agent_pos[i], self.prey_pos[i] = pos[: self.n], pos[self.n :]
            self.grid[i] = 0.0
            self.grid[i, pos[: self.n, 0], pos[: self.n, 1], 0] = 1.0
            self.grid[i, pos[self.n :, 0], pos[self.n :, 1], 1] = 1.0
        self.frozen[idx] = False
        self.prey_alive[idx] = True
        self.steps[idx] = 0
        self.caught[idx] = 0
        self.miscaptures[idx] = 0

    def reset(self, seed: int | None = None) -> VectorStep:
        """Resets every world; a seed reseeds (world i with ``seed + i``), no seed goes on
        with the worlds' own Generators (seeded from the constructor's seed at first)."""
        if seed is not None or self._rng is None:
            self._seed_rngs(self._seed if seed is None else seed)
        self._reset_worlds(range(self.num_envs))
        B = self.num_envs
        obs, state, mask = self._observe()
        zeros, no = np.zeros((B, self.n), np.float32), np.zeros(B, bool)
        return VectorStep(
            {"predator": obs},
            state,
            {"predator": mask},
            zeros,
            no,
            no.copy(),
            {"predator": obs.copy()},
            state.copy(),
            None,
            {"predator": ~self.frozen},
        )

    # -- a step ---------------------------------------------------------------------------------

    def _move_predators(self, a: np.ndarray) -> None:
        """sh:197-207: in a random order per world, each unfrozen predator moves unless the
        target cell holds anything (stay and catch target its own cell: it stays)."""
        b, top = self._b, self.shape - 1
        order = np.argsort(self._rng.random((self.num_envs, self.n)), axis=1)
        for k in range(self.n):
            i = order[:, k]
            pos = self.agent_pos[b, i]
            new = np.clip(pos + MOVES[a[b, i]], 0, top)
            blocked = self.grid[b, new[:, 0], new[:, 1]].any(axis=-1)
            go = np.flatnonzero(~blocked & ~self.frozen[b, i])
            self.grid[go, pos[go, 0], pos[go, 1], 0] = 0.0
            self.grid[go, new[go, 0], new[go, 1], 0] = 1.0
            self.agent_pos[go, i[go]] = new[go]

    def _turn_of_prey(self, a: np.ndarray, reward: np.ndarray) -> None:
        """sh:218-312: in a random order per world, each living prey is caught (two or more
        catching predators beside it), punishes a lone attempt, or flees at random."""
        o, b, top = self.options, self._b, self.shape - 1
        order = np.argsort(self._rng.random((self.num_envs, self.p)), axis=1)
        flee = self._rng.random((self.num_envs, self.p))
        catch = a == CATCH
        for k in range(self.p):
            j = order[:, k]
            alive = self.prey_alive[b, j]
            pos = self.prey_pos[b, j]  # [B, 2]
            # Predators executing catch on a cell beside the prey, not frozen (sh:234-242);
            # upstream's prevent_cannibalism check (sh:251) always holds for them.
            beside = np.abs(self.agent_pos - pos[:, None]).sum(axis=-1) == 1  # [B, N]
            catching = catch & ~self.frozen & beside & alive[:, None]
            n = catching.sum(axis=1)
            captured = n >= CATCHERS
            missed = (n > 0) & ~captured
            reward += np.where(captured, o.reward_stag, 0.0) + np.where(
                missed, o.miscapture_punishment, 0.0
            )
            self.caught += captured
            self.miscaptures += missed
            # Caught: the prey leaves the grid, its catchers freeze and leave it (sh:253-287).
            c = np.flatnonzero(captured)
            self.prey_alive[c, j[c]] = False
            self.grid[c, pos[c, 0], pos[c, 1], 1] = 0.0
            fb, fi = np.nonzero(catching & captured[:, None])
            self.frozen[fb, fi] = True
            self.grid[fb, self.agent_pos[fb, fi, 0], self.agent_pos[fb, fi, 1], 0] = 0.0
            # Not caught: a uniformly drawn free neighbour, if any (sh:221-227, 297-312).
            cand = np.clip(pos[:, None] + MOVES[:4], 0, top)  # [B, 4, 2]
            free = ~self.grid[b[:, None], cand[..., 0], cand[..., 1]].any(axis=-1)  # [B, 4]
            count = free.sum(axis=1)
            pick = np.minimum((flee[b, k] * count).astype(np.int64), np.maximum(count - 1, 0))
            u = np.argmax(np.cumsum(free, axis=1) > pick[:, None], axis=1)
            m = np.flatnonzero(alive & ~captured & (count > 0))
            new = cand[m, u[m]]
            self.grid[m, pos[m, 0], pos[m, 1], 1] = 0.0
            self.grid[m, new[:, 0], new[:, 1], 1] = 1.0
            self.prey_pos[m, j[m]] = new

    def step(self, actions: dict[str, np.ndarray]) -> VectorStep:
        B = self.num_envs
        a = np.asarray(actions["predator"], np.int64).reshape(B, self.n)
        if a.min() < 0 or a.max() >= N_ACTIONS:
            raise ValueError(f"actions are 0..{N_ACTIONS - 1}, got {a.min()}..{a.max()}")
        reward = np.zeros(B)  # reward_time 0 (ro:41)
        self._move_predators(a)
        self._turn_of_prey(a, reward)
        terminated = ~self.prey_alive.any(axis=1) | self.frozen.all(axis=1)  # sh:314
        self.steps += 1
        truncated = ~terminated & (self.steps >= self.options.episode_limit)  # sh:323-326
        ended = terminated | truncated
        info = {"prey_caught": self.caught.copy(), "miscaptures": self.miscaptures.copy()}
        obs, state, mask = self._observe()
        final_obs, final_state, active = obs, state, ~self.frozen
        if self.auto_reset and ended.any():
            final_obs, final_state = obs.copy(), state.copy()
            self._reset_worlds(np.flatnonzero(ended))
            obs, state, mask = self._observe()
            active = ~self.frozen
        rewards = np.repeat(reward[:, None], self.n, axis=1).astype(np.float32)
        return VectorStep(
            {"predator": obs},
            state,
            {"predator": mask},
            rewards,
            terminated,
            truncated,
            {"predator": final_obs},
            final_state,
            info,
            {"predator": active},
        )

    # -- what the predators see -----------------------------------------------------------------

    def _observe(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``[B, N, obs]`` observations, ``[B, S]`` states and ``[B, N, 6]`` action masks."""
        B, o = self.num_envs, self.options
        r0, r1 = o.agent_obs
        rows, cols = o.world_shape
        self._padded[:, r0 : r0 + rows, r1 : r1 + cols] = self.grid
        # The padded grid's window at [pos, pos + 2r] is centred on the predator (sh:562-567).
        wr = self.agent_pos[..., 0, None] + self._view_rows  # [B, N, 2r0+1]
        wc = self.agent_pos[..., 1, None] + self._view_cols
        view = self._padded[self._b[:, None, None, None], wr[..., :, None], wc[..., None, :]]
        obs = view.reshape(B, self.n, self.obs_dim) * ~self.frozen[..., None]
        state = self.grid.reshape(B, -1).copy()
        return obs.astype(np.float32), state, self._action_mask()

    def _action_mask(self) -> np.ndarray:
        """sh:373-398."""
        to = self.agent_pos[:, :, None] + MOVES[:4]  # [B, N, 4, 2]
        on_grid = ((to >= 0) & (to < self.shape)).all(axis=-1)
        mask = np.ones((self.num_envs, self.n, N_ACTIONS), np.float32)
        mask[..., :4] = on_grid
        top = self.shape - 1
        near = np.clip(to, 0, top)
        prey_near = self.grid[self._b[:, None, None], near[..., 0], near[..., 1], 1:].any(-1)
        mask[..., CATCH] = (prey_near & on_grid).any(axis=-1)
        mask[self.frozen] = 0.0
        mask[..., STAY] = 1.0
        return mask


class PredPreyEnv(CoreEnv):
    """The PettingZoo face of one world (B = 1) of :class:`PredPreyBatch`: predators
    ``predator_0..N-1``, dict observations ``{"observations", "action_mask"}``, the team reward
    for each, ``state()`` the whole grid; the episode's ``prey_caught`` and ``miscaptures`` in
    every predator's info on its last step. A frozen predator stays among the agents (it may
    only stay, and observes zeros), as upstream."""

    core_class = PredPreyBatch
    options = PredPreyOptions
    metadata = {
        "name": "predprey_punish",
        "render_modes": ["rgb_array"],
        "is_parallelizable": True,
        "render_fps": 4,
    }

    def render(self, cell: int = 16) -> np.ndarray:
        """The grid from above: predators blue (frozen ones gone), prey red."""
        core = self.core
        rows, cols = core.options.world_shape
        img = np.full((rows * cell, cols * cell, 3), 235, np.uint8)
        img[::cell] = img[:, ::cell] = 200
        for layer, colour in ((0, (50, 90, 200)), (1, (200, 50, 40))):
            for r, c in zip(*np.nonzero(core.grid[0, :, :, layer]), strict=True):
                img[r * cell + 3 : (r + 1) * cell - 2, c * cell + 3 : (c + 1) * cell - 2] = colour
        return img
