"""Step labels, checklists and preference pairs (envs.web.prm): the expert completes every
checklist, a wrong step is labelled as not advancing, pairs hold up when replayed on copies of
the env, the data is deterministic, and ``arena web prm-data`` writes it."""

import copy
import json

import pytest

import envs
from arena.cli import main
from envs.web import FLOWS, TWIN_TASKS
from envs.web.prm import (
    IN_PROGRESS,
    MAX_ITEMS,
    NO,
    YES,
    State,
    build,
    checklist_text,
    label_episode,
    plan,
    reward,
    start,
    teacher_policy,
)
from envs.web.teachers import experts
from envs.web.traces import task_of

ALL = [f"websim/{t}-v0" for t in (*TWIN_TASKS, *FLOWS)]


def _expert(env_id):
    return teacher_policy(task_of(env_id), 0.0, 0)


@pytest.mark.parametrize("env_id", ALL)
def test_the_experts_episode_completes_its_checklist(env_id):
    for seed in (0, 1):
        ep = label_episode(env_id, seed, _expert(env_id), rejected=0)
        assert ep is not None and 1 <= len(ep.items) <= MAX_ITEMS
        assert ep.labels[-1]["success"]
        assert ep.labels[-1]["checklist"] == [YES] * len(ep.items)
        assert ep.labels[-1]["reward"] == 1.0
        # every expert step advances by one, and matches the expert from that state
        assert all(lab["advanced"] and lab["matches_expert"] for lab in ep.labels)
        assert [lab["cost_before"] for lab in ep.labels] == list(range(len(ep.labels), 0, -1))
        text = checklist_text(ep.items)
        assert text.startswith("Checklist 1: ") and "\n- Goal: " in text


def test_checklists_are_phrased_from_the_goal():
    ep = label_episode("websim/login-user-v0", 0, _expert("websim/login-user-v0"), rejected=0)
    user, password = ep.goal.split('"')[1], ep.goal.split('"')[3]
    assert checklist_text(ep.items) == (
        "Checklist 1: Fill the 'Username' and 'Password' fields\n"
        f"- Goal: Fill the 'Username' field with {user!r} and the 'Password' field with "
        f"{password!r}.\n"
        "Checklist 2: Click the 'Login' button\n"
        "- Goal: Click the 'Login' button, which completes the task."
    )
    # after the username only, the first item is in progress
    assert ep.labels[0]["checklist"] == [IN_PROGRESS, NO]
    assert reward([IN_PROGRESS, NO]) == 0.25
    flow = label_episode("websim/flow-flight-v0", 0, _expert("websim/flow-flight-v0"), rejected=0)
    assert len(flow.items) == MAX_ITEMS  # 12 expert actions, merged down to five
    assert "which completes page 3 of 3 (click-dialog)" in flow.items[-1].goal


def test_a_wrong_step_does_not_advance():
    # click the Username label, then the Login button with empty fields (a failure)
    ep = label_episode("websim/login-user-v0", 0, ["click('1')", "click('5')"], rejected=0)
    first, second = ep.labels
    assert not first["advanced"] and first["effect"] == "none" and not first["matches_expert"]
    assert first["cost_before"] == first["cost_after"] == 3
    assert first["checklist"] == [NO, NO]
    assert not second["advanced"] and second["effect"] == "failure" and second["done"]
    assert second["cost_after"] is None
    # filling the password first advances, though the expert fills the username first
    ep = label_episode("websim/login-user-v0", 0, ["fill('4', 'x')"], rejected=0)
    assert ep.labels[0]["effect"] == "none"  # a wrong password
    password = ep.goal.split('"')[3]
    ep = label_episode("websim/login-user-v0", 0, [f"fill('4', {password!r})"], rejected=0)
    assert ep.labels[0]["advanced"] and not ep.labels[0]["matches_expert"]
    assert ep.labels[0]["checklist"] == [IN_PROGRESS, NO]


def _replay(record) -> State:
    arena = record["arena"]
    state = start(arena["env"], arena["seed"])
    state.env.max_steps = 1 << 30
    for action in record["action_history"]:
        state.step(action)
    return state


def _cost(state, expert, action):
    sim = state.copy()
    sim.step(action)
    p = plan(sim, expert)
    return float("inf") if p is None else len(p)


