"""``arena prm train`` and ``arena prm bench`` (training.prm): a tiny judge trains and resumes
to the same weights, the meta-benchmark counts as WebRewardBench does (ties are not wins), the
baselines score what they say, and bad input is refused."""

import json

import pytest
import torch

from arena.cli import main
from envs.web.prm import build, teacher_policy
from training import prm

TINY = ["--model", "tiny", "--lora-rank", "4", "--max-prompt-tokens", "4096"]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    out = tmp_path_factory.mktemp("prm-data")
    tasks = ("enter-password", "click-button")
    build([(f"websim/{t}-v0", s, teacher_policy(t, 0.2, s)) for t in tasks for s in range(3)], out)
    return out


def _rows(data):
    return prm.read_pairs(data)


def test_rank_metrics_count_ties_against_the_chosen():
    assert prm.rank_metrics([0.9, 0.1, 0.5]) == (True, 1.0)
    assert prm.rank_metrics([0.5, 0.1, 0.5]) == (False, 0.5)  # a draw: rank 2
    assert prm.rank_metrics([0.2, 0.9, 0.5]) == (False, 1 / 3)
    assert prm.rank_metrics([0.0, 0.0, 0.0, 0.0]) == (False, 0.25)


def test_batches_are_epochs_of_seeded_permutations():
    steps = [prm.batch_indices(10, 4, 7, s) for s in range(5)]
    flat = sum(steps, [])
    assert sorted(flat[:10]) == list(range(10)) and sorted(flat[10:20]) == list(range(10))
    assert steps == [prm.batch_indices(10, 4, 7, s) for s in range(5)]
    assert prm.batch_indices(10, 4, 8, 0) != steps[0]


def test_the_baselines_score_what_they_say(data):
    rows = _rows(data)
    oracle = prm.benchmark(rows, prm.scorer("oracle"))
    assert oracle["states"] == len(rows) and oracle["accuracy"] > 0.9
    # outcome-only: the env's reward, which is zero on every step but a finishing one
    row = next(r for r in rows if r["arena"]["cost_to_go"] == 1)
    scores = prm.outcome_scores(row)
    assert scores[0] > 0 and all(s <= 0 for s in scores[1:])
    early = next(r for r in rows if r["arena"]["cost_to_go"] > 1)
    assert prm.rank_metrics(prm.outcome_scores(early))[0] is False
    rand = prm.benchmark(rows, prm.scorer("random", seed=1))
    lo, hi = rand["accuracy_ci95"]
    assert 0 <= lo <= rand["accuracy"] <= hi <= 1 and rand["accuracy"] < oracle["accuracy"]
    assert 0 < rand["mrr"] < 1 and 0 <= rand["trajectory_accuracy"] <= 1


def test_train_resumes_to_the_same_weights_and_benches(data, tmp_path, capsys):
    once, resumed = tmp_path / "once", tmp_path / "resumed"
    args = ["prm", "train", str(data), *TINY, "--batch", "2", "--checkpoint-every", "2"]
    assert main([*args, "--steps", "4", "--out", str(once)]) == 0
    assert "4 steps over" in capsys.readouterr().out
    assert main([*args, "--steps", "6", "--out", str(once)]) == 2  # another run's directory
    assert "holds another PRM run" in capsys.readouterr().err
    cfg = prm.PRMConfig(
        model=prm.StudentSettings(kind="tiny", max_prompt_tokens=4096, lora=prm.LoRASettings(4)),
        steps=4,
        batch=2,
        checkpoint_every=2,
    )

    def crash(step, total, loss):
        if step == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        prm.train(data, resumed, cfg, crash)
    assert json.loads((resumed / "progress.json").read_text())["step"] == 2
    assert prm.train(data, resumed, cfg)["steps"] == 4
    a = torch.load(once / "checkpoint.pt", weights_only=True)["model"]
    b = torch.load(resumed / "checkpoint.pt", weights_only=True)["model"]
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert a and all("lora" in k for k in a)  # the checkpoint holds the adapter alone
    # the trained judge on the meta-benchmark, through the CLI
    result = tmp_path / "bench.json"
    bench = ["prm", "bench", str(once), "--data", str(data), "--limit", "3"]
    assert main([*bench, "--out", str(result)]) == 0
    got = json.loads(result.read_text())
    assert got["states"] == 3 and 0 <= got["accuracy"] <= 1
    assert "accuracy" in capsys.readouterr().out


def test_bad_input_is_refused(data, tmp_path, capsys):
    assert main(["prm", "train", str(tmp_path), "--out", str(tmp_path / "x"), *TINY]) == 2
    assert "no pairs.jsonl" in capsys.readouterr().err
    bad = ["prm", "train", str(data), "--out", str(tmp_path / "y"), *TINY, "--steps", "0"]
    assert main(bad) == 2
    assert "steps=0" in capsys.readouterr().err
    assert main(["prm", "bench", "judge-me", "--data", str(data)]) == 2
    assert "one of base, random, outcome, oracle" in capsys.readouterr().err
    assert main(["prm", "bench", str(tmp_path), "--data", str(data)]) == 2
    assert "not an arena prm train run" in capsys.readouterr().err
