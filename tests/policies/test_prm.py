"""The process reward model's prompts, answers and scores (policies.prm), on a tiny Llama:
Web-Shepherd's prompt sections in its order, answers built from the very tokens the judge
reads, cached scoring equal to one plain forward pass, and training that learns the labels."""

import json

import pytest
import torch

from envs.web.prm import build, teacher_policy
from policies.lm.student import Student, StudentSettings
from policies.prm import (
    EVALUATION,
    IN_PROGRESS,
    JUDGEMENTS,
    NO,
    YES,
    ProcessRewardModel,
    items_of,
    step_reward,
    trajectory,
)


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    out = tmp_path_factory.mktemp("prm")
    tasks = ("login-user", "click-checkboxes")
    build([(f"websim/{t}-v0", s, teacher_policy(t, 0.1, s)) for t in tasks for s in range(6)], out)

    return [json.loads(x) for x in (out / "pairs.jsonl").read_text().splitlines()]


def _prm(seed=0, max_prompt_tokens=4096):
    settings = StudentSettings(kind="tiny", max_prompt_tokens=max_prompt_tokens)
    return ProcessRewardModel(Student.build(settings, seed))


def test_the_prompt_is_web_shepherds_sections_in_order(rows):
    prm = _prm()
    row = next(r for r in rows if len(r["action_history"]) >= 1)
    response = row["chosen"][0]
    text = prm.tok.decode(prm.judge_prompts(row, [response])[0])
    heads = [
        "## User Instruction",
        "## Trajectory",
        "## Current State",
        "### Current URL",
        "### AXTREE",
        "## Checklist",
        "## Agent's Response",
    ]
    at = [text.index(h) for h in heads]
    assert at == sorted(at)
    assert row["intent"] in text and row["gt_checklist"] in text
    assert f"THOUGHT: {response['thought']}\nACTION: {response['action']}" in text
    assert "Thought 1: " in trajectory(row) and "Action 1: " in trajectory(row)


def test_a_long_page_loses_tree_lines_not_the_response(rows):
    row = max(rows, key=lambda r: len(r["text_observation"]))
    prm = _prm(max_prompt_tokens=1500)
    ids = prm.judge_prompts(row, row["chosen"] + row["rejected"])
    assert max(len(i) for i in ids) <= 1500
    text = prm.tok.decode(ids[0])
    assert text.count("\n...") == 1 and row["chosen"][0]["action"] in text


def test_the_answer_is_the_checklist_evaluation(rows):
    prm = _prm()
    answer = prm.tok.decode(prm.judge_answer([YES, IN_PROGRESS, NO]))
    assert answer == f"{EVALUATION}\nChecklist 1: Yes\nChecklist 2: In Progress\nChecklist 3: No"
    row = rows[0]
    examples = prm.judge_examples(row)
    assert len(examples) == len(row["chosen"]) + len(row["rejected"])
    n = items_of(row["gt_checklist"])
    assert prm.tok.decode(examples[0].answer).count("Checklist ") == n


def _plain_probs(prm, prompt, n_items):
    """Each item's three probabilities from one forward pass over the prompt and the answer
    of the likeliest judgements, found item by item with no cache."""
    model, probs, answer = prm.student.model, [], []
    for k in range(1, n_items + 1):
        ids = torch.tensor([prompt + answer + prm.header(k)])
        with torch.no_grad():
            logits = model(ids).logits[0, -1][prm.first_ids]
        dist = torch.softmax(logits.float(), -1)
        probs.append(dist.tolist())
        answer += prm.header(k) + prm.judgement_ids[int(dist.argmax())]
    return probs


def test_cached_scores_equal_a_plain_forward_pass(rows):
    prm = _prm(seed=3)
    row = next(r for r in rows if items_of(r["gt_checklist"]) >= 2 and len(r["rejected"]) >= 2)
    responses = row["chosen"] + row["rejected"]
    judged = prm.judge(row, responses)
    prompts = prm.judge_prompts(row, responses)
    for got, prompt in zip(judged, prompts, strict=True):
        want = _plain_probs(prm, prompt, items_of(row["gt_checklist"]))
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            assert sum(g) == pytest.approx(1.0)
            assert g == pytest.approx(w, abs=1e-5)
    assert prm.scores(row, responses) == pytest.approx([step_reward(p) for p in judged])


def test_step_reward_is_web_shepherds_get_score():
    assert step_reward([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]) == pytest.approx(0.75)
    assert step_reward([[0.2, 0.4, 0.4]]) == pytest.approx(0.4)
    assert step_reward([]) == 0.0


def test_training_teaches_the_judgements(rows):
    """A few dozen steps on one state's examples: the tiny judge learns their labels."""
    torch.manual_seed(0)
    prm = _prm()
    row = next(
        r
        for r in rows
        if {YES, NO} <= {j for c in r["chosen"] + r["rejected"] for j in c["checklist_evaluation"]}
    )
    examples = prm.judge_examples(row)
    labels = [c["checklist_evaluation"] for c in row["chosen"] + row["rejected"]]

    def label_prob():
        judged = prm.judge(row, row["chosen"] + row["rejected"])
        return sum(
            p[JUDGEMENTS.index(j)]
            for items, ls in zip(judged, labels, strict=True)
            for p, j in zip(items, ls, strict=True)
        ) / sum(len(ls) for ls in labels)

    before = label_prob()
    optim = torch.optim.Adam(prm.student.model.parameters(), lr=3e-3)
    first = None
    for _ in range(40):
        loss, tokens = prm.loss(examples)
        first = first if first is not None else loss.item()
        loss.backward()
        optim.step()
        optim.zero_grad()
    assert tokens > 0 and loss.item() < 0.3 * first
    assert label_prob() > max(0.6, before + 0.3)  # chance: 1/3


def test_played_steps_are_judged_once_per_state():
    """``episode_step_rewards``: every step of played episodes gets the PRM's score of that
    state and action; attempts that share states (here two identical greedy ones) pay once."""
    import envs
    from policies.lm.play import EnvPool, play
    from policies.prm import episode_step_rewards, step_response, step_state, task_checklist

    student = Student.build(StudentSettings(kind="tiny"), 0)
    pool = EnvPool(lambda env_id: envs.make(env_id, max_steps=3))
    episodes = play(student, pool.jobs([("login-user", 7, 0)] * 2), 0.0)
    pool.close()
    assert episodes[0].actions == episodes[1].actions and len(episodes[0].actions) == 3
    prm = _prm()
    both = episode_step_rewards(prm, episodes, "twin")
    paid = prm.tokens_read
    prm.tokens_read = 0
    assert episode_step_rewards(prm, episodes[:1], "twin") == both[:1] == both[1:]
    assert prm.tokens_read == paid > 0
    ep, env_id = episodes[0], "websim/login-user-v0"
    checklist = task_checklist(prm, env_id, 7, ep.observations[0], "twin")
    assert items_of(checklist) >= 2
    thoughts = []
    for t, (obs, action) in enumerate(zip(ep.observations, ep.actions, strict=True)):
        response = step_response(obs, action, 0)
        row = step_state(env_id, obs, 0, checklist, thoughts, ep.actions[:t])
        assert prm.scores(row, [response]) == pytest.approx([both[0][t]])
        thoughts.append(response["thought"])
