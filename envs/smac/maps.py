"""SMAC v1 maps and SMACv2 procedural scenarios: who fights, where they start, on what ground,
what the enemy is ordered to do, for how long.

v1 maps: units, counts, episode limits, races and unit-type bits as in SMAC's map registry
(github.com/oxwhirl/smac, ``smac/env/starcraft2/maps/smac_maps.py``) and the map table of its
``docs/smac.md``; ``tests/envs/test_smac.py`` checks them against a copy of both. Spawn points,
enemy orders and ground come from the map archives themselves
(``smac/env/starcraft2/maps/SMAC_Maps/<map>.SC2Map``: ``Objects``, ``MapScript.galaxy`` and
``t3CellFlags``): most maps spawn the agents on (9, 16) and the enemy on (23, 16) and
attack-move the enemy to (9, 16); seven maps differ (``_LAYOUTS``). SC2 places the units asked
to spawn on one point around it; here a compact formation with a small seeded jitter.
SMACv2 scenarios (github.com/oxwhirl/smacv2, its README's scenario table and
``smacv2/examples/configs/sc2_gen_*.yaml``) sample unit types per episode (0.45/0.45/0.10)
and starts with its ``surrounded_and_reflect`` distribution (``distributions.py``) on the
open 32x32_flat map.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import numpy as np

from envs.smac import terrain
from envs.smac.units import INDEX, TABLE, UNIT_TYPES

MAP_SIZE = 32.0
ALLY_START = (9.0, 16.0)
ENEMY_START = (23.0, 16.0)
AMOVE_POINT, AMOVE_SEGMENT, HUNT, HOLD = "amove_point", "amove_segment", "hunt", "hold"
V2_LIMIT = 200
V2_TYPES = {
    "protoss": ("stalker", "zealot", "colossus"),
    "terran": ("marine", "marauder", "medivac"),
    "zerg": ("zergling", "hydralisk", "baneling"),
}
V2_TYPE_PROBS = (0.45, 0.45, 0.10)
# SMACv2's exception_unit_types: a team (or the group of extra enemies) made of these alone is
# drawn again.
V2_EXCEPTIONS = {"protoss": (), "terran": ("medivac",), "zerg": ("baneling",)}
V2_SIZES = {
    "5_vs_5": (5, 5),
    "10_vs_10": (10, 10),
    "10_vs_11": (10, 11),
    "20_vs_20": (20, 20),
    "20_vs_23": (20, 23),
}
V2_MIN_ATTACK_RANGE = 2.0
V2_SURROUND_OFFSET = 2.0  # surrounded enemies stop this far short of the centre per axis
_CORNERS = np.array([(0, 0), (0, 1), (1, 1), (1, 0)])  # SMACv2's diagonals 0-3
_V2_RANK = {name: i for i, name in enumerate(sorted(n for t in V2_TYPES.values() for n in t))}


@dataclass(frozen=True)
class MapSpec:
    """One battle scenario.

    Args:
        allies / enemies: ``((unit name, count), ...)`` in agent (and enemy) order; for a
            SMACv2 scenario, the counts only matter (types are sampled per episode).
        limit: episode limit in agent steps.
        type_bits: length of the unit-type one-hot in observations and state.
        ally_type_ids / enemy_type_ids: unit name -> one-hot index (SMAC numbers the two
            teams differently on some maps; see ``_SMAC_TYPE_IDS``).
        race: SMACv2 race, or None for a v1 map.
        terrain: the ground (``envs.smac.terrain.LAYOUTS``).
        ally_at / enemy_at: the spawn point of each group (default: all allies at (9, 16),
            all enemies at (23, 16)).
        enemy_order: what the map script orders the enemy to do: ``AMOVE_POINT`` (attack-move
            to ``order_point``), ``AMOVE_SEGMENT`` (to a point drawn per episode on the
            segment ``order_point`` = (x0, y0, x1, y1)), ``HUNT`` (attack the closest agent,
            and the next one when it dies) or ``HOLD`` (no order).
    """

    name: str
    allies: tuple[tuple[str, int], ...]
    enemies: tuple[tuple[str, int], ...]
    limit: int
    type_bits: int = 0
    ally_type_ids: dict[str, int] = field(default_factory=dict)
    enemy_type_ids: dict[str, int] = field(default_factory=dict)
    race: str | None = None
    terrain: str = "band"
    ally_at: tuple[tuple[float, float], ...] = ()
    enemy_at: tuple[tuple[float, float], ...] = ()
    enemy_order: str = AMOVE_POINT
    order_point: tuple[float, ...] = ALLY_START

    @property
    def n_allies(self) -> int:
        return sum(n for _, n in self.allies)

    @property
    def n_enemies(self) -> int:
        return sum(n for _, n in self.enemies)

    @property
    def procedural(self) -> bool:
        return self.race is not None

    def unit_names(self) -> set[str]:
        if self.race:
            return set(V2_TYPES[self.race])
        return {name for name, _ in self.allies + self.enemies}

    def shields(self, team: str) -> bool:
        """SMAC's shield bit: whether the team is Protoss."""
        names = self.unit_names() if self.race else {n for n, _ in getattr(self, team)}
        return any(UNIT_TYPES[INDEX[n]].race == "P" for n in names)


