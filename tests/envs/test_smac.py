"""SMAC battles: mechanics with SC2's numbers, the maps and sizes of upstream SMAC and SMACv2,
the interface, determinism."""

import math

import numpy as np
import pytest

import envs
from envs.smac import units as U
from envs.smac.core import AMOVE, ATTACK, HEAL, IDLE, MOVE, NONE, BattleBatch
from envs.smac.maps import (
    MAP_SIZE,
    ODIS_MAPS,
    SMAC_MAPS,
    SMACV2_SCENARIOS,
    V2_EXCEPTIONS,
    V2_TYPE_PROBS,
    V2_TYPES,
    sample_battle,
    v2_spawn_points,
)

# Reference numbers, written down from SMAC's and SMACv2's own sources (github.com/oxwhirl/smac
# at d6aab33, github.com/oxwhirl/smacv2 at 577ab5a), not from this repository's code.
#
# SMAC's map registry, smac/env/starcraft2/maps/smac_maps.py `map_param_registry`:
# name: (n_agents, n_enemies, limit, a_race, b_race, unit_type_bits, map_type).
SMAC_REGISTRY = {
    "3m": (3, 3, 60, "T", "T", 0, "marines"),
    "8m": (8, 8, 120, "T", "T", 0, "marines"),
    "25m": (25, 25, 150, "T", "T", 0, "marines"),
    "5m_vs_6m": (5, 6, 70, "T", "T", 0, "marines"),
    "8m_vs_9m": (8, 9, 120, "T", "T", 0, "marines"),
    "10m_vs_11m": (10, 11, 150, "T", "T", 0, "marines"),
    "27m_vs_30m": (27, 30, 180, "T", "T", 0, "marines"),
    "MMM": (10, 10, 150, "T", "T", 3, "MMM"),
    "MMM2": (10, 12, 180, "T", "T", 3, "MMM"),
    "2s3z": (5, 5, 120, "P", "P", 2, "stalkers_and_zealots"),
    "3s5z": (8, 8, 150, "P", "P", 2, "stalkers_and_zealots"),
    "3s5z_vs_3s6z": (8, 9, 170, "P", "P", 2, "stalkers_and_zealots"),
    "3s_vs_3z": (3, 3, 150, "P", "P", 0, "stalkers"),
    "3s_vs_4z": (3, 4, 200, "P", "P", 0, "stalkers"),
    "3s_vs_5z": (3, 5, 250, "P", "P", 0, "stalkers"),
    "1c3s5z": (9, 9, 180, "P", "P", 3, "colossi_stalkers_zealots"),
    "2m_vs_1z": (2, 1, 150, "T", "P", 0, "marines"),
    "corridor": (6, 24, 400, "P", "Z", 0, "zealots"),
    "6h_vs_8z": (6, 8, 150, "Z", "P", 0, "hydralisks"),
    "2s_vs_1sc": (2, 1, 300, "P", "Z", 0, "stalkers"),
    "so_many_baneling": (7, 32, 100, "P", "Z", 0, "zealots"),
    "bane_vs_bane": (24, 24, 200, "Z", "Z", 2, "bane"),
    "2c_vs_64zg": (2, 64, 400, "P", "Z", 0, "colossus"),
}
# The units of each map, from the map table of SMAC's docs/smac.md ("Ally Units", "Enemy Units").
_MMM = {"medivac": 1, "marauder": 2, "marine": 7}
SMAC_UNITS = {
    "3m": ({"marine": 3}, {"marine": 3}),
    "8m": ({"marine": 8}, {"marine": 8}),
    "25m": ({"marine": 25}, {"marine": 25}),
    "2s3z": ({"stalker": 2, "zealot": 3}, {"stalker": 2, "zealot": 3}),
    "3s5z": ({"stalker": 3, "zealot": 5}, {"stalker": 3, "zealot": 5}),
    "MMM": (_MMM, _MMM),
    "5m_vs_6m": ({"marine": 5}, {"marine": 6}),
    "8m_vs_9m": ({"marine": 8}, {"marine": 9}),
    "10m_vs_11m": ({"marine": 10}, {"marine": 11}),
    "27m_vs_30m": ({"marine": 27}, {"marine": 30}),
    "3s5z_vs_3s6z": ({"stalker": 3, "zealot": 5}, {"stalker": 3, "zealot": 6}),
    "MMM2": (_MMM, {"medivac": 1, "marauder": 3, "marine": 8}),
    "2m_vs_1z": ({"marine": 2}, {"zealot": 1}),
    "2s_vs_1sc": ({"stalker": 2}, {"spine_crawler": 1}),
    "3s_vs_3z": ({"stalker": 3}, {"zealot": 3}),
    "3s_vs_4z": ({"stalker": 3}, {"zealot": 4}),
    "3s_vs_5z": ({"stalker": 3}, {"zealot": 5}),
    "6h_vs_8z": ({"hydralisk": 6}, {"zealot": 8}),
    "corridor": ({"zealot": 6}, {"zergling": 24}),
    "bane_vs_bane": ({"zergling": 20, "baneling": 4}, {"zergling": 20, "baneling": 4}),
    "so_many_baneling": ({"zealot": 7}, {"baneling": 32}),
    "2c_vs_64zg": ({"colossus": 2}, {"zergling": 64}),
    "1c3s5z": (
        {"colossus": 1, "stalker": 3, "zealot": 5},
        {"colossus": 1, "stalker": 3, "zealot": 5},
    ),
}
# The unit-type one-hot index per map_type, allies and enemies (starcraft2.py
# `_init_ally_unit_types` and `get_unit_type_id`: enemies use SC2's ids, zealot 73 < stalker 74).
SMAC_TYPE_IDS = {
    "stalkers_and_zealots": ({"stalker": 0, "zealot": 1}, {"zealot": 0, "stalker": 1}),
    "colossi_stalkers_zealots": ({"colossus": 0, "stalker": 1, "zealot": 2},) * 2,
    "MMM": ({"marauder": 0, "marine": 1, "medivac": 2},) * 2,
    "bane": ({"baneling": 0, "zergling": 1},) * 2,
}
# SMACv2: the README's scenario table (n_units, n_enemies); the `10gen_{race}` registry entries
# (limit 200, unit_type_bits 3, both races the same); sc2_gen_{race}.yaml's unit types and weights,
# `exception_unit_types` (a team may not be made of these alone), use_unit_ranges,
# min_attack_range 2, obs_own_pos, map_x = map_y = 32; the one-hot index is `get_unit_type_id`'s.
SMACV2_COUNTS = {"5_vs_5": (5, 5), "10_vs_10": (10, 10), "10_vs_11": (10, 11)}
SMACV2_COUNTS |= {"20_vs_20": (20, 20), "20_vs_23": (20, 23)}
SMACV2_TEAMS = {  # race: ({unit: weight}, one-hot index, exceptions)
    "protoss": (
        {"stalker": 0.45, "zealot": 0.45, "colossus": 0.1},
        {"stalker": 0, "zealot": 1, "colossus": 2},
        set(),
    ),
    "terran": (
        {"marine": 0.45, "marauder": 0.45, "medivac": 0.1},
        {"marine": 0, "marauder": 1, "medivac": 2},
        {"medivac"},
    ),
    "zerg": (
        {"zergling": 0.45, "baneling": 0.1, "hydralisk": 0.45},
        {"zergling": 0, "hydralisk": 1, "baneling": 2},
        {"baneling"},
    ),
}
# (obs size, state size, n_actions): what upstream StarCraft2Env reports with its default flags
# (SMACv2: sc2_gen_{race}.yaml's env_args), computed by running the upstream code without the game
# (tests/envs/smac_upstream.py).
SMAC_SIZES = {
    "3m": (30, 48, 9),
    "8m": (80, 168, 14),
    "25m": (250, 950, 31),
    "5m_vs_6m": (55, 98, 12),
    "8m_vs_9m": (85, 179, 15),
    "10m_vs_11m": (105, 243, 17),
    "27m_vs_30m": (285, 1170, 36),
    "MMM": (160, 290, 16),
    "MMM2": (176, 322, 18),
    "2s3z": (80, 120, 11),
    "3s5z": (128, 216, 14),
    "3s5z_vs_3s6z": (136, 230, 15),
    "3s_vs_3z": (36, 54, 9),
    "3s_vs_4z": (42, 61, 10),
    "3s_vs_5z": (48, 68, 11),
    "1c3s5z": (162, 270, 15),
    "2m_vs_1z": (16, 26, 7),
    "corridor": (156, 282, 30),
    "6h_vs_8z": (78, 140, 14),
    "2s_vs_1sc": (17, 27, 7),
    "so_many_baneling": (202, 397, 38),
    "bane_vs_bane": (336, 984, 30),
    "2c_vs_64zg": (332, 342, 70),
    "protoss_5_vs_5": (92, 130, 11),
    "protoss_10_vs_10": (182, 310, 16),
    "protoss_10_vs_11": (191, 327, 17),
    "protoss_20_vs_20": (362, 820, 26),
    "protoss_20_vs_23": (389, 901, 29),
    "terran_5_vs_5": (82, 120, 11),
    "terran_10_vs_10": (162, 290, 16),
    "terran_10_vs_11": (170, 306, 17),
    "terran_20_vs_20": (322, 780, 26),
    "terran_20_vs_23": (346, 858, 29),
    "zerg_5_vs_5": (82, 120, 11),
    "zerg_10_vs_10": (162, 290, 16),
    "zerg_10_vs_11": (170, 306, 17),
    "zerg_20_vs_20": (322, 780, 26),
    "zerg_20_vs_23": (346, 858, 29),
}
# Every SMAC map's MapInfo (inside its .SC2Map) says 32 x 32 with camera bounds (0, 0)-(32, 32);
# SMACv2's scenarios run on 32x32_flat with map_x = map_y = 32.
SMAC_MAP_SIDE = 32


