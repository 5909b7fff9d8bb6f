"""``arena offline``: ODIS's multi-task BC-T learns the recorded actions of several tasks with
one network, resumes to the same weights, acts zero-shot on unseen unit counts; bad input."""

import json

import pytest
import torch

from arena.cli import main
from policies.offline.entity_bc import EntityBC, EntityBCConfig, binary_id
from training import offline
from training import record as rec


def accuracy(model, task) -> float:
    """How often the greedy action (over all actions) is the dataset's, on filled steps of
    living agents that had a choice."""
    with torch.no_grad():
        logits = offline.sequence_logits(model, task.tokens, task.actions)
    hit = (logits.argmax(-1) == task.actions).float()
    keep = task.filled[..., None].expand_as(hit) & (task.actions != 0)
    return float(hit[keep].mean())


def test_binary_id_is_odis_binary_embed():
    assert binary_id(0, 4, 15).tolist() == [0, 0, 0, 1]
    assert binary_id(4, 4, 15).tolist() == [0, 1, 0, 1]
    with pytest.raises(ValueError, match="at most 15"):
        binary_id(15, 4, 15)


def test_one_network_reads_every_unit_count_and_attacks_by_enemy_token():
    cfg = EntityBCConfig(own_width=5, widths={"enemy": 5, "ally": 5}, n_no_attack=6)
    model = EntityBC(cfg)
    for A, E in ((3, 3), (5, 6), (13, 15)):
        tokens = {
            "own": torch.randn(2, A, 5),
            "enemy": torch.randn(2, A, E, 5),
            "ally": torch.randn(2, A, A - 1, 5),
        }
        logits, h = model(tokens, torch.full((2, A), -1), model.initial_state(2 * A))
        assert logits.shape == (2, A, 6 + E) and h.shape == (2 * A, 64)
        # permuting the enemies permutes their attack logits (one head shared by all enemies)
        perm = torch.randperm(E)
        swapped = dict(tokens, enemy=tokens["enemy"][:, :, perm])
        again, _ = model(swapped, torch.full((2, A), -1), model.initial_state(2 * A))
        torch.testing.assert_close(again[..., 6:], logits[..., 6:][..., perm], atol=1e-5, rtol=0)
        torch.testing.assert_close(again[..., :6], logits[..., :6], atol=1e-5, rtol=0)


def test_bc_learns_the_recorded_actions_and_resumes_to_the_same_weights(marine_sets, tmp_path):
    tasks = [offline.load_task(d) for d in marine_sets]
    assert [t.env for t in tasks] == ["smac/3m-v0", "smac/5m-v0"]
    assert tasks[1].tokens["enemy"].shape[-2:] == (5, 5) and tasks[0].n_no_attack == 6
    cfg = offline.OfflineConfig(steps=60, batch_episodes=8, checkpoint_every=30, seed=1)
    torch.manual_seed(1)
    untrained = EntityBC(offline.model_config(tasks, cfg))
    before = [accuracy(untrained, t) for t in tasks]
    report = offline.train(marine_sets, tmp_path / "a", cfg)
    model, meta = offline.load_model(tmp_path / "a")
    after = [accuracy(model, t) for t in tasks]
    assert report["steps"] == 60 and meta["tasks"] == ["smac/3m-v0", "smac/5m-v0"]
    for b, a in zip(before, after, strict=True):
        assert a > b + 0.2, (before, after)
    losses = json.loads((tmp_path / "a" / "progress.json").read_text())["losses"]
    assert losses[-1][1] < losses[0][1]
    # 30 steps, then the same command with more steps: the weights of 60 steps straight
    offline.train(marine_sets, tmp_path / "b", offline.OfflineConfig(**{**vars(cfg), "steps": 30}))
    offline.train(marine_sets, tmp_path / "b", cfg)
    a = torch.load(tmp_path / "a" / "checkpoint.pt", weights_only=True)["model"]
    b = torch.load(tmp_path / "b" / "checkpoint.pt", weights_only=True)["model"]
    for k in a:
        torch.testing.assert_close(a[k], b[k], atol=0, rtol=0)
    # zero-shot: 4m was never seen; the table keeps each env's row
    rows = offline.zero_shot(tmp_path / "a", ["smac/4m-v0", "smac/3m-v0"], episodes=8)
    assert [r["source"] for r in rows] == [False, True]
    for r in rows:
        assert 0 <= r["win_ci95"][0] <= r["win_rate"] <= r["win_ci95"][1] <= 1
    table = json.loads((tmp_path / "a" / "zero_shot.json").read_text())
    assert set(table) == {"smac/4m-v0", "smac/3m-v0"}


def test_evaluation_plays_the_networks_greedy_legal_actions(marine_sets, tmp_path):
    """With a network that always prefers stop, every live agent stops: no battle is won and
    the agents never fire, so the enemy's attack-move ends every battle in a loss."""
    cfg = EntityBCConfig(own_width=5, widths={"enemy": 5, "ally": 5}, n_no_attack=6)
    model = EntityBC(cfg)
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        model.q_skill.bias[1] = 1.0  # stop; the enemies' logits are the mean, below it
    row = offline.evaluate(model, "smac/4m-v0", episodes=6)
    assert row["win_rate"] == 0 and row["return_mean"] == pytest.approx(0, abs=1e-6)


def test_bad_input_is_refused_with_one_line(marine_sets, tmp_path, capsys):
    def error(argv):
        assert main(argv) == 2
        return capsys.readouterr().err.strip().splitlines()[-1]

    out = str(tmp_path / "run")
    assert "offline algorithms are bc, odis, bikt" in error(
        ["offline", *marine_sets, "--out", out, "--algo", "cql"]
    )
    assert "--steps must be at least 1" in error(
        ["offline", *marine_sets, "--out", out, "--steps", "0"]
    )
    assert "at least one DATASET" in error(["offline", "--out", out])
    assert "not an arena offline run" in error(
        ["offline", "--out", str(tmp_path), "--eval-only", "--eval", "smac/4m-v0"]
    )
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("x")
    assert "holds files but no offline run" in error(
        ["offline", *marine_sets, "--out", str(tmp_path / "mine"), "--steps", "1"]
    )
    assert (
        main(["offline", marine_sets[0], "--out", out, "--steps", "2", "--checkpoint-every", "1"])
        == 0
    )
    capsys.readouterr()
    assert "holds another offline run" in error(
        ["offline", *marine_sets, "--out", out, "--steps", "2"]
    )
    assert "unknown env id" in error(
        ["offline", "--out", out, "--eval-only", "--eval", "smac/nope-v0"]
    )
    assert "entity tokens differ" in error(
        ["offline", "--out", out, "--eval-only", "--eval", "smac/2s3z-v0"]
    )
    assert "arguments as :KEY=VALUE" in error(
        ["offline", "--out", out, "--eval-only", "--eval", "smac/4m-v0:N"]
    )
    assert "takes no argument bogus" in error(
        ["offline", "--out", out, "--eval-only", "--eval", "smac/4m-v0:bogus=1"]
    )
    assert "no entity layout for 'matrix/climbing-v0'" in error(
        ["offline", "--out", out, "--eval-only", "--eval", "matrix/climbing-v0"]
    )
    spread = tmp_path / "spread"
    rec.record("random", spread, env="mpe/simple_spread-v3", episodes=2, workers=1)
    assert "entity tokens differ" in error(
        ["offline", marine_sets[0], str(spread), "--out", str(tmp_path / "mixed"), "--steps", "1"]
    )
    assert "--algo odis needs a global state split into units" in error(
        ["offline", str(spread), "--out", str(tmp_path / "odis"), "--algo", "odis"]
    )
