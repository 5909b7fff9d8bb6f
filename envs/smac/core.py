"""The vectorised SMAC simulator: B battles of one map stepped together in NumPy.

Every per-unit quantity is a ``[B, U]`` array (U = allies then enemies), every pairwise one a
``[B, U, U]`` array, so a game frame is a fixed sequence of array operations whatever the
number of units; the only Python loop is over the 8 frames of an agent step.

One game frame (1/16 game second):
  1. targets: an explicit attack/heal order keeps its target while it lives; idle and stopped
     units take the closest target within weapon range and do not move; the enemy AI
     attack-moves: it takes the closest target within sight, else walks to the allies' start;
  2. units in range (edge to edge, the real weapon range) fire when their cooldown is over:
     each attack deals max(0.5, damage + bonus - armor), shields first (shield armor 0);
     zealot and colossus attack twice, the colossus also hits a 2.8-wide line through its
     target, a baneling explodes (radius 2.2) and dies; medivacs heal 9 hp/s for 1 energy per
     3 hp;
  3. the others walk at their speed toward their target, move point or attack-move point;
     ground units push apart where their radii overlap; the map edges hold everyone in.

What SMAC's agents see (observations, state, masks, reward) is computed from these arrays in
``_observe`` with SMAC's feature order and normalisation.

Shields do not regenerate (SC2 regenerates 2/s after 10 s out of combat; SMAC episodes rarely
leave units out of combat that long).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from gymnasium.utils import seeding

from envs.smac import units as U_
from envs.smac.maps import MAP_SIZE, V2_MIN_ATTACK_RANGE, MapSpec, sample_battle
from envs.smac.units import TABLE
from envs.vector import VectorEnv, VectorStep

DT = 1.0 / U_.FRAMES_PER_SECOND
N_ACTIONS_NO_ATTACK = 6
SIGHT_RANGE_V1, SHOOT_RANGE_V1 = 9.0, 6.0
REWARD_DEATH, REWARD_WIN, REWARD_SCALE = 10.0, 200.0, 20.0
# Order kinds.
NONE, IDLE, MOVE, ATTACK, HEAL, AMOVE = range(6)
# Move directions of actions 2-5: north (+y), south, east (+x), west.
MOVES = np.array([[0, 1], [0, -1], [1, 0], [-1, 0]], np.float32)
EPS = 1e-5


def action_name(action: int, medivac: bool = False) -> str:
    names = ("no-op", "stop", "move north", "move south", "move east", "move west")
    if action < N_ACTIONS_NO_ATTACK:
        return names[action]
    i = action - N_ACTIONS_NO_ATTACK
    return f"heal ally {i}" if medivac else f"attack enemy {i}"


class BattleBatch(VectorEnv):
    """B battles of one map (``envs.smac.maps``), stepped as arrays.

    Args:
        num_envs: B.
        seed: battle i is first reset with ``seed + i``; later resets continue its own RNG.
        map_name: a SMAC v1 map or SMACv2 scenario (``envs.smac.maps.spec_of``).
        reward_sparse: +1 win, -1 loss, 0 otherwise instead of SMAC's dense reward.
        auto_reset: reset a battle inside ``step`` when it ends (the training sampler's
            contract); the PettingZoo env turns it off.
    """

    has_action_mask = True

    def __init__(
        self,
        num_envs: int,
        seed: int | None = None,
        map_name: str = "3m",
        reward_sparse: bool = False,
        auto_reset: bool = True,
    ):
        from envs.smac.maps import spec_of

        self.spec: MapSpec = spec_of(map_name)
        self.num_envs = B = num_envs
        self.n_allies, self.n_enemies = A, E = self.spec.n_allies, self.spec.n_enemies
        self.n_units = Un = A + E
        self.n_actions = N_ACTIONS_NO_ATTACK + E
        self.reward_sparse, self.auto_reset = reward_sparse, auto_reset
        self.v2 = self.spec.procedural
        self.agents = tuple(f"agent_{i}" for i in range(A))
        self.type_bits = self.spec.type_bits
        self.shield_ally = int(self.spec.shields("allies"))
        self.shield_enemy = int(self.spec.shields("enemies"))
        present = {U_.INDEX[n] for n in self.spec.unit_names()}
        self.has_medivac = U_.MEDIVAC in present
        self.has_colossus = U_.COLOSSUS in present
        self.has_baneling = U_.BANELING in present
        # SMAC's feature sizes.
        self.nf_enemy = 4 + 1 + self.shield_enemy + self.type_bits
        self.nf_ally = 4 + 1 + self.shield_ally + self.type_bits
        self.nf_own = 1 + self.shield_ally + self.type_bits + (2 if self.v2 else 0)
        obs_dim = 4 + E * self.nf_enemy + (A - 1) * self.nf_ally + self.nf_own
        self.nf_state_ally = 4 + self.shield_ally + self.type_bits
        self.nf_state_enemy = 3 + self.shield_enemy + self.type_bits
        state_dim = A * self.nf_state_ally + E * self.nf_state_enemy + A * self.n_actions
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (obs_dim,), np.float32)
        self.state_space = gym.spaces.Box(-1.0, 1.0, (state_dim,), np.float32)
        self.action_space = gym.spaces.Discrete(self.n_actions)

        self.team = np.r_[np.zeros(A, np.int8), np.ones(E, np.int8)]
        self._opponents = self.team[:, None] != self.team[None, :]
        self._others = np.array([[j for j in range(A) if j != i] for i in range(A)], int).reshape(
            A, A - 1
        )
        self._seed = seed
        self._rngs: list[np.random.Generator] = [seeding.np_random(None)[0] for _ in range(B)]
        f32 = np.float32
        z = lambda dtype=f32: np.zeros((B, Un), dtype)  # noqa: E731
        # Dynamic state.
        self.x, self.y, self.hp, self.sh, self.cd, self.energy = (z() for _ in range(6))
        self.alive = z(bool)
        self.kind = z(np.int8)
        self.target = z(np.int64)
        self.px, self.py = z(), z()
        self.fired_at = np.full((B, Un), -1, np.int64)  # last target fired on (rendering)
        self.point = np.zeros((B, 2), f32)
        self.t = np.zeros(B, np.int64)
        self.last_action = np.zeros((B, A), np.int64)
        # Per-episode constants (a SMACv2 battle samples its unit types).
        self.types = z(np.int64)
        self.hp_max, self.sh_max, self.armor, self.speed, self.radius = (z() for _ in range(5))
        self.reach, self.cd_max, self.n_attacks, self.sight, self.shoot = (z() for _ in range(5))
        self.cd_norm = z()
        self.is_medivac, self.ground, self.mobile = z(bool), z(bool), z(bool)
        self.onehot = np.zeros((B, Un, self.type_bits), f32)
        self.candidates = np.zeros((B, Un, Un), bool)
        self.max_reward = np.ones(B, f32)
        self._ones_b = np.arange(B)[:, None]
        self._last_mask: np.ndarray | None = None

    # -- episodes -----------------------------------------------------------------------------

    def _new_battles(self, rows: np.ndarray) -> None:
        """Samples new battles in ``rows`` and sets every per-episode constant."""
        A = self.n_allies
        spec = self.spec
        for b in rows:  # one draw per new episode, not per step
            types, pos, point = sample_battle(spec, self._rngs[b])
            self.types[b], self.x[b], self.y[b], self.point[b] = types, pos[:, 0], pos[:, 1], point
        ty = self.types[rows]
        self.hp_max[rows], self.sh_max[rows] = TABLE.hp[ty], TABLE.shield[ty]
        self.armor[rows], self.speed[rows] = TABLE.armor[ty], TABLE.speed[ty]
        self.radius[rows], self.reach[rows] = TABLE.radius[ty], TABLE.range[ty]
        self.cd_max[rows], self.n_attacks[rows] = TABLE.cooldown[ty], TABLE.attacks[ty]
        self.cd_norm[rows] = TABLE.cooldown_norm[ty]
        self.is_medivac[rows] = TABLE.is_medivac[ty]
        self.ground[rows] = ~TABLE.air[ty]
        self.mobile[rows] = TABLE.speed[ty] > 0
        if self.v2:  # SMACv2: per-unit sight and shoot ranges
            self.sight[rows] = TABLE.sight[ty]
            self.shoot[rows] = np.maximum(TABLE.range[ty], V2_MIN_ATTACK_RANGE)
        else:
            self.sight[rows], self.shoot[rows] = SIGHT_RANGE_V1, SHOOT_RANGE_V1
        if self.type_bits:
            ids = np.zeros(len(U_.UNIT_TYPES), np.int64)
            ally_ids, enemy_ids = ids.copy(), ids.copy()
            for name, i in spec.ally_type_ids.items():
                ally_ids[U_.INDEX[name]] = i
            for name, i in spec.enemy_type_ids.items():
                enemy_ids[U_.INDEX[name]] = i
            idx = np.concatenate([ally_ids[ty[:, :A]], enemy_ids[ty[:, A:]]], axis=1)
            self.onehot[rows] = np.eye(self.type_bits, dtype=np.float32)[idx]
        # Who may target whom: opponents it can hit; a medivac heals allies but not medivacs.
        hit = TABLE.can_hit[ty[:, :, None], ty[:, None, :]] & self._opponents
        med = TABLE.is_medivac[ty]
        same = ~self._opponents & ~np.eye(self.n_units, dtype=bool)
        heal = med[:, :, None] & same & ~med[:, None, :]
        self.candidates[rows] = np.where(med[:, :, None], heal, hit)
        self.hp[rows], self.sh[rows] = self.hp_max[rows], self.sh_max[rows]
        self.cd[rows] = 0.0
        self.energy[rows] = np.where(self.is_medivac[rows], U_.MEDIVAC_ENERGY_START, 0.0)
        self.alive[rows] = True
        self.kind[rows] = np.r_[np.full(A, IDLE), np.full(self.n_enemies, AMOVE)]
        self.target[rows] = 0
        self.fired_at[rows] = -1
        self.t[rows] = 0
        self.last_action[rows] = 0
        enemy = slice(A, None)
        self.max_reward[rows] = (
            self.n_enemies * REWARD_DEATH
            + REWARD_WIN
            + (self.hp_max[rows, enemy] + self.sh_max[rows, enemy]).sum(1)
        )

    def reset(self, seed: int | None = None) -> VectorStep:
        seed = self._seed if seed is None else seed
        B = self.num_envs
        if seed is not None:
            self._rngs = [seeding.np_random(seed + i)[0] for i in range(B)]
        rows = np.arange(B)
        self._new_battles(rows)
        obs, state, mask = self._observe()
        zeros = np.zeros((B, self.n_allies), np.float32)
        no = np.zeros(B, bool)
        return VectorStep(obs, state, mask, zeros, no, no.copy(), obs.copy(), state.copy())

    # -- actions ------------------------------------------------------------------------------

    def _check(self, actions: np.ndarray) -> None:
        """An unavailable action is an error naming the agent, the action and the legal ones."""
        mask = self._last_mask
        n = self.n_actions
        bad = (actions < 0) | (actions >= n)
        legal = np.take_along_axis(mask, np.clip(actions, 0, n - 1)[..., None], -1)[..., 0] > 0
        bad |= ~legal
        if bad.any():
            b, a = map(int, np.argwhere(bad)[0])
            act = int(actions[b, a])
            med = bool(self.is_medivac[b, a])
            allowed = [f"{i} ({action_name(i, med)})" for i in np.flatnonzero(mask[b, a])]
            what = action_name(act, med) if 0 <= act < n else f"out of range 0..{n - 1}"
            where = f"battle {b}: " if self.num_envs > 1 else ""
            raise ValueError(
                f"{where}agent {self.agents[a]} chose action {act} ({what}), which is "
                f"unavailable; legal actions: {', '.join(allowed)}"
            )

    def _apply_orders(self, actions: np.ndarray) -> None:
        A = self.n_allies
        kind, target = self.kind[:, :A], self.target[:, :A]
        stop = actions == 1
        move = (actions >= 2) & (actions < N_ACTIONS_NO_ATTACK)
        attack = actions >= N_ACTIONS_NO_ATTACK
        kind[stop] = IDLE
        kind[move] = MOVE
        d = MOVES[np.clip(actions - 2, 0, 3)] * U_.MOVE_AMOUNT
        self.px[:, :A] = np.where(move, self.x[:, :A] + d[..., 0], self.px[:, :A])
        self.py[:, :A] = np.where(move, self.y[:, :A] + d[..., 1], self.py[:, :A])
        med = self.is_medivac[:, :A]
        kind[attack] = np.where(med[attack], HEAL, ATTACK)
        slot = actions - N_ACTIONS_NO_ATTACK
        # attack i targets enemy i (unit A + i); a medivac's slot i is ally i.
        target[attack] = np.where(med, slot, slot + A)[attack]
        self.last_action[:] = actions

    # -- the game -----------------------------------------------------------------------------

    def _frame(self) -> None:
        x, y, alive = self.x, self.y, self.alive
        B, Un = x.shape
        rows = self._ones_b
        dx = x[:, None, :] - x[:, :, None]  # dx[b, i, j] = x_j - x_i
        dy = y[:, None, :] - y[:, :, None]
        dist = np.sqrt(dx * dx + dy * dy)
        edge = dist - (self.radius[:, :, None] + self.radius[:, None, :])

        # 1. targets
        cand = self.candidates & alive[:, None, :]
        if self.has_medivac:
            damaged = self.hp < self.hp_max
            cand &= ~self.is_medivac[:, :, None] | damaged[:, None, :]
        masked = np.where(cand, edge, np.inf)
        closest = masked.argmin(-1)
        nearest = masked[rows, np.arange(Un)[None, :], closest]
        kind = self.kind
        amove = kind == AMOVE
        ordered = (kind == ATTACK) | (kind == HEAL)
        order = self.target
        order_alive = alive[rows, order]
        kind[ordered & ~order_alive] = IDLE  # the target died: the order is done
        ordered &= order_alive
        explicit = ordered & self.candidates[rows, np.arange(Un)[None, :], order]
        # An order on a unit it cannot hit (a marauder on a medivac) leaves it idle.
        idle = (kind == IDLE) | (ordered & ~explicit)
        auto = (idle | amove) & (nearest <= np.where(amove, self.sight, self.reach))
        tgt = np.where(explicit, order, closest)
        has_t = (explicit | auto) & alive
        t_edge = edge[rows, np.arange(Un)[None, :], tgt]
        in_range = has_t & (t_edge <= self.reach + EPS)

        # 2. attacks and heals
        fire = in_range & (self.cd <= EPS) & ~self.is_medivac
        acting = fire | (in_range & self.is_medivac)
        self.fired_at = np.where(acting, tgt, np.where(in_range, self.fired_at, -1))
        if fire.any():
            self._damage(fire, tgt, dx, dy, dist)
        if self.has_medivac:
            self._heal(in_range & self.is_medivac, tgt)
        self.cd = np.maximum(np.where(fire, self.cd_max, self.cd) - DT, 0.0)
        dead = alive & (self.hp <= 0)
        if dead.any():
            alive &= ~dead
            self.hp[dead] = 0.0
            self.sh[dead] = 0.0
            kind[dead] = NONE

        # 3. movement
        chase = has_t & ~in_range & (explicit | amove)
        tx = np.where(chase, x[rows, tgt], np.where(kind == MOVE, self.px, self.point[:, :1]))
        ty = np.where(chase, y[rows, tgt], np.where(kind == MOVE, self.py, self.point[:, 1:]))
        if self.has_medivac:  # an attack-moving medivac follows its team
            tx, ty = self._follow_team(amove & ~has_t & self.is_medivac, tx, ty)
        walking = alive & self.mobile & (chase | (kind == MOVE) | (amove & ~has_t))
        vx, vy = tx - x, ty - y
        gap = np.sqrt(vx * vx + vy * vy)
        stride = self.speed * DT
        arrived = walking & (kind == MOVE) & (gap <= stride)
        kind[arrived] = IDLE
        scale = np.where(walking & (gap > EPS), np.minimum(stride, gap) / np.maximum(gap, EPS), 0)
        # Ground units push apart where they overlap (a static unit does not move).
        solid = alive & self.ground
        pair = solid[:, :, None] & solid[:, None, :]
        overlap = np.where(pair & (edge < 0), -edge, 0.0)
        share = np.where(self.mobile[:, None, :], 0.5, 1.0) * self.mobile[:, :, None]
        push = overlap * share / np.maximum(dist, EPS)
        self.x = np.clip(x + vx * scale - (push * dx).sum(-1), self.radius, MAP_SIZE - self.radius)
        self.y = np.clip(y + vy * scale - (push * dy).sum(-1), self.radius, MAP_SIZE - self.radius)

    def _damage(self, fire, tgt, dx, dy, dist) -> None:
        """Applies this frame's attacks: every hit on a unit is summed, shields take it first."""
        B, Un = fire.shape
        bi, ui = np.nonzero(fire)
        ti = tgt[bi, ui]
        ty = self.types
        n = self.n_attacks[bi, ui]
        raw = TABLE.raw[ty[bi, ui], ty[bi, ti]]
        flat_b, flat_t, w_raw, w_hits = [bi], [ti], [raw * n], [n]
        if self.has_colossus or self.has_baneling:
            splash = self._splash(bi, ui, ti, dx, dy, dist)
            if splash is not None:
                sb, sj, s_raw, s_hits = splash
                flat_b.append(sb)
                flat_t.append(sj)
                w_raw.append(s_raw)
                w_hits.append(s_hits)
        flat = np.concatenate(flat_b) * Un + np.concatenate(flat_t)
        total = np.bincount(flat, np.concatenate(w_raw), B * Un).reshape(B, Un)
        hits = np.bincount(flat, np.concatenate(w_hits), B * Un).reshape(B, Un)
        sh0 = self.sh
        absorbed = np.minimum(sh0, total)
        rest = total - absorbed
        # Hits wholly absorbed by the shield lose nothing to armor; the others lose armor each.
        mean = total / np.maximum(hits, 1.0)
        into_hp = np.clip(hits - np.floor(sh0 / np.maximum(mean, EPS)), 0.0, hits)
        hp_damage = np.where(
            rest > 0, np.maximum(U_.MIN_DAMAGE * into_hp, rest - self.armor * into_hp), 0.0
        )
        self.sh = sh0 - absorbed
        self.hp = self.hp - hp_damage
        if self.has_baneling:
            bane = TABLE.is_baneling[ty[bi, ui]]
            self.hp[bi[bane], ui[bane]] = 0.0  # a baneling dies in its explosion

    def _splash(self, bi, ui, ti, dx, dy, dist):
        """Extra hits of colossus lines and baneling explosions: (battle, victim, raw, hits)."""
        ty = self.types
        kinds = ty[bi, ui]
        colossus = TABLE.is_colossus[kinds]
        bane = TABLE.is_baneling[kinds]
        if not (colossus.any() or bane.any()):
            return None
        victims_ok = self._opponents[ui] & self.alive[bi] & self.ground[bi]  # [K, U]
        hit = np.zeros_like(victims_ok)
        if colossus.any():
            # A line 2.8 wide across the attack direction, through the target.
            ux, uy = dx[bi, ui, ti], dy[bi, ui, ti]
            norm = np.maximum(np.hypot(ux, uy), EPS)
            ux, uy = ux / norm, uy / norm
            rx = dx[bi, ti, :]  # victim j relative to the target
            ry = dy[bi, ti, :]
            along = rx * ux[:, None] + ry * uy[:, None]
            across = -rx * uy[:, None] + ry * ux[:, None]
            line = (np.abs(across) <= U_.COLOSSUS_SPLASH_WIDTH / 2) & (
                np.abs(along) <= self.radius[bi]
            )
            line[np.arange(len(ti)), ti] = False  # the target is hit already
            hit |= line & colossus[:, None]
        if bane.any():
            blast = dist[bi, ui, :] <= U_.BANELING_SPLASH_RADIUS
            blast[np.arange(len(ti)), ti] = False
            hit |= blast & bane[:, None]
        hit &= victims_ok
        k, j = np.nonzero(hit)
        n = self.n_attacks[bi[k], ui[k]]
        raw = TABLE.raw[kinds[k], ty[bi[k], j]]
        return bi[k], j, raw * n, n

    def _heal(self, healing, tgt) -> None:
        self.energy = np.where(
            self.is_medivac,
            np.minimum(self.energy + U_.ENERGY_REGEN_PER_S * DT, U_.MEDIVAC_ENERGY_MAX),
            0.0,
        )
        healing = healing & (self.energy > 0)
        if not healing.any():
            return
        bi, ui = np.nonzero(healing)
        ti = tgt[bi, ui]
        per_frame = TABLE.damage[U_.MEDIVAC] * DT
        amount = np.minimum(
            np.minimum(per_frame, self.hp_max[bi, ti] - self.hp[bi, ti]),
            self.energy[bi, ui] * U_.MEDIVAC_HP_PER_ENERGY,
        )
        np.add.at(self.hp, (bi, ti), amount)
        self.energy[bi, ui] -= amount / U_.MEDIVAC_HP_PER_ENERGY

    def _follow_team(self, follow, tx, ty):
        if not follow.any():
            return tx, ty
        body = self.alive & ~self.is_medivac
        out_x, out_y = tx.copy(), ty.copy()
        for team in (0, 1):
            cols = self.team == team
            w = body[:, cols]
            n = np.maximum(w.sum(1, keepdims=True), 1)
            cx = (self.x[:, cols] * w).sum(1, keepdims=True) / n
            cy = (self.y[:, cols] * w).sum(1, keepdims=True) / n
            f = follow & cols[None, :]
            out_x = np.where(f, cx, out_x)
            out_y = np.where(f, cy, out_y)
        return out_x, out_y

    # -- the agents' view ---------------------------------------------------------------------

    def _observe(self):
        """SMAC's observations ``[B, A, D]``, state ``[B, S]`` and action masks ``[B, A, n]``."""
        A, E = self.n_allies, self.n_enemies
        B = self.num_envs
        x, y, alive = self.x, self.y, self.alive
        f32 = np.float32
        me_alive = alive[:, :A]
        dx = x[:, None, :] - x[:, :A, None]  # [B, A, U]: unit minus agent
        dy = y[:, None, :] - y[:, :A, None]
        dist = np.sqrt(dx * dx + dy * dy)
        hp = self.hp / self.hp_max
        sh = self.sh / np.maximum(self.sh_max, 1.0)

        # Masks.
        mask = np.zeros((B, A, self.n_actions), f32)
        mask[:, :, 0] = ~me_alive
        mask[:, :, 1] = me_alive
        ax, ay = x[:, :A], y[:, :A]
        m = U_.MOVE_AMOUNT / 2
        for k, (ex, ey) in enumerate(MOVES):
            nx, ny = ax + ex * m, ay + ey * m
            inside = (nx >= 0) & (nx < MAP_SIZE) & (ny >= 0) & (ny < MAP_SIZE)
            mask[:, :, 2 + k] = me_alive & inside
        shoot = self.shoot[:, :A, None]
        attack = me_alive[:, :, None] & alive[:, None, A:] & (dist[:, :, A:] <= shoot)
        attack &= ~self.is_medivac[:, :A, None]
        mask[:, :, N_ACTIONS_NO_ATTACK:] = attack
        if self.has_medivac:
            k = min(A, E)
            heal = self.candidates[:, :A, :k] & alive[:, None, :k] & (dist[:, :, :k] <= shoot)
            heal &= me_alive[:, :, None] & self.is_medivac[:, :A, None]
            mask[:, :, N_ACTIONS_NO_ATTACK : N_ACTIONS_NO_ATTACK + k] += heal

        # Observations: zeros for a dead agent and for units out of its sight.
        sight = self.sight[:, :A, None]
        visible = (dist < sight) & alive[:, None, :] & me_alive[:, :, None]
        rel = np.stack([dist / sight, dx / sight, dy / sight], -1)  # [B, A, U, 3]

        def unit_feats(cols, shields, first):
            parts = [first, rel[:, :, cols], hp[:, None, cols, None].repeat(A, 1)]
            if shields:
                parts.append(sh[:, None, cols, None].repeat(A, 1))
            if self.type_bits:
                parts.append(self.onehot[:, None, cols].repeat(A, 1))
            return np.concatenate(parts, -1)

        en_vis = visible[:, :, A:]
        enemy = unit_feats(slice(A, None), self.shield_enemy, mask[:, :, 6:, None])
        enemy *= en_vis[..., None]
        ally = unit_feats(slice(0, A), self.shield_ally, visible[:, :, :A, None].astype(f32))
        rows = np.arange(A)[:, None]
        ally = ally[:, rows, self._others] * visible[:, rows, self._others][..., None]
        own = [hp[:, :A, None]]
        if self.shield_ally:
            own.append(sh[:, :A, None])
        if self.v2:
            own += [ax[..., None] / MAP_SIZE, ay[..., None] / MAP_SIZE]
        if self.type_bits:
            own.append(self.onehot[:, :A])
        own = np.concatenate(own, -1) * me_alive[..., None]
        obs = np.concatenate(
            [mask[:, :, 2:6], enemy.reshape(B, A, -1), ally.reshape(B, A, -1), own], -1
        )

        # State: allies, enemies (zeros when dead), then every agent's last action.
        cx, cy = (x - MAP_SIZE / 2) / MAP_SIZE, (y - MAP_SIZE / 2) / MAP_SIZE
        wpn = np.where(
            self.is_medivac, self.energy / U_.MEDIVAC_ENERGY_MAX, self.cd / self.cd_norm
        )
        al = [hp[:, :A], wpn[:, :A], cx[:, :A], cy[:, :A]]
        en = [hp[:, A:], cx[:, A:], cy[:, A:]]
        if self.shield_ally:
            al.append(sh[:, :A])
        if self.shield_enemy:
            en.append(sh[:, A:])
        al = np.concatenate([np.stack(al, -1), self.onehot[:, :A]], -1) * me_alive[..., None]
        en = np.concatenate([np.stack(en, -1), self.onehot[:, A:]], -1) * alive[:, A:, None]
        last = np.zeros((B, A, self.n_actions), f32)
        np.put_along_axis(last, self.last_action[..., None], 1.0, -1)
        last *= (self.t > 0)[:, None, None]
        state = np.concatenate([al.reshape(B, -1), en.reshape(B, -1), last.reshape(B, -1)], -1)
        self._last_mask = mask
        return obs.astype(f32), state.astype(f32), mask

    # -- stepping -----------------------------------------------------------------------------

    def step(self, actions: np.ndarray) -> VectorStep:
        A = self.n_allies
        B = self.num_envs
        actions = np.asarray(actions).reshape(B, A).astype(np.int64)
        self._check(actions)
        self._apply_orders(actions)
        before = self.hp[:, A:] + self.sh[:, A:]
        was_alive = self.alive.copy()
        for _ in range(U_.STEP_MUL):
            self._frame()
        self.t += 1
        alive = self.alive
        body = alive & ~self.is_medivac  # a team of medivacs alone has lost (SMAC's rule)
        allies_left, enemies_left = body[:, :A].any(1), body[:, A:].any(1)
        won = allies_left & ~enemies_left
        terminated = ~allies_left | ~enemies_left
        truncated = ~terminated & (self.t >= self.spec.limit)
        if self.reward_sparse:
            reward = won * 1.0 - (~allies_left & enemies_left)
        else:
            after = self.hp[:, A:] + self.sh[:, A:]
            damage = np.where(was_alive[:, A:], before - after, 0.0).sum(1)
            kills = (was_alive[:, A:] & ~alive[:, A:]).sum(1) * REWARD_DEATH
            reward = np.abs(damage + kills) + won * REWARD_WIN
            reward = reward / self.max_reward * REWARD_SCALE
        rewards = np.repeat(reward.astype(np.float32)[:, None], A, 1)
        obs, state, mask = self._observe()
        done = terminated | truncated
        self.info = {
            "battle_won": won,
            "dead_allies": (~alive[:, :A]).sum(1),
            "dead_enemies": (~alive[:, A:]).sum(1),
            "episode_limit": truncated,
        }
        final_obs, final_state = obs, state
        if self.auto_reset and done.any():
            final_obs, final_state = obs.copy(), state.copy()
            rows = np.flatnonzero(done)
            self._new_battles(rows)
            obs, state, mask = self._observe()
        return VectorStep(
            obs, state, mask, rewards, terminated, truncated, final_obs, final_state,
            info=self.info,
        )