# SMAC's unit-type one-hot indices per map type: allies are numbered from the map's first
# custom unit id, enemies by SC2's built-in ids, which swaps stalker/zealot for enemies.
_SMAC_TYPE_IDS = {
    "stalkers_and_zealots": ({"stalker": 0, "zealot": 1}, {"zealot": 0, "stalker": 1}),
    "colossi_stalkers_zealots": (
        {"colossus": 0, "stalker": 1, "zealot": 2},
        {"colossus": 0, "stalker": 1, "zealot": 2},
    ),
    "MMM": (
        {"marauder": 0, "marine": 1, "medivac": 2},
        {"marauder": 0, "marine": 1, "medivac": 2},
    ),
    "bane": ({"baneling": 0, "zergling": 1}, {"baneling": 0, "zergling": 1}),
}


def _v1(name, allies, enemies, limit, map_type=None, **layout) -> MapSpec:
    ally_ids, enemy_ids = _SMAC_TYPE_IDS.get(map_type, ({}, {}))
    return MapSpec(name, allies, enemies, limit, len(ally_ids), ally_ids, enemy_ids, **layout)


# Spawn points, enemy orders and terrain of the maps that differ from the standard layout, from
# each map's MapScript.galaxy and Objects (SMAC's .SC2Map archives).
_OPEN = {"terrain": "open"}
_LAYOUTS = {
    "2m_vs_1z": dict(
        terrain="octagon",
        enemy_at=((16.0, 19.0),),
        enemy_order=AMOVE_SEGMENT,
        order_point=(13.0, 12.0, 19.0, 12.0),
    ),
    "2s_vs_1sc": dict(
        terrain="2s_vs_1sc",
        enemy_at=((13.92, 20.04),),
        enemy_order=HOLD,
    ),
    "6h_vs_8z": dict(
        terrain="6h_vs_8z",
        ally_at=((14.60, 9.49),),
        enemy_at=((14.41, 16.76),),
        order_point=(14.60, 9.49),
    ),
    "corridor": dict(
        terrain="corridor",
        ally_at=((19.04, 19.12),),
        enemy_at=((27.91, 28.24),),
        order_point=(4.47, 4.33),
    ),
    "so_many_baneling": dict(
        terrain="so_many_baneling",
        ally_at=((11.47, 12.02),),
        enemy_at=((27.91, 28.24),),
        order_point=(4.47, 4.33),
    ),
    "bane_vs_bane": dict(
        terrain="octagon",
        ally_at=((16.0, 8.0), (16.0, 11.0)),
        enemy_at=((16.0, 24.0), (16.0, 21.0)),
        order_point=(16.0, 8.0),
    ),
    "2c_vs_64zg": dict(
        terrain="2c_vs_64zg",
        ally_at=((16.0, 16.0),),
        enemy_at=((16.0, 9.0),),
        enemy_order=HUNT,
    ),
}


