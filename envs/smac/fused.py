"""The frames of an agent step as one compiled loop (numba), the same game as
``BattleBatch._frame`` in NumPy.

With a few units per battle, the NumPy frame is dominated by the per-call cost of its ~60
array operations, 8 times a step; here each battle runs its 8 frames in one compiled loop
over its units. The rules, and the order in which they apply within a frame, are those of
``envs.smac.core`` (its docstring); ``tests/envs/test_smac_fused.py`` steps both on the same
battles and compares them. numba is optional (``pip install 'arena[smac]'``): without it the
core steps in NumPy.
"""

from __future__ import annotations

import numpy as np

from envs.smac import units as U_
from envs.smac.terrain import AIR

try:
    import numba
except ImportError:  # the NumPy frame runs instead
    numba = None

# Order kinds, as envs.smac.core numbers them (core imports this module, so not back).
NONE, IDLE, MOVE, ATTACK, HEAL, AMOVE = range(6)
EPS = np.float32(1e-5)
INF = np.float32(np.inf)
# smaclite's attack-move (envs.smac.core: SCAN_RANGE, ATTACKER_KEY, HEAL_MIN_ENERGY).
ATTACKER_KEY = np.float32(2e9)
HEAL_MIN_ENERGY = np.float32(5.0)
# The unit table's constants, as float32 like the core's arrays.
HEAL_PER_FRAME = np.float32(U_.TABLE.damage[U_.MEDIVAC] * np.float32(1.0 / U_.FRAMES_PER_SECOND))
ENERGY_PER_FRAME = np.float32(U_.ENERGY_REGEN_PER_S * (1.0 / U_.FRAMES_PER_SECOND))
ENERGY_MAX = np.float32(U_.MEDIVAC_ENERGY_MAX)
HP_PER_ENERGY = np.float32(U_.MEDIVAC_HP_PER_ENERGY)
HALF_WIDTH = np.float32(U_.COLOSSUS_SPLASH_WIDTH / 2)
BANE_RADIUS = np.float32(U_.BANELING_SPLASH_RADIUS)
SHIELD_DELAY = U_.SHIELD_REGEN_DELAY
SHIELD_REGEN = np.float32(U_.SHIELD_REGEN)
ZERG_REGEN = np.float32(U_.ZERG_REGEN)
MIN_DAMAGE = np.float32(U_.MIN_DAMAGE)
COLOSSUS, BANELING = U_.COLOSSUS, U_.BANELING


def frames(core, n: int) -> None:
    """Runs ``n`` game frames of every battle of ``core`` (a ``BattleBatch``) in place."""
    c = core
    routes = c._routes if c._routes is not None else np.zeros(1, np.int16)
    _frames(
        n, c.clock, c.pos, c.hp, c.sh, c.energy, c.ready_at, c.hit_at, c.alive, c.kind,
        c.target, c.goal, c.locked, c.fired_at, c.death_pos, c.stride, c.lo_x, c.hi_x,
        c.lo_y, c.hi_y, c.team, c.candidates, c.reach_offset, c.collide, c.push_share, c.raw,
        c.n_attacks, c.period, c.can_fire, c.is_medivac, c.ground, c.hp_max, c.sh_max,
        c.armor, c.reach, c.sight, c.radius, c.mover, c.zerg, c.types, c._far, c._walk,
        routes, c._centres, c._routes is not None, c.has_terrain, c.has_medivac,
        c.has_shields, c.has_zerg, c.has_splash, c.smaclite, c.scan_r, c.query_r, c.healer,
    )  # fmt: skip
    c.clock += n


