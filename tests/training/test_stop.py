"""``stop_test_win_rate``: a run stops at the first greedy test that reaches it and
checkpoints there (ODIS's ``stop_winrate``, how its medium datasets' policies are made)."""

import pytest
from rich.console import Console

import training
from tests.policies.test_testing import SMALL as PPO_SMALL
from tests.policies.test_testing import rows
from training.config import ConfigError, TrainConfig, apply_overrides

SMALL = [*PPO_SMALL, "test_interval=200", "test_nepisode=2"]


def test_a_run_stops_where_its_test_win_rate_reaches_the_bar(ray_session, tmp_path):
    quiet = Console(quiet=True)
    cfg = TrainConfig(env="smac/3m-v0", algo="ippo", iterations=4)
    apply_overrides(cfg, [*SMALL, "stop_test_win_rate=0"])  # any first test reaches 0
    run = training.train(cfg, out=str(tmp_path), name="stop", console=quiet)
    assert [r["iteration"] for r in rows(run)] == ["1"]
    assert (run / "checkpoints" / "iter_000001").is_dir()
    # resumed, a stopped run stays stopped
    training.train(None, resume=str(run), console=quiet)
    assert len(rows(run)) == 1
    # a bar no test reaches leaves the run to its target
    cfg = TrainConfig(env="smac/3m-v0", algo="ippo", iterations=2)
    apply_overrides(cfg, [*SMALL, "test_nepisode=1", "stop_test_win_rate=1"])
    got = rows(training.train(cfg, out=str(tmp_path), name="target", console=quiet))
    won = [float(r["test_battle_won_mean"]) for r in got]
    assert len(got) == 2 or won[len(got) - 1] == 1.0


def test_a_stop_without_test_battles_is_refused(ray_session, tmp_path):
    for env, sets in (
        ("mpe/simple_spread-v3", []),
        ("smac/3m-v0", ["test_interval=0"]),
    ):
        cfg = TrainConfig(env=env, algo="ippo", iterations=1)
        apply_overrides(cfg, [*PPO_SMALL, *sets, "stop_test_win_rate=0.5"])
        with pytest.raises(ConfigError, match="stop_test_win_rate needs greedy test battles"):
            training.train(cfg, out=str(tmp_path), console=Console(quiet=True))
    with pytest.raises(ConfigError, match=r"stop_test_win_rate must be in \[0, 1\], got 1.5"):
        TrainConfig(env="smac/3m-v0", stop_test_win_rate=1.5).validate()