def registry_sizes(name: str) -> tuple[int, int, int]:
    """get_obs_size / get_state_size / n_actions of SMAC's and SMACv2's starcraft2.py, written
    out over the upstream tables above (never over this repository's map specs)."""
    if name in SMAC_REGISTRY:
        A, E, _, a_race, b_race, bits, _ = SMAC_REGISTRY[name]
        own_pos = 0
    else:
        race, size = name.split("_", 1)
        (A, E), a_race, bits, own_pos = SMACV2_COUNTS[size], race[0].upper(), 3, 2
        b_race = a_race
    sa, se = int(a_race == "P"), int(b_race == "P")
    obs = 4 + E * (5 + se + bits) + (A - 1) * (5 + sa + bits) + (1 + sa + bits + own_pos)
    state = A * (4 + sa + bits) + E * (3 + se + bits) + A * (6 + E)
    return obs, state, 6 + E


def battle(map_name: str, seed: int = 0) -> BattleBatch:
    core = BattleBatch(1, seed=seed, map_name=map_name, auto_reset=False)
    core.reset()
    return core


def isolate(core: BattleBatch, keep: list[int], positions: dict[int, complex]) -> None:
    """Kills every unit not in ``keep``, places the kept ones and freezes them (no orders)."""
    dead = np.ones((1, core.n_units), bool)
    dead[0, keep] = False
    core._bury(dead)
    for i, z in positions.items():
        core.pos[0, i] = z
        core.kind[0, i] = NONE
    core._refresh()


def frames(core: BattleBatch, n: int) -> None:
    for _ in range(n):
        core._frame()


def test_unit_table_has_sc2s_numbers():
    t = {u.name: u for u in U.UNIT_TYPES}
    assert (t["marine"].hp, t["marine"].damage, t["marine"].cooldown) == (45, 6, 0.61)
    assert (t["stalker"].hp, t["stalker"].shield, t["stalker"].armor) == (80, 80, 1)
    assert (t["zealot"].hp, t["zealot"].shield, t["zealot"].attacks) == (100, 50, 2)
    assert (t["colossus"].hp, t["colossus"].shield, t["colossus"].range) == (200, 150, 7)
    assert (t["spine_crawler"].hp, t["spine_crawler"].armor, t["spine_crawler"].speed) == (
        300,
        2,
        0,
    )
    assert U.hit_damage("marauder", "stalker") == 19  # 10 + 10 vs armored - 1
    assert U.hit_damage("baneling", "zergling") == 35  # 16 + 19 vs light
    assert U.hit_damage("zergling", "spine_crawler") == 3
    assert (U.FRAMES_PER_SECOND, U.STEP_MUL, U.MOVE_AMOUNT) == (22.4, 8, 2.0)