def _frames_py(
    n, clock0, pos, hp, sh, energy, ready_at, hit_at, alive, kind, target, goal, locked,
    fired_at, death_pos, stride, lo_x, hi_x, lo_y, hi_y, team, cand, reach_offset, collide,
    push_share, raw, n_attacks, period, can_fire, is_medivac, ground, hp_max, sh_max, armor,
    reach, sight, radius, mover, zerg, types, far, walk, routes, centres, routed, terrain,
    medivacs, shields, zergs, splash, smaclite, scan_r, query_r, healer,
):  # fmt: skip
    B, Un = pos.shape
    dz = np.empty((Un, Un), np.complex64)
    dist = np.empty((Un, Un), np.float32)
    tgt = np.empty(Un, np.int64)
    has_t = np.empty(Un, np.bool_)
    in_range = np.empty(Un, np.bool_)
    total = np.empty(Un, np.float64)
    hits = np.empty(Un, np.float64)
    amount = np.empty(Un, np.float32)
    moved = np.empty(Un, np.complex64)  # this frame's new positions
    fire = np.empty(Un, np.bool_)
    order_t = np.empty(Un, np.int64)  # the target of a unit's live attack order, or -1
    for b in range(B):
        for f in range(n):
            clock = clock0 + f
            for i in range(Un):
                for j in range(Un):
                    d = pos[b, j] - pos[b, i]
                    dz[i, j] = d
                    dist[i, j] = np.float32(abs(d))
            # 1. targets (under smaclite's rules, healers after the others: they look at who
            # has a target)
            healers_left = False
            for j in range(Un):
                k = kind[b, j]
                t0 = target[b, j]
                live = k == ATTACK and cand[b, j, t0] and alive[b, t0]
                order_t[j] = t0 if live else -1
                healers_left |= healer[b, j] and alive[b, j]
            for n_i in range(2 * Un if smaclite else Un):
                i = n_i % Un
                if smaclite and is_medivac[b, i] != (n_i >= Un):
                    continue
                k = kind[b, i]
                t0 = target[b, i]
                ordered = (k == ATTACK or k == HEAL) and cand[b, i, t0] and alive[b, t0]
                idle = (k == IDLE or ((k == ATTACK or k == HEAL) and not ordered)) and team[i] == 1
                acquire = sight[b, i] if k == AMOVE else (reach[b, i] if idle else -INF)
                best, nearest = 0, INF
                for j in range(Un):
                    look = dist[i, j] + reach_offset[b, i, j]
                    if medivacs and is_medivac[b, i] and hp[b, j] >= hp_max[b, j]:
                        look = INF
                    if look < nearest:
                        best, nearest = j, look
                lk = locked[b, i]
                kept = dist[i, lk] + reach_offset[b, i, lk]
                if medivacs and is_medivac[b, i] and hp[b, lk] >= hp_max[b, lk]:
                    kept = INF
                if kept <= acquire and (kept <= reach[b, i] or fired_at[b, lk] == i):
                    best, nearest = lk, kept
                auto = nearest <= acquire
                if smaclite and k == AMOVE:
                    if is_medivac[b, i]:
                        best, auto = _smaclite_heal(
                            b, i, dist, reach_offset, reach, scan_r, hp, hp_max, alive, energy,
                            locked, has_t,
                        )  # fmt: skip
                    else:
                        best, auto = _smaclite_attack(
                            b, i, dist, reach_offset, reach, scan_r, query_r, alive, cand,
                            order_t, healer, locked, medivacs, healers_left,
                        )  # fmt: skip
                locked[b, i] = best if (auto and not ordered) else i
                t = t0 if ordered else best
                tgt[i] = t
                has_t[i] = ordered or auto
                in_range[i] = has_t[i] and dist[i, t] + reach_offset[b, i, t] <= reach[b, i]
            # 2. attacks and heals
            for i in range(Un):
                total[i] = 0.0
                hits[i] = 0.0
            fired = False
            for i in range(Un):
                fired_at[b, i] = tgt[i] if in_range[i] else -1
                fire[i] = in_range[i] and ready_at[b, i] <= clock and can_fire[b, i]
                if fire[i]:
                    ready_at[b, i] = clock + period[b, i]
                    fired = True
                    t = tgt[i]
                    total[t] += raw[b, i, t]
                    hits[t] += n_attacks[b, i]
                    if splash:
                        _splash(b, i, t, types, dz, dist, radius, team, alive, ground, raw,
                                n_attacks, total, hits)  # fmt: skip
            if fired:
                _apply_damage(b, clock, total, hits, hp, sh, armor, hit_at, shields)
                for i in range(Un):  # a baneling dies in its own explosion
                    if fire[i] and types[b, i] == BANELING:
                        hp[b, i] = 0.0
                for i in range(Un):
                    if alive[b, i] and hp[b, i] <= 0:
                        alive[b, i] = False
                        hp[b, i] = sh[b, i] = stride[b, i] = 0.0
                        kind[b, i] = NONE
                        death_pos[b, i] = pos[b, i]
                        pos[b, i] = np.complex64(far[i] + 1j * far[i])
                        lo_x[b, i] = hi_x[b, i] = lo_y[b, i] = hi_y[b, i] = far[i]
            if medivacs:
                for i in range(Un):
                    if is_medivac[b, i]:
                        energy[b, i] = min(energy[b, i] + ENERGY_PER_FRAME, ENERGY_MAX)
                    else:
                        energy[b, i] = 0.0
                for i in range(Un):  # every heal of the frame from the same hp
                    amount[i] = 0.0
                    t = tgt[i]
                    if in_range[i] and is_medivac[b, i] and energy[b, i] > 0 and alive[b, t]:
                        room = hp_max[b, t] - hp[b, t]
                        amount[i] = min(min(HEAL_PER_FRAME, room), energy[b, i] * HP_PER_ENERGY)
                for i in range(Un):
                    if amount[i] != 0.0:
                        hp[b, tgt[i]] += amount[i]
                        energy[b, i] -= amount[i] / HP_PER_ENERGY
            if shields or zergs:
                for i in range(Un):
                    if not alive[b, i]:
                        continue
                    if shields and clock - hit_at[b, i] >= SHIELD_DELAY:
                        sh[b, i] = min(sh[b, i] + SHIELD_REGEN, sh_max[b, i])
                    if zergs and zerg[b, i]:
                        hp[b, i] = min(hp[b, i] + ZERG_REGEN, hp_max[b, i])
            # 3. movement, with the orders as they stand after this frame's deaths
            for i in range(Un):
                k = kind[b, i]
                t0 = target[b, i]
                ordered = (k == ATTACK or k == HEAL) and cand[b, i, t0] and alive[b, t0]
                may_chase = ordered or k == AMOVE
                walks = k == MOVE or k == AMOVE
                chase = has_t[i] and not in_range[i] and may_chase
                walking = chase or (walks and not has_t[i])
                here = pos[b, i]
                dest = pos[b, tgt[i]] if chase else goal[b, i]
                step = stride[b, i]
                if k == MOVE and np.float32(abs(dest - here)) <= step:
                    kind[b, i] = IDLE  # arrived: stands (an agent's unit holds its fire)
                if routed and mover[b, i] != AIR:
                    cell = _cell(here)
                    goal_cell = _cell(dest)
                    m = min(mover[b, i], 1)
                    via = routes[(m * 1024 + goal_cell) * 1024 + cell]
                    if via != goal_cell:
                        dest = centres[via]
                v = dest - here
                gap = np.float32(abs(v))
                scale = np.float32(0.0)
                if walking:
                    scale = min(step, gap) / max(gap, EPS)
                push = np.complex64(0.0)
                for j in range(Un):
                    over = collide[b, i, j] - dist[i, j]
                    if over > 0:
                        push += (
                            np.float32(over * push_share[b, i, j] / max(dist[i, j], EPS)) * dz[i, j]
                        )
                new = here + v * scale - push
                x = min(max(new.real, lo_x[b, i]), hi_x[b, i])
                y = min(max(new.imag, lo_y[b, i]), hi_y[b, i])
                if terrain and alive[b, i]:
                    base = mover[b, i] * 1024
                    if not walk[base + _cell_xy(x, y)]:
                        if walk[base + _cell_xy(x, here.imag)]:
                            y = here.imag
                        elif walk[base + _cell_xy(here.real, y)]:
                            x = here.real
                        else:
                            x, y = here.real, here.imag
                moved[i] = np.complex64(x + 1j * y)
            for i in range(Un):
                pos[b, i] = moved[i]


