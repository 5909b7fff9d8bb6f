"""GRPO with a process reward model's dense step rewards against outcome-only GRPO, at equal
FLOPs (Web-Shepherd's use of a PRM as a training reward, at this machine's scale).

From one BC run (``--init``), two GRPO runs with the same settings and seed: ``outcome``
(the env's reward only) and ``prm`` (``--set prm=RUN``: the PRM's step rewards add a
process advantage, ``policies.lm.objective.process_advantages``; its judging is paid in
``flops_reward``). Every iteration is checkpointed; then the BC student, the PRM arm's
last checkpoint, and the outcome arm's checkpoints at equal FLOPs (the last one that spent no
more than the PRM arm) and at equal iterations play held-out page seeds of the run's tasks
greedily. Prints one JSON object (success with 95% Wilson intervals over episodes, per task,
FLOPs) and writes it to ``--json``. Runs resume: a finished arm is not trained again.

    .venv/bin/python bench/prm_grpo.py --init BC_RUN --prm PRM_RUN --out DIR
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")


def rows(run: Path) -> list[dict]:
    with (run / "metrics.csv").open() as f:
        return list(csv.DictReader(f))


def arm_command(args, name: str, run: Path) -> list[str]:
    arena = str(Path(sys.executable).with_name("arena"))
    if (run / "checkpoints" / "latest").is_file():
        return [arena, "train", "--resume", str(run), "--iterations", str(args.iterations[name])]
    sets = [
        f"init={args.init}", f"group_size={args.group_size}",
        f"groups_per_iteration={args.groups}", f"temperature={args.temperature}",
        f"lr={args.lr}", f"resample_flat={args.resample_flat}", "eval_every=0",
        "checkpoint_every=1", "keep_checkpoints=1000", f"env.max_steps={args.max_steps}",
    ]  # fmt: skip
    if name == "prm":
        sets += [f"prm={args.prm}", f"prm_checklist={args.checklist}"]
    cmd = [arena, "train", args.env, "--algo", "grpo", "--iterations", str(args.iterations[name])]
    cmd += ["--out", str(args.out), "--name", name, "--seed", str(args.seed)]
    return cmd + [x for s in sets for x in ("--set", s)]


def wait(job: subprocess.Popen, name: str, out: Path) -> None:
    if job.wait():
        sys.exit(f"the {name} arm failed (exit {job.returncode}); see {out}/{name}.log")


def evaluate(run: Path, checkpoint: str | None, seeds: list[int]) -> dict:
    import numpy as np
    import torch

    from policies.lm.evaluation import success_rates
    from policies.testing import wilson
    from training.prm import load_student_run

    torch.set_num_threads(1)
    student, tasks = load_student_run(run, checkpoint)
    per_task = success_rates(student, tasks, seeds, "twin", len(seeds))
    wins = round(sum(per_task.values()) * len(seeds))
    total = len(tasks) * len(seeds)
    return {
        "success": wins / total,
        "success_ci95": list(wilson(wins, total)),
        "per_task": per_task,
        "episodes": total,
        "mean_over_tasks": float(np.mean(list(per_task.values()))),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--init", required=True, help="a bc run (its newest checkpoint)")
    p.add_argument("--prm", required=True, help="an arena prm train run")
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--env", default="websim/click-test-2-v0")
    p.add_argument("--prm-iterations", type=int, default=4)
    p.add_argument("--outcome-iterations", type=int, default=16)
    p.add_argument("--group-size", type=int, default=4)
    p.add_argument("--groups", type=int, default=2, help="groups per iteration")
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--resample-flat", type=int, default=1)
    p.add_argument("--max-steps", type=int, default=5)
    p.add_argument("--checklist", default="written", choices=["written", "twin"])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--eval-seeds", type=int, default=16, help="held-out pages per task")
    p.add_argument(
        "--sequential",
        action="store_true",
        help="train one arm at a time (a SmolLM2 arm's update holds 10-13 GB at the defaults)",
    )
    p.add_argument("--json", type=Path, default=Path("bench/results/prm_grpo.json"))
    args = p.parse_args()
    args.iterations = {"outcome": args.outcome_iterations, "prm": args.prm_iterations}
    runs = {name: args.out / args.env / "grpo" / name for name in args.iterations}
    jobs = {}
    for name, run in runs.items():
        done = run.is_dir() and len(rows(run)) >= args.iterations[name]
        if not done:
            log = (args.out / f"{name}.log").open("a")
            jobs[name] = subprocess.Popen(arm_command(args, name, run), stdout=log, stderr=log)
            if args.sequential:
                wait(jobs.pop(name), name, args.out)
    for name, job in jobs.items():
        wait(job, name, args.out)

    from policies.lm.evaluation import EVAL_SEED0

    seeds = list(range(EVAL_SEED0, EVAL_SEED0 + args.eval_seeds))
    prm_rows, outcome_rows = rows(runs["prm"]), rows(runs["outcome"])
    budget = float(prm_rows[-1]["flops_total"])
    within = [r for r in outcome_rows if float(r["flops_total"]) <= budget] or outcome_rows[:1]
    points = {
        "bc (init)": (Path(args.init), None, None),
        "grpo + prm": (runs["prm"], f"iter_{len(prm_rows):06d}", prm_rows[-1]),
        "grpo, outcome only, equal FLOPs": (
            runs["outcome"], f"iter_{int(within[-1]['iteration']):06d}", within[-1],
        ),
        "grpo, outcome only, equal iterations": (
            runs["outcome"], f"iter_{len(prm_rows):06d}", outcome_rows[len(prm_rows) - 1],
        ),
    }  # fmt: skip
    out = {"settings": {k: str(v) for k, v in vars(args).items()}, "rows": []}
    for label, (run, checkpoint, row) in points.items():
        result = evaluate(run, checkpoint, seeds)
        if row is not None:
            result.update(
                iterations=int(row["iteration"]),
                **{k: float(row[k]) for k in ("flops_total", "flops_sampling", "flops_train")},
                flops_reward=float(row.get("flops_reward") or 0.0),
                train_success_last=float(row["success_rate"]),
            )
        out["rows"].append({"arm": label, "checkpoint": checkpoint, **result})
        print(json.dumps(out["rows"][-1]), flush=True)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