_M, _MMM = (("marine", 1),), (("marauder", 2), ("marine", 7), ("medivac", 1))
# One row a line.
# fmt: off
SMAC_MAPS: dict[str, MapSpec] = {
    m.name: m
    for m in (
        _v1("3m", (("marine", 3),), (("marine", 3),), 60),
        _v1("8m", (("marine", 8),), (("marine", 8),), 120),
        _v1("25m", (("marine", 25),), (("marine", 25),), 150),
        _v1("5m_vs_6m", (("marine", 5),), (("marine", 6),), 70),
        _v1("8m_vs_9m", (("marine", 8),), (("marine", 9),), 120),
        _v1("10m_vs_11m", (("marine", 10),), (("marine", 11),), 150),
        _v1("27m_vs_30m", (("marine", 27),), (("marine", 30),), 180),
        _v1("MMM", _MMM, _MMM, 150, "MMM"),
        _v1("MMM2", _MMM, (("marauder", 3), ("marine", 8), ("medivac", 1)), 180, "MMM"),
        _v1("2s3z", (("stalker", 2), ("zealot", 3)), (("stalker", 2), ("zealot", 3)), 120,
            "stalkers_and_zealots"),
        _v1("3s5z", (("stalker", 3), ("zealot", 5)), (("stalker", 3), ("zealot", 5)), 150,
            "stalkers_and_zealots"),
        _v1("3s5z_vs_3s6z", (("stalker", 3), ("zealot", 5)), (("stalker", 3), ("zealot", 6)),
            170, "stalkers_and_zealots"),
        _v1("1c3s5z", (("colossus", 1), ("stalker", 3), ("zealot", 5)),
            (("colossus", 1), ("stalker", 3), ("zealot", 5)), 180, "colossi_stalkers_zealots"),
        _v1("3s_vs_3z", (("stalker", 3),), (("zealot", 3),), 150, **_OPEN),
        _v1("3s_vs_4z", (("stalker", 3),), (("zealot", 4),), 200, **_OPEN),
        _v1("3s_vs_5z", (("stalker", 3),), (("zealot", 5),), 250, **_OPEN),
        # Two marines, each spawned on its own point.
        _v1("2m_vs_1z", (("marine", 1), ("marine", 1)), (("zealot", 1),), 150,
            ally_at=((13.0, 12.0), (19.0, 12.0)), **_LAYOUTS["2m_vs_1z"]),
        _v1("2s_vs_1sc", (("stalker", 1), ("stalker", 1)), (("spine_crawler", 1),), 300,
            ally_at=((11.12, 10.34), (16.98, 10.37)), **_LAYOUTS["2s_vs_1sc"]),
        _v1("6h_vs_8z", (("hydralisk", 6),), (("zealot", 8),), 150, **_LAYOUTS["6h_vs_8z"]),
        _v1("corridor", (("zealot", 6),), (("zergling", 24),), 400, **_LAYOUTS["corridor"]),
        _v1("so_many_baneling", (("zealot", 7),), (("baneling", 32),), 100,
            **_LAYOUTS["so_many_baneling"]),
        _v1("bane_vs_bane", (("baneling", 4), ("zergling", 20)),
            (("baneling", 4), ("zergling", 20)), 200, "bane", **_LAYOUTS["bane_vs_bane"]),
        _v1("2c_vs_64zg", (("colossus", 2),), (("zergling", 64),), 400,
            **_LAYOUTS["2c_vs_64zg"]),
    )
}
# fmt: on

