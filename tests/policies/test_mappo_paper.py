"""The MAPPO paper's pieces (marlbenchmark/on-policy@de66d7a) against on-policy's formulas on
hand-made inputs: ValueNorm, the Huber value loss with value clipping, active masks, the
input LayerNorm and initialisation, the agent-specific SMAC state with death masking; and
short training runs with all of them."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest
import torch
from ray.rllib.core.columns import Columns
from ray.rllib.evaluation.postprocessing import Postprocessing

from envs.smac import units as U_
from envs.smac.core import BattleBatch
from envs.smac.maps import MAP_SIZE
from policies import algorithm
from policies.algorithm import AlgorithmMismatch
from policies.batch import BatchSpec
from policies.modules import ActorCritic, ModelSettings
from policies.ppo import PPOSettings
from policies.ppo.array_path import gae_batch
from policies.ppo.learner import (
    ACTIVE,
    ArrayPPOLearner,
    LossSettings,
    active_standardised,
    clip_groups,
    huber,
    value_loss,
)
from policies.sampling import ModuleRollout
from policies.value_norm import ValueNorm

# -- ValueNorm -----------------------------------------------------------------------------------


class OnPolicyValueNorm:
    """onpolicy/utils/valuenorm.py (ValueNorm(1), norm_axes=1, per_element_update=False) in
    float64 NumPy, line by line."""

    def __init__(self, beta=0.99999, epsilon=1e-5):
        self.beta, self.epsilon = beta, epsilon
        self.running_mean = np.zeros(1)
        self.running_mean_sq = np.zeros(1)
        self.debiasing_term = 0.0

    def running_mean_var(self):
        debias = max(self.debiasing_term, self.epsilon)
        mean = self.running_mean / debias
        var = np.maximum(self.running_mean_sq / debias - mean**2, 1e-2)
        return mean, var

    def update(self, x):
        w = self.beta
        self.running_mean = self.running_mean * w + x.mean(0) * (1 - w)
        self.running_mean_sq = self.running_mean_sq * w + (x**2).mean(0) * (1 - w)
        self.debiasing_term = self.debiasing_term * w + 1.0 * (1 - w)

    def normalize(self, x):
        mean, var = self.running_mean_var()
        return (x - mean) / np.sqrt(var)

    def denormalize(self, x):
        mean, var = self.running_mean_var()
        return x * np.sqrt(var) + mean


def test_value_norm_follows_on_policys_running_statistics():
    rng = np.random.default_rng(0)
    ours, ref = ValueNorm(), OnPolicyValueNorm()
    probe = rng.normal(size=(7, 1))
    # before any update: mean 0, variance clamped at 0.01
    assert np.allclose(ours.normalize(torch.tensor(probe, dtype=torch.float32)), probe / 0.1)
    for scale, shift in [(1.0, 0.0), (5.0, 3.0), (20.0, -8.0), (0.5, 40.0)]:
        x = rng.normal(shift, scale, size=(64, 1))
        ours.update(torch.tensor(x, dtype=torch.float32))
        ref.update(x)
        t = torch.tensor(probe, dtype=torch.float32)
        assert np.allclose(ours.normalize(t).numpy(), ref.normalize(probe), rtol=1e-4, atol=1e-4)
        assert np.allclose(ours.denormalize(t).numpy(), ref.denormalize(probe), rtol=1e-4)
        mean, var = ours.mean_var()
        ref_mean, ref_var = ref.running_mean_var()
        assert mean.item() == pytest.approx(ref_mean[0], rel=1e-4)
        assert var.item() == pytest.approx(ref_var[0], rel=1e-3)
    # the statistics are buffers: in the state dict, not parameters
    assert set(ours.state_dict()) == {"running_mean", "running_mean_sq", "debiasing_term"}
    assert not list(ours.parameters())


# -- value loss ----------------------------------------------------------------------------------


def on_policy_value_loss(values, value_preds, returns, active, clip, delta):
    """r_mappo.py cal_value_loss (use_huber_loss, use_clipped_value_loss,
    use_value_active_masks; no normaliser) with util.py's huber_loss, in NumPy."""

    def huber_loss(e, d):
        a = (abs(e) <= d).astype(float)
        b = (abs(e) > d).astype(float)
        return a * e**2 / 2 + b * d * (abs(e) - d / 2)

    clipped = value_preds + np.clip(values - value_preds, -clip, clip)
    loss = np.maximum(huber_loss(returns - values, delta), huber_loss(returns - clipped, delta))
    return (loss * active).sum() / active.sum()