@pytest.mark.parametrize(
    "env_id",
    [
        "websim/click-checkboxes-v0",
        "websim/search-engine-v0",
        "websim/email-inbox-v0",
        "websim/flow-search-v0",
    ],
)
def test_chosen_actions_advance_and_rejected_do_not(env_id):
    expert = experts()[task_of(env_id)]
    ep = label_episode(env_id, 3, teacher_policy(task_of(env_id), 0.3, 3), rejected=3)
    assert ep.records
    for rec in ep.records:
        state = _replay(rec)
        assert state.obs.endswith(rec["text_observation"])
        cost = rec["arena"]["cost_to_go"]
        assert len(plan(state, expert)) == cost
        assert rec["chosen"][0]["action"] == plan(state, expert)[0][0]
        for c in rec["chosen"]:
            assert _cost(state, expert, c["action"]) < cost and c["effect"] == "advance"
        for r in rec["rejected"]:
            assert _cost(state, expert, r["action"]) >= cost and r["effect"] != "advance"
        assert {r["action"] for r in rec["rejected"]}.isdisjoint(c["action"] for c in rec["chosen"])
        assert set(rec) >= {
            "task_id",
            "step_id",
            "intent",
            "start_url",
            "current_url",
            "text_observation",
            "gt_checklist",
            "thought_history",
            "action_history",
            "chosen",
            "rejected",
            "source_name",
        }
        assert len(rec["thought_history"]) == len(rec["action_history"]) == rec["step_id"]


def test_labelling_does_not_change_the_env_it_copies():
    env = envs.make("websim/search-engine-v0")
    state = start("websim/search-engine-v0", 5, env)
    before = copy.deepcopy(env)
    assert plan(state, experts()["search-engine"])
    assert env.view.text == before.view.text and env.steps == before.steps == 0


def _episodes(tasks, seeds, rate=0.2):
    return [(f"websim/{t}-v0", s, teacher_policy(t, rate, s)) for t in tasks for s in range(seeds)]


def test_the_data_is_deterministic(tmp_path):
    tasks = ("click-option", "use-autocomplete")
    a = build(_episodes(tasks, 3), tmp_path / "a", pair_seed=1)
    b = build(_episodes(tasks, 3), tmp_path / "b", pair_seed=1)
    c = build(_episodes(tasks, 3), tmp_path / "c", pair_seed=2)
    for name in ("checklists.jsonl", "labels.jsonl", "pairs.jsonl"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    assert a["pairs"] == b["pairs"] > 0
    pairs_a = (tmp_path / "a" / "pairs.jsonl").read_text()
    assert pairs_a != (tmp_path / "c" / "pairs.jsonl").read_text()  # another draw
    assert (tmp_path / "a" / "labels.jsonl").read_text() == (
        tmp_path / "c" / "labels.jsonl"
    ).read_text()
    assert c["steps"] == a["steps"]


def test_the_cli_writes_the_files_and_reads_traces(tmp_path, capsys):
    out = tmp_path / "prm"
    args = ["web", "prm-data", "--tasks", "enter-password", "flow-email", "--episodes", "3"]
    assert main([*args, "--out", str(out)]) == 0
    assert "6 episodes (0 the expert cannot solve)" in capsys.readouterr().out
    assert sorted(p.name for p in out.iterdir()) == [
        "checklists.jsonl",
        "labels.jsonl",
        "pairs.jsonl",
        "summary.json",
    ]
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["tasks"]) == {"websim/enter-password-v0", "websim/flow-email-v0"}
    rows = [json.loads(x) for x in (out / "checklists.jsonl").read_text().splitlines()]
    assert len(rows) == 6 and rows[0]["gt_checklist"].startswith("Checklist 1: ")
    # the same episodes, written by arena web traces and labelled from the file
    traces = tmp_path / "traces"
    trace_args = ["web", "traces", "--tasks", "enter-password", "flow-email", "--episodes", "3"]
    assert main([*trace_args, "--error-rate", "0.1", "--out", str(traces)]) == 0
    again = tmp_path / "again"
    assert (
        main(["web", "prm-data", "--traces", str(traces / "traces.jsonl"), "--out", str(again)])
        == 0
    )
    for name in ("labels.jsonl", "pairs.jsonl"):
        assert (again / name).read_bytes() == (out / name).read_bytes()
    assert main(["web", "prm-data", "--tasks", "click-pie", "--out", str(out)]) == 2
    assert main(["web", "prm-data", "--out", str(out)]) == 2
