"""Entity tokens: the token view holds exactly the flat view's numbers, each token is the
entity it names, and the token widths do not depend on the number of units."""

import numpy as np
import pytest

import envs
from envs.entities import entity_layout, state_layout
from envs.smac.core import BattleBatch

SMAC_CASES = [
    ("smac/3m-v0", {}),
    ("smac/5m_vs_6m-v0", {}),
    ("smac/10m-v0", {}),
    ("smac/2s3z-v0", {}),
    (
        "smac/3m-v0",
        {"obs_last_action": True, "obs_pathing_grid": True, "obs_timestep_number": True},
    ),
    ("smacv2/protoss_5_vs_5-v0", {}),
]


def smac_obs(env_id, env_args, steps=6, seed=0):
    """Observations ``[T, A, D]`` of a battle played with random legal actions."""
    env = envs.make(env_id, **env_args)
    obs, _ = env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(steps):
        rows.append(np.stack([obs[a]["observations"] for a in env.agents]))
        acts = {a: rng.choice(np.flatnonzero(obs[a]["action_mask"])) for a in env.agents}
        obs, *_ = env.step(acts)
        if not env.agents:
            break
    return np.stack(rows), env


@pytest.mark.parametrize(("env_id", "env_args"), SMAC_CASES)
def test_smac_tokens_are_the_flat_numbers(env_id, env_args):
    obs, env = smac_obs(env_id, env_args)
    lay = entity_layout(env_id, env_args)
    core = env.core
    tok = lay.split(obs)
    A, E = core.n_allies, core.n_enemies
    assert tok["enemy"].shape == (*obs.shape[:2], E, core.nf_enemy)
    assert tok["ally"].shape == (*obs.shape[:2], A - 1, core.nf_ally)
    assert tok["own"].shape[-1] + E * core.nf_enemy + (A - 1) * core.nf_ally == obs.shape[-1]
    np.testing.assert_array_equal(lay.join(tok), obs)
    # every number of the flat view is in exactly one token
    flat = np.concatenate([tok["own"].ravel(), tok["enemy"].ravel(), tok["ally"].ravel()])
    np.testing.assert_array_equal(np.sort(flat), np.sort(obs.ravel()))


def test_smac_tokens_are_the_entities_they_name():
    """Enemy j's token is enemy j seen from agent i; ally token k is agent i's k-th other
    agent: their relative positions times sight equal the units' positions."""
    core = BattleBatch(1, seed=3, map_name="5m_vs_6m", auto_reset=False)
    step = core.reset()
    rng = np.random.default_rng(0)
    lay = entity_layout("smac/5m_vs_6m-v0")
    A, E = core.n_allies, core.n_enemies
    checked = 0
    for _ in range(12):
        tok = lay.split(step.obs["agent"][0])  # [A, ...]
        pos, sight = core.pos[0], core.sight[0]
        for i in range(A):
            if not core.alive[0, i]:
                assert not tok["own"][i].any() and not tok["enemy"][i].any()
                continue
            others = [j for j in range(A) if j != i]
            for kind, units in (("enemy", range(A, A + E)), ("ally", others)):
                for k, u in enumerate(units):
                    t = tok[kind][i, k]
                    if not t.any():
                        continue  # out of sight or dead
                    d = pos[u] - pos[i]
                    col = 1  # [available/visible, distance, dx, dy, health, ...]
                    np.testing.assert_allclose(t[col + 1] * sight[i], d.real, atol=1e-4)
                    np.testing.assert_allclose(t[col + 2] * sight[i], d.imag, atol=1e-4)
                    np.testing.assert_allclose(t[col] * sight[i], abs(d), atol=1e-4)
                    hp = core.hp[0, u] / core.hp_max[0, u]
                    np.testing.assert_allclose(t[col + 3], hp, atol=1e-6)
                    checked += 1
        masks = core._last_mask[0]
        acts = np.array([rng.choice(np.flatnonzero(m)) for m in masks])
        step = core.step(acts[None])
    assert checked > 50


def test_token_widths_do_not_depend_on_the_number_of_units():
    """ODIS's marine task sets: one network reads 3m, 5m_vs_6m and 13m_vs_15m."""
    widths = set()
    for m in ("3m", "5m_vs_6m", "10m", "13m_vs_15m"):
        lay = entity_layout(f"smac/{m}-v0")
        widths.add((lay.own_width, lay.width("enemy"), lay.width("ally")))
    assert len(widths) == 1
    spread = {
        (lay.own_width, lay.width("landmark"), lay.width("ally"))
        for lay in (entity_layout("mpe/simple_spread-v3", {"N": n}) for n in (2, 3, 5))
    }
    assert len(spread) == 1


