"""Stacked seeds (``model.seeds``): grouped layers equal one plain module per seed, gradients
stay in their seed, a seed's weights load into a plain module."""

import re

import gymnasium as gym
import numpy as np
import pytest
import torch
from ray.rllib.core.columns import Columns

from policies.batch import BatchSpec
from policies.modules import ActorCritic, GroupedLinear, ModelSettings, seed_state_dict

G, R = 3, 5


def module(action_space, seeds: int, state_dim: int = 0) -> ActorCritic:
    spec = BatchSpec.for_space(
        gym.spaces.Box(-1, 1, (6,)), state_dim=state_dim, num_ids=2 if state_dim else 0
    )
    return ActorCritic(
        observation_space=spec.space(),
        action_space=action_space,
        model_config={"batch_spec": spec.to_dict(), "model": {"seeds": seeds}},
    )


def batch(m: ActorCritic, rows: int) -> dict:
    rng = np.random.default_rng(0)
    obs = rng.random((rows, 6), np.float32)
    state = rng.random((rows, m.spec.state_dim), np.float32) if m.spec.state_dim else None
    ids = np.tile(np.arange(2), rows // 2 + 1)[:rows] if m.spec.num_ids else None
    packed = m.spec.pack(obs, None, state, ids)
    return {Columns.OBS: {k: torch.tensor(v) for k, v in packed.items()}}


SPACES = [gym.spaces.Discrete(4), gym.spaces.Box(-1, 1, (2,))]


@pytest.mark.parametrize("space", SPACES, ids=["discrete", "gaussian"])
@pytest.mark.parametrize("state_dim", [0, 3], ids=["ippo", "mappo"])
def test_each_block_equals_a_plain_module_with_its_seeds_weights(space, state_dim):
    torch.manual_seed(0)
    stacked = module(space, G, state_dim)
    with torch.no_grad():  # distinct log_std per seed, so slicing them is checked too
        if stacked.log_std is not None:
            stacked.log_std.copy_(torch.randn_like(stacked.log_std))
    b = batch(stacked, G * R)
    logits, _ = stacked.actor(b)
    values, _ = stacked.critic(b)
    for k in range(G):
        plain = module(space, 1, state_dim)
        plain.load_state_dict(seed_state_dict(stacked.state_dict(), k, G))
        rows = slice(k * R, (k + 1) * R)
        block = {Columns.OBS: {key: v[rows] for key, v in b[Columns.OBS].items()}}
        torch.testing.assert_close(plain.actor(block)[0], logits[rows], rtol=0, atol=1e-6)
        torch.testing.assert_close(plain.critic(block)[0], values[rows], rtol=0, atol=1e-6)


def test_a_seeds_gradient_reaches_only_its_slices():
    stacked = module(gym.spaces.Box(-1, 1, (2,)), G)
    b = batch(stacked, G * R)
    logits, _ = stacked.actor(b)
    values, _ = stacked.critic(b)
    k = 1
    (logits[k * R : (k + 1) * R].exp().sum() + values[k * R : (k + 1) * R].sum()).backward()
    for name, p in stacked.named_parameters():
        assert p.shape[0] == G, name
        touched = [bool(p.grad[g].abs().sum() > 0) for g in range(G)]
        assert touched == [g == k for g in range(G)], name


def test_grouped_slices_are_initialised_like_plain_layers():
    layer = GroupedLinear(8, 4, G, gain=2.0)
    for g in range(G):
        w = layer.weight[g].detach()  # [in, out]: orthogonal columns of norm gain
        torch.testing.assert_close(w.T @ w, 4.0 * torch.eye(4), rtol=0, atol=1e-5)
    assert not torch.equal(layer.weight[0], layer.weight[1])
    assert layer.bias.abs().sum() == 0


def test_rows_not_in_equal_blocks_are_refused():
    with pytest.raises(ValueError, match="7 rows for 3 seeds"):
        GroupedLinear(2, 2, G, 1.0)(torch.zeros(7, 2))


def test_one_seed_keeps_plain_layers():
    m = module(gym.spaces.Discrete(4), 1)
    assert not any(isinstance(x, GroupedLinear) for x in m.modules())
    assert isinstance(m.pi_head, torch.nn.Linear)


def test_seed_index_out_of_range_is_named():
    with pytest.raises(ValueError, match="seed index 3 of a run with 3 seeds"):
        seed_state_dict({}, 3, G)


@pytest.mark.parametrize(
    "model, message",
    [
        (ModelSettings(seeds=0), "model.seeds=0 \\(in 1..64\\)"),
        (ModelSettings(seeds=65), "model.seeds=65"),
        (ModelSettings(seeds=2, recurrent=True), "feed-forward only"),
    ],
)
def test_bad_seeds_are_named(model, message):
    assert any(re.search(message, p) for p in model.problems())


@pytest.fixture(scope="module")
def stacked_runner(ray_session):
    from policies import algorithm

    info = algorithm.get("mappo")
    settings = info.settings(
        train_batch_size=200, minibatch_size=64, num_epochs=1, num_envs_per_env_runner=2
    )
    settings.model.seeds = G
    algo = info.build("mpe/simple_spread-v3", settings, seed=1).build_algo()
    yield algo.env_runner
    algo.stop()


def test_runner_steps_envs_per_seed_in_seed_major_blocks(stacked_runner):
    runner = stacked_runner
    assert (runner.num_envs, runner.seeds, runner.envs_per_seed) == (2 * G, G, 2)
    roll = runner.rollout(num_timesteps=2 * G * 3)
    m = roll.modules["shared"]
    rows = m.outputs.shape[1]
    assert rows == 2 * G * 3  # envs x agents, env-major: seed k's envs are rows block k
    # distinct env seeds: every env starts somewhere else
    first = m.inputs["obs"][0].reshape(2 * G, -1)
    assert len({tuple(r) for r in first.round(5)}) == 2 * G
    stacked = runner.module["shared"]
    space = stacked.action_space
    for k in range(G):
        cfg = stacked.model_config
        plain = ActorCritic(
            observation_space=stacked.observation_space,
            action_space=space,
            model_config={**cfg, "model": {**cfg["model"], "seeds": 1}},
        )
        plain.load_state_dict(seed_state_dict(stacked.state_dict(), k, G))
        block = slice(k * rows // G, (k + 1) * rows // G)
        x = {key: torch.tensor(v[0, block]) for key, v in m.inputs.items()}
        out, _ = plain.actor({Columns.OBS: x})
        np.testing.assert_allclose(out.detach().numpy(), m.outputs[0, block], atol=1e-5)


def test_runner_logs_returns_per_seed(stacked_runner):
    runner = stacked_runner
    runner.rollout(num_timesteps=2 * G * 30, force_reset=True)  # one episode (25 steps) per env
    metrics = runner.get_metrics()
    peek = lambda k: metrics[k].peek() if hasattr(metrics[k], "peek") else metrics[k]  # noqa: E731
    per_seed = [peek(f"episode_return_mean_seed{k}") for k in range(G)]
    assert len(set(per_seed)) == G
    assert peek("episode_return_mean") == pytest.approx(np.mean(per_seed))  # as many per seed


def stacked_run(tmp_path, seeds: int = G):
    """A run directory of a stacked mappo run (its config and one checkpoint of fresh
    weights; no training) and the stacked modules those weights are from."""
    from types import SimpleNamespace

    import yaml

    from policies.ppo import declare_ppo
    from training.checkpoints import save_checkpoint
    from training.config import TrainConfig, set_value

    cfg = TrainConfig(env="mpe/simple_spread-v3")
    cfg.set_algo("mappo")
    set_value(cfg, "model.seeds", seeds)
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg.to_dict(), sort_keys=False))
    opts = SimpleNamespace(env_config={}, sharing=cfg.policies)
    modules = declare_ppo(cfg.env, cfg.settings, opts, centralised_critic=True).build()
    weights = {mid: m.state_dict() for mid, m in modules.items()}

    class Algo:
        learner_group = SimpleNamespace(get_weights=lambda: weights)

        def save_to_path(self, path: str) -> None:
            __import__("pathlib").Path(path).mkdir(parents=True)

    save_checkpoint(Algo(), tmp_path, 1, 100, keep=1)
    return tmp_path, modules