def test_smacs_clock_a_step_is_8_loops_of_a_22_4_per_second_game():
    """SMAC's step_mul 8 at 22.4 loops per faster second: an isolated marine walks 1.125 per
    agent step (3.15 x 8 / 22.4), not 1.575 as at 16 loops per second."""
    core = battle("3m")
    isolate(core, [0], {0: 8 + 16j})
    core.kind[0, 0], core.goal[0, 0] = MOVE, 20 + 16j
    core._refresh()
    for step in range(1, 4):
        frames(core, U.STEP_MUL)
        assert core.pos[0, 0].real == pytest.approx(8 + 1.125 * step, abs=1e-4)


def test_smacs_clock_a_marine_fires_every_14_loops():
    """Cooldown 0.61 faster s = 13.7 loops, counted in whole loops: 14. Over 8 agent steps
    (64 loops) a marine in range fires at loops 0, 14, 28, 42, 56: 5 shots, 0.625 a step."""
    core = battle("3m")
    isolate(core, [0, 3], {0: 10 + 16j, 3: 14 + 16j})
    core.hp[0, 3] = 1000.0  # survives every shot
    core.kind[0, 0], core.target[0, 0] = ATTACK, 3
    core._refresh()
    shots = []
    for loop in range(8 * U.STEP_MUL):
        before = float(core.hp[0, 3])
        core._frame()
        if core.hp[0, 3] < before:
            shots.append(loop)
    assert shots == [0, 14, 28, 42, 56]


def test_a_marine_needs_eight_hits_to_kill_a_marine():
    assert U.hit_damage("marine", "marine") == 6 and math.ceil(45 / 6) == 8
    core = battle("3m")
    isolate(core, [0, 3], {0: 10 + 16j, 3: 14 + 16j})  # 4 apart: in range (5) edge to edge
    core.kind[0, 0], core.target[0, 0] = ATTACK, 3
    core._refresh()
    hp = [45.0]
    for _ in range(16 * 10):
        core._frame()
        if core.hp[0, 3] != hp[-1]:
            hp.append(float(core.hp[0, 3]))
        if not core.alive[0, 3]:
            break
    assert hp == [45, 39, 33, 27, 21, 15, 9, 3, 0]  # 8 hits
    assert core.hp[0, 0] == 45  # the frozen enemy never fired


def test_a_zealots_two_attacks_go_through_shields_then_hp_with_armor():
    core = battle("2s3z")  # allies: 2 stalkers (0, 1), 3 zealots (2-4); enemies the same
    zealot, stalker = 2, 5
    isolate(core, [zealot, stalker], {zealot: 10 + 16j, stalker: 11 + 16j})
    core.kind[0, zealot], core.target[0, zealot] = ATTACK, stalker
    core._refresh()
    seen = [(80.0, 80.0)]
    for _ in range(16 * 12):
        core._frame()
        now = (float(core.sh[0, stalker]), float(core.hp[0, stalker]))
        if now != seen[-1]:
            seen.append(now)
    # Five swings of 2 x 8 empty the 80 shield (no armor on shields), then 2 x (8 - 1) of hp.
    assert seen[:8] == [(80, 80), (64, 80), (48, 80), (32, 80), (16, 80), (0, 80), (0, 66), (0, 52)]


def test_a_swing_split_between_shield_and_hp_pays_armor_on_the_hp_part():
    core = battle("2s3z")
    zealot, stalker = 2, 5
    isolate(core, [zealot, stalker], {zealot: 10 + 16j, stalker: 11 + 16j})
    core.sh[0, stalker] = 10.0  # first attack: 8 into the shield; second: 2 more, 6 - 1 into hp
    core.kind[0, zealot], core.target[0, zealot] = ATTACK, stalker
    core._refresh()
    while core.hp[0, stalker] == 80:
        core._frame()
    assert core.sh[0, stalker] == 0 and core.hp[0, stalker] == 75


def test_medivac_heals_nine_hp_per_normal_second_for_one_energy_per_three_hp():
    core = battle("MMM")  # allies: marauders 0-1, marines 2-8, medivac 9
    medivac, marine = 9, 2
    assert core.is_medivac[0, medivac] and core.types[0, marine] == U.MARINE
    isolate(core, [medivac, marine], {medivac: 10 + 16j, marine: 12 + 16j})
    core.hp[0, marine] = 10.0
    assert core.energy[0, medivac] == U.MEDIVAC_ENERGY_START == 50
    core.kind[0, medivac], core.target[0, medivac] = HEAL, marine
    core._refresh()
    # One agent step is 0.5 normal seconds: 4.5 hp healed for 1.5 energy; the energy
    # regenerates 0.5625 per normal second, 0.28125 a step.
    frames(core, U.STEP_MUL)
    assert core.hp[0, marine] == pytest.approx(10 + 4.5, abs=1e-3)
    regen = 0.28125
    assert core.energy[0, medivac] == pytest.approx(50 - 1.5 + regen, abs=1e-3)
    # Out of energy it heals only what the regeneration pays for: 3 hp per energy.
    core.energy[0, medivac] = 0.0
    before = float(core.hp[0, marine])
    frames(core, U.STEP_MUL)
    assert core.hp[0, marine] - before == pytest.approx(3 * regen, abs=1e-2)
    # Full health: nothing to heal, energy accumulates.
    core.hp[0, marine] = 45.0
    e = float(core.energy[0, medivac])
    frames(core, U.STEP_MUL)
    assert core.hp[0, marine] == 45 and core.energy[0, medivac] == pytest.approx(e + regen, 1e-3)


