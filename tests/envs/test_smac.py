"""SMAC battles: mechanics with the anchor file's numbers, the interface, sizes, determinism."""

import math

import numpy as np
import pytest

import envs
from envs.smac import units as U
from envs.smac.core import AMOVE, ATTACK, HEAL, NONE, BattleBatch
from envs.smac.maps import SMAC_MAPS, SMACV2_SCENARIOS, V2_TYPE_PROBS, V2_TYPES, sample_battle

# SMAC's (obs, state) sizes with its default flags, as SMAC itself reports them.
SMAC_SIZES = {
    "3m": (30, 48),
    "8m": (80, 168),
    "2s3z": (80, 120),
    "3s5z": (128, 216),
    "MMM": (160, 290),
    "MMM2": (176, 322),
    "5m_vs_6m": (55, 98),
    "27m_vs_30m": (285, 1170),
    "1c3s5z": (162, 270),
    "corridor": (156, 282),
    "6h_vs_8z": (78, 140),
    "3s_vs_5z": (48, 68),
    "2c_vs_64zg": (332, 342),
    "2s_vs_1sc": (17, 27),
    "2m_vs_1z": (16, 26),
    "protoss_5_vs_5": (92, 130),
    "terran_5_vs_5": (82, 120),
    "zerg_5_vs_5": (82, 120),
}


def smac_sizes(spec) -> tuple[int, int]:
    """SMAC's get_obs_size / get_state_size formulas, written out independently of the core."""
    A, E, bits = spec.n_allies, spec.n_enemies, spec.type_bits
    sa, se = int(spec.shields("allies")), int(spec.shields("enemies"))
    own = 1 + sa + bits + (2 if spec.procedural else 0)  # SMACv2 adds the own position
    obs = 4 + E * (5 + se + bits) + (A - 1) * (5 + sa + bits) + own
    state = A * (4 + sa + bits) + E * (3 + se + bits) + A * (6 + E)
    return obs, state


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


def test_unit_table_matches_the_anchor():
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
    assert (U.FRAMES_PER_SECOND, U.STEP_MUL, U.MOVE_AMOUNT) == (16, 8, 2.0)


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


def test_medivac_heals_nine_hp_per_second_for_one_energy_per_three_hp():
    core = battle("MMM")  # allies: marauders 0-1, marines 2-8, medivac 9
    medivac, marine = 9, 2
    assert core.is_medivac[0, medivac] and core.types[0, marine] == U.MARINE
    isolate(core, [medivac, marine], {medivac: 10 + 16j, marine: 12 + 16j})
    core.hp[0, marine] = 10.0
    assert core.energy[0, medivac] == U.MEDIVAC_ENERGY_START == 50
    core.kind[0, medivac], core.target[0, medivac] = HEAL, marine
    core._refresh()
    frames(core, 16)  # one game second
    assert core.hp[0, marine] == pytest.approx(10 + 9, abs=1e-3)
    regen = U.ENERGY_REGEN_PER_S
    assert core.energy[0, medivac] == pytest.approx(50 - 9 / 3 + regen, abs=1e-3)
    # Out of energy it heals only what the regeneration pays for: 3 hp per energy.
    core.energy[0, medivac] = 0.0
    before = float(core.hp[0, marine])
    frames(core, 16)
    assert core.hp[0, marine] - before == pytest.approx(3 * regen, abs=1e-2)
    # Full health: nothing to heal, energy accumulates.
    core.hp[0, marine] = 45.0
    e = float(core.energy[0, medivac])
    frames(core, 16)
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
    core.pos[0, 0] = 0.0 + 0j
    frames(core, 1)
    assert core.pos[0, 0].real >= 0.375 - 1e-6 and core.pos[0, 0].imag >= 0.375 - 1e-6


def test_enemy_ai_attack_moves_toward_the_allies():
    core = battle("3m")
    start = core.pos[0, 3:].copy()
    for _ in range(4):
        core.step(np.ones((1, 3), int))  # allies stop; enemies come
    assert (core.pos[0, 3:].real < start.real - 2).all()


