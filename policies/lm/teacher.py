"""What the teacher's traces cost: the one bill that BC (``policies.bc``), the
compute-allocation sweep (``tune.sweeps.compute_allocation``) and the direct study
(``bench/lm_study_direct.py``) all charge, so no two of them price the teacher differently.

The teacher's size is a multiple of the student's, :data:`TEACHER_RATIO` unless a run says
otherwise (Vattikonda et al., "How to Train Your LLM Web Agent", NeurIPS 2025, arXiv
2507.04103: a Llama-3.3-70B teacher and a Llama-3.1-8B student, 70/8), so BC's and GRPO's
FLOPs compare as they did there whatever the student.

Its tokens, per trace step: what the teacher's server reported (``prompt_tokens`` and
``completion_tokens`` in the row's ``compute``, as ``envs.web.teachers.OpenAITeacher``
records them) when the row has them; otherwise, for the scripted teacher, which reads no
tokens, a stand-in: the prompt a language-model teacher would be sent for that step
(``envs.web.teachers.chat_messages``: its system prompt, every earlier action, the whole
page) and its answer, counted with the student's tokenizer (declared as the bill's
``source``). Each token costs a forward pass, 2 FLOPs per teacher parameter (Kaplan et al.
2020, the count the study uses).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

TEACHER_RATIO = 70 / 8
"""The teacher's parameters per student parameter unless a run sets its own: the study's
Llama-3.3-70B teacher over its Llama-3.1-8B student."""

RECORDED = "recorded usage"
STAND_IN = "stand-in: the teacher's prompt and answer in the student's tokenizer"


def teacher_params(student_params: float, ratio: float | None, params: float | None) -> float:
    """The teacher's size: ``params`` where given, else ``ratio`` (default
    :data:`TEACHER_RATIO`) times the student's. Giving both is an error: they would disagree."""
    if ratio is not None and params is not None:
        raise ValueError(
            f"teacher_ratio={ratio:g} and teacher_params={params:g} are both set; set one: "
            "teacher_ratio (the teacher's size as a multiple of the student's) or "
            "teacher_params (an absolute size)"
        )
    if params is not None:
        return float(params)
    return (TEACHER_RATIO if ratio is None else ratio) * float(student_params)


def recorded_tokens(row: dict) -> int | None:
    """The prompt and completion tokens the teacher's server reported for a trace step, or
    None where it reported none (the scripted teacher; a server that sends no usage)."""
    compute = row.get("compute") or {}
    try:
        tokens = int(compute.get("prompt_tokens") or 0) + int(compute.get("completion_tokens") or 0)
    except (TypeError, ValueError):
        return None
    return tokens if tokens > 0 else None


def stand_in_tokens(row: dict, student) -> int:
    """Tokens of the prompt a language-model teacher is sent for this step and of its answer
    (end marker included), in ``student``'s tokenizer. ``row`` carries its episode's earlier
    actions as ``history`` (``policies.lm.turns.read_traces``)."""
    from envs.web.teachers import chat_messages

    prompt = student.tok.chat(chat_messages(row["observation"], row["history"]))
    return len(prompt) + len(student.answer(row["action"]))


@dataclass(frozen=True)
class TeacherBill:
    """The teacher's bill for a set of traces, and what it rests on."""

    flops: float
    """2 x ``teacher_params`` x ``tokens``."""
    tokens: int
    """Teacher tokens over every trace step, failed episodes included."""
    teacher_params: float
    recorded_steps: int
    """Steps whose tokens the teacher's server reported."""
    stand_in_steps: int
    """Steps counted with the stand-in."""
    source: str
    """Where the tokens came from: :data:`RECORDED`, :data:`STAND_IN` or both, with counts."""

    def as_dict(self) -> dict:
        return asdict(self)


def teacher_bill(steps: list[dict], student, params: float) -> TeacherBill:
    """The bill for every one of ``steps`` (trace rows with their ``history``) at a teacher
    of ``params`` parameters (:func:`teacher_params`)."""
    if not (params >= 0 and math.isfinite(params)):
        raise ValueError(f"teacher_params={params} (a finite size >= 0)")
    tokens = recorded = stand_in = 0
    for row in steps:
        n = recorded_tokens(row)
        if n is None:
            n, stand_in = stand_in_tokens(row, student), stand_in + 1
        else:
            recorded += 1
        tokens += n
    if recorded and stand_in:
        source = f"{RECORDED} ({recorded} steps); {STAND_IN} ({stand_in} steps)"
    else:
        source = RECORDED if recorded else STAND_IN
    from policies.lm.student import forward_flops  # torch: only where a bill is drawn up

    flops = forward_flops(params, tokens)
    return TeacherBill(flops, tokens, float(params), recorded, stand_in, source)