@pytest.mark.parametrize("env_args", [{}, {"N": 4}, {"N": 5, "num_agent_neighbors": 2}])
def test_spread_tokens_are_the_flat_numbers_and_the_landmarks(env_args):
    env = envs.make("mpe/simple_spread-v3", **env_args)
    obs, _ = env.reset(seed=1)
    for _ in range(3):
        obs, *_ = env.step({a: 1 + (i % 4) for i, a in enumerate(env.agents)})
    flat = np.stack([obs[a] for a in env.agents])
    lay = entity_layout("mpe/simple_spread-v3", env_args)
    tok = lay.split(flat)
    np.testing.assert_array_equal(lay.join(tok), flat)
    # own = velocity, position; a landmark token + own position = the landmark, the same
    # for every agent (full observability only: with neighbours the order is by distance)
    world = env.unwrapped.world
    for i, agent in enumerate(world.agents):
        np.testing.assert_allclose(tok["own"][i, 2:], agent.state.p_pos, atol=1e-5)
        np.testing.assert_allclose(tok["own"][i, :2], agent.state.p_vel, atol=1e-5)
    if "num_agent_neighbors" not in env_args:
        absolute = tok["landmark"] + tok["own"][:, None, 2:]
        lm = np.stack([lm.state.p_pos for lm in world.landmarks])
        np.testing.assert_allclose(absolute, np.broadcast_to(lm, absolute.shape), atol=1e-5)
        allies = tok["ally"][..., :2] + tok["own"][:, None, 2:]
        for i in range(len(world.agents)):
            others = [a.state.p_pos for j, a in enumerate(world.agents) if j != i]
            np.testing.assert_allclose(allies[i], others, atol=1e-5)


def test_bad_input_names_what_is_allowed():
    with pytest.raises(ValueError, match="smac/\\*"):
        entity_layout("mpe/simple_tag-v3")
    lay = entity_layout("smac/3m-v0")
    with pytest.raises(ValueError, match="length 7; this layout's is 30"):
        lay.split(np.zeros((2, 7)))


@pytest.mark.parametrize(("env_id", "env_args"), SMAC_CASES)
def test_state_units_are_the_flat_state(env_id, env_args):
    env = envs.make(env_id, **env_args)
    env.reset(seed=0)
    state = np.asarray(env.state(), np.float32)
    lay = state_layout(env_id, env_args)
    core = env.core
    tok = lay.split(state)
    assert tok["ally"].shape == (core.n_allies, core.nf_state_ally)
    assert tok["enemy"].shape == (core.n_enemies, core.nf_state_enemy)
    assert tok["last_action"].shape == (core.n_allies, core.n_actions)
    np.testing.assert_array_equal(lay.join(tok), state)


def test_state_units_are_the_units_and_the_actions_taken():
    """Ally i's unit is [health, cooldown, x, y] of agent i, enemy j's [health, x, y] of
    enemy j (SMAC's get_state), and the last-action block is the actions just taken."""
    core = BattleBatch(1, seed=3, map_name="5m_vs_6m", auto_reset=False)
    step = core.reset()
    rng = np.random.default_rng(0)
    lay = state_layout("smac/5m_vs_6m-v0")
    A = core.n_allies
    for _ in range(5):
        acts = np.array([rng.choice(np.flatnonzero(m)) for m in core._last_mask[0]])
        step = core.step(acts[None])
        tok = lay.split(np.asarray(step.state[0]))
        hp = core.hp[0] / core.hp_max[0]
        centred = (core.pos[0] - 16 * (1 + 1j)) / 32
        alive = core.alive[0]
        np.testing.assert_allclose(tok["ally"][:, 0], hp[:A] * alive[:A], atol=1e-6)
        np.testing.assert_allclose(tok["ally"][:, 2], centred.real[:A] * alive[:A], atol=1e-5)
        np.testing.assert_allclose(tok["enemy"][:, 0], hp[A:] * alive[A:], atol=1e-6)
        np.testing.assert_allclose(tok["enemy"][:, 2], centred.imag[A:] * alive[A:], atol=1e-5)
        np.testing.assert_array_equal(tok["last_action"].argmax(-1)[alive[:A]], acts[alive[:A]])


def test_state_layout_refuses_states_without_unit_blocks():
    with pytest.raises(ValueError, match="no unit blocks with obs_instead_of_state"):
        state_layout("smac/3m-v0", {"obs_instead_of_state": True})
    with pytest.raises(ValueError, match="no state layout for 'mpe/simple_spread-v3'"):
        state_layout("mpe/simple_spread-v3")