def test_medivac_cannot_heal_medivacs_and_its_attack_slots_heal_allies():
    core = BattleBatch(1, seed=0, map_name="MMM", auto_reset=False)
    core.reset()
    medivac, marine = 9, 2
    core.hp[0, marine] = 20.0  # a hurt marine next to its medivac
    core.pos[0, medivac] = core.pos[0, marine] + 1
    mask = core._observe()[2][0, medivac]
    assert mask[6 + marine] == 1  # "attack 2" of the medivac is "heal ally 2"
    assert mask[6 + medivac] == 0  # not itself
    assert not core.candidates[0, medivac, medivac] and core.candidates[0, medivac, marine]
    with pytest.raises(ValueError, match=r"heal ally 9"):
        core.step(np.where(np.arange(10) == medivac, 6 + medivac, 1)[None])


def test_the_agents_unit_data_hydralisks_80_hp_and_medivacs_3_85_fast():
    """SMAC's maps override Hydralisk_RL's life (80; 6h_vs_8z.SC2Map, SMACv2's 32x32_flat) and
    Medivac_RL's speed (2.75 normal = 3.85 faster); the enemy keeps the game's 90 and 3.5."""
    core = battle("6h_vs_8z")
    assert (core.hp_max[0, :6] == 80).all()
    core = BattleBatch(16, seed=0, map_name="zerg_10_vs_11")
    core.reset()
    hydra = core.types == U.HYDRALISK
    assert hydra[:, :10].any() and hydra[:, 10:].any()
    assert (core.hp_max[:, :10][hydra[:, :10]] == 80).all()
    assert (core.hp_max[:, 10:][hydra[:, 10:]] == 90).all()
    core = battle("MMM")
    medivac, enemy_medivac = 9, 19
    assert core.is_medivac[0, enemy_medivac]
    isolate(core, [medivac, enemy_medivac], {medivac: 5 + 10j, enemy_medivac: 5 + 20j})
    for i in (medivac, enemy_medivac):
        core.kind[0, i], core.goal[0, i] = MOVE, core.pos[0, i] + 10
    core._refresh()
    frames(core, U.STEP_MUL)
    per_step = (core.pos[0, [medivac, enemy_medivac]].real - 5).round(4)
    assert per_step.tolist() == [pytest.approx(3.85 * 8 / 22.4), pytest.approx(3.5 * 8 / 22.4)]


def test_shields_regenerate_after_ten_quiet_seconds_and_zerg_life_always():
    """Shields: 2 per normal second (16 loops) after 10 normal seconds (160 loops) without
    damage; zerg life 0.2734 per normal second (the maps' ShieldRegen*/LifeRegenRate)."""
    core = battle("2s3z")
    stalker = 0
    isolate(core, [stalker], {stalker: 10 + 16j})
    core.sh[0, stalker] = 40.0
    core.hit_at[0, stalker] = core.clock  # just hit
    frames(core, 159)
    assert core.sh[0, stalker] == 40.0
    frames(core, 17)
    assert core.sh[0, stalker] == pytest.approx(40.0 + 2.0 * 16 / 16, abs=1e-3)  # 1 s of it
    core = battle("corridor")
    ling = core.n_allies
    isolate(core, [ling], {ling: 20 + 20j})
    core.hp[0, ling] = 20.0
    frames(core, 16 * 4)
    assert core.hp[0, ling] == pytest.approx(20 + 4 * 0.2734, abs=1e-3)


def test_a_colossus_walks_over_small_units_but_not_through_another_colossus():
    core = battle("1c3s5z")  # agent 0 is the colossus, 1-3 stalkers, 4-8 zealots
    colossus, zealot, enemy_colossus = 0, 4, 9
    assert core.types[0, colossus] == core.types[0, enemy_colossus] == U.COLOSSUS
    isolate(core, [colossus, zealot], {colossus: 10 + 16j, zealot: 10.2 + 16j})
    frames(core, 8)
    assert core.pos[0, colossus] == 10 + 16j and core.pos[0, zealot] == 10.2 + 16j
    core = battle("1c3s5z")
    isolate(core, [colossus, enemy_colossus], {colossus: 10 + 16j, enemy_colossus: 10.2 + 16j})
    frames(core, 8)
    assert abs(core.pos[0, colossus] - core.pos[0, enemy_colossus]) >= 2 * 1.0 - 1e-3


def test_no_heal_lands_on_a_unit_that_died_in_the_same_frame():
    core = battle("MMM")
    medivac, marine, enemy_marine = 9, 2, 13
    isolate(
        core,
        [medivac, marine, enemy_marine],
        {medivac: 10 + 16j, marine: 11 + 16j, enemy_marine: 14 + 16j},
    )
    core.hp[0, marine] = 1.0  # the next shot kills it
    core.kind[0, medivac], core.target[0, medivac] = HEAL, marine
    core.kind[0, enemy_marine], core.target[0, enemy_marine] = ATTACK, marine
    core._refresh()
    frames(core, 1)
    assert not core.alive[0, marine] and core.hp[0, marine] == 0.0


def test_an_enemy_keeps_the_target_it_took_while_it_stays_in_reach():
    core = battle("3m")
    a0, a1, enemy = 0, 1, 3
    isolate(core, [a0, a1, enemy], {a0: 10 + 16j, a1: 10 + 22j, enemy: 15.5 + 16j})
    core.kind[0, enemy] = IDLE  # takes a target within its weapon range (5): agent 0
    core._refresh()
    frames(core, 2)
    assert core.fired_at[0, enemy] == a0
    core.pos[0, a1] = 15.5 + 13j  # now closer than agent 0, also in range
    frames(core, 3)
    assert core.fired_at[0, enemy] == a0
    # Out of its weapon range (and not shooting back), the target is dropped for the closest.
    core.pos[0, a0] = 8 + 16j
    frames(core, 1)
    assert core.fired_at[0, enemy] == a1


def test_colossus_line_splash_hits_units_beside_its_target():
    core = battle("1c3s5z")  # allies: colossus 0, stalkers 1-3, zealots 4-8; enemies the same
    colossus, target, beside, behind, aside = 0, 13, 14, 15, 16  # enemy zealots
    # The lances sweep a line 2.8 wide across the attack direction, through the target.
    place = {colossus: 8 + 16j, target: 14 + 16j, beside: 14 + 17.2j, behind: 16 + 16j}
    isolate(core, [colossus, target, beside, behind, aside], place | {aside: 14 + 20j})
    core.kind[0, colossus], core.target[0, colossus] = ATTACK, target
    core._refresh()
    while core.sh[0, target] == 50:
        core._frame()
    per_swing = 2 * (10 + 5)  # two attacks of 10 + 5 vs light
    assert core.sh[0, target] == 50 - per_swing and core.sh[0, beside] == 50 - per_swing
    assert core.sh[0, behind] == 50 and core.sh[0, aside] == 50