# The marine maps ODIS adds for its multi-task sets (marine-easy, marine-hard), from
# github.com/LAMDA-RL/ODIS ``smac_patch/smac_maps.py`` (counts, limits) and
# ``smac_patch/SMAC_Maps/<map>.SC2Map``: their ``Objects`` (spawns (9, 16) and (23, 16)),
# ``MapScript.galaxy`` (the enemy attack-moves to (9, 16)) and ``t3CellFlags`` are byte for
# byte those of ODIS's copy of 8m, so only the counts and limits differ. ODIS's 3m, 5m_vs_6m,
# 8m, 8m_vs_9m, 10m_vs_11m, 25m and 27m_vs_30m have SMAC's counts and limits (SMAC_MAPS).
ODIS_MAPS: dict[str, MapSpec] = {
    name: _v1(name, (("marine", allies),), (("marine", enemies),), limit)
    for name, allies, enemies, limit in (
        ("4m", 4, 4, 75),
        ("5m", 5, 5, 90),
        ("6m", 6, 6, 100),
        ("7m", 7, 7, 110),
        ("9m", 9, 9, 120),
        ("10m", 10, 10, 120),
        ("11m", 11, 11, 150),
        ("12m", 12, 12, 150),
        ("4m_vs_5m", 4, 5, 60),
        ("6m_vs_7m", 6, 7, 80),
        ("7m_vs_8m", 7, 8, 90),
        ("9m_vs_10m", 9, 10, 140),
        ("10m_vs_12m", 10, 12, 160),
        ("11m_vs_12m", 11, 12, 160),
        ("13m_vs_15m", 13, 15, 160),
    )
}
V1_MAPS: dict[str, MapSpec] = SMAC_MAPS | ODIS_MAPS


def _v2(race: str, size: str) -> MapSpec:
    n_allies, n_enemies = V2_SIZES[size]
    types = V2_TYPES[race]
    ids = {t: i for i, t in enumerate(types)}
    first = types[0]
    return MapSpec(
        f"{race}_{size}",
        ((first, n_allies),),
        ((first, n_enemies),),
        V2_LIMIT,
        len(types),
        ids,
        ids,
        race,
        terrain="open",  # SMACv2's 32x32_flat
    )


SMACV2_SCENARIOS: dict[str, MapSpec] = {
    m.name: m for m in (_v2(r, s) for r in V2_TYPES for s in V2_SIZES)
}


def _expand(groups: tuple[tuple[str, int], ...]) -> list[int]:
    return [INDEX[name] for name, n in groups for _ in range(n)]


