"""Population self-play: VolleyBots' freezing rule, the meta-solvers, payoffs and Elo against
hand-computed cases, the population on disk, games between modules, and a run that adds and
freezes a snapshot, then cross-plays its population."""

import json

import numpy as np
import pytest
import torch

from policies import algorithm
from policies.algorithm import AlgorithmMismatch
from policies.selfplay.league import (
    Population,
    elo,
    meta_strategy,
    nash,
    payoff_value,
    play,
    should_freeze,
)


def test_freezing_rule():
    steady = [0.92] * 10
    assert should_freeze(steady, 50)
    assert not should_freeze(steady, 49)  # too early
    assert not should_freeze([0.92] * 9, 60)  # the window is not full
    assert not should_freeze([0.85] * 10, 60)  # mean below 0.9
    assert not should_freeze([0.86, 0.98] * 5, 60)  # mean 0.92 but std 0.06
    assert should_freeze([0.1] * 10, 5001)  # trained long enough


def test_nash_of_rock_paper_scissors_is_uniform_and_of_a_dominated_game_pure():
    rps = np.array([[0, -1, 1], [1, 0, -1], [-1, 1, 0]], float)
    np.testing.assert_allclose(nash(rps), [1 / 3] * 3, atol=1e-6)
    dominant = np.array([[0, -0.5, -0.8], [0.5, 0, -0.2], [0.8, 0.2, 0]])
    np.testing.assert_allclose(nash(dominant), [0, 0, 1], atol=1e-6)


def test_meta_strategies():
    p = np.zeros((4, 4))
    assert meta_strategy("sp", p).tolist() == [0, 0, 0, 1]
    assert meta_strategy("fsp", p).tolist() == [0.25] * 4
    with pytest.raises(ValueError, match="allowed: sp, fsp, nash"):
        meta_strategy("prd", p)


def test_payoff_and_elo_by_hand():
    assert payoff_value(3, 1) == 0.5 and payoff_value(0, 0) == 0.0  # draws are ignored
    # One win of a over b from 1000 each: expected 0.5, so +-42.
    assert elo([(0, 1, 1.0)], 2).tolist() == [1042.0, 958.0]
    # Then a draw: a's expected score 1 / (1 + 10^(-84/400)) = 0.6191...
    expected = 1 / (1 + 10 ** (-84 / 400))
    r = elo([(0, 1, 1.0), (0, 1, 0.5)], 2)
    assert r[0] == pytest.approx(1042 + 84 * (0.5 - expected))


def test_population_on_disk_survives_a_restart(tmp_path):
    pop = Population(tmp_path)
    pop.add({"w": torch.ones(2)}, np.zeros(0))
    pop.add({"w": torch.zeros(2)}, np.array([0.4]))
    again = Population(tmp_path)
    assert again.size == 2
    np.testing.assert_allclose(again.payoff, [[0, -0.4], [0.4, 0]])
    assert torch.equal(again.weights(0)["w"], torch.ones(2))
    assert not list(tmp_path.glob("*.tmp"))


def _policy(seed):
    from policies.inference import ModulePolicy

    info = algorithm.get("selfplay")
    spec = info.modules("volleyball/1v1-v0", info.settings()).rl_module_specs["near"]
    torch.manual_seed(seed)
    return ModulePolicy(spec.build())


def test_play_counts_every_game():
    out = play(
        "volleyball/1v1-v0",
        _policy(0),
        _policy(1),
        12,
        num_envs=8,
        env_config={"random_serve": True},
    )
    assert out["wins"] + out["losses"] + out["draws"] == 12 == len(out["results"])


def test_selfplay_refuses_envs_without_two_teams():
    info = algorithm.get("selfplay")
    with pytest.raises(AlgorithmMismatch, match="two-team env.*'near' and 'far'"):
        info.build("volleyball/hover-v0", info.settings())
    settings = info.settings()
    settings.meta_solver = "best"
    with pytest.raises(AlgorithmMismatch, match="meta_solver must be one of sp, fsp, nash"):
        info.build("volleyball/1v1-v0", settings)


def test_run_adds_and_freezes_a_snapshot_then_crossplays(tmp_path):
    """As a user runs it: a selfplay run whose member freezes after one iteration; the frozen
    'far' module holds a member's weights; cross-play writes win rates and Elo; eval renders."""
    from tests.arena.test_cli import SMALL, arena

    out = tmp_path / "runs"
    arena("train", "volleyball/1v1-v0", "--algo", "selfplay", "--iterations", "3", "--out", str(out),
          "--name", "sp", *SMALL, "--set", "max_iterations=1", "--set", "payoff_games=4",
          "--set", "meta_solver=nash")  # fmt: skip
    run = out / "volleyball/1v1-v0/selfplay/sp"
    league = json.loads((run / "population/league.json").read_text())
    assert len(league["payoff"]) == 2  # the initial policy and one frozen snapshot
    assert sorted(p.name for p in (run / "population").glob("member_*.pt")) == [
        "member_0.pt",
        "member_1.pt",
    ]
    proc = arena("crossplay", str(run), "--games", "4", "--json")
    report = json.loads(proc.stdout)
    assert report["members"] == 2 and len(report["elo"]) == 2
    assert sum(report["elo"]) == pytest.approx(2000.0)
    assert (run / "crossplay.json").exists()
    video = tmp_path / "rally.mp4"
    proc = arena("eval", str(run), "--episodes", "1", "--render", str(video))
    assert video.read_bytes()[4:8] == b"ftyp" and "hits" in proc.stdout
    proc = arena("eval", str(run), "--render", str(tmp_path / "rally.avi"), check=False)
    assert proc.returncode == 2 and "as .gif or .mp4" in proc.stderr


def test_bradley_terry_recovers_planted_strengths():
    """Games drawn from strengths 1 : 2 : 4 give ratings 400 log10(2) apart."""
    from policies.selfplay.league import bradley_terry

    strength = np.array([1.0, 2.0, 4.0])
    games = np.full((3, 3), 10_000.0) * (1 - np.eye(3))
    scores = games * strength[:, None] / (strength[:, None] + strength[None, :])
    r = bradley_terry(scores, games)
    np.testing.assert_allclose(np.diff(r), [400 * np.log10(2)] * 2, atol=1.0)
    assert r.mean() == pytest.approx(1000.0)
