"""SMAC's (and SMACv2's) environment options (``envs.smac.core.BattleOptions``) against
upstream's definitions: observation/state sizes and contents, reward variants, the episode
limit, SMACv2's reward scale and clip, its enemy trigger and ``prob_obs_enemy``, errors.

Upstream code read: SMAC's ``smac/env/starcraft2/starcraft2.py`` (github.com/oxwhirl/smac) and
SMACv2's ``smacv2/env/starcraft2/starcraft2.py`` (github.com/oxwhirl/smacv2). The expected
numbers below are computed here from those definitions, not taken from this repository."""

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

import envs
from envs.registry import EnvError
from envs.smac import units as U
from envs.smac.core import AMOVE, ATTACK, BattleBatch, BattleOptions
from tests.envs.smac_upstream import OBS_CASES, arena_case
from tests.envs.test_smac import SMAC_REGISTRY, SMAC_SIZES, SMACV2_COUNTS, scripted

# SC2's (health_max, shield_max) of the units SMACv2's protoss and terran scenarios draw.
SC2_HEALTH = {
    "stalker": (80, 80),
    "zealot": (100, 50),
    "colossus": (200, 150),
    "marine": (45, 0),
    "marauder": (125, 0),
    "medivac": (150, 0),
}
# SMACv2's ``unit_sight_range`` (use_unit_ranges) for the protoss units.
V2_SIGHT = {"stalker": 10.0, "zealot": 9.0, "colossus": 10.0}
V1_SIGHT = 9.0  # SMAC's ``unit_sight_range``


def counts(name: str) -> tuple[int, int, int]:
    """(n_agents, n_enemies, unit_type_bits) from the upstream registries."""
    if name in SMAC_REGISTRY:
        A, E, _, _, _, bits, _ = SMAC_REGISTRY[name]
        return A, E, bits
    A, E = SMACV2_COUNTS[name.split("_", 1)[1]]
    return A, E, 3


def name_of(core: BattleBatch, b: int, i: int) -> str:
    return U.UNIT_TYPES[int(core.types[b, i])].name


def stop_or_noop(step) -> np.ndarray:
    """Action 1 (stop) for every live agent, 0 (no-op) for the dead."""
    return np.where(step.action_mask["agent"][..., 1] > 0, 1, 0)


def random_legal(step, rng) -> np.ndarray:
    mask = step.action_mask["agent"]
    return (rng.random(mask.shape) * mask).argmax(-1)


# -- 1. sizes ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["3m", "MMM2", "protoss_5_vs_5"])
def test_option_sizes_follow_smacs_get_obs_size_and_get_state_size(name):
    A, E, _ = counts(name)
    n = 6 + E  # n_actions_no_attack + n_enemies
    obs0, state0, _ = SMAC_SIZES[name]
    # get_obs_ally_feats_size: + n_actions per ally with obs_last_action;
    # get_obs_own_feats_size: + 1 with obs_timestep_number;
    # get_state_size: + n_agents * n_actions with state_last_action, + 1 with the timestep.
    cases = [
        ({}, obs0, state0),
        ({"obs_last_action": True}, obs0 + (A - 1) * n, state0),
        ({"obs_timestep_number": True}, obs0 + 1, state0),
        ({"state_last_action": False}, obs0, state0 - A * n),
        ({"state_timestep_number": True}, obs0, state0 + 1),
        (
            dict(obs_last_action=True, obs_timestep_number=True, state_timestep_number=True),
            obs0 + (A - 1) * n + 1,
            state0 + 1,
        ),
    ]
    for options, obs_size, state_size in cases:
        core = BattleBatch(2, seed=0, map_name=name, **options)
        step = core.reset()
        assert core.observation_space.shape == (obs_size,), options
        assert core.state_space.shape == (state_size,), options
        assert step.obs["agent"].shape == (2, A, obs_size), options
        assert step.state.shape == (2, state_size), options
        step = core.step(stop_or_noop(step))
        assert step.obs["agent"].shape == (2, A, obs_size), options
        assert step.state.shape == (2, state_size), options


# -- 2. values --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["3m", "MMM2"])
def test_obs_last_action_puts_each_visible_allys_last_action_after_its_type_bits(name):
    """get_obs_agent: an ally's block is visible, dist, rel x, rel y, health, (shield), type
    bits, then ``last_action[al_id]`` (one-hot; zeros at reset, zeros when not visible)."""
    A, E, bits = counts(name)
    n = 6 + E
    nf_en = 4 + 1 + bits  # no shields on these terran maps
    nf_al_plain = 4 + 1 + bits
    nf_al = nf_al_plain + n
    core = BattleBatch(1, seed=4, map_name=name, auto_reset=False, obs_last_action=True)
    plain = BattleBatch(1, seed=4, map_name=name, auto_reset=False)
    step, ref = core.reset(), plain.reset()

    def ally_blocks(obs):  # [A, A-1, nf_al]
        start = 4 + E * nf_en
        return obs[0, :, start : start + (A - 1) * nf_al].reshape(A, A - 1, nf_al)

    assert (ally_blocks(step.obs["agent"])[:, :, nf_al_plain:] == 0).all()  # reset: zeros
    # get_state: the state's last n_agents * n_actions entries are last_action (zeros).
    assert (step.state[0, -A * n :] == 0).all()

    mask = step.action_mask["agent"][0]
    legal = [np.flatnonzero(mask[i]) for i in range(A)]
    acts = np.array([legal[i][i % len(legal[i])] for i in range(A)])
    assert len(set(acts.tolist())) > 1
    step, ref = core.step(acts[None]), plain.step(acts[None])
    obs = step.obs["agent"]
    blocks = ally_blocks(obs)
    onehot = np.eye(n)[acts]
    seen = 0
    for i in range(A):
        others = [j for j in range(A) if j != i]
        for k, j in enumerate(others):
            d = abs(core.pos[0, j] - core.pos[0, i])
            if d < V1_SIGHT and core.alive[0, j] and core.alive[0, i]:
                seen += 1
                assert blocks[i, k, 0] == 1
                np.testing.assert_array_equal(blocks[i, k, nf_al_plain:], onehot[j])
            else:
                assert (blocks[i, k] == 0).all()
    assert seen > 0
    # Removing the last-action columns gives the observation without the option.
    keep = np.ones(obs.shape[-1], bool)
    start = 4 + E * nf_en
    for k in range(A - 1):
        keep[start + k * nf_al + nf_al_plain : start + (k + 1) * nf_al] = False
    np.testing.assert_array_equal(obs[..., keep], ref.obs["agent"])
    np.testing.assert_array_equal(step.state, ref.state)
    np.testing.assert_array_equal(step.state[0, -A * n :], onehot.ravel())


