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


def test_a_written_answer_reads_as_web_shepherds_score():
    answer = (
        "The agent typed it.\nCHECKLIST EVALUATION:\nChecklist 1: Yes\nChecklist 2: in progress"
    )
    assert prm.text_reward(answer, 2) == (0.75, 0)
    assert prm.text_reward(answer, 3) == (0.5, 1)  # item 3 unjudged: No
    assert prm.text_reward("Checklist 1: **No**\nChecklist 1: Yes", 1) == (0.0, 0)  # the first
    assert prm.text_reward("I cannot tell.", 2) == (0.0, 2)


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
    assert set(oracle["accuracy_per_env"]) == {"websim/enter-password-v0", "websim/click-button-v0"}
    # outcome-only: the env's reward, which is zero on every step but a finishing one
    row = next(r for r in rows if r["arena"]["cost_to_go"] == 1)
    scores = prm.outcome_scores(row)
    assert scores[0] > 0 and all(s <= 0 for s in scores[1:])
    early = next(r for r in rows if r["arena"]["cost_to_go"] > 1)
    assert prm.rank_metrics(prm.outcome_scores(early))[0] is False
    outcome = prm.benchmark(rows, prm.scorer("outcome"))
    assert outcome["accuracy_earlier_steps"] == 0.0 < outcome["accuracy_final_step"]
    assert len(outcome["per_state"]) == len(rows)
    rand = prm.benchmark(rows, prm.scorer("random", seed=1))
    lo, hi = rand["accuracy_ci95"]
    assert 0 <= lo <= rand["accuracy"] <= hi <= 1 and rand["accuracy"] < oracle["accuracy"]
    assert 0 < rand["mrr"] < 1 and 0 <= rand["trajectory_accuracy"] <= 1


def test_train_resumes_to_the_same_weights_and_benches(data, tmp_path, capsys):
    once, resumed = tmp_path / "once", tmp_path / "resumed"
    args = ["prm", "train", str(data), *TINY, "--batch", "2", "--checkpoint-every", "2"]
    assert main([*args, "--steps", "4", "--out", str(once)]) == 0
    assert "4 steps over" in capsys.readouterr().out
    assert main([*args, "--steps", "4", "--lr", "0.1", "--out", str(once)]) == 2  # another run
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
    # more --steps continue a run
    assert main([*args, "--steps", "6", "--out", str(once)]) == 0
    assert json.loads((once / "progress.json").read_text())["step"] == 6


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
    assert main(["prm", "bench", "judge", "--data", str(data)]) == 2
    assert "judge needs --judge-url" in capsys.readouterr().err


# --- best-of-n --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def weak_student(ray_session, tmp_path_factory):
    """A tiny student cloned from click-test-2's scripted traces for 40 iterations: at
    temperature 1 about half its samples are the right click."""
    from rich.console import Console

    import training
    from training.config import TrainConfig, apply_overrides

    out = tmp_path_factory.mktemp("bon-student")
    cfg = TrainConfig(env="websim/click-test-2-v0", algo="bc", iterations=40)
    apply_overrides(cfg, ["model.kind=tiny", "trace_episodes=20", "eval_every=0", "lr=3e-3"])
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ARENA_CACHE", str(out / "cache"))
        return training.train(cfg, out=str(out), name="s", console=Console(quiet=True))


class ButtonOneJudge:
    """A stand-in verifier that knows click-test-2's answer (the button named in the goal),
    to test the selection loop apart from any model: 1 for a click on it, 0 otherwise."""

    def __init__(self, prm):
        self.prm = prm
        self.tokens_read = 0
        self.student = prm.student

    def write_checklist(self, *args):
        return "Checklist 1: Click the button\n- Goal: Click it."

    def scores(self, row, responses):
        import re

        name = re.search(r"Click button (\w+)", row["intent"])[1]
        bid = re.search(rf"\[(\d+)\] button '{name}'", row["text_observation"])[1]
        return [float(r["action"] == f"click('{bid}')") for r in responses]


def test_best_of_n_picks_the_verifiers_best(weak_student, data, tmp_path):
    student, tasks = prm.load_student_run(weak_student)
    assert tasks == ["click-test-2"]
    judge = prm.build_prm(prm.StudentSettings(kind="tiny", max_prompt_tokens=4096))
    cfg = prm.BestOfNConfig(n=[1, 8], episodes=12, seed=0)
    oracle = prm.best_of_n(ButtonOneJudge(judge), student, tasks, cfg)
    one, eight = oracle["rows"]
    assert one["n"] == 1 and eight["n"] == 8 and one["episodes"] == 12
    assert eight["success"] >= max(one["success"], 0.75)  # the right click is among 8 samples
    per_step = [r["student_flops_per_episode"] / r["steps_mean"] for r in (one, eight)]
    assert per_step[1] > 3 * per_step[0]  # eight samples a step (n=1 prompts hold more history)
    # the real (tiny, untrained) PRM through the CLI: it writes a checklist and judges
    out = tmp_path / "bon.json"
    args = ["prm", "best-of-n", str(_tiny_run(data, tmp_path)), "--policy", str(weak_student)]
    plot = tmp_path / "bon.png"
    assert (
        main([*args, "--n", "1", "3", "--episodes", "2", "--out", str(out), "--plot", str(plot)])
        == 0
    )
    assert plot.read_bytes()[:4] == b"\x89PNG"
    rows = json.loads(out.read_text())["rows"]
    assert [r["n"] for r in rows] == [1, 3]
    assert rows[0]["prm_flops_per_episode"] == 0 < rows[1]["prm_flops_per_episode"]
    assert main([*args, "--n", "0"]) == 2


def test_grpo_takes_the_prms_step_rewards_and_pays_for_them(weak_student, data, tmp_path):
    """``--set prm=RUN``: the EnvRunner's PRM scores every sampled step; its judging is
    counted in flops_reward (and flops_total), and bad PRM settings are refused."""
    import csv

    from rich.console import Console

    import training
    from training.config import TrainConfig, apply_overrides

    judge = _tiny_run(data, tmp_path)
    cfg = TrainConfig(env="websim/click-test-2-v0", algo="grpo", iterations=1)
    sets = [f"init={weak_student}", f"prm={judge}", "group_size=3", "groups_per_iteration=2",
            "eval_every=0", "resample_flat=0"]  # fmt: skip
    apply_overrides(cfg, sets)
    run = training.train(cfg, out=str(tmp_path), name="dense", console=Console(quiet=True))
    row = list(csv.DictReader((run / "metrics.csv").open()))[-1]
    assert float(row["flops_reward"]) > 0 and 0 <= float(row["step_reward_mean"]) <= 1
    parts = ("flops_sampling", "flops_reward", "flops_train")
    assert float(row["flops_total"]) >= sum(float(row[k]) for k in parts)
    for bad, named in [(f"prm={tmp_path}", "prm="), ("prm_checklist=both", "prm_checklist"),
                       ("prm_weight=-1", "prm_weight")]:  # fmt: skip
        cfg = TrainConfig(env="websim/click-test-2-v0", algo="grpo")
        with pytest.raises(ValueError, match=named):
            apply_overrides(cfg, [bad])
            cfg.settings.validate()


def _tiny_run(data, tmp_path):
    out = tmp_path / "tiny-prm"
    model = prm.StudentSettings(kind="tiny", max_prompt_tokens=4096, lora=prm.LoRASettings(4))
    prm.train(data, out, prm.PRMConfig(model=model, steps=1, batch=1))
    return out