def test_a_baneling_explodes_with_splash_and_dies():
    core = battle("so_many_baneling")  # 7 zealots vs 32 banelings
    bane = 7
    isolate(core, [0, 1, 6, bane], {0: 10 + 16j, 1: 10 + 17.2j, 6: 10 + 25j, bane: 10.6 + 16.5j})
    core.kind[0, bane] = AMOVE
    core._refresh()
    frames(core, 16)
    assert not core.alive[0, bane]
    hit = 16 + 19  # vs light, into the 50 shield
    assert core.sh[0, 0] == 50 - hit and core.sh[0, 1] == 50 - hit  # both within 2.2
    assert core.sh[0, 6] == 50  # far away


def test_spine_crawler_is_static_and_units_walk_into_their_real_range():
    core = battle("2s_vs_1sc")
    spine = 2
    isolate(core, [0, spine], {0: 8 + 16j, spine: 22 + 16j})
    core.kind[0, 0], core.target[0, 0] = ATTACK, spine
    core._refresh()
    start = core.pos[0, spine]
    frames(core, 16 * 4)
    assert core.pos[0, spine] == start
    gap = abs(core.pos[0, spine] - core.pos[0, 0]) - core.radius[0, 0] - core.radius[0, spine]
    assert gap <= 6 + 1e-3  # the stalker walked into its range of 6 and stopped there
    assert core.hp[0, spine] < 300


def test_units_collide_and_stay_on_the_map():
    core = battle("3m")
    isolate(core, [0, 1], {0: 10 + 16j, 1: 10.1 + 16j})
    core.kind[0, :2] = ATTACK  # no legal target: stands idle
    frames(core, 8)
    d = abs(core.pos[0, 0] - core.pos[0, 1])
    assert d >= 2 * 0.375 - 1e-3
    core.pos[0, 0] = 0.0 + 12j  # on the edge of 3m's band (x 0-32, y 8-24)
    frames(core, 1)
    assert core.pos[0, 0].real >= 0.375 - 1e-6


def test_enemy_ai_attack_moves_toward_the_allies():
    core = battle("3m")
    start = core.pos[0, 3:].copy()
    for _ in range(4):
        core.step(np.ones((1, 3), int))  # allies stop; enemies come
    assert (core.pos[0, 3:].real < start.real - 2).all()


def test_the_reference_tables_cover_every_map_and_agree_with_smacs_formulas():
    assert set(SMAC_REGISTRY) == set(SMAC_UNITS) == set(SMAC_MAPS)
    v2 = {f"{race}_{size}" for race in SMACV2_TEAMS for size in SMACV2_COUNTS}
    assert v2 == set(SMACV2_SCENARIOS)
    assert set(SMAC_SIZES) == set(SMAC_MAPS) | v2 and len(SMAC_SIZES) == 38
    # The sizes upstream's code reported equal its size formulas over its own registry.
    for name, sizes in SMAC_SIZES.items():
        assert registry_sizes(name) == sizes, name


@pytest.mark.parametrize("name", sorted(SMAC_MAPS) + sorted(SMACV2_SCENARIOS))
def test_observation_and_state_sizes_equal_smacs(name):
    spec = SMAC_MAPS.get(name) or SMACV2_SCENARIOS[name]
    core = BattleBatch(2, seed=0, map_name=name)
    step = core.reset()
    obs_size, state_size, n_actions = SMAC_SIZES[name]
    assert (core.observation_space.shape[0], core.state_space.shape[0]) == (obs_size, state_size)
    assert step.obs["agent"].shape == (2, spec.n_allies, obs_size)
    assert step.state.shape == (2, state_size)
    assert core.n_actions == n_actions
    assert np.abs(step.obs["agent"]).max() <= 1 and np.abs(step.state).max() <= 1
    assert core.spec.limit == spec.limit
    assert MAP_SIZE == SMAC_MAP_SIDE


@pytest.mark.parametrize("name", sorted(SMAC_MAPS))
def test_v1_map_matches_smacs_registry_and_map_table(name):
    spec = SMAC_MAPS[name]
    n_agents, n_enemies, limit, a_race, b_race, bits, map_type = SMAC_REGISTRY[name]
    allies, enemies = SMAC_UNITS[name]
    assert (spec.n_allies, spec.n_enemies, spec.limit) == (n_agents, n_enemies, limit)

    def counts(groups):  # a map may spawn one type in several groups
        out = {}
        for unit, n in groups:
            out[unit] = out.get(unit, 0) + n
        return out

    assert counts(spec.allies) == allies and counts(spec.enemies) == enemies
    assert {U.UNIT_TYPES[U.INDEX[u]].race for u in allies} == {a_race}
    assert {U.UNIT_TYPES[U.INDEX[u]].race for u in enemies} == {b_race}
    assert spec.type_bits == bits
    ally_ids, enemy_ids = SMAC_TYPE_IDS.get(map_type, ({}, {}))
    assert (spec.ally_type_ids, spec.enemy_type_ids) == (ally_ids, enemy_ids)


@pytest.mark.parametrize("name", sorted(SMACV2_SCENARIOS))
def test_smacv2_scenario_matches_smacv2s_configs(name):
    spec = SMACV2_SCENARIOS[name]
    race, size = name.split("_", 1)
    weights, type_ids, exceptions = SMACV2_TEAMS[race]
    assert (spec.n_allies, spec.n_enemies) == SMACV2_COUNTS[size]
    assert (spec.limit, spec.type_bits, spec.race) == (200, 3, race)
    assert spec.ally_type_ids == spec.enemy_type_ids == type_ids
    assert dict(zip(V2_TYPES[race], V2_TYPE_PROBS, strict=True)) == weights
    assert set(V2_EXCEPTIONS[race]) == exceptions
    assert {U.UNIT_TYPES[U.INDEX[u]].race for u in weights} == {race[0].upper()}