def test_timestep_numbers_are_episode_steps_over_the_limit_as_the_last_entry():
    """get_obs_agent / get_state_dict: ``_episode_steps / episode_limit`` appended last."""
    core = BattleBatch(
        1,
        seed=0,
        map_name="3m",
        auto_reset=False,
        obs_timestep_number=True,
        state_timestep_number=True,
    )
    step = core.reset()
    limit = SMAC_REGISTRY["3m"][2]
    assert (step.obs["agent"][0, :, -1] == 0).all() and step.state[0, -1] == 0
    for t in range(1, 4):
        step = core.step(stop_or_noop(step))
        np.testing.assert_allclose(step.obs["agent"][0, :, -1], t / limit, rtol=1e-6)
        np.testing.assert_allclose(step.state[0, -1], t / limit, rtol=1e-6)
    # Without state_last_action the timestep directly follows the enemies' features.
    core = BattleBatch(
        1, seed=0, map_name="3m", state_last_action=False, state_timestep_number=True
    )
    step = core.reset()
    step = core.step(stop_or_noop(step))
    assert step.state.shape == (1, SMAC_SIZES["3m"][1] - 3 * 9 + 1)
    np.testing.assert_allclose(step.state[0, -1], 1 / limit, rtol=1e-6)


# -- 3-4. rewards ------------------------------------------------------------------------------


@pytest.mark.parametrize("reward_scale", [True, False])
def test_sparse_reward_is_one_on_a_win_scaled_by_max_reward_over_20(reward_scale):
    """step: reward = 1 on a win, -1 on a defeat, 0 otherwise; divided by max_reward / 20 with
    max_reward = n_enemies * 10 + 200 + sum of the enemies' health_max + shield_max
    (__init__ and init_units); 3m: 3 * 10 + 200 + 3 * 45 = 365."""
    B = 16
    core = BattleBatch(
        B,
        seed=3,
        map_name="3m",
        auto_reset=False,
        reward_sparse=True,
        reward_scale=reward_scale,
    )
    step = core.reset()
    scale = 20.0 / (3 * 10 + 200 + 3 * 45) if reward_scale else 1.0
    over = np.zeros(B, bool)
    won_any = lost_any = False
    for _ in range(SMAC_REGISTRY["3m"][2]):
        live = ~over
        step = core.step(scripted(step, core))
        allies, enemies = core.alive[:, :3].any(1), core.alive[:, 3:].any(1)
        won, lost = allies & ~enemies, ~allies & enemies
        assert (step.info["battle_won"][live] == won[live]).all()
        expected = np.where(won, 1.0, np.where(lost, -1.0, 0.0)) * scale
        np.testing.assert_allclose(step.rewards[live], np.repeat(expected[live, None], 3, 1))
        won_any |= (won & live).any()
        lost_any |= (lost & live).any()
        over |= step.terminated | step.truncated
        if over.all():
            break
    assert won_any and lost_any


def dense_expected(before, after, alive_before, alive_after, A, only_positive):
    """reward_battle + step's reward_win, without scaling, for every battle."""
    was = alive_before
    # delta: hp + shield lost by each unit alive before the step (all of it when it died).
    lost = np.where(alive_after, before - after, before) * was
    died = was & ~alive_after
    delta_enemy = lost[:, A:].sum(1)
    delta_deaths = 10.0 * died[:, A:].sum(1)
    if only_positive:
        reward = np.abs(delta_enemy + delta_deaths)
    else:
        delta_ally = 0.5 * lost[:, :A].sum(1)
        delta_deaths = delta_deaths - 0.5 * 10.0 * died[:, :A].sum(1)
        reward = delta_enemy + delta_deaths - delta_ally
    won = alive_after[:, :A].any(1) & ~alive_after[:, A:].any(1)
    return reward + 200.0 * won, won