def _smaclite_attack_py(b, i, dist, reach_offset, reach, scan_r, query_r, alive, cand, order_t,
                        healer, locked, medivacs, healers_left):  # fmt: skip
    """smaclite's attack-move for a unit that attacks, as ``BattleBatch._smaclite_targets``:
    (its target, whether it has one)."""
    lk = locked[b, i]
    attacks_me = order_t[lk] == i and cand[b, i, lk]
    in_range = dist[i, lk] + reach_offset[b, i, lk] <= reach[b, i]
    if lk != i and alive[b, lk] and (attacks_me or in_range):  # kept
        if medivacs and healers_left and not healer[b, lk]:  # the healers-first re-pick
            p = _smaclite_pick(b, i, dist, scan_r, query_r, cand, order_t, healer, medivacs, False)
            if p >= 0:
                return p, True
        return lk, True
    p = _smaclite_pick(b, i, dist, scan_r, query_r, cand, order_t, healer, medivacs, True)
    return max(p, 0), p >= 0


def _smaclite_pick_py(b, i, dist, scan_r, query_r, cand, order_t, healer, medivacs, far):
    """smaclite's ``min(key=(priority, d))`` over the units near ``i`` or attacking it (at
    distance 2e9 beyond the query radius when ``far``): an agent healer first; -1 if none."""
    best, best_key, best_h, key_h = -1, INF, -1, INF
    for j in range(dist.shape[0]):
        attacker = order_t[j] == i and cand[b, i, j]
        d = dist[i, j]
        if d < scan_r[b, i, j] or (attacker and d < query_r):
            key = d
        elif attacker and far:
            key = ATTACKER_KEY
        else:
            continue
        if key < best_key:
            best, best_key = j, key
        if medivacs and healer[b, j] and key < key_h:
            best_h, key_h = j, key
    return best_h if best_h >= 0 else best