@functools.cache
def _formation(n: int, spacing: float) -> np.ndarray:
    """Offsets ``[n, 2]`` of a compact square formation of ``n`` units, unit 0 at the back."""
    cols = math.ceil(math.sqrt(n))
    k = np.arange(n)
    offsets = np.stack([k // cols - (math.ceil(n / cols) - 1) / 2, k % cols - (cols - 1) / 2], 1)
    return (offsets * spacing).astype(np.float32)


def formation(types: np.ndarray, centre, mirror: bool = False) -> np.ndarray:
    """Positions of a compact square formation of ``types`` around ``centre``; ``mirror``
    flips it left-right, so that two facing teams have the same units in front."""
    offsets = _formation(len(types), 2 * float(TABLE.radius[types].max()) + 0.2)
    if mirror:
        offsets = offsets * np.array([-1.0, 1.0], np.float32)
    return (np.asarray(centre, np.float32) + offsets).astype(np.float32)


def sample_battle(spec: MapSpec, rng: np.random.Generator):
    """Unit types ``[U]`` (allies then enemies), start positions ``[U, 2]`` and the point the
    enemy AI attack-moves to, for one episode of ``spec``."""
    if not spec.procedural:
        ally_types, ally_base, enemy_types, enemy_base = _v1_start(spec.name)
        ally_pos = jitter(ally_base, rng, spec.terrain)
        enemy_pos = jitter(enemy_base, rng, spec.terrain)
        # SMAC numbers the agents by (unit type id, x, y).
        rank = np.array([spec.ally_type_ids.get(UNIT_TYPES[t].name, 0) for t in ally_types])
        order = np.lexsort((ally_pos[:, 1], ally_pos[:, 0], rank))
        ally_types, ally_pos = ally_types[order], ally_pos[order]
        if spec.enemy_order == AMOVE_SEGMENT:
            x0, y0, x1, y1 = spec.order_point
            point = np.array((x0, y0)) + rng.uniform() * np.array((x1 - x0, y1 - y0))
        else:
            point = np.array(spec.order_point[:2])
    else:
        # SMACv2 mirrors the allies' team for the enemies and samples any extra enemies.
        ally_types = _v2_team(spec.race, spec.n_allies, rng)
        extra = _v2_team(spec.race, spec.n_enemies - spec.n_allies, rng)
        enemy_types = np.concatenate([ally_types, extra])[: spec.n_enemies]
        ally_pts, enemy_pts = v2_spawn_points(len(ally_types), len(enemy_types), rng)
        ally_pos = jitter(place(ally_types, ally_pts, spec.terrain), rng, spec.terrain)
        enemy_pos = jitter(place(enemy_types, enemy_pts, spec.terrain), rng, spec.terrain)
        order = _v2_agent_order(ally_types, ally_pos)
        ally_types, ally_pos = ally_types[order], ally_pos[order]
        point = ally_pos.mean(0)
    types = np.concatenate([ally_types, enemy_types]).astype(np.int64)
    pos = np.clip(np.concatenate([ally_pos, enemy_pos]), 0.5, MAP_SIZE - 0.5)
    return types, pos.astype(np.float32), point.astype(np.float32)


@functools.cache
def _v1_start(name: str):
    """A v1 map's unit types and start positions before the per-episode jitter."""
    spec = V1_MAPS[name]
    out = []
    for groups, at, mirror in (
        (spec.allies, spec.ally_at, False),
        (spec.enemies, spec.enemy_at, True),
    ):
        types = np.array(_expand(groups))
        points = _spawn_points(
            groups, at or ((ENEMY_START if mirror else ALLY_START),) * len(groups)
        )
        out += [types, place(types, points, spec.terrain, mirror)]
    return tuple(out)


def _spawn_points(groups, points) -> np.ndarray:
    return np.array([p for (_, n), p in zip(groups, points, strict=True) for _ in range(n)])


def _v2_team(race: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` unit types drawn with SMACv2's weights, drawn again while all are exceptions
    (SMACv2's ``WeightedTeamsDistribution``: no all-medivac or all-baneling team)."""
    pool = np.array([INDEX[name] for name in V2_TYPES[race]])
    exceptions = [INDEX[name] for name in V2_EXCEPTIONS[race]]
    while True:
        team = pool[rng.choice(3, size=n, p=V2_TYPE_PROBS)]
        if n == 0 or not np.isin(team, exceptions).all():
            return team


def v2_spawn_points(n: int, m: int, rng: np.random.Generator):
    """The spawn points ``[n, 2]``, ``[m, 2]`` of SMACv2's "surrounded_and_reflect" starts
    (smacv2/env/starcraft2/distributions.py), p = 0.5 each:

    - reflect: each ally uniform on x in [0, 15], y in [0, 32]; enemy i at the mirror image of
      ally i across x = 16; extra enemies uniform on the right half;
    - surrounded: all allies on the centre; the enemies split into 1-4 groups (sizes from a
      uniform multinomial, so a group may be empty) on distinct diagonals, each group on one
      point a uniform fraction of the way from its corner to 2 short of the centre per axis.
    """
    half = MAP_SIZE / 2
    if rng.random() > 0.5:
        ally = np.full((n, 2), half)
        n_groups = int(rng.integers(1, 5))
        sizes = rng.multinomial(m, np.full(n_groups, 1 / n_groups))
        fraction = rng.uniform(size=n_groups)
        diagonals = rng.choice(4, size=n_groups, replace=False)
        corner = _CORNERS[diagonals] * MAP_SIZE
        inner = half + (2 * _CORNERS[diagonals] - 1) * V2_SURROUND_OFFSET
        points = inner * fraction[:, None] + corner * (1 - fraction[:, None])
        return ally, np.repeat(points, sizes, axis=0)
    ally = rng.uniform((0, 0), (half - 1, MAP_SIZE), size=(n, 2))
    k = min(n, m)
    extra = rng.uniform((half, 0), (MAP_SIZE, MAP_SIZE), size=(m - k, 2))
    return ally, np.r_[np.c_[MAP_SIZE - ally[:k, 0], ally[:k, 1]], extra]


def place(types: np.ndarray, points: np.ndarray, layout: str, mirror: bool = False) -> np.ndarray:
    """Positions for units asked to spawn on ``points``, as SC2 places them: units sharing a
    point stand around it in a compact formation (``mirror``: the enemy's, facing left), and
    a unit that would stand on unpathable ground moves to the nearest pathable cell."""
    pos = np.asarray(points, np.float32).copy()
    _, group = np.unique(points, axis=0, return_inverse=True)
    for g in np.unique(group):
        idx = np.flatnonzero(group == g)
        if len(idx) > 1:
            pos[idx] = formation(types[idx], points[idx[0]], mirror)
    ground = terrain.walkable(layout)[terrain.GROUND]
    off = ~ground[terrain.cell_of(pos[:, 0], pos[:, 1])]
    if off.any():
        free = terrain.centres()[ground]
        here = pos[off, 0] + 1j * pos[off, 1]
        to = free[np.abs(here[:, None] - free[None, :]).argmin(1)]
        pos[off] = np.c_[to.real, to.imag]
    return pos


def jitter(pos: np.ndarray, rng: np.random.Generator, layout: str) -> np.ndarray:
    """``pos`` moved by a small seeded jitter (up to 0.2 per axis), so that a map's episodes
    differ; a unit the jitter would put on unpathable ground keeps its place."""
    out = pos + rng.uniform(-0.2, 0.2, size=pos.shape).astype(np.float32)
    ground = terrain.walkable(layout)[terrain.GROUND]
    off = ~ground[terrain.cell_of(out[:, 0], out[:, 1])]
    out[off] = pos[off]
    return out


def _v2_agent_order(types: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """SMACv2 numbers the agents by (unit type id, x, y); the agents' unit ids follow their
    names' alphabetical order (baneling < colossus < ... < zergling)."""
    rank = np.array([_V2_RANK[UNIT_TYPES[t].name] for t in types])
    return np.lexsort((pos[:, 1], pos[:, 0], rank))


def parse_v1_maps(text: str) -> list[str]:
    """Comma-separated SMAC v1 map names; a ValueError names the unknown ones and the maps."""
    maps = [m.strip() for m in text.split(",") if m.strip()]
    unknown = [m for m in maps if m not in V1_MAPS]
    if unknown or not maps:
        raise ValueError(f"unknown SMAC maps {unknown}; allowed: {', '.join(V1_MAPS)}")
    return maps


def spec_of(map_name: str) -> MapSpec:
    """The :class:`MapSpec` of a v1 map or SMACv2 scenario name; else an error listing them."""
    spec = V1_MAPS.get(map_name) or SMACV2_SCENARIOS.get(map_name)
    if spec is None:
        raise ValueError(
            f"unknown SMAC map {map_name!r}; v1 maps: {', '.join(V1_MAPS)}; "
            f"SMACv2 scenarios: {', '.join(SMACV2_SCENARIOS)}"
        )
    return spec