# ODIS's marine maps (github.com/LAMDA-RL/ODIS smac_patch/smac_maps.py): n_agents, n_enemies,
# limit; every one is race T against T, no unit-type bits, map_type "marines".
ODIS_REGISTRY = {
    "4m": (4, 4, 75), "5m": (5, 5, 90), "6m": (6, 6, 100), "7m": (7, 7, 110),
    "9m": (9, 9, 120), "10m": (10, 10, 120), "11m": (11, 11, 150), "12m": (12, 12, 150),
    "4m_vs_5m": (4, 5, 60), "6m_vs_7m": (6, 7, 80), "7m_vs_8m": (7, 8, 90),
    "9m_vs_10m": (9, 10, 140), "10m_vs_12m": (10, 12, 160), "11m_vs_12m": (11, 12, 160),
    "13m_vs_15m": (13, 15, 160),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(ODIS_REGISTRY))
def test_odis_marine_maps_match_odis_registry_and_smacs_sizes(name):
    A, E, limit = ODIS_REGISTRY[name]
    spec = ODIS_MAPS[name]
    assert (spec.n_allies, spec.n_enemies, spec.limit, spec.type_bits) == (A, E, limit, 0)
    assert spec.allies == (("marine", A),) and spec.enemies == (("marine", E),)
    # 8m's layout: spawns, the enemy's attack-move point, the ground
    assert (spec.terrain, spec.ally_at, spec.enemy_at, spec.enemy_order, spec.order_point) == (
        SMAC_MAPS["8m"].terrain,
        (),
        (),
        SMAC_MAPS["8m"].enemy_order,
        SMAC_MAPS["8m"].order_point,
    )
    core = envs.make(f"smac/{name}-v0").core
    obs = 4 + E * 5 + (A - 1) * 5 + 1  # SMAC's get_obs_size for marines against marines
    state = A * 4 + E * 3 + A * (6 + E)
    assert (core.observation_space.shape[0], core.state_space.shape[0]) == (obs, state)
    assert core.n_actions == 6 + E and not set(ODIS_MAPS) & set(SMAC_MAPS)


@pytest.mark.parametrize("name", ["3m", "MMM"])
def test_scripted_actions_play_as_heuristic_ai_with_heuristic_rest(name):
    """The heuristic as legal actions of a plain battle (``arena record heuristic``) plays
    the battle SMAC's heuristic_ai=True, heuristic_rest=True plays."""
    scripted = BattleBatch(8, seed=1, map_name=name, auto_reset=False)
    smacs = BattleBatch(8, seed=1, map_name=name, auto_reset=False, heuristic_ai=True,
                        heuristic_rest=True)  # fmt: skip
    scripted.reset(), smacs.reset()
    for _ in range(scripted.spec.limit):
        act = scripted.scripted_actions()
        legal = np.take_along_axis(scripted._last_mask, act[..., None], -1)
        assert (legal == 1).all()
        a, b = scripted.step(act), smacs.step(np.zeros_like(act))
        # a live agent the script gives no order (0) stops instead
        np.testing.assert_array_equal(np.where(act == 1, 0, act), smacs.heuristic_actions)
        np.testing.assert_array_equal(a.obs["agent"], b.obs["agent"])
        if scripted.over.all():
            break
    assert scripted.over.all() and smacs.over.all()


def test_every_map_and_scenario_is_registered():
    ids = set(envs.ids())
    assert {f"smac/{m}-v0" for m in SMAC_MAPS | ODIS_MAPS} <= ids
    assert {f"smacv2/{s}-v0" for s in SMACV2_SCENARIOS} <= ids


def test_smacv2_samples_unit_types_with_its_probabilities_and_per_unit_ranges():
    spec = SMACV2_SCENARIOS["zerg_10_vs_11"]
    rng = np.random.default_rng(0)
    counts = np.zeros(3)
    pool = [U.INDEX[n] for n in V2_TYPES["zerg"]]
    for _ in range(400):
        types, pos, _ = sample_battle(spec, rng)
        # mirrored teams; the agents are numbered by unit type (SMACv2), the enemies are not
        assert len(types) == 21 and (np.sort(types[:10]) == np.sort(types[10:20])).all()
        counts += [(types[:10] == p).sum() for p in pool]
    freq = counts / counts.sum()
    np.testing.assert_allclose(freq, V2_TYPE_PROBS, atol=0.03)
    core = BattleBatch(8, seed=0, map_name="zerg_10_vs_11")
    core.reset()
    np.testing.assert_allclose(core.sight, U.TABLE.sight[core.types])
    assert (core.shoot >= 2).all()  # min_attack_range
    assert (core.shoot == np.maximum(U.TABLE.range[core.types], 2)).all()


def test_smacv2_never_fields_a_group_of_medivacs_or_banelings_alone():
    """SMACv2 draws a team again while it is all exception types; with one extra enemy (10 vs
    11) that enemy is therefore never a medivac or a baneling, but may be a colossus."""
    for race, never in (("terran", "medivac"), ("zerg", "baneling"), ("protoss", None)):
        spec, rng = SMACV2_SCENARIOS[f"{race}_10_vs_11"], np.random.default_rng(0)
        extra = {int(sample_battle(spec, rng)[0][20]) for _ in range(300)}
        assert {U.UNIT_TYPES[t].name for t in extra} == set(V2_TYPES[race]) - {never}


# Nearest ally-enemy distance at the start: mean and 10th/50th/90th percentiles of SMACv2's own
# ``SurroundedPositionDistribution`` / ``ReflectPositionDistribution`` (smacv2/env/starcraft2/
# distributions.py at 577ab5a, run as it is, 20,000 draws each).
SMACV2_START_DISTANCE = {
    (5, 5, "surrounded"): (9.66, 3.78, 8.60, 17.42),
    (5, 5, "reflect"): (6.96, 2.63, 5.87, 12.96),
    (20, 23, "surrounded"): (9.21, 3.66, 7.98, 16.95),
    (20, 23, "reflect"): (3.36, 2.15, 2.98, 5.10),
}