def _smaclite_heal_py(b, i, dist, reach_offset, reach, scan_r, hp, hp_max, alive, energy, locked,
                      has_t):  # fmt: skip
    """smaclite's attack-move for a healer, as ``BattleBatch._smaclite_targets``."""
    lk = locked[b, i]
    in_range = dist[i, lk] + reach_offset[b, i, lk] <= reach[b, i]
    if lk != i and alive[b, lk] and in_range and hp[b, lk] < hp_max[b, lk]:
        return lk, True
    best, low = 0, INF
    if energy[b, i] >= HEAL_MIN_ENERGY:
        for j in range(dist.shape[0]):
            hurt_or_fighting = hp[b, j] < hp_max[b, j] or has_t[j]
            if dist[i, j] < scan_r[b, i, j] and hurt_or_fighting and hp[b, j] < low:
                best, low = j, hp[b, j]
    return best, low < INF


def _splash_py(b, i, t, types, dz, dist, radius, team, alive, ground, raw, n_attacks, total, hits):
    """Extra hits of a colossus's line or a baneling's explosion, as ``BattleBatch._splash``."""
    kind = types[b, i]
    u = dz[i, t] / max(np.float32(abs(dz[i, t])), EPS)
    for j in range(dz.shape[0]):
        if j == t or team[j] == team[i] or not alive[b, j] or not ground[b, j]:
            continue
        if kind == COLOSSUS:
            rel = dz[t, j] * np.conj(u)
            hit = abs(rel.imag) <= HALF_WIDTH and abs(rel.real) <= radius[b, j]
        else:
            hit = kind == BANELING and dist[i, j] <= BANE_RADIUS
        if hit:
            total[j] += raw[b, i, j]
            hits[j] += n_attacks[b, i]


def _apply_damage_py(b, clock, total, hits, hp, sh, armor, hit_at, shields):
    """A frame's summed hits on each unit, shields first, as ``BattleBatch._damage``."""
    for j in range(total.shape[0]):
        tot = np.float32(total[j])
        if tot <= 0:
            continue
        n = np.float32(hits[j])
        hit_at[b, j] = clock
        rest = tot
        if shields:
            s0 = sh[b, j]
            absorbed = min(s0, tot)
            rest = tot - absorbed
            mean = tot / max(n, np.float32(1.0))
            n = min(max(n - np.floor(s0 / max(mean, EPS)), np.float32(0.0)), n)
            sh[b, j] = s0 - absorbed
        if rest > 0:
            hp[b, j] -= max(MIN_DAMAGE * n, rest - armor[b, j] * n)


def _cell_py(z):
    return _cell_xy(z.real, z.imag)


def _cell_xy_py(x, y):
    ix = min(max(int(x), 0), 31)
    iy = min(max(int(y), 0), 31)
    return ix * 32 + iy


if numba is not None:
    _jit = numba.njit(cache=True, nogil=True)
    _cell_xy = _jit(_cell_xy_py)
    _cell = _jit(_cell_py)
    _apply_damage = _jit(_apply_damage_py)
    _splash = _jit(_splash_py)
    _smaclite_pick = _jit(_smaclite_pick_py)
    _smaclite_attack = _jit(_smaclite_attack_py)
    _smaclite_heal = _jit(_smaclite_heal_py)
    _frames = _jit(_frames_py)
    AVAILABLE = True
else:
    AVAILABLE = False