@pytest.mark.parametrize("name", sorted(SMAC_MAPS) + sorted(SMACV2_SCENARIOS))
def test_observation_and_state_sizes_equal_smacs(name):
    spec = SMAC_MAPS.get(name) or SMACV2_SCENARIOS[name]
    core = BattleBatch(2, seed=0, map_name=name)
    step = core.reset()
    expected = SMAC_SIZES.get(name, smac_sizes(spec))
    assert smac_sizes(spec) == expected
    assert (core.observation_space.shape[0], core.state_space.shape[0]) == expected
    assert step.obs["agent"].shape == (2, spec.n_allies, expected[0])
    assert step.state.shape == (2, expected[1])
    assert core.n_actions == 6 + spec.n_enemies
    assert np.abs(step.obs["agent"]).max() <= 1 and np.abs(step.state).max() <= 1
    assert core.spec.limit == spec.limit


def test_map_table_matches_the_anchor():
    lim = {"3m": 60, "8m": 120, "25m": 150, "5m_vs_6m": 70, "27m_vs_30m": 180, "MMM2": 180}
    lim |= {"2s3z": 120, "corridor": 400, "so_many_baneling": 100, "2c_vs_64zg": 400}
    lim |= {"2s_vs_1sc": 300, "3s_vs_5z": 250, "6h_vs_8z": 150, "bane_vs_bane": 200}
    for name, limit in lim.items():
        assert SMAC_MAPS[name].limit == limit, name
    assert (SMAC_MAPS["MMM2"].n_allies, SMAC_MAPS["MMM2"].n_enemies) == (10, 12)
    assert (SMAC_MAPS["corridor"].n_allies, SMAC_MAPS["corridor"].n_enemies) == (6, 24)
    assert len(SMAC_MAPS) == 23
    assert {
        f"{r}_{s}"
        for r in ("protoss", "terran", "zerg")
        for s in ("5_vs_5", "10_vs_10", "10_vs_11", "20_vs_20", "20_vs_23")
    } == set(SMACV2_SCENARIOS)


def test_every_map_and_scenario_is_registered():
    ids = set(envs.ids())
    assert {f"smac/{m}-v0" for m in SMAC_MAPS} <= ids
    assert {f"smacv2/{s}-v0" for s in SMACV2_SCENARIOS} <= ids


def test_smacv2_samples_unit_types_with_its_probabilities_and_per_unit_ranges():
    spec = SMACV2_SCENARIOS["zerg_10_vs_11"]
    rng = np.random.default_rng(0)
    counts = np.zeros(3)
    pool = [U.INDEX[n] for n in V2_TYPES["zerg"]]
    for _ in range(400):
        types, pos, _ = sample_battle(spec, rng)
        assert len(types) == 21 and (types[:10] == types[10:20]).all()  # mirrored teams
        counts += [(types[:10] == p).sum() for p in pool]
    freq = counts / counts.sum()
    np.testing.assert_allclose(freq, V2_TYPE_PROBS, atol=0.03)
    core = BattleBatch(8, seed=0, map_name="zerg_10_vs_11")
    core.reset()
    np.testing.assert_allclose(core.sight, U.TABLE.sight[core.types])
    assert (core.shoot >= 2).all()  # min_attack_range
    assert (core.shoot == np.maximum(U.TABLE.range[core.types], 2)).all()


def test_smacv2_start_positions_are_surrounded_or_reflected():
    spec = SMACV2_SCENARIOS["terran_5_vs_5"]
    rng = np.random.default_rng(1)
    kinds = set()
    for _ in range(60):
        types, pos, _ = sample_battle(spec, rng)
        allies, enemies = pos[:5], pos[5:]
        centre = allies.mean(0)
        if np.allclose(centre, 16, atol=1.5):
            kinds.add("surrounded")
        else:
            mirrored = np.array([32 - enemies[:, 0].mean(), enemies[:, 1].mean()])
            assert np.allclose(mirrored, centre, atol=1.5)
            kinds.add("reflect")
    assert kinds == {"surrounded", "reflect"}


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