@pytest.mark.parametrize("n,m,kind", list(SMACV2_START_DISTANCE))
def test_smacv2_spawn_points_follow_smacv2s_distributions(n, m, kind):
    rng = np.random.default_rng(0)
    nearest, groups = [], []
    while len(nearest) < 3000:
        ally, enemy = v2_spawn_points(n, m, rng)
        if np.allclose(ally, 16) != (kind == "surrounded"):
            continue
        nearest.append(np.linalg.norm(ally[:, None] - enemy[None], axis=-1).min())
        groups.append(len(np.unique(enemy, axis=0)))
        if kind == "reflect":  # each ally on its own; enemy i mirrors ally i across x = 16
            assert (ally[:, 0] <= 15).all() and len(np.unique(ally, axis=0)) == n
            np.testing.assert_allclose(enemy[:n], np.c_[32 - ally[:, 0], ally[:, 1]])
            assert (enemy[n:, 0] >= 16).all()
    mean, *pct = SMACV2_START_DISTANCE[n, m, kind]
    assert abs(np.mean(nearest) - mean) < 0.35
    np.testing.assert_allclose(np.percentile(nearest, [10, 50, 90]), pct, atol=0.6)
    if kind == "surrounded":  # 1-4 groups drawn uniformly, a multinomial split may empty some
        share = np.bincount(groups, minlength=5)[1:] / len(groups)
        assert share[:3].min() > 0.2 and 0.02 < share[3] < 0.3 if n == 5 else share.min() > 0.15


def test_smacv2_places_units_around_a_shared_spawn_point_and_numbers_agents_by_type():
    spec = SMACV2_SCENARIOS["protoss_20_vs_23"]
    rng = np.random.default_rng(3)
    surrounded = 0
    for _ in range(20):
        types, pos, _ = sample_battle(spec, rng)
        allies = pos[:20]
        if np.allclose(allies.mean(0), 16, atol=0.5):  # all asked to spawn on the centre
            surrounded += 1
            radius = U.TABLE.radius[types[:20]]
            gaps = np.linalg.norm(allies[:, None] - allies[None], axis=-1)
            gaps -= radius[:, None] + radius[None]
            assert gaps[~np.eye(20, dtype=bool)].min() > -0.5  # none stacked
        names = [U.UNIT_TYPES[t].name for t in types[:20]]
        assert names == sorted(names)  # colossus < stalker < zealot, as SMACv2's unit ids
    assert surrounded >= 5


def test_masks_dead_units_have_only_no_op_and_attacks_need_range():
    core = battle("3m")
    mask = core._observe()[2][0]
    assert (mask[:, 0] == 0).all() and (mask[:, 1] == 1).all()
    # The teams start 14 apart, beyond the shoot range of 6: no attacks yet.
    assert (mask[:, 6:] == 0).all()
    dead = np.zeros((1, 6), bool)
    dead[0, 1] = True
    core._bury(dead)
    core.pos[0, 3] = core.pos[0, 0] + 5
    obs, state, mask = core._observe()
    assert mask[0, 1].tolist() == [1, 0, 0, 0, 0, 0, 0, 0, 0]
    assert (obs[0, 1] == 0).all()
    assert mask[0, 0, 6] == 1 and mask[0, 0, 7] == 0
    # A unit at the map's west edge may not move west.
    core.pos[0, 2] = 0.5 + 16j
    assert core._observe()[2][0, 2, 5] == 0


def test_an_unavailable_action_is_an_error_naming_agent_action_and_legal_ones():
    core = battle("3m")
    with pytest.raises(ValueError) as e:
        core.step(np.array([[1, 6, 1]]))
    msg = str(e.value)
    assert "agent_1" in msg and "action 6 (attack enemy 0)" in msg
    assert "legal actions: 1 (stop), 2 (move north)" in msg
    with pytest.raises(ValueError, match="not in 0..8"):
        core.step(np.array([[1, 1, 9]]))


def scripted(step, core) -> np.ndarray:
    """Focus fire: every agent attacks the weakest enemy it may attack, else moves east."""
    mask = step.action_mask["agent"]
    A = core.n_allies
    hp = core.hp[:, A:] + core.sh[:, A:]
    score = np.where(mask[:, :, 6:] > 0, -hp[:, None, :], -np.inf)
    attack = 6 + score.argmax(-1)
    can_attack = mask[:, :, 6:].any(-1)
    east = np.where(mask[:, :, 4] > 0, 4, 1)
    act = np.where(can_attack, attack, east)
    return np.where(mask[:, :, 0] > 0, 0, act)


def test_a_won_battle_returns_exactly_20_and_a_lost_one_less():
    core = BattleBatch(16, seed=3, map_name="3m", auto_reset=False)
    step = core.reset()
    total = np.zeros(16)
    over = np.zeros(16, bool)
    won = np.zeros(16, bool)
    for _ in range(core.spec.limit):
        live = ~over
        step = core.step(np.where(live[:, None], scripted(step, core), 0))
        total += np.where(live, step.rewards[:, 0], 0)
        done = (step.terminated | step.truncated) & live
        won |= done & step.info["battle_won"]
        over |= done
        if over.all():
            break  # until then a finished battle steps on with no-ops, its only legal action
    assert won.any() and (~won).any()
    np.testing.assert_allclose(total[won], 20.0, atol=1e-4)
    assert (total[~won] < 20).all()


def test_info_reward_sparse_and_truncation_at_the_episode_limit():
    core = BattleBatch(1, seed=0, map_name="3m", reward_sparse=True, auto_reset=False)
    core.reset()
    core.kind[0, 3:] = NONE  # the enemies hold still, far away: nothing happens
    core._refresh()
    core.t[:] = core.spec.limit - 1
    step = core.step(np.ones((1, 3), int))
    assert step.truncated[0] and not step.terminated[0]
    assert step.info["episode_limit"][0] and not step.info["battle_won"][0]
    assert step.info["dead_allies"][0] == 0 and step.info["dead_enemies"][0] == 0
    assert (step.rewards == 0).all()


def random_rollout(map_name: str, seed: int, steps: int = 40):
    core = BattleBatch(4, seed=seed, map_name=map_name)
    step = core.reset()
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(steps):
        a = (rng.random(step.action_mask["agent"].shape) * step.action_mask["agent"]).argmax(-1)
        step = core.step(a)
        out.append((step.obs["agent"].copy(), step.state.copy(), step.rewards.copy()))
    return out


