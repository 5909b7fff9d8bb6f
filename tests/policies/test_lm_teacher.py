"""The teacher's bill (``policies.lm.teacher``), without Ray: the tokens the teacher's server
reported where a trace has them, the stated stand-in where it has none, the teacher's size
as a ratio of the student's (or outright, not both)."""

import json

import pytest

from envs.web.teachers import SYSTEM_PROMPT
from envs.web.traces import TeacherSpec, write_traces
from policies.lm.student import Student, StudentSettings
from policies.lm.teacher import (
    RECORDED,
    STAND_IN,
    TEACHER_RATIO,
    teacher_bill,
    teacher_params,
)
from policies.lm.turns import read_traces
from tests.envs.web.test_traces import _Chat, chat_teacher

TINY = StudentSettings(kind="tiny")


def _chatml_bytes(role: str, content: str) -> int:
    """Tokens of one ChatML message for the byte tokenizer: a start marker, the role, a
    newline, the text, an end marker and a newline."""
    return 1 + len(f"{role}\n{content}".encode()) + 1 + 1


def test_the_bill_is_the_usage_the_teacher_recorded(tmp_path):
    # an OpenAI-compatible teacher reporting 100 prompt + 10 completion tokens a request
    with chat_teacher() as url:
        write_traces(["websim/login-user-v0"], 2, tmp_path, TeacherSpec("openai", url=url,
                     model="m", params=1.0))  # fmt: skip
    steps, total = read_traces(tmp_path, successes_only=False)
    assert total == len(steps) == len(_Chat.seen) > 2
    bill = teacher_bill(steps, Student.build(TINY), 7e9)
    # exactly 2 x params x (prompt + completion) per step, whatever the student's tokenizer
    assert bill.tokens == 110 * total
    assert bill.flops == 2 * 7e9 * 110 * total
    assert (bill.recorded_steps, bill.stand_in_steps, bill.source) == (total, 0, RECORDED)
    # the row's own "flops" (the teacher's params at trace time, 1 here) is not the price
    assert steps[0]["compute"]["flops"] == 2 * 1.0 * 110


def test_the_scripted_teacher_is_billed_for_the_prompt_a_teacher_would_be_sent(tmp_path):
    write_traces(["websim/click-button-sequence-v0"], 1, tmp_path, TeacherSpec("scripted"))
    steps, _ = read_traces(tmp_path, successes_only=False)
    assert [s["history"] for s in steps] == [[], [steps[0]["action"]]]  # two clicks
    student = Student.build(TINY)
    # counted by hand in bytes: the teachers' system prompt, the earlier actions, the page
    # (not the student's short prompt, nor its last 3 actions only, nor cut to fit), the
    # assistant's turn, then the answer and its end marker
    want = 0
    for s in steps:
        want += _chatml_bytes("system", SYSTEM_PROMPT)
        if s["history"]:
            want += _chatml_bytes("user", "Previous actions:\n" + "\n".join(s["history"]))
        want += _chatml_bytes("user", s["observation"]) + 1 + len(b"assistant\n")
        want += len(s["action"].encode()) + 1
    bill = teacher_bill(steps, student, 1e6)
    assert bill.tokens == want and bill.flops == 2 * 1e6 * want
    assert (bill.recorded_steps, bill.stand_in_steps, bill.source) == (0, 2, STAND_IN)
    assert "student's tokenizer" in bill.source
    # the old bill counted the student's own prompt (a one-line system message) instead
    old = sum(
        len(student.prompt(s["observation"], s["history"])) + len(student.answer(s["action"]))
        for s in steps
    )
    assert old < 0.5 * want
    # a row with usage beside rows without: each billed its own way, both named
    first = teacher_bill(steps[:1], student, 1.0).tokens
    steps[0]["compute"] = {"prompt_tokens": 40, "completion_tokens": 2}
    mixed = teacher_bill(steps, student, 1e6)
    assert mixed.tokens == 42 + want - first
    assert (mixed.recorded_steps, mixed.stand_in_steps) == (1, 1)
    assert RECORDED in mixed.source and STAND_IN in mixed.source


def test_the_teacher_is_a_ratio_of_the_student_unless_its_size_is_given():
    from training.config import ConfigError, TrainConfig, set_value

    assert TEACHER_RATIO == 8.75  # the study's Llama-3.3-70B over Llama-3.1-8B
    assert teacher_params(134_515_008, None, None) == 8.75 * 134_515_008
    assert teacher_params(100, 2.0, None) == 200.0
    assert teacher_params(100, None, 7e10) == 7e10
    with pytest.raises(ValueError, match="teacher_ratio=2 and teacher_params=7e\\+10 are both"):
        teacher_params(100, 2.0, 7e10)
    cfg = TrainConfig(env="websim/click-test-2-v0", algo="bc")
    assert cfg.settings.teacher_ratio is None and cfg.settings.teacher_params is None
    cfg.validate()
    set_value(cfg, "teacher_ratio", 2)
    set_value(cfg, "teacher_params", 7e10)
    with pytest.raises(ConfigError, match="teacher_ratio=2 and teacher_params=7e\\+10 \\(set one"):
        cfg.validate()
    set_value(cfg, "teacher_params", None)
    set_value(cfg, "teacher_ratio", -1)
    with pytest.raises(ConfigError, match="teacher_ratio=-1.0 \\(a finite multiple > 0\\)"):
        cfg.validate()


def test_a_trace_step_with_a_zero_usage_is_billed_by_the_stand_in():
    student = Student.build(TINY)
    row = {"observation": "Goal: x", "history": [], "action": "noop()"}
    stand_in = teacher_bill([row], student, 1.0).tokens
    # a server that sent no usage: OpenAITeacher records zeros, which is no usage at all
    zero = {**row, "compute": {"prompt_tokens": 0, "completion_tokens": 0}}
    assert teacher_bill([zero], student, 1.0).tokens == stand_in
    assert json.dumps(teacher_bill([zero], student, 1.0).as_dict())  # a run writes it
