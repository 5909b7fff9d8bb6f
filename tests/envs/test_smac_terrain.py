"""Each SMAC map's ground, spawns and enemy orders, against the numbers read from SMAC's map
archives (github.com/oxwhirl/smac, ``smac/env/starcraft2/maps/SMAC_Maps/*.SC2Map``: the
``t3CellFlags`` pathing bits, ``t3SyncCliffLevel`` cliff levels, ``Objects`` and
``MapScript.galaxy``)."""

import numpy as np
import pytest

from envs.smac import terrain
from envs.smac.core import ATTACK, IDLE, MOVE, NONE, BattleBatch
from envs.smac.maps import SMAC_MAPS

# Pathable cells and their bounds per map, counted from each archive's t3CellFlags (for
# 6h_vs_8z and 2s_vs_1sc: the plateau the units stand on).
ARCHIVE = {
    "3m": (512, (0, 31), (8, 23)),
    "MMM2": (512, (0, 31), (8, 23)),
    "3s_vs_5z": (1024, (0, 31), (0, 31)),
    "2m_vs_1z": (352, (6, 25), (6, 25)),
    "bane_vs_bane": (352, (6, 25), (6, 25)),
    "6h_vs_8z": (152, (8, 21), (8, 19)),
    "2s_vs_1sc": (168, (8, 19), (8, 23)),
    "corridor": (332, (2, 29), (2, 29)),
    "so_many_baneling": (300, (2, 29), (2, 29)),
    "2c_vs_64zg": (336, (0, 31), (6, 19)),
}


def battle(map_name, seed=0):
    core = BattleBatch(1, seed=seed, map_name=map_name, auto_reset=False)
    core.reset()
    return core


def on_ground(core) -> bool:
    alive = core.alive[0]
    cells = terrain.cell_of(core.pos[0].real, core.pos[0].imag)
    return bool(core._walk[core.mover[0] * 1024 + cells][alive].all())


@pytest.mark.parametrize("name", list(ARCHIVE))
def test_each_maps_ground_is_its_archives(name):
    count, (x0, x1), (y0, y1) = ARCHIVE[name]
    grid = terrain.pathable(SMAC_MAPS[name].terrain)
    xs, ys = np.nonzero(grid)
    assert grid.sum() == count
    assert (xs.min(), xs.max(), ys.min(), ys.max()) == (x0, x1, y0, y1)


def test_the_corridor_choke_and_the_ravines_cliff():
    corridor = terrain.pathable("corridor")
    assert corridor[12:14, 12:14].all()  # the 2x2 choke, joined corner to corner
    assert not corridor[11, 12] and not corridor[12, 11] and not corridor[14, 13]
    ravine = terrain.pathable("2c_vs_64zg")
    assert not ravine[4:28, 12:14].any() and ravine[0:4, 12:14].all()
    colossus = terrain.walkable("2c_vs_64zg")[terrain.CLIFF_WALKER].reshape(32, 32)
    assert colossus[4:28, 12:14].all()  # a colossus steps over the cliff


@pytest.mark.parametrize("name", sorted(SMAC_MAPS))
def test_every_map_spawns_on_its_ground_where_smac_does(name):
    spec = SMAC_MAPS[name]
    for seed in range(3):
        core = battle(name, seed)
        assert on_ground(core)
        A = core.n_allies
        allies = core.pos[0, :A]
        points = [complex(*p) for p in spec.ally_at] or [9 + 16j]
        nearest = np.abs(allies[:, None] - np.array(points)[None]).min(1)
        assert nearest.max() < 4.5  # a formation around the archive's points


def test_moves_onto_unpathable_ground_are_masked_as_smacs_can_move():
    core = battle("3m")
    core.pos[0, 0] = 5 + 8.6j  # half a move (1) south is y 7.6: off the band
    mask = core._observe()[2][0, 0]
    assert mask[2] == 1 and mask[3] == 0 and mask[4] == 1 and mask[5] == 1
    core.pos[0, 0] = 5 + 9.2j
    assert core._observe()[2][0, 0, 3] == 1


def test_a_unit_sent_off_the_ground_stops_at_its_edge():
    core = battle("3m")
    core.kind[0, 3:] = NONE
    core.kind[0, 0] = MOVE
    core.goal[0, 0] = core.pos[0, 0] - 12j
    core._refresh()
    for _ in range(12 * 8):  # 12 steps of 1.125: far enough to have left a 16-high band
        core._frame()
    assert 7.99 <= core.pos[0, 0].imag < 8.5 and on_ground(core)