@pytest.mark.parametrize("map_name", ["3m", "MMM2", "1c3s5z", "protoss_5_vs_5"])
def test_battles_are_deterministic_given_the_seed(map_name):
    a, b, c = random_rollout(map_name, 5), random_rollout(map_name, 5), random_rollout(map_name, 6)
    for x, y in zip(a, b, strict=True):
        for u, v in zip(x, y, strict=True):
            np.testing.assert_array_equal(u, v)
    assert any(not np.array_equal(x[1], z[1]) for x, z in zip(a, c, strict=True))


def test_auto_reset_returns_the_final_observation_and_starts_a_new_battle():
    core = BattleBatch(8, seed=0, map_name="3m")
    step = core.reset()
    for _ in range(core.spec.limit + 1):
        step = core.step(scripted(step, core))
        done = step.terminated | step.truncated
        if done.any():
            b = int(np.flatnonzero(done)[0])
            assert core.t[b] == 0 and core.alive[b].all()
            assert not np.array_equal(step.final_state[b], step.state[b])
            return
    pytest.fail("no battle ended")


def test_pettingzoo_env_is_one_battle_of_the_core_with_smacs_interface():
    env = envs.make("smac/MMM2-v0", render_mode="rgb_array")
    obs, _ = env.reset(seed=0)
    assert env.possible_agents == [f"agent_{i}" for i in range(10)]
    o = obs["agent_0"]
    assert o["observations"].shape == (176,) and o["action_mask"].dtype == np.int8
    assert env.state().shape == (322,)
    frame = env.render()
    assert frame.ndim == 3 and frame.shape[2] == 3 and frame.dtype == np.uint8
    colours = {tuple(c) for c in frame.reshape(-1, 3)[::7]}
    assert len(colours) > 4  # units, bars and background, not a blank frame
    rng = np.random.default_rng(0)
    for _ in range(400):
        acts = {a: int(rng.choice(np.flatnonzero(obs[a]["action_mask"]))) for a in env.agents}
        obs, rew, term, trunc, info = env.step(acts)
        if not env.agents:
            keys = set(next(iter(info.values())))
            assert {"battle_won", "dead_allies", "dead_enemies", "episode_limit"} <= keys
            break
    else:
        pytest.fail("the episode never ended")


def test_without_auto_reset_a_finished_battle_may_only_no_op_until_reset():
    core = battle("3m")
    core._bury(np.r_[False, False, False, True, True, True][None])  # the enemies are gone
    step = core.step(np.ones((1, 3), int))
    assert step.terminated[0] and step.info["battle_won"][0]
    assert (step.action_mask["agent"][0, :, 0] == 1).all() and (
        step.action_mask["agent"][0, :, 1:] == 0
    ).all()
    with pytest.raises(ValueError, match="legal actions: 0 \\(no-op\\)"):
        core.step(np.ones((1, 3), int))
    assert (core.reset().action_mask["agent"][0, :, 1] == 1).all()


@pytest.mark.parametrize("name", sorted(SMAC_MAPS))
def test_agents_that_only_stop_deal_no_damage(name):
    """SMAC's agent units are Passive: "stop" every step (no-op once dead) never fires, so no
    enemy loses health or shield (an enemy baneling dies in its own explosion)."""
    from envs.smac.units import TABLE

    core = BattleBatch(4, seed=1, map_name=name, auto_reset=False)
    step = core.reset()
    A = core.n_allies
    bane = TABLE.is_baneling[core.types[:, A:]]

    def enemy_health():
        total = core.hp[:, A:] + (core.sh[:, A:] if core.has_shields else 0.0)
        return np.where(bane, 0.0, total)

    before = enemy_health()
    for _ in range(core.spec.limit):
        mask = step.action_mask["agent"]
        step = core.step(np.where(mask[..., 1] > 0, 1, 0))
        after = enemy_health()
        assert (after >= before - 1e-4).all(), (name, before - after)
        before = after
        if core.over.all():
            break


def test_smacv2_conic_fov_sees_and_shoots_only_inside_the_cone_it_turns():
    """SMACv2's conic_fov: 12 look actions after the moves, the facing in the own features and
    the state, and is_position_in_cone's test (arctan of slopes: the opposite cone counts)."""
    plain = BattleBatch(1, seed=0, map_name="protoss_5_vs_5")
    core = BattleBatch(1, seed=0, map_name="protoss_5_vs_5", conic_fov=True, auto_reset=False)
    assert core.n_actions == plain.n_actions + 12 == 6 + 12 + 5
    assert core.observation_space.shape[0] == plain.observation_space.shape[0] + 2
    # each ally's facing, and every last action is 12 longer
    assert core.state_space.shape[0] == plain.state_space.shape[0] + 5 * 2 + 5 * 12
    core.reset()
    dead = np.ones((1, core.n_units), bool)
    dead[0, [0, 5, 6, 7]] = False
    core._bury(dead)
    core.kind[0, 5:] = NONE
    core._refresh()
    me = 16 + 16j
    core.pos[0, [0, 5, 6, 7]] = [me, me + 1.5, me + 1.5j, me - 1.5]  # east, north, west
    nf = core.nf_enemy
    first = core.n_no_attack

    def seen_and_shootable():
        obs, _, mask = core._observe()
        blocks = obs[0, 0, 4 : 4 + 5 * nf].reshape(5, nf)
        return [bool(blocks[e].any()) for e in range(3)], mask[0, 0, first : first + 3].tolist()

    # Facing east (the start): east and, through the arctan test, west; not north.
    assert seen_and_shootable() == ([True, False, True], [1, 0, 1])
    act = np.zeros((1, 5), int)  # the dead no-op
    act[0, 0] = 6 + 3  # look 3: 90 degrees, north
    core.step(act)
    core.pos[0, [0, 5, 6, 7]] = [me, me + 1.5, me + 1.5j, me - 1.5]
    assert seen_and_shootable() == ([False, True, False], [0, 1, 0])
    own = core._observe()[0][0, 0, -(2 + 2 + core.type_bits) :]
    np.testing.assert_allclose(own[2:4], [0.0, 1.0], atol=1e-6)  # x/32, y/32, then facing
