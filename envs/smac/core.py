"""The vectorised SMAC simulator: B battles of one map stepped together in NumPy.

Every per-unit quantity is a ``[B, U]`` array (U = allies then enemies), every pairwise one a
``[B, U, U]`` array, so a game frame is a fixed sequence of array operations whatever the
number of units; the only Python loop is over the 8 frames of an agent step. Positions are
complex numbers (x + iy), which halves the array operations of all 2-D geometry.

One game frame (one SC2 game loop, 1/22.4 "faster" second; an agent step is 8 of them):
  1. targets: an explicit attack/heal order keeps its target while it lives; the agents'
     units fire only on such an order (SMAC's unit data makes them Passive); the enemy's idle
     units take a target within weapon range and do not move; attack-moving enemies take one
     within sight, else walk to the map script's point; a target taken this way is kept while
     it stays within that range; where the enemy hunts (SMACv2, 2c_vs_64zg), each enemy
     without a live target is ordered to attack its closest agent once a step;
  2. units in range (edge to edge, the real weapon range) fire when their cooldown is over:
     each attack deals max(0.5, damage + bonus - armor), shields first (shield armor 0);
     zealot and colossus attack twice, the colossus also hits a 2.8-wide line through its
     target, a baneling explodes (radius 2.2) and dies; medivacs heal 12.6 hp per faster
     second (9 per normal second) for 1 energy per 3 hp; shields regenerate after 10 normal
     seconds without damage, zerg life always;
  3. the others walk at their speed toward their target, move point or attack-move point,
     around the map's unpathable ground along shortest paths (``envs.smac.terrain``); ground
     units push apart where their radii overlap (a colossus walks over smaller units); no
     unit steps onto ground it cannot walk on.

Orders change once per agent step, so everything that follows from an order (may it chase,
how far does it look for targets, where does it walk) is derived then, in ``_refresh``, not
in every frame. A dead unit is parked far off the map, so that no distance test ever finds it.

What SMAC's agents see (observations, state, masks, reward) is computed from these arrays in
``_observe`` with SMAC's feature order and normalisation.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
from gymnasium.utils import seeding

from envs.smac import fused, terrain
from envs.smac import units as U_
from envs.smac.maps import (
    HOLD,
    HUNT,
    MAP_SIZE,
    V2_MIN_ATTACK_RANGE,
    MapSpec,
    sample_battle,
    spec_of,
)
from envs.smac.units import TABLE
from envs.vector import VectorEnv, VectorStep, single_group

DT = 1.0 / U_.FRAMES_PER_SECOND
N_ACTIONS_NO_ATTACK = 6
SIGHT_RANGE_V1, SHOOT_RANGE_V1 = 9.0, 6.0
# Order kinds.
NONE, IDLE, MOVE, ATTACK, HEAL, AMOVE = range(6)
# Move offsets of actions 2-5: north (+y), south, east (+x), west.
MOVES = np.array([1j, -1j, 1, -1], np.complex64)
EPS = 1e-5
_CONE_EPS = 1e-7  # SMACv2's EPS in is_position_in_cone
FAR = -1e5  # where the dead are parked (each at its own spot, 10 apart)
_clip = np._core.umath.clip  # the ufunc itself, without np.clip's Python wrapper


@dataclass(frozen=True)
class BattleOptions:
    """SMAC's (and SMACv2's) environment options, with their names and defaults
    (``smac/env/starcraft2/starcraft2.py``, ``StarCraft2Env.__init__``); pass any of them to
    ``envs.make`` / ``BattleBatch`` as keywords.

    Args:
        reward_sparse: +1 win, -1 loss, 0 otherwise (also scaled when ``reward_scale``).
        reward_only_positive: only the damage dealt counts (v1 takes its absolute value,
            SMACv2 clips it at 0); False also subtracts ``reward_negative_scale`` x (damage
            taken + ``reward_death_value`` per agent lost).
        reward_scale: divide the reward by ``max_reward / reward_scale_rate``.
        reward_scale_per_episode: SMACv2 only; scale each episode by its own enemy team, so a
            win is worth exactly ``reward_scale_rate`` (SMACv2 itself fixes the scale from the
            first episode's enemies, the default here).
        obs_last_action: each visible ally's last action (one-hot) in the observation.
        obs_timestep_number / state_timestep_number: the episode's step / limit appended.
        state_last_action: every agent's last action in the state.
        terminate_at_limit: SMAC ends an episode at its limit with ``terminated``; Arena's
            default is ``truncated`` (a time-out is not a terminal state for the critic).
        prob_obs_enemy: SMACv2 only; when an agent first sees an enemy, each other agent is
            told about it with this probability, else never sees it (0.0 = SMACv2's EPO).
        conic_fov: SMACv2 only; each agent sees and shoots only inside a cone (of 2 pi /
            ``num_fov_actions``) it turns with ``num_fov_actions`` extra actions (6 onward,
            before the attacks). The cone is tested as SMACv2's ``is_position_in_cone`` does,
            with arctan of slopes, so it also covers the opposite direction.
        use_state_agent: each agent's critic gets its own state ``[A, S]``, the MAPPO paper's
            agent-specific global state (marlbenchmark/on-policy@de66d7a:
            onpolicy/envs/starcraft2/StarCraft2_Env.py:1327-1520 ``get_state_agent``, with
            that env's defaults: all health, last actions as ``state_last_action`` says, the
            agent's one-hot id): its allies, the enemies (all of them, with whether they are
            within its sight), its moves and its own features, relative to it. SMAC v1 maps.
        use_mustalive: with ``use_state_agent``, a dead agent's state is zeros but for its id
            (on-policy's death masking, StarCraft2_Env.py:1372).
        add_center_xy: with ``use_state_agent``, every unit's position relative to the map's
            centre is added (StarCraft2_Env.py:1421, 1457, 1485).
    """

    reward_sparse: bool = False
    reward_only_positive: bool = True
    reward_death_value: float = 10.0
    reward_win: float = 200.0
    reward_defeat: float = 0.0
    reward_negative_scale: float = 0.5
    reward_scale: bool = True
    reward_scale_rate: float = 20.0
    reward_scale_per_episode: bool = False
    obs_last_action: bool = False
    obs_timestep_number: bool = False
    state_last_action: bool = True
    state_timestep_number: bool = False
    terminate_at_limit: bool = False
    prob_obs_enemy: float = 1.0
    conic_fov: bool = False
    num_fov_actions: int = 12
    use_state_agent: bool = False
    use_mustalive: bool = True
    add_center_xy: bool = True

    @classmethod
    def of(cls, options: dict, v2: bool) -> BattleOptions:
        """Checked options: an unknown name, a SMACv2-only option on a v1 map or a value out of
        range is a ValueError naming it and what is allowed."""
        names = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(options) - set(names))
        if unknown:
            raise ValueError(f"unknown SMAC option(s) {unknown}; allowed: {', '.join(names)}")
        opt = cls(**options)
        for name in _V2_ONLY:
            if not v2 and getattr(opt, name) != getattr(cls, name):
                raise ValueError(f"{name} is a SMACv2 option; this is a SMAC v1 map")
        if v2 and opt.use_state_agent:
            raise ValueError(
                "use_state_agent is on-policy's SMAC v1 state (StarCraft2_Env.get_state_agent); "
                "this is a SMACv2 scenario: leave it off"
            )
        if not opt.use_state_agent and (not opt.use_mustalive or not opt.add_center_xy):
            raise ValueError("use_mustalive and add_center_xy shape use_state_agent's state: "
                             "set use_state_agent=True or leave them at their defaults")  # fmt: skip
        if not 1 <= opt.num_fov_actions <= 360:  # one action per degree at the finest
            raise ValueError(f"num_fov_actions must be in 1..360, got {opt.num_fov_actions}")
        if not 0.0 <= opt.prob_obs_enemy <= 1.0:
            raise ValueError(f"prob_obs_enemy must be in [0, 1], got {opt.prob_obs_enemy}")
        if opt.reward_scale and opt.reward_scale_rate <= 0:
            raise ValueError(f"reward_scale_rate must be > 0, got {opt.reward_scale_rate}")
        return opt


_V2_ONLY = ("reward_scale_per_episode", "prob_obs_enemy", "conic_fov", "num_fov_actions")


def action_name(action: int, medivac: bool = False, n_fov: int = 0) -> str:
    names = ("no-op", "stop", "move north", "move south", "move east", "move west")
    if action < len(names):
        return names[action]
    if action < len(names) + n_fov:
        return f"look {action - len(names)}"
    i = action - len(names) - n_fov
    return f"heal ally {i}" if medivac else f"attack enemy {i}"


class BattleBatch(VectorEnv):
    """B battles of one map (``envs.smac.maps``), stepped as arrays.

    Args:
        num_envs: B.
        seed: battle i is first reset with ``seed + i``; later resets continue its own RNG.
        map_name: a SMAC v1 map or SMACv2 scenario (``envs.smac.maps.spec_of``).
        auto_reset: reset a battle inside ``step`` when it ends (the training sampler's
            contract); the PettingZoo env turns it off. Without it, a finished battle's
            agents may only no-op until the next ``reset``, so a batch steps on as one.
        engine: ``"numba"`` runs a step's frames compiled (``envs.smac.fused``), ``"numpy"``
            as array operations; ``"auto"`` takes numba where it is installed.
        options: SMAC's environment options, :class:`BattleOptions`.
    """

    options = BattleOptions  # the keyword options ``envs.make`` accepts besides the signature

    def __init__(
        self,
        num_envs: int,
        seed: int | None = None,
        map_name: str = "3m",
        auto_reset: bool = True,
        engine: str = "auto",
        **options,
    ):
        self.spec: MapSpec = spec_of(map_name)
        self.num_envs = B = num_envs
        self.n_allies, self.n_enemies = A, E = self.spec.n_allies, self.spec.n_enemies
        self.n_units = Un = A + E
        self.v2 = self.spec.procedural
        self.opt = opt = BattleOptions.of(options, self.v2)
        self.n_fov = opt.num_fov_actions if opt.conic_fov else 0
        self.n_no_attack = N_ACTIONS_NO_ATTACK + self.n_fov
        self.n_actions = self.n_no_attack + E
        angles = 2 * np.pi * np.arange(self.n_fov) / max(self.n_fov, 1)
        self._fov_dirs = np.exp(1j * angles).astype(np.complex64)
        self.fov = np.ones((B, A), np.complex64)  # each agent's facing (x + iy)
        self.auto_reset = auto_reset
        if engine not in ("auto", "numba", "numpy"):
            raise ValueError(f"engine must be 'auto', 'numba' or 'numpy', got {engine!r}")
        if engine == "numba" and not fused.AVAILABLE:
            raise ValueError("engine='numba' needs numba: pip install 'arena[smac]'")
        self.fused = engine != "numpy" and fused.AVAILABLE
        self.agents = tuple(f"agent_{i}" for i in range(A))
        self.type_bits = self.spec.type_bits
        self.shield_ally = int(self.spec.shields("allies"))
        self.shield_enemy = int(self.spec.shields("enemies"))
        present = {U_.INDEX[n] for n in self.spec.unit_names()}
        self.has_medivac = U_.MEDIVAC in present
        self.has_shields = bool(self.shield_ally or self.shield_enemy)
        self.has_splash = bool({U_.COLOSSUS, U_.BANELING} & present)
        self.has_baneling = U_.BANELING in present
        self.has_zerg = any(U_.UNIT_TYPES[t].race == "Z" for t in present)
        self.has_regen = self.has_shields or self.has_zerg
        # SMAC's feature sizes.
        self.nf_enemy = 4 + 1 + self.shield_enemy + self.type_bits
        self.nf_ally = 4 + 1 + self.shield_ally + self.type_bits
        self.nf_ally += self.n_actions * opt.obs_last_action
        self.nf_own = 1 + self.shield_ally + self.type_bits + (2 if self.v2 else 0)
        self.nf_own += 2 * opt.conic_fov
        obs_dim = 4 + E * self.nf_enemy + (A - 1) * self.nf_ally + self.nf_own
        obs_dim += opt.obs_timestep_number
        self.nf_state_ally = 4 + self.shield_ally + self.type_bits + 2 * opt.conic_fov
        self.nf_state_enemy = 3 + self.shield_enemy + self.type_bits
        state_dim = A * self.nf_state_ally + E * self.nf_state_enemy
        state_dim += A * self.n_actions * opt.state_last_action + opt.state_timestep_number
        # on-policy's get_state_agent sizes (StarCraft2_Env.py:1543-1603, 1656-1681)
        centre, last = 2 * opt.add_center_xy, self.n_actions * opt.state_last_action
        self.nf_agent_enemy = 5 + 1 + self.shield_enemy + self.type_bits + centre
        self.nf_agent_ally = 5 + 1 + self.shield_ally + self.type_bits + last + centre
        self.nf_agent_own = 4 + 1 + self.shield_ally + self.type_bits + last + centre
        state_shape: tuple[int, ...] = (state_dim,)
        if opt.use_state_agent:
            state_shape = (A, E * self.nf_agent_enemy + (A - 1) * self.nf_agent_ally + 4
                           + self.nf_agent_own + A + opt.state_timestep_number)  # fmt: skip
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (obs_dim,), np.float32)
        self.state_space = gym.spaces.Box(-np.inf, np.inf, state_shape, np.float32)
        self.action_space = gym.spaces.Discrete(self.n_actions)
        self.groups = single_group(self.agents, self.observation_space, self.action_space, True)

        self.team = np.r_[np.zeros(A, np.int8), np.ones(E, np.int8)]
        self._opponents = self.team[:, None] != self.team[None, :]
        self._others = np.array([[j for j in range(A) if j != i] for i in range(A)], int).reshape(
            A, A - 1
        )
        self._far = (FAR - 10.0 * np.arange(Un)).astype(np.float32)
        self._seed = seed
        self._rngs: list[np.random.Generator] = [seeding.np_random(None)[0] for _ in range(B)]
        f32 = np.float32
        z = lambda dtype=f32: np.zeros((B, Un), dtype)  # noqa: E731
        zz = lambda dtype=f32: np.zeros((B, Un, Un), dtype)  # noqa: E731
        # Dynamic state.
        self.pos = z(np.complex64)
        self.hp, self.sh, self.energy = z(), z(), z()
        self.ready_at = z(np.int64)  # the frame from which a unit may fire again
        self.hit_at = z(np.int64)  # the frame a unit last took damage (shield regeneration)
        self._none = np.broadcast_to(np.arange(Un), (B, Un))  # "no target": oneself
        self.locked = self._none.copy()  # the target a unit took on its own
        self.clock = 0
        self.alive = z(bool)
        self.kind = z(np.int8)
        self.target = z(np.int64)
        self.goal = z(np.complex64)  # move point or attack-move point
        self.death_pos = z(np.complex64)
        self.fired_at = np.full((B, Un), -1, np.int64)  # last target fired on (rendering)
        self.point = np.zeros(B, np.complex64)
        self.t = np.zeros(B, np.int64)
        self.over = np.zeros(B, bool)  # finished and not reset (auto_reset off)
        self.last_action = np.zeros((B, A), np.int64)
        # Derived from the orders (``_refresh``).
        self.ordered, self.may_chase, self.walks_to_goal = z(bool), z(bool), z(bool)
        self.is_move = z(bool)
        self.acquire = z()
        # Per-episode constants (a SMACv2 battle samples its unit types).
        self.types = z(np.int64)
        self.hp_max, self.sh_max, self.armor, self.speed, self.radius = (z() for _ in range(5))
        self.reach, self.n_attacks, self.sight, self.shoot, self.cd_norm = (z() for _ in range(5))
        self.period = z(np.int64)
        self.stride, self.stride0 = z(), z()
        self._typed = False
        # The map script attack-moves the enemy (or gives it no order); where it hunts the
        # agents (SMACv2, 2c_vs_64zg) its orders come each step, medivacs, which cannot take
        # an attack order, follow their team.
        self.hunt = self.v2 or self.spec.enemy_order == HUNT
        enemy_kind = IDLE if self.spec.enemy_order == HOLD else AMOVE
        self._start_kind = np.r_[np.full(A, IDLE), np.full(E, enemy_kind)].astype(np.int8)
        # The ground: what each unit may walk on, and the way around obstacles.
        layout = self.spec.terrain
        self._walk = terrain.walkable(layout).ravel()  # [mover * 1024 + cell]
        self._ground = terrain.pathable(layout)
        self.has_terrain = not self._walk.all()
        routes = [terrain.waypoints(layout, m) for m in (terrain.GROUND, terrain.CLIFF_WALKER)]
        self._routes = None
        if any(r is not None for r in routes):
            self._routes = np.stack(
                [np.arange(1024)[:, None].repeat(1024, 1) if r is None else r for r in routes]
            ).ravel()
        self._centres = terrain.centres().astype(np.complex64)
        self.mover = z(np.int64)
        # Flat gathers ([B*U] rows of [B*U, U] views) are cheaper than take_along_axis.
        self._flat = np.arange(B * Un)
        self._ones = np.ones(Un, np.complex64)
        self._action_eye = np.eye(self.n_actions, dtype=f32)
        self._base = (np.arange(B) * Un)[:, None]
        self.lo_x, self.hi_x, self.lo_y, self.hi_y = (z() for _ in range(4))
        self.is_medivac, self.ground, self.can_fire = z(bool), z(bool), z(bool)
        self.zerg = z(bool)
        self.onehot = np.zeros((B, Un, self.type_bits), f32)
        self.candidates = zz(bool)
        self.reach_offset = zz()  # -(r_i + r_j) for candidate targets, inf otherwise
        self.collide = zz()  # r_i + r_j for pairs of ground units, 0 otherwise
        self.push_share = zz()  # how much of an overlap unit i gives way (0.5, 1 or 0)
        self.raw = zz()  # damage of one swing of i on j before armor (attacks x raw)
        self.max_reward = np.ones(B, f32)
        self._scaled = np.zeros(B, bool)  # whether battle b's reward scale is fixed
        # SMACv2's prob_obs_enemy: who spotted each enemy, and who was told about it.
        self._spotter = np.full((B, E), -1)  # the agent that spotted each enemy, or -1
        self._told_to = np.ones((B, A, E), bool)
        self._obs_rng = np.random.default_rng(seed)
        self._last_mask: np.ndarray | None = None
        self.info: dict[str, np.ndarray] = {}

    @property
    def x(self) -> np.ndarray:
        return self.pos.real

    @property
    def y(self) -> np.ndarray:
        return self.pos.imag

    # -- episodes -----------------------------------------------------------------------------

    def _new_battles(self, rows: np.ndarray) -> None:
        """Samples new battles in ``rows``: their units (SMACv2) and start positions."""
        A = self.n_allies
        spec = self.spec
        for b in rows:  # one draw per new episode, not per step
            types, pos, point = sample_battle(spec, self._rngs[b])
            self.types[b] = types
            self.pos[b] = pos[:, 0] + 1j * pos[:, 1]
            self.point[b] = point[0] + 1j * point[1]
        if self.v2 or not self._typed:
            self._set_types(rows if self._typed else np.arange(self.num_envs))
            self._typed = True
        self.stride[rows] = self.stride0[rows]
        self.lo_x[rows] = self.lo_y[rows] = self.radius[rows]
        self.hi_x[rows] = self.hi_y[rows] = MAP_SIZE - self.radius[rows]
        self.hp[rows], self.sh[rows] = self.hp_max[rows], self.sh_max[rows]
        self.ready_at[rows] = self.hit_at[rows] = self.clock
        self.locked[rows] = self._none[rows]
        self.energy[rows] = np.where(self.is_medivac[rows], U_.MEDIVAC_ENERGY_START, 0.0)
        self.alive[rows] = True
        self.kind[rows] = self._start_kind
        self.target[rows] = 0
        self.goal[rows] = self.point[rows][:, None]
        self.fired_at[rows] = -1
        self._spotter[rows] = -1
        self._told_to[rows] = self.opt.prob_obs_enemy >= 1.0
        self.t[rows] = 0
        self.over[rows] = False
        self.last_action[rows] = 0
        self.fov[rows] = 1
        # SMACv2 fixes the reward scale from a battle's first episode (its enemy team then).
        rescale = rows if self.opt.reward_scale_per_episode else rows[~self._scaled[rows]]
        self.max_reward[rescale] = (
            self.n_enemies * self.opt.reward_death_value
            + self.opt.reward_win
            + (self.hp_max[rescale, A:] + self.sh_max[rescale, A:]).sum(1)
        )
        self._scaled[rows] = True
        self._refresh()

    def _set_types(self, rows: np.ndarray) -> None:
        """Every constant that follows from the unit types of battles ``rows`` (once for a v1
        map, whose types never change; at each reset for SMACv2)."""
        A, spec = self.n_allies, self.spec
        ty = self.types[rows]
        # The agents' units are the maps' ``*_RL`` types, some with their own hp or speed.
        agent = self.team == 0
        hp = np.where(agent, TABLE.agent_hp[ty], TABLE.hp[ty])
        speed = np.where(agent, TABLE.agent_speed[ty], TABLE.speed[ty])
        self.hp_max[rows], self.sh_max[rows] = hp, TABLE.shield[ty]
        self.armor[rows], self.speed[rows] = TABLE.armor[ty], speed
        self.zerg[rows] = TABLE.zerg[ty]
        self.radius[rows], self.reach[rows] = TABLE.radius[ty], TABLE.range[ty] + EPS
        self.n_attacks[rows], self.cd_norm[rows] = TABLE.attacks[ty], TABLE.state_cooldown[ty]
        self.period[rows] = TABLE.cooldown_frames[ty]
        self.stride0[rows] = speed * DT
        r = TABLE.radius[ty]
        med = TABLE.is_medivac[ty]
        self.is_medivac[rows] = med
        self.can_fire[rows] = TABLE.attacks[ty] > 0
        ground = ~TABLE.air[ty]
        self.ground[rows] = ground
        self.mover[rows] = np.where(
            ground,
            np.where(TABLE.is_colossus[ty], terrain.CLIFF_WALKER, terrain.GROUND),
            terrain.AIR,
        )
        if self.v2:  # SMACv2: per-unit sight and shoot ranges
            self.sight[rows] = TABLE.sight[ty]
            self.shoot[rows] = np.maximum(TABLE.range[ty], V2_MIN_ATTACK_RANGE)
        else:
            self.sight[rows], self.shoot[rows] = SIGHT_RANGE_V1, SHOOT_RANGE_V1
        if self.type_bits:
            ally_ids = np.zeros(len(U_.UNIT_TYPES), np.int64)
            enemy_ids = ally_ids.copy()
            for name, i in spec.ally_type_ids.items():
                ally_ids[U_.INDEX[name]] = i
            for name, i in spec.enemy_type_ids.items():
                enemy_ids[U_.INDEX[name]] = i
            idx = np.concatenate([ally_ids[ty[:, :A]], enemy_ids[ty[:, A:]]], axis=1)
            self.onehot[rows] = np.eye(self.type_bits, dtype=np.float32)[idx]
        # Who may target whom: opponents it can hit; a medivac heals allies but not medivacs.
        pair_types = (ty[:, :, None], ty[:, None, :])
        hit = TABLE.can_hit[pair_types] & self._opponents
        not_self = ~np.eye(self.n_units, dtype=bool)
        heal = med[:, :, None] & ~self._opponents & not_self & ~med[:, None, :]
        cand = np.where(med[:, :, None], heal, hit)
        self.candidates[rows] = cand
        radii = r[:, :, None] + r[:, None, :]
        self.reach_offset[rows] = np.where(cand, -radii, np.inf)
        solid = ground[:, :, None] & ground[:, None, :] & not_self
        # A colossus walks over the smaller ground units (they pass under it); two collide.
        colossus = TABLE.is_colossus[ty]
        solid &= colossus[:, :, None] == colossus[:, None, :]
        self.collide[rows] = np.where(solid, radii, 0.0)
        mobile = TABLE.speed[ty] > 0
        self.push_share[rows] = np.where(mobile[:, None, :], 0.5, 1.0) * mobile[:, :, None]
        self.raw[rows] = TABLE.raw[pair_types] * TABLE.attacks[ty][:, :, None]

    def reset(self, seed: int | None = None) -> VectorStep:
        seed = self._seed if seed is None else seed
        B = self.num_envs
        if seed is not None:
            self._rngs = [seeding.np_random(seed + i)[0] for i in range(B)]
            self._scaled[:] = False  # a seeded reset replays from the first episode
            self._obs_rng = np.random.default_rng(seed)
        self._new_battles(np.arange(B))
        obs, state, mask = self._observe()
        zeros = np.zeros((B, self.n_allies), np.float32)
        no = np.zeros(B, bool)
        return VectorStep(
            {"agent": obs},
            state,
            {"agent": mask},
            zeros,
            no,
            no.copy(),
            {"agent": obs.copy()},
            state.copy(),
            {},
            self._active(),
        )

    # -- orders -------------------------------------------------------------------------------

    def _check(self, actions: np.ndarray) -> None:
        """An unavailable action is an error naming the agent, the action and the legal ones."""
        mask = self._last_mask
        n = self.n_actions
        inside = (actions >= 0) & (actions < n)
        legal = np.take_along_axis(mask, np.where(inside, actions, 0)[..., None], -1)[..., 0]
        bad = ~inside | (legal == 0)
        if bad.any():
            b, a = map(int, np.argwhere(bad)[0])
            act = int(actions[b, a])
            med, k = bool(self.is_medivac[b, a]), self.n_fov
            allowed = [f"{i} ({action_name(i, med, k)})" for i in np.flatnonzero(mask[b, a])]
            what = action_name(act, med, k) if 0 <= act < n else f"not in 0..{n - 1}"
            where = f"battle {b}: " if self.num_envs > 1 else ""
            raise ValueError(
                f"{where}agent {self.agents[a]} chose action {act} ({what}), which is "
                f"unavailable; legal actions: {', '.join(allowed)}"
            )

    def _apply_orders(self, actions: np.ndarray) -> None:
        A = self.n_allies
        kind, target, goal = self.kind[:, :A], self.target[:, :A], self.goal[:, :A]
        move = (actions >= 2) & (actions < N_ACTIONS_NO_ATTACK)
        attack = actions >= self.n_no_attack
        if self.n_fov:  # turning the cone gives the unit no order
            look = (actions >= N_ACTIONS_NO_ATTACK) & ~attack
            turn = self._fov_dirs[np.clip(actions - N_ACTIONS_NO_ATTACK, 0, self.n_fov - 1)]
            self.fov = np.where(look, turn, self.fov)
        med = self.is_medivac[:, :A]
        kind[actions == 1] = IDLE
        kind[move] = MOVE
        kind[attack] = np.where(med, HEAL, ATTACK)[attack]
        offset = MOVES[np.clip(actions - 2, 0, 3)] * U_.MOVE_AMOUNT
        goal[move] = (self.pos[:, :A] + offset)[move]
        slot = actions - self.n_no_attack
        target[attack] = np.where(med, slot, slot + A)[attack]  # a medivac's slot i is ally i
        self.last_action[:] = actions
        if self.has_medivac:  # an attack-moving medivac follows its team's centre
            body = self.alive & ~self.is_medivac
            for team in (0, 1):
                cols = self.team == team
                w = body[:, cols]
                centre = (self.pos[:, cols] * w).sum(1) / np.maximum(w.sum(1), 1)
                follow = (self.kind == AMOVE) & self.is_medivac & cols
                self.goal = np.where(follow, centre[:, None], self.goal)
        if self.hunt:
            self._hunt()
        self._refresh()

    def _hunt(self) -> None:
        """The enemy AI of SMACv2 (its 32x32_flat map's trigger, every 0.5 game s = one agent
        step) and of 2c_vs_64zg (an attack order on the agents' unit group): each enemy without
        a live target is ordered to attack the agent closest to it, wherever that agent is,
        and keeps that target until it dies."""
        A, B, Un = self.n_allies, self.num_envs, self.n_units
        alive = self.alive
        target_alive = alive.ravel()[(self._base + self.target).ravel()].reshape(B, Un)
        free = alive & self.can_fire & ~((self.kind == ATTACK) & target_alive)
        free[:, :A] = False
        if not free.any():
            return
        d = np.abs(self.pos[:, A:, None] - self.pos[:, None, :A])
        d = np.where(self.candidates[:, A:, :A] & alive[:, None, :A], d, np.inf)
        closest = d.argmin(-1)
        free[:, A:] &= np.isfinite(d.min(-1))
        self.kind[free] = ATTACK
        self.target[free] = closest[free[:, A:]]

    def _refresh(self) -> None:
        """What follows from the orders: explicit targets, acquisition ranges, walking goals."""
        kind = self.kind
        ordered = (kind == ATTACK) | (kind == HEAL)
        target = self.target.ravel()
        B, Un = self.kind.shape
        valid = ordered & self.candidates.reshape(-1, Un)[self._flat, target].reshape(B, Un)
        valid &= self.alive.ravel()[(self._base + self.target).ravel()].reshape(B, Un)
        ai = kind == AMOVE
        idle = (kind == IDLE) | (ordered & ~valid)  # an order it cannot carry out: idle
        # SMAC makes the agents' units Passive (their unit data's Response is Nothing): they
        # fire or heal only on an attack/heal action, never on their own when idle, stopped
        # or arrived. The enemy's units acquire targets as SC2 does.
        idle &= self.team == 1
        self.ordered = valid
        self.acquire = np.where(ai, self.sight, np.where(idle, self.reach, -np.inf)).astype(
            np.float32
        )
        self.may_chase = valid | ai
        self.is_move = kind == MOVE
        self.walks_to_goal = self.is_move | ai

    # -- the game -----------------------------------------------------------------------------

    def _frame(self) -> None:
        pos = self.pos
        dz = pos[:, None, :] - pos[:, :, None]  # dz[b, i, j] = pos_j - pos_i
        dist = np.abs(dz)
        edge = dist + self.reach_offset  # edge-to-edge distance to candidate targets

        # 1. targets
        if self.has_medivac:  # medivacs look for damaged allies only
            healthy = self.hp >= self.hp_max
            look = np.where(self.is_medivac[:, :, None] & healthy[:, None, :], np.inf, edge)
        else:
            look = edge
        closest = look.argmin(-1)
        B, Un = closest.shape
        # Gathering the minimum at argmin is several times cheaper than a second reduction.
        nearest = look.reshape(-1, Un)[self._flat, closest.ravel()].reshape(B, Un)
        # A unit that took a target on its own keeps it while the target stays in weapon range
        # or keeps shooting at it (as smaclite models SC2's attack-move), else takes the
        # closest again.
        kept = look.reshape(-1, Un)[self._flat, self.locked.ravel()].reshape(B, Un)
        its_target = self.fired_at.ravel()[(self._base + self.locked).ravel()].reshape(B, Un)
        keep = (kept <= self.acquire) & ((kept <= self.reach) | (its_target == self._none))
        closest = np.where(keep, self.locked, closest)
        nearest = np.where(keep, kept, nearest)
        auto = nearest <= self.acquire
        ordered = self.ordered
        self.locked = np.where(auto & ~ordered, closest, self._none)
        tgt = np.where(ordered, self.target, closest)
        has_t = ordered | auto
        t_edge = edge.reshape(-1, Un)[self._flat, tgt.ravel()].reshape(B, Un)
        in_range = has_t & (t_edge <= self.reach)

        # 2. attacks and heals
        fire = in_range & (self.ready_at <= self.clock) & self.can_fire
        self.ready_at = np.where(fire, self.clock + self.period, self.ready_at)
        self.fired_at = np.where(in_range, tgt, -1)
        if fire.any():
            self._damage(fire, tgt, dz, dist)
        if self.has_medivac:
            self._heal(in_range & self.is_medivac, tgt)
        if self.has_regen:
            self._regenerate()
        self.clock += 1

        # 3. movement: chase, walk to the goal, give way, stay on the map
        chase = has_t & ~in_range & self.may_chase
        walking = chase | (self.walks_to_goal & ~has_t)
        dest = np.where(chase, pos.ravel()[(self._base + tgt).ravel()].reshape(B, Un), self.goal)
        stride = self.stride
        there = (np.abs(dest - pos) <= stride) & self.is_move
        if self._routes is not None:
            dest = self._route(pos, dest)
        v = dest - pos
        gap = np.abs(v)
        if there.any():
            self._arrive(there)
        scale = np.where(walking, np.minimum(stride, gap) / np.maximum(gap, EPS), 0.0)
        overlap = np.maximum(self.collide - dist, 0.0)
        push = overlap * self.push_share / np.maximum(dist, EPS)
        pos = pos + v * scale - (push * dz) @ self._ones  # matmul: a faster row sum
        x, y = pos.real.copy(), pos.imag.copy()
        _clip(x, self.lo_x, self.hi_x, out=x)
        _clip(y, self.lo_y, self.hi_y, out=y)
        if self.has_terrain:
            x, y = self._keep_on_ground(x, y)
        self.pos = x + 1j * y

    def _route(self, pos, dest):
        """Where a walking ground unit heads to reach ``dest``: straight there when it sees
        it, else at the furthest cell of a shortest path around the obstacles it sees."""
        here = terrain.cell_of(pos.real, pos.imag)
        there = terrain.cell_of(dest.real, dest.imag)
        mover = np.minimum(self.mover, terrain.CLIFF_WALKER)
        via = self._routes[(mover * 1024 + there) * 1024 + here]
        detour = (via != there) & (self.mover != terrain.AIR)
        return np.where(detour, self._centres[via], dest)

    def _keep_on_ground(self, x, y):
        """A unit may not step onto a cell it cannot walk on: it slides along the edge (keeps
        the move along one axis) or stays where it was."""
        x0, y0 = self.pos.real, self.pos.imag
        base = self.mover * 1024

        def ok(a, b):
            return self._walk[base + terrain.cell_of(a, b)] | ~self.alive

        fine = ok(x, y)
        if fine.all():
            return x, y
        along_x, along_y = ok(x, y0), ok(x0, y)
        x = np.where(fine | along_x, x, x0)
        y = np.where(fine | (~along_x & along_y), y, y0)
        return x, y

    def _arrive(self, there: np.ndarray) -> None:
        """Units that reached their move point stand idle (an agent's unit holds its fire)."""
        self.kind[there] = IDLE
        self._refresh()

    def _damage(self, fire, tgt, dz, dist) -> None:
        """Applies this frame's attacks: every hit on a unit is summed, shields take it first."""
        B, Un = fire.shape
        bi, ui = np.nonzero(fire)
        ti = tgt[bi, ui]
        n = self.n_attacks[bi, ui]
        raw = self.raw[bi, ui, ti]
        if self.has_splash:
            sb, sj, s_raw, s_n = self._splash(bi, ui, ti, dz, dist)
            bi_all, ti_all = np.concatenate([bi, sb]), np.concatenate([ti, sj])
            raw, n = np.concatenate([raw, s_raw]), np.concatenate([n, s_n])
        else:
            bi_all, ti_all = bi, ti
        flat = bi_all * Un + ti_all
        total = np.bincount(flat, raw, B * Un).reshape(B, Un).astype(np.float32)
        hits = np.bincount(flat, n, B * Un).reshape(B, Un).astype(np.float32)
        if self.has_shields:
            sh0 = self.sh
            absorbed = np.minimum(sh0, total)
            rest = total - absorbed
            # Hits wholly absorbed by the shield lose nothing to armor; the others lose armor.
            mean = total / np.maximum(hits, 1.0)
            hits = np.clip(hits - np.floor(sh0 / np.maximum(mean, EPS)), 0.0, hits)
            self.sh = sh0 - absorbed
        else:
            rest = total
        self.hit_at = np.where(total > 0, self.clock, self.hit_at)
        hp_damage = np.maximum(U_.MIN_DAMAGE * hits, rest - self.armor * hits)
        self.hp = self.hp - np.where(rest > 0, hp_damage, 0.0)
        if self.has_baneling:
            bane = TABLE.is_baneling[self.types[bi, ui]]
            self.hp[bi[bane], ui[bane]] = 0.0  # a baneling dies in its explosion
        dead = self.alive & (self.hp <= 0)
        if dead.any():
            self._bury(dead)

    def _bury(self, dead: np.ndarray) -> None:
        self.alive &= ~dead
        idx = np.nonzero(dead)  # once: integer indexing is cheaper than repeated masks
        self.hp[idx] = self.sh[idx] = self.stride[idx] = 0.0
        self.kind[idx] = NONE
        self.death_pos[idx] = self.pos[idx]
        far = self._far[idx[1]]
        self.pos[idx] = far + 1j * far
        self.lo_x[idx] = self.hi_x[idx] = self.lo_y[idx] = self.hi_y[idx] = far
        self._refresh()

    def _splash(self, bi, ui, ti, dz, dist):
        """Extra hits of colossus lines and baneling explosions: (battle, victim, raw, hits)."""
        kinds = self.types[bi, ui]
        colossus = TABLE.is_colossus[kinds]
        bane = TABLE.is_baneling[kinds]
        k_idx = np.arange(len(ti))
        hit = np.zeros((len(ti), self.n_units), bool)
        if colossus.any():
            # A line 2.8 wide across the attack direction, through the target.
            u = dz[bi, ui, ti]
            u = u / np.maximum(np.abs(u), EPS)
            rel = dz[bi, ti, :] * np.conj(u)[:, None]  # victim relative to the target, rotated
            line = (np.abs(rel.imag) <= U_.COLOSSUS_SPLASH_WIDTH / 2) & (
                np.abs(rel.real) <= self.radius[bi]
            )
            hit |= line & colossus[:, None]
        if bane.any():
            hit |= (dist[bi, ui, :] <= U_.BANELING_SPLASH_RADIUS) & bane[:, None]
        hit[k_idx, ti] = False  # the target is hit already
        hit &= self._opponents[ui] & self.alive[bi] & self.ground[bi]
        k, j = np.nonzero(hit)
        return bi[k], j, self.raw[bi[k], ui[k], j], self.n_attacks[bi[k], ui[k]]

    def _regenerate(self) -> None:
        """SC2's regeneration (the SMAC maps' unit data): shields 2 per normal second once a
        unit has taken no damage for 10 normal seconds; zerg life 0.2734 per normal second."""
        if self.has_shields:
            rested = (self.clock - self.hit_at >= U_.SHIELD_REGEN_DELAY) & self.alive
            self.sh = np.minimum(self.sh + rested * np.float32(U_.SHIELD_REGEN), self.sh_max)
        if self.has_zerg:
            grow = self.zerg & self.alive
            self.hp = np.minimum(self.hp + grow * np.float32(U_.ZERG_REGEN), self.hp_max)

    def _heal(self, healing, tgt) -> None:
        energy = np.minimum(self.energy + U_.ENERGY_REGEN_PER_S * DT, U_.MEDIVAC_ENERGY_MAX)
        self.energy = np.where(self.is_medivac, energy, 0.0).astype(np.float32)
        healing = healing & (self.energy > 0)
        if not healing.any():
            return
        bi, ui = np.nonzero(healing)
        ti = tgt[bi, ui]
        living = self.alive[bi, ti]  # not a unit killed earlier in this frame
        bi, ui, ti = bi[living], ui[living], ti[living]
        per_frame = TABLE.damage[U_.MEDIVAC] * DT
        amount = np.minimum(
            np.minimum(per_frame, self.hp_max[bi, ti] - self.hp[bi, ti]),
            self.energy[bi, ui] * U_.MEDIVAC_HP_PER_ENERGY,
        )
        np.add.at(self.hp, (bi, ti), amount)
        self.energy[bi, ui] -= amount / U_.MEDIVAC_HP_PER_ENERGY

    def _reward(self, before, was_alive, won, lost) -> np.ndarray:
        """SMAC's reward of the step (``reward_battle`` and ``step``) for each battle ``[B]``."""
        opt, A = self.opt, self.n_allies
        if opt.reward_sparse:
            reward = won * 1.0 - lost
        else:
            lost_hp = np.where(was_alive, before - self.hp - self.sh, 0.0)
            died = was_alive & ~self.alive
            dealt = lost_hp[:, A:].sum(1) + died[:, A:].sum(1) * opt.reward_death_value
            if opt.reward_only_positive:
                # Enemy heals and shield regeneration make ``dealt`` negative: SMAC takes the
                # absolute value, SMACv2 clips it at 0.
                reward = np.maximum(dealt, 0.0) if self.v2 else np.abs(dealt)
            else:
                taken = lost_hp[:, :A].sum(1) + died[:, :A].sum(1) * opt.reward_death_value
                reward = dealt - opt.reward_negative_scale * taken
            reward = reward + won * opt.reward_win + lost * opt.reward_defeat
        if opt.reward_scale:
            reward = reward / (self.max_reward / opt.reward_scale_rate)
        return reward

    # -- the agents' view ---------------------------------------------------------------------

    def _observe(self):
        """SMAC's observations ``[B, A, D]``, state ``[B, S]`` and action masks ``[B, A, n]``."""
        A, E, B = self.n_allies, self.n_enemies, self.num_envs
        alive, f32 = self.alive, np.float32
        me_alive = alive[:, :A]
        me = self.pos[:, :A]
        dz = self.pos[:, None, :] - me[:, :, None]  # [B, A, U]: unit minus agent
        dist = np.abs(dz)
        hp = self.hp / self.hp_max
        sh = self.sh / np.maximum(self.sh_max, 1.0)

        # Masks.
        mask = np.zeros((B, A, self.n_actions), f32)
        mask[:, :, 0] = ~me_alive
        mask[:, :, 1] = me_alive
        # SMAC's can_move: the cell half a move ahead is on the map and pathable, for every
        # unit (a medivac's and a colossus's moves are masked by the ground grid too).
        probe = me[:, :, None] + MOVES * (U_.MOVE_AMOUNT / 2)
        inside = (probe.real >= 0) & (probe.real < MAP_SIZE)
        inside &= (probe.imag >= 0) & (probe.imag < MAP_SIZE)
        inside &= self._ground.ravel()[terrain.cell_of(probe.real, probe.imag)]
        mask[:, :, 2:6] = inside & me_alive[..., None]
        shoot = self.shoot[:, :A, None]
        sight = self.sight[:, :A, None]
        if self.n_fov:
            in_shot, in_sight = self._cone(dz, dist, shoot), self._cone(dz, dist, sight)
        else:
            in_shot, in_sight = dist <= shoot, dist < sight
        mask[:, :, N_ACTIONS_NO_ATTACK : self.n_no_attack] = me_alive[..., None]
        attack = alive[:, None, A:] & in_shot[:, :, A:]
        attack &= (me_alive & ~self.is_medivac[:, :A])[..., None]
        first = self.n_no_attack
        mask[:, :, first:] = attack
        if self.has_medivac:
            k = min(A, E)
            heal = self.candidates[:, :A, :k] & alive[:, None, :k] & in_shot[:, :, :k]
            heal &= (me_alive & self.is_medivac[:, :A])[..., None]
            mask[:, :, first : first + k] += heal

        # Observations: zeros for a dead agent and for units out of its sight.
        visible = in_sight & alive[:, None, :] & me_alive[..., None]
        rel = np.stack([dist, dz.real, dz.imag], -1) / sight[..., None]  # [B, A, U, 3]
        shape = (B, A, self.n_units)
        unit = [rel, np.broadcast_to(hp[:, None, :, None], (*shape, 1))]
        unit_shield = np.broadcast_to(sh[:, None, :, None], (*shape, 1))
        onehot = np.broadcast_to(self.onehot[:, None], (*shape, self.type_bits))

        def feats(cols, shields, first, *extra):
            parts = [first, *(p[:, :, cols] for p in unit)]
            if shields:
                parts.append(unit_shield[:, :, cols])
            parts.append(onehot[:, :, cols])
            return np.concatenate([*parts, *extra], -1)

        last = self._action_eye[self.last_action] * (self.t > 0)[:, None, None]  # [B, A, n]
        if self.opt.prob_obs_enemy < 1.0:
            visible[:, :, A:] &= self._told(visible[:, :, A:])
        enemy = feats(slice(A, None), self.shield_enemy, mask[:, :, first:, None])
        enemy *= visible[:, :, A:, None]
        rows = np.arange(A)[:, None]
        seen = visible[:, rows, self._others][..., None]
        extra = [np.broadcast_to(last[:, None], (B, A, A, self.n_actions))]
        ally = feats(
            slice(0, A),
            self.shield_ally,
            visible[:, :, :A, None].astype(f32),
            *(extra if self.opt.obs_last_action else []),
        )
        ally = ally[:, rows, self._others] * seen
        own = [hp[:, :A, None]]
        if self.shield_ally:
            own.append(sh[:, :A, None])
        if self.v2:
            own += [me.real[..., None] / MAP_SIZE, me.imag[..., None] / MAP_SIZE]
        if self.n_fov:
            own += [self.fov.real[..., None], self.fov.imag[..., None]]
        own.append(self.onehot[:, :A])
        own = np.concatenate(own, -1) * me_alive[..., None]
        progress = np.broadcast_to((self.t / self.spec.limit)[:, None, None], (B, A, 1))
        obs = np.concatenate(
            [mask[:, :, 2:6], enemy.reshape(B, A, -1), ally.reshape(B, A, -1), own]
            + [progress] * self.opt.obs_timestep_number,
            -1,
        )

        # State: allies, enemies (zeros when dead), then every agent's last action.
        centred = (self.pos - (MAP_SIZE / 2) * (1 + 1j)) / MAP_SIZE
        cooldown = np.maximum(self.ready_at - self.clock, 0) / self.cd_norm
        wpn = np.where(self.is_medivac, self.energy / U_.MEDIVAC_ENERGY_MAX, cooldown)
        al = [hp[:, :A], wpn[:, :A], centred.real[:, :A], centred.imag[:, :A]]
        en = [hp[:, A:], centred.real[:, A:], centred.imag[:, A:]]
        if self.shield_ally:
            al.append(sh[:, :A])
        if self.n_fov:
            al += [self.fov.real, self.fov.imag]
        if self.shield_enemy:
            en.append(sh[:, A:])
        al = np.concatenate([np.stack(al, -1), self.onehot[:, :A]], -1) * me_alive[..., None]
        en = np.concatenate([np.stack(en, -1), self.onehot[:, A:]], -1) * alive[:, A:, None]
        state = [al.reshape(B, -1), en.reshape(B, -1)]
        state += [last.reshape(B, -1)] * self.opt.state_last_action
        state += [progress[:, 0]] * self.opt.state_timestep_number
        state = np.concatenate(state, -1)
        if self.opt.use_state_agent:
            state = self._state_agent(mask, dz, dist, hp, sh, centred, wpn, last, progress)
        if self.over.any():  # a finished battle waits for its reset: no-ops only
            mask[self.over] = 0
            mask[self.over, :, 0] = 1
        self._last_mask = mask
        return obs.astype(f32), state.astype(f32), mask

    def _state_agent(self, mask, dz, dist, hp, sh, centred, wpn, last, progress) -> np.ndarray:
        """on-policy's agent-specific state ``[B, A, S]`` (StarCraft2_Env.py:1327-1520
        ``get_state_agent``): allies (but itself), enemies, moves, own features, one-hot id
        and the step; a dead agent's is zeros but for its id under ``use_mustalive``. Written
        feature by feature into one array (views per block), no concatenation."""
        A, E, B, f32 = self.n_allies, self.n_enemies, self.num_envs, np.float32
        opt, alive, bits = self.opt, self.alive, self.type_bits
        out = np.zeros((B, A, self.state_space.shape[1]), f32)
        n_al, n_en = (A - 1) * self.nf_agent_ally, E * self.nf_agent_enemy
        al = out[:, :, :n_al].reshape(B, A, A - 1, self.nf_agent_ally)
        en = out[:, :, n_al : n_al + n_en].reshape(B, A, E, self.nf_agent_enemy)
        at = n_al + n_en
        move, own = out[:, :, at : at + 4], out[:, :, at + 4 : at + 4 + self.nf_agent_own]
        body = at + 4 + self.nf_agent_own  # then the one-hot id and the step
        out[:, :, body : body + A] = np.eye(A, dtype=f32)
        if opt.state_timestep_number:
            out[:, :, -1] = progress[..., 0]
        me = alive[:, :A, None]  # [B, A, 1]
        sight = self.sight[:, :A, None]

        def relative(block, cols, live):
            """distance, dx, dy over sight, only seen by a live agent (StarCraft2_Env.py:1399,
            1436: "if unit.health > 0")."""
            near = live & me
            block[..., 1] = dist[cols] / sight * near
            block[..., 2] = dz.real[cols] / sight * near
            block[..., 3] = dz.imag[cols] / sight * near
            return (dist[cols] < sight) & near  # within sight

        # enemies: available, distance, dx, dy, visible, health, shield, type, centre x/y
        first = self.n_no_attack
        live = alive[:, None, A:]  # [B, 1, E]
        en[..., 0] = mask[:, :, first : first + E] * live
        en[..., 4] = relative(en, np.s_[:, :, A:], live)
        en[..., 5] = hp[:, None, A:] * live
        c = 6
        if self.shield_enemy:
            en[..., c] = sh[:, None, A:] * live
            c += 1
        en[..., c : c + bits] = self.onehot[:, None, A:] * live[..., None]
        if opt.add_center_xy:
            en[..., c + bits] = centred.real[:, None, A:] * live
            en[..., c + bits + 1] = centred.imag[:, None, A:] * live
        # allies: visible, distance, dx, dy, cooldown (energy), health, shield, centre x/y,
        # type, last action
        others = self._others  # [A, A - 1]
        live = alive[:, others]  # [B, A, A - 1]
        al[..., 0] = relative(al, np.s_[:, np.arange(A)[:, None], others], live)
        al[..., 4] = wpn[:, others] * live
        al[..., 5] = hp[:, others] * live
        c = 6
        if self.shield_ally:
            al[..., c] = sh[:, others] * live
            c += 1
        if opt.add_center_xy:
            al[..., c] = centred.real[:, others] * live
            al[..., c + 1] = centred.imag[:, others] * live
            c += 2
        al[..., c : c + bits] = self.onehot[:, others] * live[..., None]
        if opt.state_last_action:
            al[..., c + bits :] = last[:, others] * live[..., None]
        # moves, then own: 1, 0, 0, 0, health, shield, centre x/y, type, last action
        move[:] = mask[:, :, 2:6]
        own[..., 0] = 1.0
        own[..., 4] = hp[:, :A]
        c = 5
        if self.shield_ally:
            own[..., c] = sh[:, :A]
            c += 1
        if opt.add_center_xy:
            # a dead agent's place (use_mustalive off): where it died, SC2's last known unit
            dead_xy = (self.death_pos[:, :A] - (MAP_SIZE / 2) * (1 + 1j)) / MAP_SIZE
            xy = np.where(alive[:, :A], centred[:, :A], dead_xy)
            own[..., c], own[..., c + 1] = xy.real, xy.imag
            c += 2
        own[..., c : c + bits] = self.onehot[:, :A]
        if opt.state_last_action:
            own[..., c + bits :] = last
        if opt.use_mustalive:
            out[:, :, :body] *= me
        return out

    def _cone(self, dz, dist, reach) -> np.ndarray:
        """SMACv2's ``is_position_in_cone``: within ``reach`` and within half the cone's angle
        of the agent's facing, comparing arctan of slopes (so the opposite cone counts too)."""
        dx = dz.real
        ahead = dx > 0
        dx = np.where(ahead, np.maximum(dx, _CONE_EPS), np.minimum(dx, -_CONE_EPS))
        fx = self.fov.real[..., None]
        fx = np.where(ahead, np.maximum(fx, _CONE_EPS), np.minimum(fx, -_CONE_EPS))
        gap = np.abs(np.arctan(dz.imag / dx) - np.arctan(self.fov.imag[..., None] / fx))
        return (dist <= reach) & (gap < np.pi / self.n_fov)

    def _told(self, sees: np.ndarray) -> np.ndarray:
        """SMACv2's ``prob_obs_enemy``: the first agent to see an enemy (the lowest index among
        those seeing it first) spots it and tells each other agent about it with that
        probability; an agent not told does not observe that enemy until it is spotted again,
        which happens when its spotter dies (SMACv2's ``step`` then forgets the tag).
        ``sees``: ``[B, A, E]``; returns who may observe whom, ``[B, A, E]``."""
        spotter = self._spotter
        lost = (spotter >= 0) & ~np.take_along_axis(self.alive, np.maximum(spotter, 0), 1)
        spotter[lost] = -1
        new = sees.any(1) & (spotter < 0)  # [B, E]
        if new.any():
            b, e = np.nonzero(new)
            first = sees[b, :, e].argmax(1)
            told = self._obs_rng.random((len(b), self.n_allies)) < self.opt.prob_obs_enemy
            told[np.arange(len(b)), first] = True
            self._told_to[b, :, e] = told
            spotter[b, e] = first
        return self._told_to

    # -- stepping -----------------------------------------------------------------------------

    def step(self, actions: dict[str, np.ndarray] | np.ndarray) -> VectorStep:
        """Steps with ``{"agent": [B, A]}`` (the VectorEnv form) or the bare ``[B, A]`` array."""
        A, B = self.n_allies, self.num_envs
        if isinstance(actions, dict):
            actions = actions["agent"]
        actions = np.asarray(actions).reshape(B, A).astype(np.int64)
        self._check(actions)
        self._apply_orders(actions)
        before = self.hp + self.sh
        was_alive = self.alive.copy()
        if self.fused:
            fused.frames(self, U_.STEP_MUL)
            self._refresh()
        else:
            for _ in range(U_.STEP_MUL):
                self._frame()
        self.t += 1
        alive = self.alive
        body = alive & ~self.is_medivac  # a team of medivacs alone has lost (SMAC's rule)
        allies_left, enemies_left = body[:, :A].any(1), body[:, A:].any(1)
        won = allies_left & ~enemies_left
        # SMAC: on maps with medivacs a team with none but medivacs left has lost, even when the
        # enemy died in the same step; elsewhere that is a draw.
        lost = ~allies_left & (enemies_left | self.has_medivac)
        terminated = ~allies_left | ~enemies_left
        at_limit = ~terminated & (self.t >= self.spec.limit)
        if self.opt.terminate_at_limit:
            terminated, truncated = terminated | at_limit, np.zeros_like(at_limit)
        else:
            truncated = at_limit
        reward = self._reward(before, was_alive, won, lost)
        rewards = np.repeat(reward.astype(np.float32)[:, None], A, 1)
        done = terminated | truncated
        if not self.auto_reset:
            self.over |= done
        obs, state, mask = self._observe()
        self.info = {
            "battle_won": won,
            "dead_allies": (~alive[:, :A]).sum(1),
            "dead_enemies": (~alive[:, A:]).sum(1),
            "episode_limit": at_limit,
        }
        final_obs, final_state = obs, state
        if self.auto_reset and done.any():
            final_obs, final_state = obs.copy(), state.copy()
            self._new_battles(np.flatnonzero(done))
            obs, state, mask = self._observe()
        return VectorStep(
            {"agent": obs},
            state,
            {"agent": mask},
            rewards,
            terminated,
            truncated,
            {"agent": final_obs},
            final_state,
            self.info,
            self._active(),
        )

    def _active(self) -> dict[str, np.ndarray]:
        """Who is alive at the observation just made (MAPPO's active masks: on-policy's
        smac_runner.py:141-143 masks an agent from the step after it died to its episode's
        end; a reset battle's agents are all alive)."""
        return {"agent": self.alive[:, : self.n_allies].copy()}