def test_zerglings_walk_around_the_ravine_and_a_colossus_straight_over_it():
    core = battle("2c_vs_64zg")
    A = core.n_allies
    dead = np.ones((1, core.n_units), bool)
    dead[0, [0, A]] = False
    core._bury(dead)
    core.pos[0, 0], core.pos[0, A] = 16 + 16j, 16 + 9j
    core.kind[0, 0] = NONE  # the colossus holds still
    core.kind[0, A], core.target[0, A] = ATTACK, 0
    core._refresh()
    lowest_cliff_gap = np.inf
    for _ in range(40 * 8):
        core._frame()
        z = core.pos[0, A]
        if 4 <= z.real < 28:  # never through the cliff (y 12-14) between the lanes
            lowest_cliff_gap = min(lowest_cliff_gap, abs(z.imag - 13))
        assert on_ground(core)
    assert lowest_cliff_gap >= 0.9
    assert abs(core.pos[0, A] - core.pos[0, 0]) < 1.5  # it got there, round the end
    # The colossus crosses the same cliff directly.
    core = battle("2c_vs_64zg")
    dead = np.ones((1, core.n_units), bool)
    dead[0, 0] = False
    core._bury(dead)
    core.kind[0, 0], core.goal[0, 0] = MOVE, 16 + 10j
    core.pos[0, 0] = 16 + 16j
    core._refresh()
    for _ in range(7 * 8):  # 6 at 1.125 per step
        core._frame()
    assert abs(core.pos[0, 0] - (16 + 10j)) < 0.2


def test_corridor_zerglings_come_through_the_choke_to_smacs_attack_point():
    core = battle("corridor")
    A = core.n_allies
    dead = np.zeros((1, core.n_units), bool)
    dead[0, :A] = True
    core._bury(dead)
    for _ in range(60 * 8):
        core._frame()
        assert on_ground(core)
    lings = core.pos[0, A:]
    assert (abs(lings - (4.47 + 4.33j)) < 6).mean() > 0.8  # most reached the far room


def test_each_maps_enemy_orders_are_its_scripts():
    # 2s_vs_1sc: the spine crawler has no order; 2m_vs_1z: attack-move to a random point
    # between the marines' spawns; 2c_vs_64zg: attack the colossi.
    crawler = battle("2s_vs_1sc")
    assert crawler.kind[0, 2] == IDLE
    points = {complex(battle("2m_vs_1z", seed).point[0]) for seed in range(6)}
    assert len(points) == 6
    assert all(p.imag == pytest.approx(12) and 13 <= p.real <= 19 for p in points)
    lings = battle("2c_vs_64zg")
    lings.step(np.ones((1, 2), int))
    assert (lings.kind[0, 2:] == ATTACK).all() and set(lings.target[0, 2:]) <= {0, 1}
    assert (battle("corridor").point[0] == np.complex64(4.47 + 4.33j)).all()


# Cells per cliff level value, counted from each archive's t3SyncCliffLevel.
CLIFF_COUNTS = {
    "3m": {0: 448, 64: 576},
    "MMM2": {0: 448, 64: 576},
    "3s_vs_5z": {64: 1024},
    "2m_vs_1z": {0: 580, 64: 444},
    "bane_vs_bane": {0: 580, 64: 444},
    "6h_vs_8z": {0: 812, 64: 212},
    "2s_vs_1sc": {0: 792, 64: 232},
    "corridor": {0: 556, 64: 468},
    "so_many_baneling": {0: 596, 64: 428},
    "2c_vs_64zg": {0: 536, 64: 308, 72: 12, 88: 12, 104: 12, 128: 144},
}


@pytest.mark.parametrize("name", sorted(CLIFF_COUNTS))
def test_each_maps_heights_are_its_archives_cliff_levels(name):
    layout = SMAC_MAPS[name].terrain
    h = terrain.height(layout)
    values, counts = np.unique(np.rint(h * 255).astype(int), return_counts=True)
    assert dict(zip(values.tolist(), counts.tolist(), strict=True)) == CLIFF_COUNTS[name]
    # Every cell a unit stands on is above the low ground around the plateau.
    assert (h[terrain.pathable(layout)] > 0).all()
    # 2c_vs_64zg: the colossi's high ground (y 14-19) is a level above the zerglings' (6-11).
    if name == "2c_vs_64zg":
        assert h[16, 16] * 255 == pytest.approx(128) and h[16, 8] * 255 == pytest.approx(64)