def test_eval_plays_one_seed_of_a_stacked_run(tmp_path):
    from training.checkpoints import RunError
    from training.evaluation import load_policy

    run, modules = stacked_run(tmp_path)
    with pytest.raises(RunError, match="trained 3 stacked seeds: pick one with --seed-index K"):
        load_policy(run)
    with pytest.raises(RunError, match="K in 0..2 \\(not 3\\)"):
        load_policy(run, seed_index=3)
    stacked = modules["shared"]
    rng, n = np.random.default_rng(1), G * R
    x = stacked.spec.pack(rng.random((n, 18)), None, rng.random((n, 54)), np.arange(n) % 3)
    b = {Columns.OBS: {key: torch.tensor(v) for key, v in x.items()}}
    logits, _ = stacked.actor(b)
    for k in range(G):
        plain = load_policy(run, seed_index=k).modules["shared"].module
        assert not any(isinstance(x, GroupedLinear) for x in plain.modules())
        rows = slice(k * R, (k + 1) * R)
        block = {Columns.OBS: {key: v[rows] for key, v in b[Columns.OBS].items()}}
        torch.testing.assert_close(plain.actor(block)[0], logits[rows], rtol=0, atol=1e-6)


def test_a_one_seed_run_has_only_seed_index_0(tmp_path):
    from training.checkpoints import RunError
    from training.evaluation import module_specs

    run, _ = stacked_run(tmp_path, seeds=1)
    assert module_specs(run, 0) and module_specs(run)
    with pytest.raises(RunError, match="--seed-index 2: .* trained one seed"):
        module_specs(run, 2)