@pytest.mark.parametrize("only_positive", [False, True])
def test_dense_reward_equals_smacs_reward_battle_on_a_rollout(only_positive):
    B, A = 16, 3
    core = BattleBatch(
        B,
        seed=3,
        map_name="3m",
        auto_reset=False,
        reward_only_positive=only_positive,
        reward_scale=False,
    )
    step = core.reset()
    rng = np.random.default_rng(3)
    # Half the battles play the scripted policy with 10% random actions (some are won), the
    # other half play at random.
    p_random = np.where(np.arange(B) < B // 2, 0.1, 1.0)[:, None]
    over = np.zeros(B, bool)
    wins = ally_deaths = kills = negative = 0
    for _ in range(SMAC_REGISTRY["3m"][2]):
        live = ~over
        before, alive_before = core.hp + core.sh, core.alive.copy()
        rnd = random_legal(step, rng)
        act = np.where(rng.random((B, A)) < p_random, rnd, scripted(step, core))
        step = core.step(act)
        expected, won = dense_expected(
            before, core.hp + core.sh, alive_before, core.alive, A, only_positive
        )
        np.testing.assert_allclose(
            step.rewards[live], np.repeat(expected[live, None], A, 1), atol=1e-3
        )
        wins += (won & live).sum()
        kills += ((alive_before & ~core.alive)[:, A:].sum(1) * live).sum()
        ally_deaths += ((alive_before & ~core.alive)[:, :A].sum(1) * live).sum()
        negative += (expected[live] < 0).sum()
        over |= step.terminated | step.truncated
        if over.all():
            break
    assert wins > 0 and kills > 0 and ally_deaths > 0
    assert (negative > 0) == (not only_positive)


# -- 5. the episode limit -----------------------------------------------------------------------


@pytest.mark.parametrize("terminate_at_limit", [False, True])
def test_terminate_at_limit_ends_the_episode_with_terminated_instead_of_truncated(
    terminate_at_limit,
):
    """SMAC's step: at ``episode_limit`` terminated = True (and info["episode_limit"] with
    continuing_episode); Arena's default reports it as truncated."""
    core = BattleBatch(
        1, seed=0, map_name="3m", auto_reset=False, terminate_at_limit=terminate_at_limit
    )
    core.reset()
    core.kind[0, 3:] = 0  # NONE: the enemies hold still, far away: nothing happens
    core._refresh()
    limit = SMAC_REGISTRY["3m"][2]
    core.t[:] = limit - 2
    step = core.step(np.ones((1, 3), int))
    assert not step.terminated[0] and not step.truncated[0]
    assert not step.info["episode_limit"][0]
    step = core.step(np.ones((1, 3), int))
    assert step.terminated[0] == terminate_at_limit
    assert step.truncated[0] == (not terminate_at_limit)
    assert step.info["episode_limit"][0] and not step.info["battle_won"][0]
    # A battle won before the limit is terminated either way, and not at the limit.
    core.reset()
    core._bury(np.r_[False, False, False, True, True, True][None])
    step = core.step(np.ones((1, 3), int))
    assert step.terminated[0] and not step.truncated[0]
    assert step.info["battle_won"][0] and not step.info["episode_limit"][0]


def test_terminate_at_limit_in_the_pettingzoo_env():
    env = envs.make("smac/3m-v0", terminate_at_limit=True)
    env.reset(seed=0)
    env.core.kind[0, 3:] = 0
    env.core._refresh()
    env.core.t[:] = SMAC_REGISTRY["3m"][2] - 1
    _, _, term, trunc, info = env.step({a: 1 for a in env.agents})
    assert all(term.values()) and not any(trunc.values())
    assert info["agent_0"]["episode_limit"] is True
    assert env.agents == []


# -- 6. SMACv2's reward ------------------------------------------------------------------------


def team_max_reward(core: BattleBatch, b: int) -> float:
    """init_units: n_enemies * reward_death_value + reward_win + sum(health_max + shield_max)."""
    A, E = core.n_allies, core.n_enemies
    hp = sum(sum(SC2_HEALTH[name_of(core, b, A + e)]) for e in range(E))
    return E * 10.0 + 200.0 + hp


@pytest.mark.parametrize("per_episode", [False, True])
def test_smacv2_reward_scale_is_fixed_by_the_first_episodes_enemies(per_episode):
    """SMACv2's init_units adds the enemies' health_max + shield_max to max_reward only while
    ``_episode_count == 0``: later episodes (other teams) keep the first one's scale.
    ``reward_scale_per_episode=True`` rescales with each episode's team instead."""
    B = 4
    core = BattleBatch(B, seed=0, map_name="protoss_5_vs_5", reward_scale_per_episode=per_episode)
    step = core.reset()
    first = np.array([team_max_reward(core, b) for b in range(B)])
    np.testing.assert_allclose(core.max_reward, first)
    changed = False
    for _ in range(6):
        core.t[:] = core.spec.limit - 1  # every battle times out and is drawn again
        step = core.step(stop_or_noop(step))
        assert (step.truncated | step.terminated).all() and (core.t == 0).all()
        now = np.array([team_max_reward(core, b) for b in range(B)])
        changed |= (now != first).any()
        np.testing.assert_allclose(core.max_reward, now if per_episode else first)
    assert changed  # the draws gave some battle a team of other health
    # A seeded reset starts over from a first episode.
    core.reset(seed=5)
    now = np.array([team_max_reward(core, b) for b in range(B)])
    np.testing.assert_allclose(core.max_reward, now)


def heal_setup(core: BattleBatch, b: int) -> tuple[int, int]:
    """In battle b: every agent at x = 1, every enemy at x = 30 (beyond every sight range), all
    within y 9-23 (the ground of SMAC's standard maps); a damaged enemy (not a medivac) at
    (30, 16) with an enemy medivac beside it. Returns (damaged, medivac) unit indices."""
    A, E = core.n_allies, core.n_enemies
    enemies = [A + e for e in range(E)]
    medivac = next(u for u in enemies if name_of(core, b, u) == "medivac")
    damaged = next(u for u in enemies if name_of(core, b, u) != "medivac")
    for i in range(A):
        core.pos[b, i] = 1 + (9 + 1.5 * i) * 1j
    ys = iter([9, 10.5, 12, 13.5, 18.5, 20, 21.5, 23, 14.5, 22.5])
    for u in enemies:
        core.pos[b, u] = 30 + next(ys) * 1j
    core.pos[b, damaged] = 30 + 16j
    core.pos[b, medivac] = 30 + 17j
    core.hp[b, damaged] = SC2_HEALTH[name_of(core, b, damaged)][0] - 40.0
    core._refresh()
    return damaged, medivac


def test_smacv2_clips_the_reward_of_enemy_healing_at_zero_where_smac_takes_abs():
    """reward_battle with reward_only_positive: SMACv2 returns max(delta_enemy + delta_deaths,
    0), SMAC abs(delta_enemy + delta_deaths). An enemy medivac healing while the agents only
    stop makes that sum negative: 0 on SMACv2, the healed hp on SMAC."""
    # SMACv2, terran_5_vs_5: a battle whose enemy team has a medivac.
    B = 16
    core = BattleBatch(B, seed=0, map_name="terran_5_vs_5", auto_reset=False, reward_scale=False)
    step = core.reset()
    A = core.n_allies
    b = next(b for b in range(B) if any(name_of(core, b, A + e) == "medivac" for e in range(5)))
    damaged, _ = heal_setup(core, b)
    hp0 = core.hp[b].copy()
    step = core.step(stop_or_noop(step))
    healed = core.hp[b, damaged] - hp0[damaged]
    assert healed > 1.0
    assert step.rewards[b, 0] == 0.0

    # SMAC v1, MMM: the same healing earns its absolute value.
    core = BattleBatch(1, seed=0, map_name="MMM", auto_reset=False, reward_scale=False)
    step = core.reset()
    damaged, _ = heal_setup(core, 0)
    hp0 = core.hp[0].copy()
    step = core.step(stop_or_noop(step))
    healed = core.hp[0, damaged] - hp0[damaged]
    assert healed > 1.0
    others = np.delete(np.arange(core.n_units), damaged)
    np.testing.assert_array_equal(core.hp[0, others], hp0[others])  # no damage anywhere
    assert step.rewards[0, 0] == pytest.approx(healed, abs=1e-3)


# -- 7. SMACv2's enemy AI ----------------------------------------------------------------------


def test_smacv2_enemies_attack_their_closest_ally_and_keep_it_while_it_lives():
    """SMACv2's 32x32_flat trigger: every 0.5 s each enemy without a target is ordered to
    attack the ally closest to it, however far away."""
    core = BattleBatch(1, seed=0, map_name="protoss_5_vs_5", auto_reset=False)
    step = core.reset()
    A, E = core.n_allies, core.n_enemies
    ally_y = [4, 10, 16, 22, 28]
    enemy_y = [29, 5, 17, 11, 23]
    for i in range(A):
        core.pos[0, i] = 1 + ally_y[i] * 1j
    for e in range(E):
        core.pos[0, A + e] = 30 + enemy_y[e] * 1j
    core._refresh()
    assert (core.kind[0, A:] == AMOVE).all()

    def closest(e):
        d = [
            abs(core.pos[0, A + e] - core.pos[0, i]) if core.alive[0, i] else np.inf
            for i in range(A)
        ]
        return int(np.argmin(d))

    targets = [closest(e) for e in range(E)]
    assert targets == [4, 0, 2, 1, 3]
    gap0 = [abs(core.pos[0, A + e] - core.pos[0, targets[e]]) for e in range(E)]
    step = core.step(stop_or_noop(step))
    assert (core.kind[0, A:] == ATTACK).all()
    assert core.target[0, A:].tolist() == targets
    for e in range(E):
        assert abs(core.pos[0, A + e] - core.pos[0, targets[e]]) < gap0[e] - 0.5

    # Ally 0 now stands closer to enemy 0 than its target (ally 4): the order stands.
    core.pos[0, 0] = core.pos[0, A] - 4
    core._refresh()
    assert closest(0) == 0
    step = core.step(stop_or_noop(step))
    assert core.kind[0, A] == ATTACK and core.target[0, A] == 4
    # Its target dies: the next order goes to the closest live ally.
    dead = np.zeros((1, core.n_units), bool)
    dead[0, 4] = True
    core._bury(dead)
    want = closest(0)
    assert want == 0
    step = core.step(stop_or_noop(step))
    assert core.kind[0, A] == ATTACK and core.target[0, A] == want


# -- 8. SMACv2's prob_obs_enemy ----------------------------------------------------------------


def blind_battle(prob: float):
    """A protoss_5_vs_5 batch and a battle b in which no agent saw any enemy at reset."""
    core = BattleBatch(32, seed=0, map_name="protoss_5_vs_5", prob_obs_enemy=prob, auto_reset=False)
    step = core.reset()
    A, E = core.n_allies, core.n_enemies

    def blind(b):
        return all(
            abs(core.pos[b, A + e] - core.pos[b, a]) >= V2_SIGHT[name_of(core, b, a)]
            for a in range(A)
            for e in range(E)
        )

    b = next(b for b in range(core.num_envs) if blind(b))
    assert (step.obs["agent"][b, :, 4 : 4 + E * core.nf_enemy] == 0).all()
    return core, step, b


def place_for_sighting(core, b, agent0, agent1):
    """Enemy 0 at the centre; agents 0 and 1 where given; everyone else far away."""
    A = core.n_allies
    core.pos[b, A] = 16 + 16j
    core.pos[b, 0], core.pos[b, 1] = agent0, agent1
    for k, z in enumerate([1 + 1j, 3 + 1j, 1 + 3j]):
        core.pos[b, 2 + k] = z
    for k, z in enumerate([30 + 30j, 30 + 26j, 26 + 30j, 30 + 22j]):
        core.pos[b, A + 1 + k] = z
    core._refresh()


def enemy_block(step, core, b, agent, e=0):
    start = 4 + e * core.nf_enemy
    return step.obs["agent"][b, agent, start : start + core.nf_enemy]


def sees(core, b, agent, e=0) -> bool:
    A = core.n_allies
    d = abs(core.pos[b, A + e] - core.pos[b, agent])
    alive = core.alive[b, agent] and core.alive[b, A + e]
    return bool(alive and d < V2_SIGHT[name_of(core, b, agent)])


@pytest.mark.parametrize("prob", [0.0, 1.0])
def test_prob_obs_enemy_the_first_agent_to_see_an_enemy_observes_it_the_others_maybe(prob):
    """SMACv2's get_obs_agent: the first agent (in agent order) to see an untagged enemy tags
    it and observes it; every other agent observes it only if its draw < prob_obs_enemy."""
    core, step, b = blind_battle(prob)
    place_for_sighting(core, b, 13 + 16j, 16 + 19j)  # both 3 from enemy 0
    later = 0
    for t in range(5):
        step = core.step(stop_or_noop(step))
        assert sees(core, b, 0) and enemy_block(step, core, b, 0).any()
        if not sees(core, b, 1):
            continue
        later += t > 0
        block = enemy_block(step, core, b, 1)
        if prob == 0.0:
            assert (block == 0).all(), t
        else:
            d = abs(core.pos[b, core.n_allies] - core.pos[b, 1])
            assert block[1] == pytest.approx(d / V2_SIGHT[name_of(core, b, 1)], abs=1e-5)
    assert later > 0


def test_prob_obs_enemy_zero_an_agent_not_told_never_sees_it():
    """Agent 1 sees enemy 0 first (alone); agent 0 comes into sight later: never told."""
    core, step, b = blind_battle(0.0)
    place_for_sighting(core, b, 2 + 16j, 16 + 19j)  # agent 0 14 away, agent 1 3 away
    step = core.step(stop_or_noop(step))
    assert sees(core, b, 1) and not sees(core, b, 0)
    assert enemy_block(step, core, b, 1).any() and not enemy_block(step, core, b, 0).any()
    core.pos[b, 0] = core.pos[b, core.n_allies] - 3
    core._refresh()
    for _ in range(3):
        step = core.step(stop_or_noop(step))
        assert sees(core, b, 0) and sees(core, b, 1)
        assert (enemy_block(step, core, b, 0) == 0).all()
        assert enemy_block(step, core, b, 1).any()


def test_prob_obs_enemy_zero_the_tag_is_dropped_when_the_spotter_dies():
    """SMACv2's step: when an agent dies, every enemy it tagged is untagged
    (``enemy_tags[e] = None; obs_enemies[e, :] = 0``), so the next agent to see that enemy
    tags it and observes it."""
    core, step, b = blind_battle(0.0)
    place_for_sighting(core, b, 13 + 16j, 16 + 19j)
    step = core.step(stop_or_noop(step))
    assert sees(core, b, 1) and not enemy_block(step, core, b, 1).any()
    dead = np.zeros((core.num_envs, core.n_units), bool)
    dead[b, 0] = True
    core._bury(dead)  # agent 0, the spotter, dies
    step = core.step(stop_or_noop(step))
    assert sees(core, b, 1)
    assert enemy_block(step, core, b, 1).any()


# -- 9. errors ---------------------------------------------------------------------------------


def test_unknown_and_misplaced_options_are_errors_naming_what_is_allowed():
    with pytest.raises(EnvError) as e:
        envs.make("smac/3m-v0", no_such_option=1)
    msg = str(e.value)
    assert "no_such_option" in msg
    names = [f.name for f in dataclasses.fields(BattleOptions)]
    assert {"reward_sparse", "obs_last_action", "prob_obs_enemy"} <= set(names)
    for name in names:
        assert name in msg, name
    with pytest.raises(ValueError, match="prob_obs_enemy"):
        BattleBatch(1, map_name="3m", prob_obs_enemy=0.5)
    with pytest.raises(ValueError, match="reward_scale_per_episode"):
        BattleBatch(1, map_name="3m", reward_scale_per_episode=True)
    with pytest.raises(ValueError, match="prob_obs_enemy"):
        BattleBatch(1, map_name="protoss_5_vs_5", prob_obs_enemy=1.5)
    with pytest.raises(ValueError, match="prob_obs_enemy"):
        BattleBatch(1, map_name="protoss_5_vs_5", prob_obs_enemy=-0.1)
    with pytest.raises(EnvError, match="prob_obs_enemy"):
        envs.make("smac/3m-v0", prob_obs_enemy=0.5)
    with pytest.raises(ValueError):
        BattleBatch(1, map_name="3m", no_such_option=1)
    with pytest.raises(ValueError, match=r"num_fov_actions must be in 1\.\.360"):
        BattleBatch(1, map_name="protoss_5_vs_5", conic_fov=True, num_fov_actions=100_000)


def test_make_with_obs_last_action_has_the_bigger_observation_space():
    env = envs.make("smac/3m-v0", obs_last_action=True)
    size = SMAC_SIZES["3m"][0] + 2 * 9
    assert env.observation_space("agent_0")["observations"].shape == (size,)
    obs, _ = env.reset(seed=0)
    assert obs["agent_0"]["observations"].shape == (size,)
    obs, *_ = env.step({a: 1 for a in env.agents})
    assert obs["agent_2"]["observations"].shape == (size,)
    env2 = envs.make("smacv2/protoss_5_vs_5-v0", prob_obs_enemy=0.0)
    env2.reset(seed=0)


# -- 10. SMAC's surrounding pathing and height, obs_instead_of_state ---------------------------


@pytest.mark.parametrize("name", ["3m", "MMM2", "protoss_5_vs_5"])
def test_grid_options_and_obs_instead_of_state_sizes_follow_smac(name):
    """get_obs_move_feats_size: + n_obs_pathing (8), + n_obs_height (9); get_state_size with
    obs_instead_of_state: get_obs_size() * n_agents."""
    A, _, _ = counts(name)
    obs0, state0, _ = SMAC_SIZES[name]
    for options, obs_size, state_size in [
        ({"obs_pathing_grid": True}, obs0 + 8, state0),
        ({"obs_terrain_height": True}, obs0 + 9, state0),
        ({"obs_pathing_grid": True, "obs_terrain_height": True}, obs0 + 17, state0),
        ({"obs_instead_of_state": True}, obs0, A * obs0),
        ({"obs_instead_of_state": True, "obs_pathing_grid": True}, obs0 + 8, A * (obs0 + 8)),
    ]:
        core = BattleBatch(2, seed=0, map_name=name, **options)
        step = core.reset()
        assert core.observation_space.shape == (obs_size,), options
        assert core.state_space.shape == (state_size,), options
        assert step.obs["agent"].shape == (2, A, obs_size)
        assert step.state.shape == (2, state_size)


def move_block(core, step, b, agent):
    return step.obs["agent"][b, agent, : core.nf_move]


# (agent position, SMAC's 8 pathing values, SMAC's 9 heights x 255) worked out by hand from the
# drawings of envs/smac/terrain.py: get_surrounding_points of (int(x), int(y)) with move_amount
# 2: (x, y+4), (x, y-4), (x+4, y), (x-4, y), (x+2, y+2), (x-2, y-2), (x+2, y-2), (x-2, y+2) and
# (x, y) itself for heights; 1 off the map.
GRID_CASES = {
    # 3m's band: pathable y 8-23, cliff level 64 on y 7-24, 0 elsewhere.
    "3m": [
        (9.5 + 9.7j, [1, 0, 1, 1, 1, 0, 0, 1], [64, 0, 64, 64, 64, 64, 64, 64, 64]),
        (1.5 + 12.5j, [1, 1, 1, 1, 1, 1, 1, 1], [64, 64, 64, 255, 64, 255, 64, 255, 64]),
    ],
    # 2c_vs_64zg around (5, 17): the west ramp (72/88/104 between levels 64 and 128).
    "2c_vs_64zg": [
        (5.5 + 17.5j, [1, 1, 1, 1, 1, 1, 1, 1], [0, 88, 128, 64, 128, 64, 128, 64, 88]),
    ],
}


@pytest.mark.parametrize("name", sorted(GRID_CASES))
def test_surrounding_pathing_and_height_are_smacs_points_of_the_maps_grids(name):
    core = BattleBatch(1, seed=0, map_name=name, obs_pathing_grid=True, obs_terrain_height=True)
    core.reset()
    for pos, pathing, height in GRID_CASES[name]:
        core.pos[0, 0] = pos
        step_obs, _, mask = core._observe()
        move = step_obs[0, 0, : core.nf_move]
        np.testing.assert_array_equal(move[:4], mask[0, 0, 2:6])  # the move features first
        got_pathing = move[4:12]
        want_pathing = np.array(pathing, np.float32)
        if name == "2c_vs_64zg":  # its pathing at those cells: the drawing's
            from envs.smac import terrain

            grid = terrain.pathable("2c_vs_64zg")
            pts = [(5, 21), (5, 13), (9, 17), (1, 17), (7, 19), (3, 15), (7, 15), (3, 19)]
            want_pathing = np.array([grid[p] for p in pts], np.float32)
        np.testing.assert_array_equal(got_pathing, want_pathing, err_msg=str(pos))
        np.testing.assert_allclose(move[12:21], np.array(height) / 255, rtol=1e-6)
    # A dead agent's move features are all zeros (SMAC returns zeros for the dead).
    core._bury(np.eye(1, core.n_units, 0, dtype=bool))
    obs, _, _ = core._observe()
    assert (obs[0, 0] == 0).all()


def test_obs_instead_of_state_is_every_agents_observation_concatenated():
    core = BattleBatch(
        3, seed=1, map_name="MMM2", obs_instead_of_state=True, state_last_action=True
    )
    step = core.reset()
    rng = np.random.default_rng(0)
    for _ in range(5):
        np.testing.assert_array_equal(step.state, step.obs["agent"].reshape(3, -1))
        step = core.step(random_legal(step, rng))


# -- 11. SMAC's continuing_episode ----------------------------------------------------------------


@pytest.mark.parametrize("continuing", [None, False, True])
def test_continuing_episode_is_smacs_flag_at_the_limit(continuing):
    """SMAC's step at the limit: terminated = True; info["episode_limit"] = True only with
    continuing_episode. None keeps Arena's default: truncated, info marks the time-out."""
    core = BattleBatch(1, seed=0, map_name="3m", auto_reset=False, continuing_episode=continuing)
    core.reset()
    core.kind[0, 3:] = 0  # the enemies hold still, far away: the limit is reached
    core._refresh()
    core.t[:] = SMAC_REGISTRY["3m"][2] - 1
    step = core.step(np.ones((1, 3), int))
    assert step.terminated[0] == (continuing is not None)
    assert step.truncated[0] == (continuing is None)
    assert step.info["episode_limit"][0] == (continuing is not False)
    with pytest.raises(ValueError, match="continuing_episode"):
        BattleBatch(1, map_name="3m", continuing_episode="yes")


# -- 12. SMACv2's action_mask=False -----------------------------------------------------------


def placed_v2(engine="numpy", **options):
    """protoss_5_vs_5 with the agents on the west, enemies 0-1 within agent 0's shoot range,
    the other enemies far east."""
    core = BattleBatch(1, seed=3, map_name="protoss_5_vs_5", engine=engine, **options)
    core.reset()
    A = core.n_allies
    core.pos[0, :A] = [4 + 4j, 4 + 8j, 4 + 12j, 4 + 16j, 4 + 20j]
    core.pos[0, A:] = [5 + 4j, 4 + 5.5j, 28 + 4j, 28 + 16j, 28 + 28j]
    core._refresh()
    return core


@pytest.mark.parametrize("engine", ["numpy", "numba"])
def test_action_mask_false_makes_every_live_target_available_out_of_range_gives_no_order(engine):
    core = placed_v2(engine=engine, action_mask=False)
    A, E = core.n_allies, core.n_enemies
    _, _, mask = core._observe()
    first = core.n_no_attack
    assert (mask[0, :, first:] == 1).all()  # every live enemy, for every live agent
    # The enemy's "available" entry is still the range test (get_true_avail_agent_actions).
    obs, _, _ = core._observe()
    in_range = [abs(core.pos[0, A + e] - core.pos[0, 0]) <= core.shoot[0, 0] for e in range(E)]
    assert in_range[:2] == [True, True] and not any(in_range[2:])
    for e in range(2):
        assert obs[0, 0, 4 + e * core.nf_enemy] == 1.0
    # Agent 0 moves east, then "attacks" enemy 4 (out of range): no order, it keeps moving.
    actions = np.ones((1, A), int)
    actions[0, 0] = 4
    core.step(actions)
    goal = core.goal[0, 0]
    assert core.kind[0, 0] == 2  # MOVE
    actions[0, 0] = first + 4
    core.step(actions)
    assert core.kind[0, 0] == 2 and core.goal[0, 0] == goal
    assert core.last_action[0, 0] == first + 4
    # An attack in range is an order.
    core.pos[0, A] = core.pos[0, 0] + 1
    core._refresh()
    core._observe()
    actions[0, 0] = first
    core.step(actions)
    assert core.kind[0, 0] == ATTACK and core.target[0, 0] == A
    # A dead enemy is never available.
    core._bury(np.eye(1, core.n_units, A + 2, dtype=bool))
    _, _, mask = core._observe()
    assert mask[0, 0, first + 2] == 0 and mask[0, 0, first + 3] == 1


# -- 13. SMACv2's stochastic attack and health ------------------------------------------------


# Upstream's own get_obs_size() / get_state_size() with these options, printed by
# tests/envs/smac_upstream.py (``option_sizes``; SMACv2: sc2_gen_{race}.yaml plus its
# ``attack`` / ``health`` capability entries with that ``observe``).
UPSTREAM_OPTION_SIZES = [
    ("3m", {"obs_pathing_grid": True}, (38, 48)),
    ("3m", {"obs_terrain_height": True}, (39, 48)),
    (
        "3m",
        {"obs_pathing_grid": True, "obs_terrain_height": True, "obs_instead_of_state": True},
        (47, 141),
    ),
    ("MMM2", {"obs_pathing_grid": True}, (184, 322)),
    ("MMM2", {"obs_terrain_height": True}, (185, 322)),
    (
        "MMM2",
        {"obs_pathing_grid": True, "obs_terrain_height": True, "obs_instead_of_state": True},
        (193, 1930),
    ),
    ("corridor", {"obs_pathing_grid": True}, (164, 282)),
    ("corridor", {"obs_terrain_height": True}, (165, 282)),
    (
        "corridor",
        {"obs_pathing_grid": True, "obs_terrain_height": True, "obs_instead_of_state": True},
        (173, 1038),
    ),
    ("protoss_5_vs_5", {"observe": True, "keys": ("attack",)}, (97, 135)),
    ("protoss_5_vs_5", {"observe": False, "keys": ("attack",)}, (97, 135)),
    ("protoss_5_vs_5", {"observe": True, "keys": ("health",)}, (97, 135)),
    ("protoss_5_vs_5", {"observe": False, "keys": ("health",)}, (97, 135)),
    ("protoss_5_vs_5", {"observe": True, "keys": ("attack", "health")}, (102, 140)),
    ("protoss_5_vs_5", {"observe": False, "keys": ("attack", "health")}, (102, 140)),
    ("terran_5_vs_5", {"observe": True, "keys": ("attack",)}, (87, 125)),
    ("terran_5_vs_5", {"observe": False, "keys": ("attack",)}, (87, 125)),
    ("terran_5_vs_5", {"observe": True, "keys": ("health",)}, (87, 125)),
    ("terran_5_vs_5", {"observe": False, "keys": ("health",)}, (87, 125)),
    ("terran_5_vs_5", {"observe": True, "keys": ("attack", "health")}, (92, 130)),
    ("terran_5_vs_5", {"observe": False, "keys": ("attack", "health")}, (92, 130)),
]


@pytest.mark.parametrize("name, options, want", UPSTREAM_OPTION_SIZES)
def test_option_sizes_equal_upstreams_own(name, options, want):
    if "keys" in options:
        observe, keys = options["observe"], options["keys"]
        options = {}
        if "attack" in keys:
            options.update(stochastic_attack=(0.5, 1.0), observe_attack_probs=observe)
        if "health" in keys:
            options.update(stochastic_health=(0.0, 0.5), observe_teammate_health=observe)
    core = BattleBatch(1, seed=0, map_name=name, **options)
    assert (core.observation_space.shape[0], core.state_space.shape[0]) == want


def test_capability_sizes_follow_smacv2():
    """get_obs_ally_feats_size / get_obs_own_feats_size / get_ally_num_attributes: one entry
    per capability (observed or zero-padded), for teammates, oneself and the state."""
    A, E, _ = counts("protoss_5_vs_5")
    obs0, state0, _ = SMAC_SIZES["protoss_5_vs_5"]
    for options, n in [
        ({"stochastic_attack": (0.5, 1.0)}, 1),
        ({"stochastic_health": (0.0, 0.5)}, 1),
        ({"stochastic_health": (0.0, 0.5), "observe_teammate_health": False}, 1),
        ({"stochastic_attack": [0.5, 1.0], "stochastic_health": (0.0, 0.5)}, 2),
    ]:
        core = BattleBatch(1, seed=0, map_name="protoss_5_vs_5", **options)
        assert core.observation_space.shape == (obs0 + (A - 1) * n + n,), options
        assert core.state_space.shape == (state0 + A * n,), options


@pytest.mark.parametrize("observe", [True, False])
def test_stochastic_attack_and_health_features_sit_where_smacv2_puts_them(observe):
    core = BattleBatch(
        2,
        seed=5,
        map_name="terran_5_vs_5",
        stochastic_attack=(0.2, 0.9),
        stochastic_health=(0.1, 0.4),
        observe_attack_probs=observe,
        observe_teammate_health=observe,
    )
    core.reset()
    A, E = core.n_allies, core.n_enemies
    p, level = core.attack_prob, core.health_level
    assert ((p >= 0.2) & (p <= 0.9)).all() and ((level >= 0.1) & (level <= 0.4)).all()
    assert len(np.unique(p)) == 2 * A  # drawn per agent and battle
    b, a, other = 1, 0, 1
    core.hp[b, other] = 0.7 * core.hp_max[b, other]
    core.pos[b, other] = core.pos[b, a] + 1
    obs, state, _ = core._observe()
    health = (0.7 - level[b, other]) / (1 - level[b, other])  # SMACv2's _compute_health
    # Own features (terran: no shield): health, attack probability, health level, x, y, type.
    own = obs[b, other, 4 + E * core.nf_enemy + (A - 1) * core.nf_ally :]
    np.testing.assert_allclose(own[:3], [health, p[b, other], level[b, other]], rtol=1e-5)
    # Agent 0's view of ally 1: visible, distance, x, y, health, attack prob, level, type bits.
    ally = obs[b, a, 4 + E * core.nf_enemy : 4 + E * core.nf_enemy + core.nf_ally]
    assert ally[0] == 1
    want = [health, p[b, other], level[b, other]] if observe else [0.0, 0.0, 0.0]
    np.testing.assert_allclose(ally[4:7], want, rtol=1e-5, atol=1e-7)
    # State, ally 1: health, energy/cooldown, x, y, attack prob, level, type bits.
    row = state[b, other * core.nf_state_ally : (other + 1) * core.nf_state_ally]
    np.testing.assert_allclose(row[[0, 4, 5]], [health, p[b, other], level[b, other]], rtol=1e-5)


@pytest.mark.parametrize("engine", ["numpy", "numba"])
def test_stochastic_health_kills_an_agent_below_its_level(engine):
    core = placed_v2(engine=engine, stochastic_health=(0.3, 0.3))
    A = core.n_allies
    core.pos[0, A:] = [28 + 4j, 28 + 10j, 28 + 16j, 28 + 22j, 28 + 28j]  # nobody fights
    core.hp[0, 0] = 0.29 * core.hp_max[0, 0]
    core.hp[0, 1] = 0.31 * core.hp_max[0, 1]
    core._refresh()
    core._observe()
    step = core.step(np.ones((1, A), int))
    assert not core.alive[0, 0] and core.alive[0, 1:A].all()
    assert step.info["dead_allies"][0] == 1
    with pytest.raises(ValueError, match="reward_only_positive"):
        BattleBatch(
            1, map_name="protoss_5_vs_5", stochastic_health=(0, 0.5), reward_only_positive=False
        )
    for bad in [(0.5, 1.0), (0.6, 0.5), 0.5, (-0.1, 0.2)]:
        with pytest.raises(ValueError, match="stochastic_health"):
            BattleBatch(1, map_name="protoss_5_vs_5", stochastic_health=bad)


@pytest.mark.parametrize("engine", ["numpy", "numba"])
def test_stochastic_attack_gives_the_order_with_the_agents_probability(engine):
    """SMACv2's get_agent_action: an attack is sent only if a uniform draw <= the agent's
    attack probability. With 0 never, with 1 always, with 0.5 about half the time."""
    for prob, lo, hi in [(0.0, 0.0, 0.0), (1.0, 1.0, 1.0), (0.5, 0.4, 0.6)]:
        core = BattleBatch(
            256, seed=2, map_name="protoss_5_vs_5", engine=engine, stochastic_attack=(prob, prob)
        )
        core.reset()
        A = core.n_allies
        core.pos[:, A] = core.pos[:, 0] + 1  # enemy 0 in agent 0's range in every battle
        core._refresh()
        core._observe()
        actions = np.ones((256, A), int)
        actions[:, 0] = core.n_no_attack
        core.step(actions)
        share = (core.target[:, 0] == A).mean()
        assert lo <= share <= hi, (prob, share)


def test_a_failed_attack_does_not_turn_the_cone():
    """An attack that gives no order (the coin, or out of range without the mask) is still an
    attack action: the agent's cone (conic_fov) stays where it was."""
    core = BattleBatch(
        1, seed=2, map_name="protoss_5_vs_5", conic_fov=True, stochastic_attack=(0.0, 0.0)
    )
    core.reset()
    A = core.n_allies
    core.pos[0, A] = core.pos[0, 0] + 0.5  # enemy 0 in range and inside agent 0's cone
    core._refresh()
    core._observe()
    before = core.fov.copy()
    actions = np.ones((1, A), int)
    actions[0, 0] = core.n_no_attack
    core.step(actions)
    assert core.target[0, 0] != A  # the coin (probability 0) gave no order
    np.testing.assert_array_equal(core.fov, before)


@pytest.mark.parametrize("engine", ["numpy", "numba"])
def test_smacs_heuristic_attacks_whatever_the_mask_and_the_coin(engine):
    """SMACv2's step sends the heuristic's attack directly (get_agent_action_heuristic), not
    through get_agent_action: out of range without the mask, and with a zero attack
    probability, each agent still attacks its closest enemy and walks into range."""
    core = placed_v2(
        engine=engine, action_mask=False, stochastic_attack=(0.0, 0.0), heuristic_ai=True
    )
    A = core.n_allies
    core._observe()
    core.step(np.zeros((1, A), int))
    assert (core.kind[0, :A] == ATTACK).all()
    assert (core.target[0, :A] == core.h_target[0] + A).all()


# -- 14. SMACv2's observation bug (upstream_obs_bug) ------------------------------------------


def bug_battle(bug: bool, enemy2_dead_near: bool | None = None):
    """protoss_5_vs_5, prob_obs_enemy 1: enemies 0, 1, 3, 4 beside agent 0 only, enemy 2 far
    from every agent (alive, or dead far away / near agent 0)."""
    core = BattleBatch(1, seed=0, map_name="protoss_5_vs_5", upstream_obs_bug=bug)
    core.reset()
    A = core.n_allies
    core.pos[0, :A] = [16 + 16j, 2 + 2j, 2 + 30j, 30 + 2j, 30 + 30j]
    core.pos[0, A:] = [17 + 16j, 16 + 17j, 16 + 30j, 15 + 16j, 16 + 15j]
    if enemy2_dead_near is not None:
        if enemy2_dead_near:
            core.pos[0, A + 2] = 16 + 18j
        core._bury(np.eye(1, core.n_units, A + 2, dtype=bool))
    core._refresh()
    core._spotter[:] = -1
    core._told_to[:] = bug is False
    obs, _, _ = core._observe()
    E = core.n_enemies
    return obs[0, 0, 4 : 4 + E * core.nf_enemy].reshape(E, core.nf_enemy)


def test_upstream_obs_bug_zeroes_the_enemy_block_up_to_an_enemy_nobody_tagged():
    """SMACv2's get_obs_agent (starcraft2.py:1538-1584): enemy 2 is seen by nobody, so
    obs_enemies[2, 0] == 0 and agent 0's enemy_feats are reset to zeros there: enemies 0-2
    read zero, 3 and 4 (processed later) are kept. Arena's default shows 0, 1, 3, 4."""
    shown = lambda block: [bool(row.any()) for row in block]  # noqa: E731
    assert shown(bug_battle(False)) == [True, True, False, True, True]
    assert shown(bug_battle(True)) == [False, False, False, True, True]
    # Dead enemy 2, out of everyone's sight: never tagged, the block is still cut.
    assert shown(bug_battle(True, enemy2_dead_near=False)) == [False, False, False, True, True]
    # Dead at a spot agent 0 sees: SMACv2 tags it at its last position, nothing is cut.
    assert shown(bug_battle(True, enemy2_dead_near=True)) == [True, True, False, True, True]
    with pytest.raises(ValueError, match="upstream_obs_bug"):
        BattleBatch(1, map_name="3m", upstream_obs_bug=True)


def test_upstream_obs_bug_an_agent_before_the_spotter_in_the_shuffle_is_not_told_yet():
    """Agents 0 and 1 see enemy 0, agent 4 sees enemies 1-4, agent 2 sees nothing. SMACv2
    shuffles the agents' turns: the first seer tags the enemy, a later agent is told (prob 1),
    an earlier one is not yet. Agent 2 comes after the first of agents 0 and 1 in 2 of 3
    shuffles; whenever it comes before, its whole block is cut at enemy 0 at least."""
    core = BattleBatch(1, seed=0, map_name="protoss_5_vs_5", upstream_obs_bug=True)
    core.reset()
    A, E = core.n_allies, core.n_enemies
    core.pos[0, :A] = [16 + 16j, 16 + 18j, 2 + 30j, 30 + 2j, 30 + 30j]
    core.pos[0, A:] = [17 + 16j, 28 + 28j, 29 + 29j, 30 + 28j, 28 + 30j]
    core._refresh()
    told_2, spotters, n = 0, set(), 600
    for _ in range(n):
        core._spotter[:] = -1
        core._told_to[:] = False
        core._observe()
        at_turn, cut = core._at_turn[0], core._cut[0]
        assert at_turn[0, 0] and at_turn[1, 0]  # the spotter, and the other seer told
        assert at_turn[4, 1:].all()  # agent 4 spots enemies 1-4 itself
        spotters.add(int(core._spotter[0, 0]))
        told_2 += bool(at_turn[2, 0])
        untold = [e for e in range(E) if not at_turn[2, e]]
        assert cut[2] == (max(untold) if untold else -1)
    assert spotters == {0, 1}
    assert abs(told_2 / n - 2 / 3) < 0.07, told_2 / n


# -- 15. against SMACv2's own get_obs / get_state ---------------------------------------------


@pytest.mark.parametrize("name", sorted(OBS_CASES))
def test_observation_and_state_equal_smacv2s_own_on_the_same_units(name):
    """tests/envs/smac_upstream.py ran SMACv2's get_obs and get_state on copies of these
    battles' units (agents' turns in index order) and wrote smacv2_obs.json."""
    with open(Path(__file__).with_name("smacv2_obs.json")) as f:
        cases = json.load(f)
    want = cases[name]
    _, obs, state = arena_case(name)
    np.testing.assert_allclose(obs, np.array(want["obs"]), atol=2e-7)
    np.testing.assert_allclose(state, np.array(want["state"]), atol=2e-7)
    if name == "upstream_obs_bug":  # the same battle: SMACv2's bug hides what the default shows
        assert np.abs(np.array(want["obs"]) - np.array(cases["default"]["obs"])).max() > 0


def test_upstream_obs_bug_tags_once_per_step_when_other_battles_reset():
    """An auto-reset observes the batch again; battles that did not end keep the tagging of
    their step (SMACv2 runs get_obs once per step), so their observation is the same."""
    core = BattleBatch(16, seed=2, map_name="zerg_5_vs_5", upstream_obs_bug=True)
    step = core.reset()
    rng = np.random.default_rng(1)
    resets = 0
    for _ in range(120):
        step = core.step(random_legal(step, rng))
        done = step.terminated | step.truncated
        resets += done.sum()
        np.testing.assert_array_equal(step.final_obs["agent"][~done], step.obs["agent"][~done])
    assert resets > 0


def test_v2_only_and_range_checks_of_the_new_options():
    for name, value in [
        ("action_mask", False),
        ("stochastic_attack", (0.5, 1.0)),
        ("stochastic_health", (0.0, 0.5)),
        ("kill_unit_step_mul", 3),
        ("observe_attack_probs", False),
    ]:
        with pytest.raises(ValueError, match=f"{name} is a SMACv2 option"):
            BattleBatch(1, map_name="3m", **{name: value})
    with pytest.raises(ValueError, match=r"kill_unit_step_mul must be in 0\.\.8"):
        BattleBatch(1, map_name="protoss_5_vs_5", stochastic_health=(0, 0.5), kill_unit_step_mul=9)
    with pytest.raises(ValueError, match="stochastic_attack"):
        BattleBatch(1, map_name="protoss_5_vs_5", stochastic_attack=(0.5, 1.5))