def test_huber_value_loss_with_the_clip_is_on_policys():
    v = np.array([0.5, 30.0, -2.0, 4.0, 0.0])
    old = np.array([0.0, 25.0, -2.1, 0.0, 0.0])
    ret = np.array([1.0, 0.0, 20.0, 4.0, 11.0])
    active = np.array([1.0, 1.0, 1.0, 0.0, 1.0])
    settings = LossSettings(value_clip="change", vf_clip_param=0.2, value_loss="huber")
    t = lambda a: torch.tensor(a, dtype=torch.float64)  # noqa: E731
    ours = value_loss(t(v), t(old), t(ret), settings, t(active)).item()
    assert ours == pytest.approx(on_policy_value_loss(v, old, ret, active, 0.2, 10.0))
    # by hand, row 0: moved 0.5 -> clipped to 0.2, errors 0.5 and 0.8 (within delta): 0.32;
    # row 1: errors 30 and 25.2 beyond delta: 10 * (30 - 5) = 250; row 4: error 11 both:
    # 10 * (11 - 5) = 60; row 2 moved 0.1, within the clip: error 22, 10 * (22 - 5) = 170;
    # row 3 is inactive
    assert ours == pytest.approx((0.32 + 250 + 170 + 60) / 4)
    assert huber(torch.tensor([3.0, -12.0]), 10.0).tolist() == [4.5, 70.0]
    # unmasked: the plain mean
    whole = value_loss(t(v), t(old), t(ret), settings).item()
    assert whole == pytest.approx(on_policy_value_loss(v, old, ret, np.ones(5), 0.2, 10.0))


def test_loss_choices_are_checked():
    with pytest.raises(ValueError, match="value_loss='huber'"):
        PPOSettings(value_loss="huber", value_clip="loss").validate()
    with pytest.raises(ValueError, match="value_loss='absolute'"):
        PPOSettings(value_loss="absolute").validate()
    with pytest.raises(ValueError, match="huber_delta=0"):
        PPOSettings(huber_delta=0.0).validate()
    with pytest.raises(ValueError, match="advantage_norm='active_batch'"):
        PPOSettings(advantage_norm="active_batch", model=ModelSettings(seeds=2)).validate()
    for name in ("policy_active_masks", "value_active_masks"):  # per-seed means, not pooled
        with pytest.raises(ValueError, match=f"{name}=True .with model.seeds=1 only"):
            PPOSettings(**{name: True}, model=ModelSettings(seeds=2)).validate()
    with pytest.raises(ValueError, match="model.init='xavier'"):
        PPOSettings(model=ModelSettings(init="xavier")).validate()
    with pytest.raises(ValueError, match="model.seeds=2 with model.input_norm"):
        PPOSettings(model=ModelSettings(seeds=2, value_norm=True)).validate()


# -- active masks ------------------------------------------------------------------------------


def _module(**model) -> ActorCritic:
    spec = BatchSpec.for_space(gym.spaces.Box(-1, 1, (6,)), mask_dim=5, state_dim=4, num_ids=3)
    torch.manual_seed(0)
    return ActorCritic(
        observation_space=spec.space(),
        action_space=gym.spaces.Discrete(5),
        model_config={"batch_spec": spec.to_dict(), "model": model},
    )


