"""Behaviour cloning of a language-model student on teacher traces (the SFT stage of
Vattikonda et al., "How to Train Your LLM Web Agent", NeurIPS 2025): cross-entropy on the
answer tokens only, teacher inference charged in FLOPs, held-out success logged as the
learning curve whose area selects checkpoints.

``arena train websim/click-test-2-v0 --algo bc --traces DIR`` (``arena web traces`` writes
DIR); without ``--traces`` the run has the scripted teacher write ``trace_episodes`` episodes
per task into a cache folder first (resumable, reused by later runs).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

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
from policies.lm.student import forward_flops
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
    teacher_params: float = 70e9
    """Parameters the teacher is charged at per token (the study's Llama 3.3 70B)."""
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
        if not (self.teacher_params >= 0 and math.isfinite(self.teacher_params)):
            bad.append(f"teacher_params={self.teacher_params}")
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
        # included: charged at its size, as BC uses the traces (``turns``).
        all_steps, _ = read_traces(Path(s["traces"]), successes_only=False)
        self.teacher_flops = forward_flops(
            s["teacher_params"],
            sum(
                len(student.prompt(r["observation"], r["history"]))
                + len(student.answer(r["action"]))
                for r in all_steps
            ),
        )
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
    evaluate=evaluate_text_agent,
    example_env="websim/click-test-2-v0",
)
