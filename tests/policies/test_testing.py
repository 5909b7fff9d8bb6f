"""Greedy test episodes during a PPO-family run: SMAC's test_battle_won_mean and the team's
test_return_mean in metrics.csv on PyMARL's cadence, on by default on SMAC only."""

import csv
import math

import numpy as np
import pytest
from rich.console import Console

import training
from policies.ppo import PPOSettings, greedy_tests
from policies.testing import default_interval, greedy_test, is_due, make_test_envs, mean_ci95
from training.config import TrainConfig, apply_overrides
from training.evaluation import load_policy

SMALL = [
    "train_batch_size=200",
    "minibatch_size=100",
    "num_epochs=1",
    "num_envs_per_env_runner=8",
    "model.hidden=[16]",
]


def rows(run):
    with (run / "metrics.csv").open() as f:
        return list(csv.DictReader(f))


def test_mean_ci95_is_the_normal_interval_of_the_mean():
    lo, hi = mean_ci95([1.0, 2.0, 3.0, 4.0])  # std 1.291, sqrt(4) = 2
    assert (lo, hi) == pytest.approx((2.5 - 1.96 * 1.2910 / 2, 2.5 + 1.96 * 1.2910 / 2), abs=1e-4)
    assert mean_ci95([-3.0]) == (-math.inf, math.inf)  # one episode says nothing of the spread


def test_the_cadence_is_pymarls():
    assert is_due(0, None, 10_000)  # the first time asked (after the first iteration)
    assert not is_due(9_999, 0, 10_000) and is_due(10_000, 0, 10_000)
    assert not is_due(0, None, 0)  # 0: no tests
    assert default_interval("smac/3m-v0") == default_interval("smacv2/protoss_5_vs_5-v0") == 10_000
    assert default_interval("mpe/simple_spread-v3") == 0
    assert greedy_tests("smac/3m-v0", PPOSettings())["interval"] == 10_000
    assert greedy_tests("smac/3m-v0", PPOSettings(test_interval=0))["interval"] == 0
    assert greedy_tests("test/masked_grid-v0", PPOSettings(test_interval=50))["interval"] == 50
    with pytest.raises(ValueError, match="test_nepisode"):
        PPOSettings(test_nepisode=0).validate()


def test_a_smac_ppo_run_logs_greedy_test_battles(ray_session, tmp_path):
    cfg = TrainConfig(env="smac/3m-v0", algo="ippo", iterations=1)  # on by default on SMAC
    apply_overrides(cfg, [*SMALL, "test_nepisode=4"])
    run = training.train(cfg, out=str(tmp_path), name="smac", console=Console(quiet=True))
    (row,) = rows(run)
    won, team = float(row["test_battle_won_mean"]), float(row["test_return_mean"])
    assert won in (0.0, 0.25, 0.5, 0.75, 1.0)
    # SMAC's team return: at most 20 (rewards are scaled so that killing every enemy and
    # winning gives 20), not the sum over the three marines that RLlib's episode return is
    assert 0.0 <= team <= 20.0 + 1e-6
    # the checkpoint's weights, played greedily in fresh test envs, give the same numbers
    again = greedy_test(load_policy(run), make_test_envs("smac/3m-v0", {}, 4, cfg.seed))
    assert again["test_return_mean"] == pytest.approx(team)
    assert again["test_battle_won_mean"] == won


def test_tests_follow_the_interval_and_are_off_by_default_elsewhere(ray_session, tmp_path):
    quiet = Console(quiet=True)
    cfg = TrainConfig(env="test/masked_grid-v0", algo="ippo", iterations=1)
    apply_overrides(cfg, SMALL)
    assert rows(training.train(cfg, out=str(tmp_path), name="off", console=quiet))[0][
        "test_return_mean"
    ] in ("", "nan")
    cfg = TrainConfig(env="test/masked_grid-v0", algo="ippo", iterations=3)
    apply_overrides(cfg, [*SMALL, "test_interval=400", "test_nepisode=2"])
    got = rows(training.train(cfg, out=str(tmp_path), name="on", console=quiet))
    team = [float(r["test_return_mean"]) for r in got]
    assert all(np.isfinite(team))
    assert math.isnan(float(got[0]["test_battle_won_mean"] or "nan"))  # the grid has no battles


def test_a_seeds_sweep_on_smac_leads_with_the_greedy_test_win_rate():
    from tune.sweeps.seeds import SeedsSweep

    assert SeedsSweep(env="smac/3m-v0").lead == "test_battle_won_mean"
    assert SeedsSweep(env="mpe/simple_spread-v3").lead == "episode_return_mean"
    assert SeedsSweep(env="smac/3m-v0", metric="win_rate").lead == "win_rate"
