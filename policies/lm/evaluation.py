"""How well a trained student does: success on held-out page seeds of its training tasks and
on the tasks it never trained on, on the twin and on the real MiniWoB++ pages, and the
sim-to-real gap (twin minus real success on the same tasks and seeds)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from policies.lm.play import TRAIN_SEEDS, env_id_for, play
from policies.lm.student import Student, StudentSettings

EVAL_SEED0 = TRAIN_SEEDS + 100_000
"""Final evaluations use page seeds from here: unseen in training and in its model-selection
evaluations (which use ``TRAIN_SEEDS`` onward)."""


def load_student(spec, weights: Path) -> Student:
    """The student of a run's module spec with the plain weights file ``weights`` (a state
    dict of tensors: nothing is unpickled). A LoRA student's file holds its adapter: the base
    is built here, after checking it is the one the adapter was trained on."""
    from policies.lm.algorithm import check_saved_base

    cfg = spec.model_config
    settings = StudentSettings(**cfg["student"])
    check_saved_base(Path(weights).parent, settings, str(weights))
    student = Student.build(settings, seed=int(cfg.get("seed", 0)))
    state = torch.load(weights, weights_only=True, map_location="cpu")
    prefix = "lm."
    student.load_checkpoint_state(
        {k.removeprefix(prefix): v for k, v in state.items()}, str(weights)
    )
    student.model.eval()
    return student


def success_rates(
    student: Student, tasks: list[str], seeds: list[int], backend: str, batch: int
) -> dict[str, float]:
    """Greedy success per task, ``batch`` envs of a task played at once."""
    import envs

    out = {}
    for task in tasks:
        pool = [envs.make(env_id_for(task, backend)) for _ in range(min(batch, len(seeds)))]
        wins = []
        try:
            for i in range(0, len(seeds), len(pool)):
                chunk = seeds[i : i + len(pool)]
                jobs = [(env, task, s, 0) for env, s in zip(pool, chunk, strict=False)]
                wins += [e.success for e in play(student, jobs, 0.0)]
        finally:
            for env in pool:
                env.close()
        out[task] = float(np.mean(wins))
    return out


def held_out_report(
    student: Student,
    train_tasks: list[str],
    episodes: int,
    real_episodes: int,
    held_out: list[str] | None = None,
) -> dict:
    """Twin (``episodes`` seeds per task) and real (``real_episodes``; 0 skips the browser)
    success on training tasks' held-out seeds and on held-out tasks."""
    from envs.web import TWIN_TASKS

    held_out = held_out if held_out is not None else [t for t in TWIN_TASKS if t not in train_tasks]
    report: dict = {"train_tasks": train_tasks, "held_out_tasks": held_out}
    for backend, n, batch in (("twin", episodes, 32), ("real", real_episodes, 2)):
        if n <= 0:
            continue
        seeds = list(range(EVAL_SEED0, EVAL_SEED0 + n))
        name = "twin" if backend == "twin" else "browser"
        train = success_rates(student, train_tasks, seeds, name, batch)
        other = success_rates(student, held_out, seeds, name, batch) if held_out else {}
        report[backend] = {
            "episodes_per_task": n,
            "train_tasks": train,
            "held_out_tasks": other,
            "train_mean": float(np.mean(list(train.values()))),
            "held_out_mean": float(np.mean(list(other.values()))) if other else None,
        }
    if "twin" in report and "real" in report:
        # the same tasks and the first real_episodes seeds on both sides
        n = real_episodes
        seeds = list(range(EVAL_SEED0, EVAL_SEED0 + n))
        twin_same = success_rates(student, train_tasks, seeds, "twin", 32)
        report["sim_to_real_gap"] = float(
            np.mean(list(twin_same.values())) - report["real"]["train_mean"]
        )
    return report


def evaluate_text_agent(
    modules, weights_dir: Path, env_id: str, settings, episodes: int, real_episodes: int
) -> dict:
    """``arena eval`` of a bc/grpo run (``policies.algorithm.AlgorithmInfo.evaluate``): the
    student of ``modules`` with the weights in ``weights_dir``, scored by
    :func:`held_out_report` on its training tasks."""
    from policies.inference import weights_file
    from policies.lm.algorithm import training_tasks
    from policies.lm.module import MODULE_ID

    student = load_student(
        modules.rl_module_specs[MODULE_ID], weights_dir / weights_file(MODULE_ID)
    )
    report = held_out_report(student, training_tasks(env_id, settings), episodes, real_episodes)
    twin = report["twin"]
    return {
        "student_params": student.params,
        "success_mean": twin["train_mean"],
        "return_mean": twin["train_mean"],
        "return_std": 0.0,
        "win_rate": None,
        "per_group_return_mean": {},
        **report,
    }
