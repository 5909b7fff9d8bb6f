"""Behaviour cloning of a language-model student on teacher traces (the SFT stage of
Vattikonda et al., "How to Train Your LLM Web Agent", NeurIPS 2025): cross-entropy on the
answer tokens only, teacher inference charged in FLOPs, held-out success logged as the
learning curve whose area selects checkpoints.

``arena train websim/click-test-2-v0 --algo bc --traces DIR`` (``arena web traces`` writes
DIR); without ``--traces`` the run has the scripted teacher write ``trace_episodes`` episodes
per task into a cache folder first (resumable, reused by later runs).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from envs.files import write_atomic
from policies.algorithm import AlgorithmInfo, AlgorithmMismatch
from policies.lm.algorithm import (
    LM_LOSSES,
    LM_METRICS,
    TEXT_AGENT,
    LMAlgorithm,
    LMSettings,
    configure_lm,
    declare_lm,
    training_tasks,
)
from policies.lm.evaluation import evaluate_text_agent
from policies.lm.teacher import TeacherBill, teacher_bill, teacher_params
from policies.lm.turns import read_traces, scripted_traces, stream_indices, teacher_share


@dataclass
class BCSettings(LMSettings):
    """Behaviour cloning's settings (``--set key=value``)."""

    traces: str = ""
    """``traces.jsonl`` or its folder; empty: the scripted teacher writes them (cached)."""
    trace_episodes: int = 200
    """Episodes per task the scripted teacher writes when ``traces`` is empty."""
    teacher_error_rate: float = 0.1
    """Chance of a random click in those traces (failed traces, as the study's teacher had)."""
    teacher_ratio: float | None = None
    """The teacher's parameters as a multiple of the student's; unset: 70/8 = 8.75, the
    study's Llama-3.3-70B teacher over its Llama-3.1-8B student (``policies.lm.teacher``)."""
    teacher_params: float | None = None
    """The teacher's parameters outright, instead of ``teacher_ratio`` (set one of them)."""
    successes_only: bool = True
    """Clone only successful episodes (all traces are still charged)."""
    batch_size: int = 16
    """Trace turns per gradient step (one step per iteration)."""

    def problems(self) -> list[str]:
        bad = super().problems()
        if self.trace_episodes < 1 or self.batch_size < 1:
            bad.append(f"trace_episodes={self.trace_episodes}, batch_size={self.batch_size}")
        if not 0 <= self.teacher_error_rate <= 1:
            bad.append(f"teacher_error_rate={self.teacher_error_rate} (in [0, 1])")
        ratio, params = self.teacher_ratio, self.teacher_params
        if ratio is not None and params is not None:
            bad.append(
                f"teacher_ratio={ratio:g} and teacher_params={params:g} (set one: the ratio to "
                "the student's parameters, or the teacher's parameters outright)"
            )
        if ratio is not None and not (ratio > 0 and math.isfinite(ratio)):
            bad.append(f"teacher_ratio={ratio} (a finite multiple > 0)")
        if params is not None and not (params >= 0 and math.isfinite(params)):
            bad.append(f"teacher_params={params} (a finite size >= 0)")
        return bad


class BCAlgorithm(LMAlgorithm):
    """Behaviour cloning: each iteration the next ``batch_size`` turns of the run's stream
    over the traces (``policies.lm.turns.stream_indices``), the teacher charged for the share
    of the traces drawn so far."""

    MODE = "bc"

    def setup(self, config) -> None:
        super().setup(config)
        s = self.config.learner_config_dict
        student = self._student()
        steps, total = read_traces(Path(s["traces"]), s["successes_only"])
        if not steps:
            raise AlgorithmMismatch(f"{s['traces']}: no successful trace steps to clone")
        self.trace_turns = [
            {"prompt": student.prompt(r["observation"], r["history"]),
             "answer": student.answer(r["action"])}
            for r in steps
        ]  # fmt: skip
        # The teacher read every prompt and wrote every answer of every trace, failed ones
        # included: billed for its own tokens at its size, paid as BC uses the traces (``turns``).
        all_steps, _ = read_traces(Path(s["traces"]), successes_only=False)
        size = teacher_params(student.params, s["teacher_ratio"], s["teacher_params"])
        self.teacher_bill = teacher_bill(all_steps, student, size)
        self.teacher_flops = self.teacher_bill.flops
        self.trace_steps = total

    def turns(self, s: dict) -> tuple[list[dict], int, dict]:
        n, seed = s["batch_size"], int(self.config.seed or 0)
        index = stream_indices(len(self.trace_turns), seed, self._drawn, n)
        picked = [self.trace_turns[i] for i in index]
        self._drawn += len(picked)
        self.counters["flops_teacher"] = self.teacher_flops * teacher_share(
            self._drawn, len(self.trace_turns)
        )
        return picked, n, {"answer_tokens": float(np.mean([len(t["answer"]) for t in picked]))}


def declare_bill(algo, settings: BCSettings) -> str:
    """Writes the teacher's bill and what it rests on to ``RUN/teacher_bill.json`` (``arena
    report`` reads it) and returns the line a new run prints."""
    bill: TeacherBill = algo.teacher_bill
    ratio = settings.teacher_ratio
    # the ratio in effect: the one set, the default, or what teacher_params comes to
    doc = {
        **bill.as_dict(),
        "student_params": int(algo.params),
        "teacher_ratio": bill.teacher_params / algo.params if ratio is None else ratio,
        "teacher_ratio_set": ratio is not None,
        "teacher_params_set": settings.teacher_params is not None,
    }
    run_dir = getattr(algo, "arena_run_dir", None)
    if run_dir is not None:  # atomically: a crash leaves the old file or the new one
        write_atomic(Path(run_dir) / "teacher_bill.json", json.dumps(doc, indent=1))
    how = (
        f"teacher_params={bill.teacher_params:.4g}"
        if settings.teacher_params is not None
        else f"{doc['teacher_ratio']:g} x the student's {algo.params:,} parameters"
    )
    return (
        f"teacher: {bill.flops:.3g} FLOPs for {bill.tokens:,} tokens over every trace step "
        f"({how}); tokens from {bill.source}"
    )


def declare(env_id: str, settings: BCSettings, opts):
    return declare_lm(env_id, settings, opts, 1.0)


def configure(env_id: str, settings: BCSettings, modules, opts):
    traces = settings.traces
    if not traces:
        traces = str(scripted_traces(
            training_tasks(env_id, settings), settings.trace_episodes, settings.teacher_error_rate
        ))  # fmt: skip
    return configure_lm(BCAlgorithm, env_id, settings, modules, opts, traces=traces)


ALGORITHM = AlgorithmInfo(
    name="bc",
    description="behaviour cloning of a language-model student on teacher traces (web)",
    settings=BCSettings,
    capabilities=TEXT_AGENT,
    declare=declare,
    configure=configure,
    metrics=LM_METRICS,
    losses=LM_LOSSES,
    default_iterations=100,
    warm_start=declare_bill,
    evaluate=evaluate_text_agent,
    example_env="websim/click-test-2-v0",
)
