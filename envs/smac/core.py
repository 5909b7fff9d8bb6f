"""The vectorised SMAC simulator: B battles of one map stepped together in NumPy.

Every per-unit quantity is a ``[B, U]`` array (U = allies then enemies), every pairwise one a
``[B, U, U]`` array, so a game frame is a fixed sequence of array operations whatever the
number of units; the only Python loop is over the 8 frames of an agent step. Positions are
complex numbers (x + iy), which halves the array operations of all 2-D geometry.

One game frame (one SC2 game loop, 1/22.4 "faster" second; an agent step is 8 of them):
  1. targets: an explicit attack/heal order keeps its target while it lives; the agents'
     units fire only on such an order (SMAC's unit data makes them Passive); the enemy's idle
     units take a target within weapon range and do not move; attack-moving enemies pick and
     keep targets by the rules of ``BattleOptions.enemy_ai`` (smaclite's, or Arena 0.2's:
     within sight, kept while in weapon range or shooting back), else walk to the map
     script's point; where the enemy hunts (SMACv2, 2c_vs_64zg), each enemy without a live
     target is ordered to attack its closest agent once a step;
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
# SMAC's get_surrounding_points: (dx, dy) in move amounts, then the agent's own cell (heights).
_AROUND = np.array([(0, 2), (0, -2), (2, 0), (-2, 0), (1, 1), (-1, -1), (1, -1), (-1, 1), (0, 0)])
N_OBS_PATHING, N_OBS_HEIGHT = 8, 9
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
        enemy_ai: how the enemy's attack-moving units pick and keep targets (``ENEMY_AIS``;
            docs/smac.md, "The enemy"). ``"smaclite"``: smaclite's attack-move
            (uoe-agents/smaclite@0d6abbe): acquire an agent within 5 + its radius or one
            attacking it, agent healers first; keep a target while it is in weapon range or
            attacks back. ``"arena-0.2"``: Arena 0.2's rule: acquire the closest agent within
            sight 9, keep it while it stays in weapon range or shoots back; no priorities.
            The default stays ``"arena-0.2"``: the calibration that was to choose
            (``bench/smac_heuristic.py``, SMAC's heuristic against each model, compared with
            the SMAC paper's heuristic column) has no published column to compare with, as
            none could be found, so nothing measured supports changing the game; and under
            smaclite's rules SMAC's closest-target script wins 97-100% on every symmetric
            map tried, 3s5z (SMAC's "hard") included. Idle enemies and the map scripts'
            explicit attack orders (SMACv2, 2c_vs_64zg) follow the same rules under both.
        heuristic_ai: SMAC's ``heuristic_ai``: the actions passed to ``step`` are ignored (but
            still fill ``last_action``, as SMAC's ``step`` does) and each agent follows SMAC's
            script (``get_agent_action_heuristic``). The action numbers it took, which SMAC
            writes back into the caller's action list, are ``BattleBatch.heuristic_actions``
            (``[B, A]``; ``info`` holds one value per battle, so they are not there).
        heuristic_rest: SMAC's ``heuristic_rest`` (needs ``heuristic_ai``): where the
            script's attack or heal is not an available action, move a step toward the target.
        obs_pathing_grid: SMAC's ``get_surrounding_pathing``: 8 entries after the 4 move
            features, the pathing grid (1 pathable) at the cells (x, y +- 4), (x +- 4, y),
            (x + 2, y + 2), (x - 2, y - 2), (x + 2, y - 2), (x - 2, y + 2) of the agent's cell,
            1 off the map. The grid is the map archive's (``envs.smac.terrain``), not a live
            game's, and leaves out the unreachable low ground of 6h_vs_8z and 2s_vs_1sc.
        obs_terrain_height: SMAC's ``get_surrounding_height``: 9 entries after those, the
            same 8 cells and the agent's own, 1 off the map. SMAC's values are the game's
            height map / 255; Arena's are the map archive's cliff level / 255 (0, 64/255 per
            level, ramps between): the same cells are higher or lower, but the absolute values
            are not SMAC's (``envs.smac.terrain.height``).
        obs_instead_of_state: the state is every agent's observation, concatenated (SMAC's
            ``get_state``; ``state_last_action`` and ``state_timestep_number`` then do nothing).
        continuing_episode: None (Arena's default): the episode limit truncates the episode and
            ``info["episode_limit"]`` marks it. True or False: SMAC's ``step``, which ends an
            episode at its limit with ``terminated`` either way and sets
            ``info["episode_limit"]`` only with True (so a learner may bootstrap; False hides
            the time-out, SMAC's default).
        action_mask: SMACv2 only; False (SMACv2's EPO configs) makes attacking (a medivac:
            healing) every live target available, in range or not; out of range (or outside
            the cone) the action gives no order, so the unit carries on with its last one. The
            observation's "available" entry of an enemy stays the in-range test.
        stochastic_attack: SMACv2 only, its ``capability_config["attack"]`` with
            ``per_agent_uniform`` bounds ``(low, high)``: each agent draws an attack
            probability per episode; an attack or heal action then gives its order only with
            that probability (else no order). Observed as an own feature and a state feature
            after the shield, and by teammates when ``observe_attack_probs`` (else a zero).
        stochastic_health: SMACv2 only, ``capability_config["health"]`` with bounds
            ``(low, high)``, high < 1: each agent draws a health level per episode and is
            killed when its health / max falls below it, checked ``kill_unit_step_mul`` game
            loops before the end of each step. Health then reads
            ``(health / max - level) / (1 - level)`` (own, state, and teammates' when
            ``observe_teammate_health``, else zero), and the level is a feature after the
            attack probability. Needs ``reward_only_positive`` (as SMACv2 asserts).
        upstream_obs_bug: SMACv2 only; reproduce SMACv2's enemy tagging exactly as its
            ``get_obs_agent`` runs it (oxwhirl/smacv2@577ab5a:
            smacv2/env/starcraft2/starcraft2.py:1538-1584): agents are processed in a random
            order, the first to see an untagged enemy (alive, or dead at its last position)
            tags it, and an agent that at its turn is not told about enemy e gets its whole
            enemy block zeroed up to e (the ``enemy_feats = np.zeros(...)`` inside the loop).
            Arena's default gives the intended observation (only the untold enemy hidden).
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
    enemy_ai: str = "arena-0.2"
    heuristic_ai: bool = False
    heuristic_rest: bool = False
    obs_pathing_grid: bool = False
    obs_terrain_height: bool = False
    obs_instead_of_state: bool = False
    continuing_episode: bool | None = None
    action_mask: bool = True
    stochastic_attack: tuple[float, float] | None = None
    observe_attack_probs: bool = True
    stochastic_health: tuple[float, float] | None = None
    observe_teammate_health: bool = True
    kill_unit_step_mul: int = 2
    upstream_obs_bug: bool = False
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
        bounds = {}
        for name, top in (("stochastic_attack", 1.0), ("stochastic_health", 1.0 - 1e-6)):
            value = getattr(opt, name)
            if value is None:
                continue
            ok = isinstance(value, (list, tuple)) and len(value) == 2
            if not ok or not 0.0 <= value[0] <= value[1] <= top:
                limit = "1" if top == 1.0 else "below 1"
                raise ValueError(
                    f"{name} must be None or (low, high) with 0 <= low <= high <= {limit}, "
                    f"got {value!r}"
                )
            bounds[name] = (float(value[0]), float(value[1]))
        opt = dataclasses.replace(opt, **bounds)
        for name in _V2_ONLY:
            if not v2 and getattr(opt, name) != getattr(cls, name):
                raise ValueError(f"{name} is a SMACv2 option; this is a SMAC v1 map")
        if v2 and opt.use_state_agent:
            raise ValueError(
                "use_state_agent is on-policy's SMAC v1 state (StarCraft2_Env.get_state_agent); "
                "this is a SMACv2 scenario: leave it off"
            )
        if opt.use_state_agent and opt.obs_instead_of_state:
            raise ValueError(
                "use_state_agent and obs_instead_of_state each define the state: pick one"
            )
        if not opt.use_state_agent and (not opt.use_mustalive or not opt.add_center_xy):
            raise ValueError("use_mustalive and add_center_xy shape use_state_agent's state: "
                             "set use_state_agent=True or leave them at their defaults")  # fmt: skip
        if not 1 <= opt.num_fov_actions <= 360:  # one action per degree at the finest
            raise ValueError(f"num_fov_actions must be in 1..360, got {opt.num_fov_actions}")
        if not 0.0 <= opt.prob_obs_enemy <= 1.0:
            raise ValueError(f"prob_obs_enemy must be in [0, 1], got {opt.prob_obs_enemy}")
        if opt.stochastic_health is not None and not opt.reward_only_positive:
            raise ValueError(
                "stochastic_health needs reward_only_positive=True (SMACv2: different health "
                "levels are only compatible with positive rewards)"
            )
        if not 0 <= opt.kill_unit_step_mul <= U_.STEP_MUL:
            raise ValueError(
                f"kill_unit_step_mul must be in 0..{U_.STEP_MUL}, got {opt.kill_unit_step_mul}"
            )
        if opt.continuing_episode is not None and not isinstance(opt.continuing_episode, bool):
            raise ValueError(
                f"continuing_episode must be None, True or False, got {opt.continuing_episode!r}"
            )
        if opt.reward_scale and opt.reward_scale_rate <= 0:
            raise ValueError(f"reward_scale_rate must be > 0, got {opt.reward_scale_rate}")
        if opt.enemy_ai not in ENEMY_AIS:
            raise ValueError(
                f"enemy_ai must be one of {', '.join(map(repr, ENEMY_AIS))}, got {opt.enemy_ai!r}"
            )
        if opt.heuristic_rest and not opt.heuristic_ai:
            raise ValueError("heuristic_rest=True needs heuristic_ai=True (SMAC ignores it alone)")
        return opt


_V2_ONLY = (
    "reward_scale_per_episode",
    "prob_obs_enemy",
    "conic_fov",
    "num_fov_actions",
    "action_mask",
    "stochastic_attack",
    "observe_attack_probs",
    "stochastic_health",
    "observe_teammate_health",
    "kill_unit_step_mul",
    "upstream_obs_bug",
)
# The enemy's target rules (BattleOptions.enemy_ai).
ENEMY_AIS = ("smaclite", "arena-0.2")
# smaclite's attack-move (uoe-agents/smaclite@0d6abbe): every unit's minimum_scan_range
# (smaclite/env/units/unit_type.py:46), and the distance it gives an agent that attacks a unit
# from outside its query radius (smaclite/env/smaclite.py:320).
SCAN_RANGE = 5.0
ATTACKER_KEY = np.float32(2e9)
# A healer takes no new target below 5 energy (smaclite/env/units/unit.py:108).
HEAL_MIN_ENERGY = 5.0


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
        # SMAC's feature sizes; SMACv2's capabilities (attack probability, health level) are
        # one entry each for the agent itself, its teammates and the state.
        self.n_caps = (opt.stochastic_attack is not None) + (opt.stochastic_health is not None)
        self.nf_move = 4 + N_OBS_PATHING * opt.obs_pathing_grid
        self.nf_move += N_OBS_HEIGHT * opt.obs_terrain_height
        self.nf_enemy = 4 + 1 + self.shield_enemy + self.type_bits
        self.nf_ally = 4 + 1 + self.shield_ally + self.n_caps + self.type_bits
        self.nf_ally += self.n_actions * opt.obs_last_action
        self.nf_own = 1 + self.shield_ally + self.n_caps + self.type_bits
        self.nf_own += (2 if self.v2 else 0) + 2 * opt.conic_fov
        obs_dim = self.nf_move + E * self.nf_enemy + (A - 1) * self.nf_ally + self.nf_own
        obs_dim += opt.obs_timestep_number
        self.nf_state_ally = 4 + self.shield_ally + self.n_caps + self.type_bits
        self.nf_state_ally += 2 * opt.conic_fov
        self.nf_state_enemy = 3 + self.shield_enemy + self.type_bits
        state_dim = A * self.nf_state_ally + E * self.nf_state_enemy
        state_dim += A * self.n_actions * opt.state_last_action + opt.state_timestep_number
        if opt.obs_instead_of_state:
            state_dim = A * obs_dim
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
        self._height = terrain.height(layout)
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
        # smaclite's attack-move (enemy_ai="smaclite"): the scan radius 5 + r_j around each
        # unit (-inf for non-candidates), the query radius 5 + the largest radius on the map
        # (smaclite/env/smaclite.py:101-103, 307), who attacks whom and the agents' healers.
        self.smaclite = opt.enemy_ai == "smaclite"
        self.scan_r = zz()
        radii = TABLE.radius[sorted(present)]
        self.query_r = np.float32(SCAN_RANGE + radii.max())
        self.order_target = np.full((B, Un), -1, np.int64)  # an attack order's target, or -1
        self.attacked = zz(bool)  # [b, i, j]: j's attack order is on i, and i can hit j
        self.healer = z(bool)  # the agents' medivacs (smaclite's priority-0 targets)
        # SMAC's heuristic_ai: each agent's target (an enemy, a medivac's an ally), or -1.
        self.h_target = np.full((B, A), -1, np.int64)
        self.heuristic_actions = np.zeros((B, A), np.int64)  # the actions it took last step
        self.max_reward = np.ones(B, f32)
        self._scaled = np.zeros(B, bool)  # whether battle b's reward scale is fixed
        # SMACv2's prob_obs_enemy: who spotted each enemy, and who was told about it.
        self._spotter = np.full((B, E), -1)  # the agent that spotted each enemy, or -1
        self._told_to = np.ones((B, A, E), bool)
        self._obs_rng = np.random.default_rng(seed)
        # SMACv2's capabilities: per-episode draws, and the attack actions' coin flips.
        self.attack_prob = np.ones((B, A), f32)
        self.health_level = np.zeros((B, A), f32)
        self._cap_rng = np.random.default_rng(None if seed is None else (seed, 1))
        self._can_shoot = np.zeros((B, A, E), bool)  # in range (and cone), whatever the mask
        # upstream_obs_bug: the last tagging pass (who was told at its turn, the zeroing cut)
        # and which battles the next one redoes (None: all).
        self._at_turn = np.zeros((B, A, E), bool)
        self._cut = np.full((B, A), -1)
        self._retag: np.ndarray | None = None
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
        opt = self.opt
        for b in rows:  # one draw per new episode, not per step
            types, pos, point = sample_battle(spec, self._rngs[b])
            self.types[b] = types
            self.pos[b] = pos[:, 0] + 1j * pos[:, 1]
            self.point[b] = point[0] + 1j * point[1]
            # SMACv2's per_agent_uniform capabilities, after the battle's own draws.
            if opt.stochastic_attack is not None:
                self.attack_prob[b] = self._rngs[b].uniform(*opt.stochastic_attack, size=A)
            if opt.stochastic_health is not None:
                self.health_level[b] = self._rngs[b].uniform(*opt.stochastic_health, size=A)
        if self.v2 or not self._typed:
            self._set_types(rows if self._typed else np.arange(self.num_envs))
            self._typed = True
        self.stride[rows] = self.stride0[rows]
        self.lo_x[rows] = self.lo_y[rows] = self.radius[rows]
        self.hi_x[rows] = self.hi_y[rows] = MAP_SIZE - self.radius[rows]
        self.hp[rows], self.sh[rows] = self.hp_max[rows], self.sh_max[rows]
        self.ready_at[rows] = self.hit_at[rows] = self.clock
        self.locked[rows] = self._none[rows]
        self.h_target[rows] = -1
        self.energy[rows] = np.where(self.is_medivac[rows], U_.MEDIVAC_ENERGY_START, 0.0)
        self.alive[rows] = True
        self.kind[rows] = self._start_kind
        self.target[rows] = 0
        self.goal[rows] = self.point[rows][:, None]
        self.fired_at[rows] = -1
        self._spotter[rows] = -1
        # SMACv2's obs_enemies starts at 0; Arena's default tells everyone when prob is 1.
        self._told_to[rows] = self.opt.prob_obs_enemy >= 1.0 and not self.opt.upstream_obs_bug
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
        self.scan_r[rows] = np.where(cand, np.float32(SCAN_RANGE) + r[:, None, :], -np.inf)
        self.healer[rows] = med & agent
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
            self._cap_rng = np.random.default_rng((seed, 1))
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

    def _apply_orders(self, actions: np.ndarray, scripted: bool = False) -> None:
        """The agents' orders from their actions; ``scripted``: SMAC's heuristic's, which
        (``get_agent_action_heuristic``) bypass ``get_agent_action``'s range test and attack
        coin."""
        A = self.n_allies
        kind, target, goal = self.kind[:, :A], self.target[:, :A], self.goal[:, :A]
        move = (actions >= 2) & (actions < N_ACTIONS_NO_ATTACK)
        attack = actions >= self.n_no_attack
        if self.n_fov:  # turning the cone gives the unit no order
            look = (actions >= N_ACTIONS_NO_ATTACK) & ~attack
            turn = self._fov_dirs[np.clip(actions - N_ACTIONS_NO_ATTACK, 0, self.n_fov - 1)]
            self.fov = np.where(look, turn, self.fov)
        if not scripted and (not self.opt.action_mask or self.opt.stochastic_attack is not None):
            attack &= self._order_given(actions, attack)  # a failed attack: no order at all
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

    def scripted_actions(self) -> np.ndarray:
        """SMAC's heuristic with ``heuristic_rest`` as legal actions ``[B, A]`` for the
        battles as they stand, to pass to :meth:`step` of a battle without ``heuristic_ai``:
        an attack the script orders is taken only where it is available (else the move toward
        the target), so the battle plays as with ``heuristic_ai=True, heuristic_rest=True``
        (a test compares the two). Where the script gives a live agent no order (a medivac
        with no hurt ally), its 0 becomes stop, the legal action nearest to "no new order".
        Call it once per step: it keeps each agent's target."""
        act = self._heuristic(rest=True)
        return np.where((act == 0) & self.alive[:, : self.n_allies] & ~self.over[:, None], 1, act)

    def _heuristic(self, rest: bool | None = None) -> np.ndarray:
        """SMAC's ``heuristic_ai`` (oxwhirl/smac@d6aab33: smac/env/starcraft2/starcraft2.py:
        657-770, ``get_agent_action_heuristic``) for every agent: the action number each
        takes, ``[B, A]``, and its target in ``h_target``.

        A medivac keeps the ally it heals while that ally lives and is hurt, else takes the
        closest hurt ally that is not a medivac (l. 662-691); any other unit keeps its enemy
        until it dies, else takes the closest living enemy, a marauder never a medivac (l.
        692-714); distances are centre to centre, with no range limit. The order is SC2's
        attack (heal) on that unit, so the unit walks into range whatever the shoot-range mask
        says; with ``heuristic_rest`` an unavailable attack becomes a move toward the target
        along its larger axis (l. 718-754). Without a target a unit gets no new order (SMAC
        sends none) and its action is 0; a dead agent's, or a finished battle's, is 0."""
        A, E = self.n_allies, self.n_enemies
        alive, hp = self.alive, self.hp
        me = self.pos[:, :A]
        med = self.is_medivac[:, :A]
        ht = self.h_target
        hurt = alive & (hp != self.hp_max)
        ally_ok = np.take_along_axis(hurt[:, :A], np.clip(ht, 0, A - 1), 1)
        enemy_ok = np.take_along_axis(alive[:, A:], np.clip(ht, 0, E - 1), 1)
        keep = (ht >= 0) & np.where(med, ally_ok, enemy_ok)
        d = np.abs(self.pos[:, None, :] - me[:, :, None])  # [B, A, U], centre to centre
        d_ally = np.where((hurt & ~self.is_medivac)[:, None, :A], d[:, :, :A], np.inf)
        marauder = self.types[:, :A] == U_.MARAUDER
        skip = marauder[:, :, None] & self.is_medivac[:, None, A:]
        d_enemy = np.where(alive[:, None, A:] & ~skip, d[:, :, A:], np.inf)
        new = np.where(med, d_ally.argmin(-1), d_enemy.argmin(-1))
        found = np.where(med, np.isfinite(d_ally.min(-1)), np.isfinite(d_enemy.min(-1)))
        ht = np.where(keep, ht, np.where(found, new, -1))
        self.h_target = ht
        act = np.where(ht >= 0, ht + self.n_no_attack, 0)
        if self.opt.heuristic_rest if rest is None else rest:
            avail = np.take_along_axis(self._last_mask, act[..., None], -1)[..., 0] > 0
            t_pos = np.where(
                med,
                np.take_along_axis(me, np.clip(ht, 0, A - 1), 1),
                np.take_along_axis(self.pos[:, A:], np.clip(ht, 0, E - 1), 1),
            )
            dx, dy = (t_pos - me).real, (t_pos - me).imag
            # 4 east / 5 west along x, 2 north / 3 south along y (SMAC's action numbers).
            move = np.where(np.abs(dx) > np.abs(dy), np.where(dx > 0, 4, 5), np.where(dy > 0, 2, 3))
            act = np.where((ht >= 0) & ~avail, move, act)
        return np.where(alive[:, :A] & ~self.over[:, None], act, 0)

    def _order_given(self, actions: np.ndarray, attack: np.ndarray) -> np.ndarray:
        """SMACv2's ``get_agent_action``: an attack or heal fails (no order, the unit carries
        on) when its coin comes up above the agent's attack probability, or, without the
        action mask, when the target is out of range (``get_can_shoot``). ``[B, A]``."""
        slot = np.clip(actions - self.n_no_attack, 0, self.n_enemies - 1)
        ok = np.take_along_axis(self._can_shoot, slot[..., None], -1)[..., 0]
        if self.opt.stochastic_attack is not None:
            coin = self._cap_rng.random(attack.shape)
            ok &= coin <= self.attack_prob
        return ok

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
        self.order_target = np.where(valid & (kind == ATTACK), self.target, -1)
        if self.smaclite:
            units = np.arange(Un)[None, :, None]
            self.attacked = (self.order_target[:, None, :] == units) & self.candidates
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
        if self.smaclite:  # attack-moving units follow smaclite's rules instead
            closest, auto = self._smaclite_targets(dist, edge, closest, auto)
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

    def _smaclite_targets(self, dist, edge, closest, auto):
        """smaclite's attack-move (uoe-agents/smaclite@0d6abbe) for the attack-moving units:
        the target each unit takes this frame and whether it has one, ``[B, U]`` each;
        ``closest`` and ``auto`` are those of the others (idle units, as in arena-0.2)."""
        at, of = self._gather, self._of
        lk = self.locked
        amove = self.kind == AMOVE
        has = (lk != self._none) & of(self.alive, lk)
        # AttackMoveCommand.clean_up_target (unit_command.py:102-115): a dead target is lost,
        # one whose attack order is on this unit is kept, else it is lost out of attack range
        # (Unit.has_within_attack_range, unit.py:97-99: range + both radii, centre to centre).
        lk_edge = at(edge, lk)
        keep = has & (at(self.attacked, lk) | (lk_edge <= self.reach))
        # The targets an attack-mover may take (smaclite.py:301-320; unit_command.py:141-152):
        # agents within 5 + their radius, or attacking it; an attacker outside the query
        # radius (5 + the map's largest radius) is listed at distance 2e9.
        near = (dist < self.scan_r) | (self.attacked & (dist < self.query_r))
        key = np.where(near, dist, np.where(self.attacked, ATTACKER_KEY, np.inf))
        pick, found = self._healers_first(key)
        kept = lk
        if self.has_medivac:
            # smaclite.py:338-360, unit_command.py:127-132: where the agents have a healer,
            # a unit with a non-healer target re-picks among those near it, healers first
            # (smaclite's CombatType.priority, combat_type.py:8-10: smaclite's own rule).
            healers_left = (self.alive & self.healer).any(1, keepdims=True)
            switch = keep & healers_left & ~of(self.healer, lk)
            p, p_found = self._healers_first(np.where(near, dist, np.inf))
            kept = np.where(switch & p_found, p, lk)
        target = np.where(keep, kept, pick)
        has_t = keep | found
        heals = amove & self.is_medivac
        if heals.any():
            # An attack-moving healer: lost when dead, out of range (clean_up_target) or at
            # full health (Unit.heal, unit.py:108-111); a new one is the lowest-hp unit within
            # 5 + its radius that is hurt or has a target (__pick_target_healing, lines
            # 154-159), taken with 5 energy or more (unit.py:108).
            hurt = self.hp < self.hp_max
            m_keep = has & (lk_edge <= self.reach) & of(hurt, lk)
            fighting = np.where(amove, has_t, auto | self.ordered)
            pool = (dist < self.scan_r) & (hurt | fighting)[:, None, :]
            pool &= (self.energy >= HEAL_MIN_ENERGY)[:, :, None]
            hp = np.where(pool, self.hp[:, None, :], np.inf)
            m = hp.argmin(-1)
            m_found = np.isfinite(at(hp, m))
            target = np.where(heals, np.where(m_keep, lk, m), target)
            has_t = np.where(heals, m_keep | m_found, has_t)
        return np.where(amove, target, closest), np.where(amove, has_t, auto)

    def _healers_first(self, key):
        """The argmin of ``key [B, U, U]`` over each row, an agent healer first where one has a
        finite key (smaclite's ``min(key=(priority, d))``), and whether any key is finite."""
        at = self._gather
        pick = key.argmin(-1)
        found = np.isfinite(at(key, pick))
        if self.has_medivac:
            h_key = np.where(self.healer[:, None, :], key, np.inf)
            h = h_key.argmin(-1)
            pick = np.where(np.isfinite(at(h_key, h)), h, pick)
        return pick, found

    def _gather(self, m, idx):
        """``m[b, i, idx[b, i]]`` for ``m`` of shape ``[B, U, U]``."""
        B, Un = idx.shape
        return m.reshape(-1, Un)[self._flat, idx.ravel()].reshape(B, Un)

    def _of(self, v, idx):
        """``v[b, idx[b, i]]`` for ``v`` of shape ``[B, U]``."""
        return v.ravel()[(self._base + idx).ravel()].reshape(idx.shape)

    def _frames(self, n: int) -> None:
        """``n`` game frames of every battle."""
        if self.fused:
            fused.frames(self, n)
            self._refresh()
        else:
            for _ in range(n):
                self._frame()

    def _kill_below_health_level(self) -> None:
        """SMACv2's ``_kill_units_below_health_level``: agents whose health / max is below
        their health level die (``stochastic_health``)."""
        A = self.n_allies
        below = self.alive[:, :A] & (self.hp[:, :A] / self.hp_max[:, :A] < self.health_level)
        if below.any():
            dead = np.zeros_like(self.alive)
            dead[:, :A] = below
            self.hp[dead] = 0.0
            self._bury(dead)

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
        first = self.n_no_attack
        self._can_shoot = self._targets(in_shot)
        # SMACv2's action_mask=False: every live target, in range or not.
        mask[:, :, first:] = self._can_shoot if self.opt.action_mask else self._targets(None)

        # Observations: zeros for a dead agent and for units out of its sight.
        visible = in_sight & alive[:, None, :] & me_alive[..., None]
        rel = np.stack([dist, dz.real, dz.imag], -1) / sight[..., None]  # [B, A, U, 3]
        shape = (B, A, self.n_units)
        # SMACv2's capabilities: health rescaled by the health level, and the per-agent draws,
        # which teammates see only where observed (else a zero in their place).
        health, caps, caps_seen = self._capabilities(hp)
        hp_seen = hp
        if self.opt.stochastic_health is not None:
            hp_seen = np.concatenate([health * self.opt.observe_teammate_health, hp[:, A:]], 1)
        unit = [rel, np.broadcast_to(hp_seen[:, None, :, None], (*shape, 1))]
        unit_shield = np.broadcast_to(sh[:, None, :, None], (*shape, 1))
        onehot = np.broadcast_to(self.onehot[:, None], (*shape, self.type_bits))

        def feats(cols, shields, first, mid=(), extra=()):
            parts = [first, *(p[:, :, cols] for p in unit)]
            if shields:
                parts.append(unit_shield[:, :, cols])
            parts += [*mid, onehot[:, :, cols], *extra]
            return np.concatenate(parts, -1)

        last = self._action_eye[self.last_action] * (self.t > 0)[:, None, None]  # [B, A, n]
        cut = None
        if self.opt.upstream_obs_bug:
            told, cut = self._told_upstream(me, me_alive, sight)
            visible[:, :, A:] &= told
        elif self.opt.prob_obs_enemy < 1.0:
            visible[:, :, A:] &= self._told(visible[:, :, A:])
        # The enemy's "available" entry is the range test, with or without the action mask.
        enemy = feats(slice(A, None), self.shield_enemy, self._can_shoot[..., None].astype(f32))
        enemy *= visible[:, :, A:, None]
        if cut is not None:  # SMACv2 zeroes the block up to the last enemy not told
            enemy *= (np.arange(E) > cut[..., None])[..., None]
        rows = np.arange(A)[:, None]
        seen = visible[:, rows, self._others][..., None]
        extra = [np.broadcast_to(last[:, None], (B, A, A, self.n_actions))]
        ally = feats(
            slice(0, A),
            self.shield_ally,
            visible[:, :, :A, None].astype(f32),
            [np.broadcast_to(caps_seen[:, None], (B, A, A, self.n_caps))] if self.n_caps else [],
            extra if self.opt.obs_last_action else [],
        )
        ally = ally[:, rows, self._others] * seen
        own = [health[..., None]]
        if self.shield_ally:
            own.append(sh[:, :A, None])
        own.append(caps)
        if self.v2:
            own += [me.real[..., None] / MAP_SIZE, me.imag[..., None] / MAP_SIZE]
        if self.n_fov:
            own += [self.fov.real[..., None], self.fov.imag[..., None]]
        own.append(self.onehot[:, :A])
        own = np.concatenate(own, -1) * me_alive[..., None]
        progress = np.broadcast_to((self.t / self.spec.limit)[:, None, None], (B, A, 1))
        move = [mask[:, :, 2:6], *self._surroundings(me, me_alive)]
        obs = np.concatenate(
            [*move, enemy.reshape(B, A, -1), ally.reshape(B, A, -1), own]
            + [progress] * self.opt.obs_timestep_number,
            -1,
        )

        # State: allies, enemies (zeros when dead), then every agent's last action.
        centred = (self.pos - (MAP_SIZE / 2) * (1 + 1j)) / MAP_SIZE
        cooldown = np.maximum(self.ready_at - self.clock, 0) / self.cd_norm
        wpn = np.where(self.is_medivac, self.energy / U_.MEDIVAC_ENERGY_MAX, cooldown)
        al = [health, wpn[:, :A], centred.real[:, :A], centred.imag[:, :A]]
        en = [hp[:, A:], centred.real[:, A:], centred.imag[:, A:]]
        if self.shield_ally:
            al.append(sh[:, :A])
        al += list(caps.transpose(2, 0, 1))
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
        if self.opt.obs_instead_of_state:  # SMAC's get_state: the observations, concatenated
            state = obs.reshape(B, -1)
        if self.opt.use_state_agent:
            state = self._state_agent(mask, dz, dist, hp, sh, centred, wpn, last, progress)
        if self.over.any():  # a finished battle waits for its reset: no-ops only
            mask[self.over] = 0
            mask[self.over, :, 0] = 1
        self._last_mask = mask
        return obs.astype(f32), state.astype(f32), mask

    def _targets(self, in_shot: np.ndarray | None) -> np.ndarray:
        """Which live targets each live agent may attack (a medivac: heal) ``[B, A, E]``:
        those ``in_shot`` (``[B, A, U]``), or all of them when None."""
        A, E = self.n_allies, self.n_enemies
        alive = self.alive
        me_alive = alive[:, :A]
        reach = np.ones((1, 1, self.n_units), bool) if in_shot is None else in_shot
        out = alive[:, None, A:] & reach[:, :, A:] & (me_alive & ~self.is_medivac[:, :A])[..., None]
        if self.has_medivac:
            k = min(A, E)
            heal = self.candidates[:, :A, :k] & alive[:, None, :k] & reach[:, :, :k]
            out[:, :, :k] |= heal & (me_alive & self.is_medivac[:, :A])[..., None]
        return out

    def _surroundings(self, me: np.ndarray, me_alive: np.ndarray) -> list[np.ndarray]:
        """SMAC's ``get_surrounding_pathing`` (8) and ``get_surrounding_height`` (9) around
        each agent's cell ``(int(x), int(y))``, 1 off the map, zeros for a dead agent."""
        opt = self.opt
        if not (opt.obs_pathing_grid or opt.obs_terrain_height):
            return []
        step = int(U_.MOVE_AMOUNT)
        ix = me.real.astype(np.int64)[..., None] + _AROUND[:, 0] * step  # int(): truncation
        iy = me.imag.astype(np.int64)[..., None] + _AROUND[:, 1] * step
        n = terrain.SIZE
        inside = (ix >= 0) & (ix < n) & (iy >= 0) & (iy < n)
        cell = terrain.cell_of(ix, iy)
        out = []
        if opt.obs_pathing_grid:
            grid = self._ground.ravel()[cell[..., :N_OBS_PATHING]]
            out.append(np.where(inside[..., :N_OBS_PATHING], grid, 1.0))
        if opt.obs_terrain_height:
            out.append(np.where(inside, self._height.ravel()[cell], 1.0))
        return [x.astype(np.float32) * me_alive[..., None] for x in out]

    def _capabilities(self, hp: np.ndarray):
        """SMACv2's capability features: the agents' health as seen (``_compute_health`` with
        ``stochastic_health``, else health / max) ``[B, A]``, their own capabilities
        ``[B, A, n_caps]`` (attack probability, health level) and what teammates see of
        them (zeros where not observed)."""
        opt, A = self.opt, self.n_allies
        health = hp[:, :A]
        caps, seen = [], []
        if opt.stochastic_attack is not None:
            caps.append(self.attack_prob)
            seen.append(self.attack_prob * opt.observe_attack_probs)
        if opt.stochastic_health is not None:
            level = self.health_level
            health = (1.0 / (1 - level)) * (health - level)
            caps.append(level)
            seen.append(level * opt.observe_teammate_health)
        shape = (*health.shape, 0)
        caps = np.stack(caps, -1) if caps else np.zeros(shape, np.float32)
        seen = np.stack(seen, -1) if seen else caps
        return health.astype(np.float32), caps.astype(np.float32), seen.astype(np.float32)

    def _told_upstream(self, me, me_alive, sight):
        """``upstream_obs_bug``: SMACv2's enemy tagging in ``get_obs``/``get_obs_agent``. The
        live agents take their turns in a random order (``random.shuffle``); the first whose
        sight covers an untagged enemy (a dead one at its last position too) tags it, and each
        other agent is told with ``prob_obs_enemy``; before its turn an agent is not told.
        ``step`` drops the tags of dead enemies and of dead spotters. Returns who observes whom
        at its turn ``[B, A, E]`` and, per agent, the last enemy not told then (-1 if none)
        ``[B, A]``: SMACv2 zeroes the agent's enemy block up to it. Battles that were not
        reset keep the previous call's result (one ``get_obs`` per step)."""
        A, E, B = self.n_allies, self.n_enemies, self.num_envs
        redo = np.ones(B, bool) if self._retag is None else self._retag
        if not redo.any():
            return self._at_turn, self._cut
        alive = self.alive
        spotter, told = self._spotter, self._told_to
        gone = (spotter >= 0) & ~np.take_along_axis(alive, np.maximum(spotter, 0), 1)
        lost = redo[:, None] & (gone | ~alive[:, A:])
        spotter[lost] = -1
        told &= ~lost[:, None, :]
        pos = np.where(alive[:, A:], self.pos[:, A:], self.death_pos[:, A:])
        dz = pos[:, None, :] - me[:, :, None]
        dist = np.abs(dz)
        sees = self._cone(dz, dist, sight) if self.n_fov else dist < sight
        sees &= me_alive[..., None]
        rank = self._obs_rng.random((B, A)).argsort(1).argsort(1)  # each agent's turn
        turn = np.where(sees, rank[..., None], A)
        first_turn = turn.min(1)  # [B, E]
        new = redo[:, None] & (spotter < 0) & (first_turn < A)
        b, e = np.nonzero(new)
        first = turn.argmin(1)[b, e]
        draws = self._obs_rng.random((len(b), A)) < self.opt.prob_obs_enemy
        draws[np.arange(len(b)), first] = True
        at_turn = told.copy()
        after = rank[b] >= first_turn[b, e][:, None]  # [n, A]: on or after the spotter's turn
        at_turn[b, :, e] = draws & after
        told[b, :, e] = draws
        spotter[b, e] = first
        cut = np.where(at_turn, -1, np.arange(E)).max(-1)
        self._at_turn = np.where(redo[:, None, None], at_turn, self._at_turn)
        self._cut = np.where(redo[:, None], cut, self._cut)
        return self._at_turn, self._cut

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
        if self.opt.heuristic_ai:
            bad = (actions < 0) | (actions >= self.n_actions)
            if bad.any():
                raise ValueError(
                    f"actions must be in 0..{self.n_actions - 1} (heuristic_ai ignores them "
                    f"but, as SMAC, records them as the last action), got {actions[bad][0]}"
                )
            self.heuristic_actions = taken = self._heuristic()
            self._apply_orders(taken, scripted=True)
            self.last_action[:] = actions  # SMAC's step one-hots the actions passed (l. 456)
        else:
            self._check(actions)
            self._apply_orders(actions)
        before = self.hp + self.sh
        was_alive = self.alive.copy()
        if self.opt.stochastic_health is not None:  # SMACv2: the kill check 2 loops early
            late = self.opt.kill_unit_step_mul
            self._frames(U_.STEP_MUL - late)
            self._kill_below_health_level()
            self._frames(late)
        else:
            self._frames(U_.STEP_MUL)
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
        smac_limit = self.opt.continuing_episode is not None  # SMAC's step: terminated
        if self.opt.terminate_at_limit or smac_limit:
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
            # SMAC sets it only with continuing_episode (Arena's default: always).
            "episode_limit": at_limit & (self.opt.continuing_episode is not False),
        }
        final_obs, final_state = obs, state
        if self.auto_reset and done.any():
            final_obs, final_state = obs.copy(), state.copy()
            self._new_battles(np.flatnonzero(done))
            self._retag = done  # SMACv2 tags once per get_obs: only the new battles again
            obs, state, mask = self._observe()
            self._retag = None
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