def _batch(m: ActorCritic, n: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    mask = (rng.random((n, 5)) < 0.7).astype(np.float32)
    mask[:, 0] = 1.0
    packed = m.spec.pack(rng.normal(size=(n, 6)), mask, rng.normal(size=(n, 4)), np.arange(n) % 3)
    obs = {k: torch.tensor(v) for k, v in packed.items()}
    with torch.no_grad():
        logits = m.actor({Columns.OBS: obs})[0]
    actions = torch.tensor([rng.choice(np.flatnonzero(r)) for r in mask])
    logp = torch.log_softmax(logits, -1).gather(-1, actions[:, None])[:, 0]
    return {
        Columns.OBS: obs,
        Columns.ACTIONS: actions,
        Columns.ACTION_LOGP: logp + torch.tensor(rng.normal(0, 0.3, n), dtype=torch.float32),
        Columns.ACTION_DIST_INPUTS: logits,
        Postprocessing.ADVANTAGES: torch.tensor(rng.normal(size=n), dtype=torch.float32),
        Postprocessing.VALUE_TARGETS: torch.tensor(rng.normal(2, 3, n), dtype=torch.float32),
        Columns.VF_PREDS: torch.tensor(rng.normal(2, 3, n), dtype=torch.float32),
    }


def _rows(batch: dict, keep) -> dict:
    return {k: _rows(v, keep) if isinstance(v, dict) else v[keep] for k, v in batch.items()}


def test_active_masked_losses_are_the_losses_of_the_active_rows():
    """r_mappo.py:134-137, 84-85, act.py:166: with both masks on, the policy loss, entropy and
    value loss are those of the active rows alone."""
    m = _module()
    batch = _batch(m, 12)
    active = torch.tensor([1, 1, 0, 1, 0, 0, 1, 1, 1, 0, 1, 1], dtype=torch.float32)
    masked = LossSettings(
        advantage_norm="none",
        value_loss="huber",
        policy_active_masks=True,
        value_active_masks=True,
        vf_loss_coeff=1.0,
    )
    plain = LossSettings(advantage_norm="none", value_loss="huber", vf_loss_coeff=1.0)
    total, stats = ArrayPPOLearner.ppo_loss(
        None, m, {**batch, ACTIVE: active}, masked, 0.01, None, True
    )
    ref, ref_stats = ArrayPPOLearner.ppo_loss(
        None, m, _rows(batch, active > 0), plain, 0.01, None, True
    )
    assert total.item() == pytest.approx(ref.item(), rel=1e-5)
    for key in ("policy_loss", "vf_loss", "entropy"):
        assert stats[key].item() == pytest.approx(ref_stats[key].item(), rel=1e-5)
    # masks off: every row counts, whatever the column says
    unmasked, _ = ArrayPPOLearner.ppo_loss(
        None, m, {**batch, ACTIVE: active}, plain, 0.01, None, False
    )
    whole, _ = ArrayPPOLearner.ppo_loss(None, m, batch, plain, 0.01, None, False)
    assert unmasked.item() == pytest.approx(whole.item()) != pytest.approx(ref.item())


def test_active_batch_advantages_are_standardised_over_live_rows():
    """r_mappo.py:179-187: NaN for dead rows, nanmean / nanstd, std + 1e-5."""
    adv = np.array([1.0, 5.0, -2.0, 0.5, 9.0, 3.0], np.float32)
    active = np.array([1, 0, 1, 1, 0, 1], np.float32)
    copy = adv.astype(np.float64).copy()
    copy[active == 0] = np.nan
    ref = (adv - np.nanmean(copy)) / (np.nanstd(copy) + 1e-5)
    ours = active_standardised(torch.tensor(adv), torch.tensor(active)).numpy()
    assert np.allclose(ours, ref, atol=1e-6)


def test_the_loss_updates_the_value_normaliser_and_learns_normalised_targets():
    """r_mappo.py:64-67: the minibatch's targets (all rows) update the normaliser, then the
    critic's values are compared with the normalised targets."""
    m = _module(value_norm=True)
    ref = OnPolicyValueNorm()
    batch = _batch(m, 10)
    targets = batch[Postprocessing.VALUE_TARGETS]
    settings = LossSettings(advantage_norm="none", value_loss="huber", vf_loss_coeff=1.0)
    _, stats = ArrayPPOLearner.ppo_loss(None, m, batch, settings, 0.0, None, True)
    ref.update(targets.numpy()[:, None].astype(np.float64))
    assert m.value_norm.running_mean.item() == pytest.approx(ref.running_mean[0], rel=1e-5)
    values = m.compute_values(batch).detach().numpy()
    norm_targets = ref.normalize(targets.numpy().astype(np.float64)[:, None])[:, 0]
    expected = on_policy_value_loss(
        values, batch[Columns.VF_PREDS].numpy(), norm_targets, np.ones(10), 0.2, 10.0
    )
    assert stats["vf_loss"].item() == pytest.approx(expected, rel=1e-4)


def test_actor_and_critic_gradients_are_clipped_apart():
    """r_mappo.py:149, 163: each network's gradient norm is clipped at max_grad_norm alone."""
    m = _module()
    params = list(m.parameters())
    for p in params:
        p.grad = torch.full_like(p, 1.0 if p is m.vf_head.weight else 0.0)
    for p in m.pi_head.parameters():
        p.grad = torch.full_like(p, 5.0)
    actor, critic = clip_groups(m, params, per_network=True)
    assert any(p is m.vf_head.weight for p in critic) and not any(
        p is m.vf_head.weight for p in actor
    )
    assert len(actor) + len(critic) == len(params) and clip_groups(m, params, False) == [params]
    norm = lambda group: torch.sqrt(sum((p.grad**2).sum() for p in group)).item()  # noqa: E731
    critic_norm = norm(critic)  # 1 x sqrt(64) = 8: within 10, stays
    assert critic_norm == pytest.approx(8.0) and norm(actor) > 10  # jointly both would shrink
    for group in (actor, critic):
        torch.nn.utils.clip_grad_norm_(group, 10.0)
    assert norm(actor) == pytest.approx(10.0, rel=1e-4) and norm(critic) == pytest.approx(
        critic_norm
    )


# -- GAE with the normaliser -----------------------------------------------------------------


def test_gae_reads_denormalised_values_and_keeps_the_sampled_ones_normalised():
    """onpolicy/utils/shared_buffer.py:236-239: GAE over denormalised values; the sampled
    values (the clip's reference) stay as the critic predicted them."""
    m = _module(value_norm=True)
    with torch.no_grad():
        m.value_norm.update(torch.tensor([3.0, 9.0, 15.0]))
    T, B, K = 4, 2, 3
    rng = np.random.default_rng(1)
    inputs = m.spec.buffers(T + 1, B * K)
    inputs["obs"][:] = rng.normal(size=inputs["obs"].shape)
    inputs["state"][:] = rng.normal(size=inputs["state"].shape)
    inputs["action_mask"][:] = 1.0
    rewards = rng.normal(size=(T, B * K)).astype(np.float32)
    active = (rng.random((T + 1, B * K)) < 0.8).astype(np.float32)
    roll = ModuleRollout(
        inputs,
        np.zeros((T, B * K), np.int64),
        np.zeros((T, B * K), np.float32),
        np.zeros((T, B * K, 5), np.float32),
        rewards,
        {},
        active=active,
    )
    done = np.zeros((T, B), bool)
    out = gae_batch(m, roll, done, done, 0.99, 0.95)
    obs = {k: torch.tensor(v.reshape(-1, *v.shape[2:])) for k, v in inputs.items()}
    with torch.no_grad():
        raw = m.compute_values({Columns.OBS: obs}).reshape(T + 1, B * K)
        real = m.value_norm.denormalize(raw).numpy()
    gae, adv = np.zeros(B * K), np.zeros((T, B * K))
    for t in reversed(range(T)):
        delta = rewards[t] + 0.99 * real[t + 1] - real[t]
        gae = delta + 0.99 * 0.95 * gae
        adv[t] = gae
    assert np.allclose(out[Postprocessing.ADVANTAGES], adv.reshape(-1), atol=1e-4)
    assert np.allclose(out[Postprocessing.VALUE_TARGETS], (adv + real[:T]).reshape(-1), atol=1e-4)
    assert np.allclose(out[Columns.VF_PREDS], raw[:T].reshape(-1).numpy(), atol=1e-5)
    assert np.array_equal(out[ACTIVE], active[:T].reshape(-1))


# -- the network ---------------------------------------------------------------------------------


def _orthogonal(w: torch.Tensor, gain: float) -> bool:
    w = w.detach()
    small = w @ w.T if w.shape[0] <= w.shape[1] else w.T @ w
    return torch.allclose(small, gain**2 * torch.eye(len(small)), atol=1e-5)


def test_onpolicy_init_and_input_layer_norm():
    """mlp.py:11-24, 46-53; rnn.py:13-22; act.py/distributions.py gain 0.01; r_actor_critic.py
    value head gain 1."""
    m = _module(init="onpolicy", input_norm=True, activation="relu", recurrent=True)
    kinds = [type(x).__name__ for x in m.pi_body]
    assert kinds == ["LayerNorm", "Linear", "ReLU", "LayerNorm", "Linear", "ReLU", "LayerNorm"]
    assert m.pi_body[0].normalized_shape == (6,) and m.vf_body[0].normalized_shape == (4 + 3,)
    relu = math.sqrt(2)
    for body in (m.pi_body, m.vf_body):
        for layer in body:
            if isinstance(layer, torch.nn.Linear):
                assert _orthogonal(layer.weight, relu) and not layer.bias.any()
    assert _orthogonal(m.pi_head.weight, 0.01) and _orthogonal(m.vf_head.weight, 1.0)
    for name, p in m.pi_gru.named_parameters():
        assert (not p.any()) if "bias" in name else _orthogonal(p, 1.0)
    assert isinstance(m.pi_gru_norm, torch.nn.LayerNorm)
    rows = m.spec.pack(np.ones((4, 6)), np.ones((4, 5)), np.ones((4, 4)), np.arange(4) % 3)
    logits, h = m.step({k: torch.tensor(v) for k, v in rows.items()}, m.initial_state_rows(4))
    assert logits.shape == (4, 5) and h["critic"].shape == (4, 64)
    tanh = _module(init="onpolicy")
    assert _orthogonal(tanh.vf_body[0].weight, 5 / 3)  # calculate_gain("tanh")
    arena = _module()
    assert [type(x).__name__ for x in arena.pi_body] == ["Linear", "Tanh", "Linear", "Tanh"]
    assert _orthogonal(arena.pi_body[0].weight, math.sqrt(2)) and arena.value_norm is None


# -- the agent-specific SMAC state ---------------------------------------------------------------


def on_policy_state_agent(env: BattleBatch, b: int, i: int, mask: np.ndarray) -> np.ndarray:
    """StarCraft2_Env.get_state_agent (StarCraft2_Env.py:1327-1520) with that env's defaults
    (obs_all_health, obs_own_health, state_last_action, state_agent_id; no pathing grid or
    height) and train_smac.py's use_mustalive / add_center_xy, unit by unit, reading the
    battle's arrays; the map's centre and size as Arena's get_state port takes them."""
    A, E = env.n_allies, env.n_enemies
    nf_en = 5 + env.type_bits + 1 + env.shield_enemy + 2
    nf_al = 5 + env.type_bits + 1 + env.shield_ally + env.n_actions + 2
    nf_own = 4 + env.type_bits + 1 + env.shield_ally + env.n_actions + 2
    move, enemy = np.zeros(4), np.zeros((E, nf_en))
    ally, own = np.zeros((A - 1, nf_al)), np.zeros(nf_own)
    centre, size = MAP_SIZE / 2, MAP_SIZE
    last = np.eye(env.n_actions)[env.last_action[b]] * (env.t[b] > 0)

    def health(u):
        return env.hp[b, u] / env.hp_max[b, u]

    def shield(u):
        return env.sh[b, u] / env.sh_max[b, u]

    if env.alive[b, i]:
        x, y = env.pos[b, i].real, env.pos[b, i].imag
        sight = env.sight[b, i]
        avail = mask[b, i]
        move[:] = avail[2:6]
        for e in range(E):
            u = A + e
            ex, ey = env.pos[b, u].real, env.pos[b, u].imag
            dist = math.hypot(ex - x, ey - y)
            if env.alive[b, u]:
                enemy[e, 0] = avail[env.n_no_attack + e]
                enemy[e, 1:4] = dist / sight, (ex - x) / sight, (ey - y) / sight
                enemy[e, 4] = dist < sight
                ind = 5
                enemy[e, ind] = health(u)
                ind += 1
                if env.shield_enemy:
                    enemy[e, ind] = shield(u)
                    ind += 1
                enemy[e, ind : ind + env.type_bits] = env.onehot[b, u]
                ind += env.type_bits
                enemy[e, ind : ind + 2] = (ex - centre) / size, (ey - centre) / size
        for k, j in enumerate(j for j in range(A) if j != i):
            ax, ay = env.pos[b, j].real, env.pos[b, j].imag
            dist = math.hypot(ax - x, ay - y)
            if env.alive[b, j]:
                ally[k, 0] = dist < sight
                ally[k, 1:4] = dist / sight, (ax - x) / sight, (ay - y) / sight
                if env.is_medivac[b, j]:
                    ally[k, 4] = env.energy[b, j] / U_.MEDIVAC_ENERGY_MAX
                else:
                    ally[k, 4] = max(env.ready_at[b, j] - env.clock, 0) / env.cd_norm[b, j]
                ind = 5
                ally[k, ind] = health(j)
                ind += 1
                if env.shield_ally:
                    ally[k, ind] = shield(j)
                    ind += 1
                ally[k, ind : ind + 2] = (ax - centre) / size, (ay - centre) / size
                ind += 2
                ally[k, ind : ind + env.type_bits] = env.onehot[b, j]
                ind += env.type_bits
                ally[k, ind:] = last[j]
        own[0] = 1
        ind = 4
        own[ind] = health(i)
        ind += 1
        if env.shield_ally:
            own[ind] = shield(i)
            ind += 1
        own[ind : ind + 2] = (x - centre) / size, (y - centre) / size
        ind += 2
        own[ind : ind + env.type_bits] = env.onehot[b, i]
        ind += env.type_bits
        own[ind:] = last[i]
    ids = np.zeros(A)
    ids[i] = 1
    return np.concatenate([ally.ravel(), enemy.ravel(), move, own, ids])


def _hand_made(map_name: str) -> BattleBatch:
    """Two battles of ``map_name`` after a few steps, then units moved, hurt and killed."""
    env = BattleBatch(2, seed=3, map_name=map_name, use_state_agent=True, engine="numpy")
    step = env.reset()
    rng = np.random.default_rng(0)
    for _ in range(3):
        mask = step.action_mask["agent"]
        acts = np.array([[rng.choice(np.flatnonzero(r)) for r in e] for e in mask])
        step = env.step({"agent": acts})
    A = env.n_allies
    env.pos[0, 0] = 10 + 12j
    env.pos[0, A] = 14 + 13j  # within sight of agent 0
    env.pos[0, A + 1] = 29 + 2j  # far beyond it
    env.hp[0, 1] *= 0.5
    env.sh[0, A] *= 0.25
    dead = np.zeros(env.alive.shape, bool)
    dead[0, 2] = dead[1, 0] = dead[0, A + 2] = True  # two agents and an enemy
    env.hp[dead] = 0.0
    env._bury(dead)
    return env


@pytest.mark.parametrize("map_name", ["3m", "2s3z", "MMM"])
def test_state_agent_is_on_policys_get_state_agent(map_name):
    env = _hand_made(map_name)
    A = env.n_allies
    _, state, mask = env._observe()
    assert state.shape == (2, A, env.state_space.shape[1]) and env.state_space.shape[0] == A
    for b in range(2):
        for i in range(A):
            ref = on_policy_state_agent(env, b, i, mask)
            assert np.allclose(state[b, i], ref, atol=1e-5), (map_name, b, i)
    # death masking: a dead agent's state is its one-hot id alone; it is inactive
    only_id = np.zeros(state.shape[-1], np.float32)
    only_id[state.shape[-1] - A + 2] = 1.0
    assert np.array_equal(state[0, 2], only_id)
    assert env._active()["agent"][0].tolist() == [True, True, False] + [True] * (A - 3)


def test_state_agent_options_are_checked():
    with pytest.raises(ValueError, match="SMACv2"):
        BattleBatch(1, map_name="protoss_5_vs_5", use_state_agent=True)
    with pytest.raises(ValueError, match="use_mustalive and add_center_xy"):
        BattleBatch(1, map_name="3m", add_center_xy=False)
    off = BattleBatch(1, map_name="3m", use_state_agent=True, add_center_xy=False)
    on = BattleBatch(1, map_name="3m", use_state_agent=True)
    # 3 enemies, 2 allies, own: 2 centre features each
    assert on.state_space.shape[1] - off.state_space.shape[1] == 2 * (3 + 2 + 1)


def test_a_per_agent_state_reaches_each_agents_critic_row():
    """``state_space`` (A, S): every module writes its own agents' states, in the sampler's and
    the acting helpers' paths, per-agent modules included."""
    import envs
    from policies.inference import ModulePolicy, Policy
    from policies.sampling import _Module, slot_from_config

    info = algorithm.get("mappo")
    env_config = {"use_state_agent": True}
    specs = info.modules("smac/3m-v0", info.settings(), env_config=env_config, sharing="per_agent")
    policy = Policy({mid: ModulePolicy(s.build()) for mid, s in specs.rl_module_specs.items()})
    vec = envs.make_vector("smac/3m-v0", 2, seed=0, **env_config)
    step = vec.reset()
    assert step.state.shape == (2, 3, vec.state_space.shape[1])
    actions, _ = policy.act_vector(step)
    assert actions["agent"].shape == (2, 3)
    for mid, spec in specs.rl_module_specs.items():  # the sampler's module rows
        slot = slot_from_config(mid, spec)
        m = _Module(slot, BatchSpec.from_dict(spec.model_config["batch_spec"]), None, True, None)
        rows = m.spec.buffers(2, 1)
        m.write(rows, step.obs, step.action_mask, step.state)
        assert np.array_equal(rows["state"][:, 0], step.state[:, slot.env_index[0]])
    env = envs.make("smac/3m-v0", **env_config)
    obs, _ = env.reset(seed=0)
    assert env.state().shape == (3, vec.state_space.shape[1])
    packed = policy.pack(policy.module_of["agent_2"], {"agent_2": obs["agent_2"]}, env.state())
    assert np.array_equal(packed["state"][0], env.state()[2])
    assert set(policy.act(obs, env.state())) == set(obs)


# -- the algorithm ------------------------------------------------------------------------------


def test_paper_sets_the_pieces_and_the_env_options():
    from policies.mappo import PAPER_ENV, paper_settings

    info = algorithm.get("mappo")
    s = paper_settings("smac/8m_vs_9m-v0", info.settings(paper=True))
    assert (s.value_loss, s.huber_delta, s.value_clip, s.vf_clip_param) == (
        "huber",
        10.0,
        "change",
        0.05,
    )
    assert s.policy_active_masks and s.value_active_masks and s.advantage_norm == "active_batch"
    assert s.grad_clip_per_network
    model = s.model
    assert (model.value_norm, model.input_norm, model.init, model.activation) == (
        True,
        True,
        "onpolicy",
        "relu",
    )
    assert (
        model.agent_id
        and not paper_settings("smacv2/zerg_5_vs_5-v0", info.settings(paper=True)).model.agent_id
    )
    paper = info.settings(paper=True)
    assert info.env_config("smac/3m-v0", paper, {"reward_sparse": False}) == {
        "reward_sparse": False,
        **PAPER_ENV,
    }
    assert info.env_config("smacv2/zerg_5_vs_5-v0", paper, {}) == {"terminate_at_limit": True}
    # SMACv2: on-policy's wrapper has every agent active (SMACv2.py:36)
    v2 = paper_settings("smacv2/zerg_5_vs_5-v0", paper)
    assert not v2.policy_active_masks and not v2.value_active_masks
    assert (v2.advantage_norm, v2.value_loss) == ("batch", "huber")
    assert info.env_config("smac/3m-v0", info.settings(), {}) == {}
    with pytest.raises(AlgorithmMismatch, match="leave out use_state_agent=False"):
        info.env_config("smac/3m-v0", paper, {"use_state_agent": False})
    with pytest.raises(AlgorithmMismatch, match="model.value_norm"):
        paper_settings(
            "smac/3m-v0", info.settings(paper=True, model=ModelSettings(value_norm=True))
        )
    # the critic reads each agent's own state
    spec = info.modules("smac/3m-v0", paper).rl_module_specs["shared"]
    assert (
        spec.model_config["batch_spec"]["state_dim"]
        == BattleBatch(1, map_name="3m", use_state_agent=True).state_space.shape[1]
    )


SMALL = dict(train_batch_size=240, minibatch_size=120, num_epochs=2, num_envs_per_env_runner=4)


def test_one_iteration_with_every_piece_trains_and_syncs_the_normaliser(ray_session):
    """Feed-forward MAPPO on smac/3m-v0 with the paper's loss, network and agent-specific
    state: the losses are finite, and the runners' value normaliser is the learner's."""
    info = algorithm.get("mappo")
    model = ModelSettings(
        value_norm=True, input_norm=True, init="onpolicy", activation="relu", agent_id=True
    )
    settings = info.settings(
        **SMALL,
        value_loss="huber",
        policy_active_masks=True,
        value_active_masks=True,
        advantage_norm="active_batch",
        grad_clip_per_network=True,
        model=model,
    )
    algo = info.build(
        "smac/3m-v0", settings, seed=0, env_config={"use_state_agent": True}
    ).build_algo()
    try:
        result = algo.train()
        stats = result["learners"]["shared"]
        assert all(np.isfinite(stats[k]) for k in ("policy_loss", "vf_loss", "entropy"))
        learner = algo.learner_group._learner.module["shared"].value_norm
        runner = algo.env_runner.module["shared"].value_norm
        assert learner.debiasing_term.item() > 0
        for key, value in learner.state_dict().items():
            assert torch.equal(value, runner.state_dict()[key]), key
    finally:
        algo.stop()


def test_paper_true_trains_one_iteration(ray_session):
    """``--set paper=true`` on smac/3m-v0: the recurrent module with every piece of the
    paper's code trains on the array path."""
    info = algorithm.get("mappo")
    paper = info.settings(paper=True)
    algo = info.build("smac/3m-v0", paper, seed=0).build_algo()
    try:
        stats = algo.train()["learners"]["shared"]
        assert all(np.isfinite(stats[k]) for k in ("policy_loss", "vf_loss", "entropy"))
    finally:
        algo.stop()
