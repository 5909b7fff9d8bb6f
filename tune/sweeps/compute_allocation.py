"""``compute_allocation``: how to split a FLOP budget between behaviour cloning on teacher
traces and GRPO, the question of Vattikonda et al., "How to Train Your LLM Web Agent: A
Statistical Diagnosis" (NeurIPS 2025), at this machine's scale.

    arena sweep compute_allocation [--samples N]

Stage ``bc``: one BC run per seed, ``bc_steps`` steps on traces it pays the teacher for as it
uses them (``policies.bc``), a checkpoint every step. Its FLOPs at the end are the seed's budget
B; it is the pure-BC arm (teacher fraction 1).

Stage ``grpo``: for every teacher fraction f < 1 and seed, GRPO from the BC checkpoint whose
FLOPs are nearest f * B (f = 0: from the untrained student), run until its FLOPs (the branch's
included) reach B. At each fraction, ``samples`` GRPO configurations are drawn at random over
the knobs the study varied, and each runs from every seed's branch, so a configuration is
scored like the study's: the mean of its best 2 trials.

The teacher is charged at ``teacher_ratio`` times the student's parameters (70/8: the study's
Llama 3.3 70B teaching Llama 3.1 8B), so that BC's and GRPO's FLOPs compare as they did there,
for its own tokens (``policies.lm.teacher``: the BC runs' bill, the only one).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from policies.lm.teacher import TEACHER_RATIO
from tune.sweeps import MAX_TRIALS, Stage

FRACTIONS = [0.0, 1 / 6, 1 / 3, 1 / 2, 2 / 3, 5 / 6, 1.0]

GRPO_SPACE: dict[str, list] = {
    "temperature": [0.5, 1.0],
    "lr": [3e-4, 1e-3, 3e-3],
    "group_size": [4, 8],
    "std_normalise": [False, True],
    "filter_zero_std": [True, False],
    "clip": [True, False],
    "discount": [0.5, 0.9, 1.0],
    "curriculum": [False, True],
}
"""The GRPO knobs the study varied (temperature, learning rate, group size, std-normalised
advantage, zero-advantage filtering, clipping, discount, curriculum), with values for the tiny
student."""


@dataclass
class ComputeAllocationSweep:
    """A FLOP budget split between BC and GRPO at teacher fractions ``fractions``."""

    env: str = "websim/click-test-2-v0"
    """The first twin task (``websim/<task>-v0``)."""
    tasks: list[str] = field(default_factory=lambda: ["focus-text", "click-dialog"])
    """The suite's other twin tasks."""
    bc_steps: int = 40
    """Steps of the pure-BC run; its FLOPs are the budget."""
    fractions: list[float] = field(default_factory=lambda: list(FRACTIONS))
    """Teacher fractions: the share of the budget spent on BC before GRPO takes over."""
    seeds: int = 3
    """BC runs; every GRPO configuration runs from each one's branch point."""
    samples: int = 2
    """GRPO configurations drawn per fraction (``--samples``)."""
    teacher_ratio: float = TEACHER_RATIO
    """The teacher is charged at this many times the student's parameters (BC's
    ``teacher_ratio``; 70/8, the study's 70B teacher over its 8B student)."""
    grpo_max_iterations: int = 60
    """A GRPO trial also ends after this many iterations (one from the untrained student may
    not reach the budget: its FLOPs are then reported as they are)."""
    bc: dict[str, Any] = field(
        default_factory=lambda: {"lr": 3e-3, "batch_size": 32, "teacher_error_rate": 0.1}
    )
    """BC settings (``arena train --algo bc --set``)."""
    grpo: dict[str, Any] = field(
        default_factory=lambda: {"groups_per_iteration": 4, "epochs": 4, "minibatch_size": 16}
    )
    """GRPO settings every trial has."""
    model: dict[str, Any] = field(default_factory=lambda: {"kind": "tiny"})
    """The student (``model.KEY``)."""
    eval_seeds: int = 8
    """Held-out page seeds per task, evaluated greedily after every iteration."""
    space: dict[str, list] = field(default_factory=lambda: dict(GRPO_SPACE))
    """GRPO knob -> values drawn from."""
    seed: int = 0
    """Seed of the draws."""

    stage_names = ("bc", "grpo")
    metric = "eval_success"

    def common(self, seed: int) -> dict[str, Any]:
        return {
            "env": self.env,
            "tasks": list(self.tasks),
            "seed": seed,
            "eval_every": 1,
            "eval_seeds": self.eval_seeds,
            **{f"model.{k}": v for k, v in self.model.items()},
        }

    def trace_episodes(self) -> int:
        """Teacher episodes per task: enough that BC never goes round its traces again, so
        every step pays the teacher."""
        batch = int(self.bc.get("batch_size", 32))
        return math.ceil(1.25 * self.bc_steps * batch / (1 + len(self.tasks)))

    def write_traces(self, sweep_dir: Path) -> Path:
        """The scripted teacher's traces of every task, written once by the driver into the
        sweep directory (where every node reads them; resumable), before the BC trials."""
        from envs.web.traces import TeacherSpec, write_traces

        task = self.env.split("/", 1)[1].rsplit("-v", 1)[0]
        env_ids = [f"websim/{t}-v0" for t in dict.fromkeys([task, *self.tasks])]
        rate = float(self.bc.get("teacher_error_rate", 0.1))
        out = sweep_dir / "traces"
        write_traces(env_ids, self.trace_episodes(), out, TeacherSpec("scripted", rate))
        return out

    def bc_config(self, seed: int, traces: str = "") -> dict[str, Any]:
        return {
            **self.common(seed),
            "algo": "bc",
            "iterations": self.bc_steps,
            "checkpoint_every": 1,
            "keep_checkpoints": self.bc_steps,
            "trace_episodes": self.trace_episodes(),
            "teacher_ratio": self.teacher_ratio,
            **self.bc,
            **({"traces": traces} if traces else {}),
        }

    def grpo_configs(self) -> list[dict[str, Any]]:
        rng = random.Random(self.seed)
        levels = [f for f in self.fractions if f < 1]
        return [
            {k: rng.choice(self.space[k]) for k in sorted(self.space)}
            for _ in range(len(levels) * self.samples)
        ]

    def validate(self) -> None:
        from training.config import ConfigError
        from tune.trainable import trial_config

        if self.bc_steps < 2 or self.seeds < 1 or self.samples < 1:
            raise ConfigError(
                f"bc_steps={self.bc_steps} (>= 2), seeds={self.seeds}, samples={self.samples}"
                " (>= 1)"
            )
        if any(not 0 <= f <= 1 for f in self.fractions) or not any(f < 1 for f in self.fractions):
            raise ConfigError(
                f"fractions must lie in [0, 1], one at least below 1 (GRPO's share), got "
                f"{self.fractions}"
            )
        if any(not isinstance(v, list) or not v for v in self.space.values()):
            raise ConfigError(f"space must map knobs to non-empty lists, got {self.space}")
        if not (self.teacher_ratio > 0 and math.isfinite(self.teacher_ratio)):
            raise ConfigError(f"teacher_ratio={self.teacher_ratio} (a finite multiple > 0)")
        priced = sorted({"teacher_ratio", "teacher_params"} & set(self.bc))
        if priced:  # one price for the whole sweep, declared once
            raise ConfigError(
                f"bc sets {', '.join(priced)}; the sweep prices the teacher with its own "
                "teacher_ratio (--set teacher_ratio=R)"
            )
        trials = self.seeds * self.samples * sum(f < 1 for f in self.fractions)
        if trials > MAX_TRIALS:
            raise ConfigError(
                f"seeds x samples x fractions below 1 = {trials} GRPO trials (at most {MAX_TRIALS})"
            )
        trial_config(self.bc_config(0))
        grpo = {**self.common(0), "algo": "grpo", **self.grpo}
        for key, values in self.space.items():  # every value a trial could draw
            for value in values:
                trial_config({**grpo, key: value})

    def stage(self, name: str, trials, rows, sweep_dir: Path) -> Stage:
        if name == "bc":
            traces = str(self.write_traces(sweep_dir))
            runs = [
                {"run": self.bc_config(s, traces), "study": {"arm": "bc", "seed": s,
                 "fraction": 1.0}, "stop": {}}
                for s in range(self.seeds)
            ]  # fmt: skip
            return Stage(name, runs, metric=self.metric)
        return Stage(name, self.grpo_trials(trials, rows), metric=self.metric)

    def grpo_trials(self, trials, rows) -> list[dict[str, Any]]:
        """GRPO from each BC run's branch points (the BC stage's results)."""
        bc = trials[(trials["stage"] == "bc") & (trials["status"] == "finished")]
        levels = [f for f in self.fractions if f < 1]
        configs = self.grpo_configs()
        out = []
        for _, t in bc.sort_values("seed").iterrows():
            curve = rows[(rows["stage"] == "bc") & (rows["trial"] == t["trial"])]
            curve = curve.sort_values("iteration")
            budget = float(curve["flops_total"].iloc[-1])
            before_end = curve.iloc[:-1]  # a branch at the last step would be pure BC
            for li, f in enumerate(levels):
                init, branch = "", 0.0
                if f > 0 and len(before_end):
                    at = (before_end["flops_total"] - f * budget).abs().idxmin()
                    it, branch = (
                        int(curve.loc[at, "iteration"]),
                        float(curve.loc[at, "flops_total"]),
                    )
                    init = f"{t['run_dir']}/checkpoints/iter_{it:06d}"
                for c in range(self.samples):
                    knobs = configs[li * self.samples + c]
                    run = {**self.common(int(t["seed"])), "algo": "grpo",
                           "iterations": self.grpo_max_iterations, "checkpoint_every": 5,
                           "keep_checkpoints": 2, "init": init, **self.grpo, **knobs}  # fmt: skip
                    study = {"arm": "grpo", "seed": int(t["seed"]), "fraction": f,
                             "config": f"f{li}c{c}", "branch_flops": branch, "budget": budget,
                             **knobs}  # fmt: skip
                    out.append({"run": run, "study": study, "stop": {"flops_total": budget}})
        return out

    def describe(self, trials) -> str:
        """What the sweep trained and how B and the teacher are priced, for the report's
        "What ran" (the student's size and the teacher's tokens from the BC runs'
        ``teacher_bill.json``)."""
        import json

        task = self.env.split("/", 1)[1].rsplit("-v", 1)[0]
        bills = []
        for t in trials[trials["stage"] == "bc"].itertuples() if len(trials) else []:
            try:
                bills.append(json.loads((Path(t.run_dir) / "teacher_bill.json").read_text()))
            except (OSError, ValueError):
                pass
        model = ", ".join(f"{k}={v}" for k, v in self.model.items()) or "kind=smollm2"
        if bills:
            params = sorted({b["student_params"] for b in bills})
            student = f"`model` {model} ({', '.join(f'{p:,}' for p in params)} parameters)"
            ratios = ", ".join(f"{r:g}" for r in sorted({b["teacher_ratio"] for b in bills}))
            sizes = ", ".join(f"{p:.4g}" for p in sorted({b["teacher_params"] for b in bills}))
            teacher = (
                f"{ratios} x the student's parameters ({sizes}),"
                f" 2 FLOPs per teacher parameter per teacher token, every trace step (failed "
                f"episodes too) paid for as BC first draws it; tokens from: "
                f"{'; '.join(sorted({b['source'] for b in bills}))} "
                f"({len(bills)} of the BC runs' `teacher_bill.json`)"
            )
        else:
            student = f"`model` {model}"
            teacher = (
                f"`teacher_ratio` = {self.teacher_ratio:g} x the student's parameters. No BC run "
                "has a `teacher_bill.json`: they ran before the teacher was billed for its own "
                "tokens (the old accounting counted the student's prompt and answer tokens)"
            )
        grpo = ", ".join(f"{k} {v}" for k, v in self.grpo.items())
        bc = ", ".join(f"{k} {v}" for k, v in self.bc.items())
        fractions = ", ".join(f"{f:.3g}" for f in self.fractions)
        return "\n".join([
            "**What was trained**: behaviour cloning (`bc`) on teacher traces, then GRPO "
            "(`grpo`) from BC's checkpoints, splitting a FLOP budget B between them (Vattikonda"
            " et al., \"How to Train Your LLM Web Agent\", NeurIPS 2025).",
            "",
            f"- **Tasks**: {', '.join(dict.fromkeys([task, *self.tasks]))} (web twin, "
            f"`websim/<task>-v0`); success is greedy on {self.eval_seeds} held-out page seeds "
            "per task, evaluated after every iteration.",
            f"- **Student**: {student}.",
            f"- **Budget B**, per seed: the FLOPs of its pure-BC run after `bc_steps` = "
            f"{self.bc_steps} steps ({bc}): the teacher's bill for the traces drawn, plus "
            "training at 6 FLOPs per student parameter per token.",
            f"- **Teacher**: {teacher}.",
            f"- **Seeds**: {self.seeds} BC run{'s' * (self.seeds != 1)}; every GRPO "
            "configuration runs from each seed's "
            f"branch. **Fractions** of B on BC before GRPO: {fractions}.",
            f"- **GRPO**: {self.samples} configuration(s) per fraction drawn (seed {self.seed}) "
            f"over {', '.join(self.space)}; fixed: {grpo}; a trial ends at B or after "
            f"`grpo_max_iterations` = {self.grpo_max_iterations}.",
        ])  # fmt: skip

    def report(self, trials, rows, figures) -> list:
        from tune import analysis

        return analysis.allocation_sections(
            trials, rows, list(self.space), figures, list(self.fractions)
        )
