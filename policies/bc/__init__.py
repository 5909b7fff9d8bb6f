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

from policies.algorithm import AlgorithmInfo, Capabilities
from policies.lm.algorithm import LM_METRICS, LMSettings, build_lm, module_spec, training_tasks
from policies.lm.turns import scripted_traces


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


def build(env_id: str, settings: BCSettings, **options):
    settings.validate()
    traces = settings.traces
    if not traces:
        traces = str(scripted_traces(
            training_tasks(env_id, settings), settings.trace_episodes, settings.teacher_error_rate
        ))  # fmt: skip
    learner = {
        "mode": "bc",
        "traces": traces,
        "successes_only": settings.successes_only,
        "teacher_params": settings.teacher_params,
        "batch_size": settings.batch_size,
        "temperature": 1.0,
    }
    return build_lm(env_id, settings, learner, **options)


def modules(env_id: str, settings: BCSettings, **options):
    training_tasks(env_id, settings)
    return module_spec(settings, 0, 1.0)


ALGORITHM = AlgorithmInfo(
    name="bc",
    description="behaviour cloning of a language-model student on teacher traces (web)",
    settings=BCSettings,
    capabilities=Capabilities(
        action_kinds=frozenset({"text"}), obs_kinds=frozenset({"text"}), recurrent=False
    ),
    build=build,
    modules=modules,
    metrics=LM_METRICS,
    default_iterations=100,
)