def test_train_seeds_is_for_ippo_and_mappo(capsys):
    from arena.cli import main

    assert main(["train", "mpe/simple_spread-v3", "--algo", "iql", "--seeds", "2"]) == 2
    assert "--seeds (model.seeds) stacks seeds of ippo or mappo runs, not 'iql'" in (
        capsys.readouterr().err
    )
    argv = ["train", "mpe/simple_spread-v3", "--algo", "mappo", "--seeds", "65"]
    assert main(argv) == 2
    assert "model.seeds=65 (in 1..64)" in capsys.readouterr().err


def test_stacking_is_refused_for_hypermarl():
    from types import SimpleNamespace

    from policies import algorithm
    from policies.algorithm import AlgorithmMismatch

    name = next(n for n in algorithm.names() if "hyper" in n)
    info = algorithm.get(name)
    settings = info.settings()
    settings.model.seeds = 2
    opts = SimpleNamespace(env_config={}, sharing="auto")
    with pytest.raises(AlgorithmMismatch, match="not HyperActorCritic modules"):
        info.declare("mpe/simple_spread-v3", settings, opts)


def test_run_files_have_per_seed_columns_and_summary(tmp_path):
    from training.run import columns_for, seed_columns
    from training.summary import summary_lines

    settings = __import__("policies.mappo", fromlist=["x"]).ALGORITHM.settings()
    assert seed_columns(settings) == ()
    settings.model.seeds = 2
    extra = seed_columns(settings)
    assert extra[:2] == ("episode_return_mean_seed0", "episode_return_mean_seed1")
    assert "win_rate_seed1" in extra
    columns = columns_for(["shared"], extra)
    rows = [[1, 100, 1.0, -5.0, 25, "", -4.0, -6.0], [2, 200, 2.0, -3.0, 25, "", -2.0, -4.0]]
    keep = ["iteration", "env_steps", "time_s", "episode_return_mean", "episode_len_mean"]
    keep += ["win_rate", "episode_return_mean_seed0", "episode_return_mean_seed1"]
    assert set(keep) <= set(columns)
    lines = [",".join(keep)] + [",".join(map(str, r)) for r in rows]
    (tmp_path / "metrics.csv").write_text("\n".join(lines) + "\n")
    text = "\n".join(summary_lines(tmp_path))
    assert "final return per seed: 0: -2.00, 1: -4.00 (mean -3.00)" in text
    assert f"arena eval {tmp_path} --seed-index 0" in text


def test_a_stacked_seeds_sweep_is_one_trial_reported_per_seed(tmp_path):
    import pandas as pd

    from tune.sweeps.seeds import SeedsSweep

    sweep = SeedsSweep(env="mpe/simple_spread-v3", algo="mappo", samples=G, stacked=True)
    sweep.validate()
    (trial,) = sweep.stage("train", None, None, tmp_path).trials
    assert trial["run"]["model.seeds"] == G
    trials = pd.DataFrame(
        [{"stage": "train", "trial": "t0", "status": "finished", "iterations": 2, "seed": 0}]
    )
    finals = [-30.0, -20.0, -10.0]
    rows = pd.DataFrame(
        {"trial": "t0", "iteration": [1, 2], "env_steps": [100, 200],
         "episode_return_mean": [-50.0, -20.0],
         **{f"episode_return_mean_seed{k}": [-50.0, finals[k]] for k in range(G)}}
    )  # fmt: skip
    sections = sweep.report(trials, rows, tmp_path)
    text = "\n".join(s.text for s in sections)
    assert "Final episode_return_mean per seed" in text
    for k, v in enumerate(finals):
        assert f"| {k} | finished | 2 | {v:.3f} |" in text
    assert "over 3 seeds" in text
    with pytest.raises(Exception, match="stacks seeds of ippo or mappo runs, not 'iql'"):
        SeedsSweep(env="mpe/simple_spread-v3", algo="iql", samples=G, stacked=True).validate()
