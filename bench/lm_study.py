"""BC+GRPO against BC alone at equal FLOPs, on a suite of twin web tasks (the web-agent
study's question at this machine's scale).

Per seed: behaviour cloning on scripted-teacher traces of every task, stopped early (the
branch point; the study finds branching part-way into SFT best); from that checkpoint
(a) GRPO for ``--grpo-iterations`` and (b) more behaviour cloning until its FLOPs reach
GRPO's total (the teacher is paid for the traces it uses that the branch had not). Both
students then play held-out page seeds of every task greedily (twin; ``--real N`` also N per
task on the real pages). Prints one JSON line per arm and seed, and a summary: success of
each arm with 95% bootstrap intervals (resampling seeds, then tasks) and of the
difference.

    .venv/bin/python bench/lm_study.py [--student tiny|smollm2] [--seeds 0,1,2] [--real 5]

The defaults are the tiny-student run reported in docs/web.md.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import shutil
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")

TASKS = ["click-test-2", "click-button", "click-link", "focus-text", "click-dialog"]


def last_row(run: Path) -> dict:
    with (run / "metrics.csv").open() as f:
        return list(csv.DictReader(f))[-1]


def bootstrap(per_seed: list[list[float]], n: int = 1000, seed: int = 0) -> list[float]:
    """95% interval of the mean success, resampling seeds and then tasks within each."""
    import numpy as np

    rng = np.random.default_rng(seed)
    means = []
    for _ in range(n):
        pick = rng.integers(len(per_seed), size=len(per_seed))
        means.append(
            np.mean([np.mean(rng.choice(per_seed[i], size=len(per_seed[i]))) for i in pick])
        )
    return [float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--student", default="tiny", choices=["tiny", "smollm2"])
    p.add_argument("--tasks", default=",".join(TASKS))
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--trace-episodes", type=int, default=100, help="teacher episodes per task")
    p.add_argument("--bc-iterations", type=int, default=40, help="BC steps to the branch point")
    p.add_argument("--bc-lr", type=float, default=3e-3)
    p.add_argument("--bc-batch", type=int, default=32, help="BC turns per step")
    p.add_argument("--grpo-iterations", type=int, default=10)
    p.add_argument("--grpo-lr", type=float, default=3e-4)
    p.add_argument("--groups", type=int, default=4, help="GRPO groups per iteration")
    p.add_argument("--epochs", type=int, default=2, help="GRPO passes per iteration")
    p.add_argument("--minibatch", type=int, default=32, help="GRPO turns per step")
    p.add_argument("--temperature", type=float, default=0.5)
    p.add_argument("--episodes", type=int, default=32, help="held-out seeds per task (twin)")
    p.add_argument("--real", type=int, default=0, help="held-out seeds per task (real pages)")
    p.add_argument("--out", default="runs/lm_study")
    args = p.parse_args()
    tasks = args.tasks.split(",")
    seeds = [int(s) for s in args.seeds.split(",")]
    out = Path(args.out)

    from policies.lm.evaluation import held_out_report, load_student
    from policies.lm.module import MODULE_ID
    from training import runtime
    from training.checkpoints import latest_checkpoint
    from training.config import TrainConfig, set_value
    from training.evaluation import module_specs
    from training.run import Run, default_callbacks

    runtime.connect(num_cpus=2, dashboard=False)
    # the teacher at bc's default teacher_ratio (70/8 of the student, policies.lm.teacher)
    model = {"model.kind": args.student}

    def config(algo: str, seed: int, **settings) -> TrainConfig:
        cfg = TrainConfig(env=f"websim/{tasks[0]}-v0", algo=algo, seed=seed)
        cfg.checkpoint_every = 10_000
        cfg.keep_checkpoints = 1
        for key, value in {"tasks": tasks[1:], "eval_every": 0, **settings}.items():
            set_value(cfg, key, value)
        return cfg

    def run(cfg, name: str, resume: Path | None = None, more: int = 0) -> Path:
        cbs = default_callbacks()
        if resume:
            r = Run.resume(resume, more={"iterations": more}, callbacks=cbs)
        else:
            r = Run.create(cfg, out=str(out), name=name, callbacks=cbs)
        return r.train()

    def score(run_dir: Path) -> dict:
        spec = module_specs(run_dir).rl_module_specs[MODULE_ID]
        ckpt = latest_checkpoint(run_dir)
        student = load_student(spec, ckpt / "weights" / f"{MODULE_ID}.pt")
        return held_out_report(student, tasks, args.episodes, args.real, held_out=[])

    results = {"branch": [], "bc": [], "bc+grpo": []}
    rows = []
    for seed in seeds:
        t0 = time.perf_counter()
        bc_settings = {**model, "lr": args.bc_lr, "batch_size": args.bc_batch}
        bc_settings["trace_episodes"] = args.trace_episodes
        branch = out / f"websim/{tasks[0]}-v0/bc/branch-{seed}"
        if not (branch / "checkpoints" / "latest").exists():
            shutil.rmtree(branch, ignore_errors=True)
            cfg = config("bc", seed, **bc_settings)
            cfg.iterations = args.bc_iterations
            run(cfg, f"branch-{seed}")
        grpo = out / f"websim/{tasks[0]}-v0/grpo/grpo-{seed}"
        if not (grpo / "checkpoints" / "latest").exists():
            shutil.rmtree(grpo, ignore_errors=True)
            cfg = config(
                "grpo", seed, init=str(branch.resolve()), lr=args.grpo_lr,
                temperature=args.temperature, groups_per_iteration=args.groups,
                epochs=args.epochs, minibatch_size=args.minibatch,
            )  # fmt: skip
            cfg.iterations = args.grpo_iterations
            run(cfg, f"grpo-{seed}")
        # BC alone: the same branch, trained on until it has spent GRPO's FLOPs
        target = float(last_row(grpo)["flops_total"])
        bc = out / f"websim/{tasks[0]}-v0/bc/bc-{seed}"
        if not (bc / "done").exists():
            shutil.rmtree(bc, ignore_errors=True)
            shutil.copytree(branch, bc)
            with (branch / "metrics.csv").open() as f:
                before, last = list(csv.DictReader(f))[-2:]
            # a step's cost, the teacher's share for traces not used before included
            per_step = float(last["flops_total"]) - float(before["flops_total"])
            extra = math.floor((target - float(last["flops_total"])) / per_step)
            run(None, "", resume=bc, more=args.bc_iterations + max(extra, 0))
            (bc / "done").write_text("")
        for arm, run_dir in (("branch", branch), ("bc", bc), ("bc+grpo", grpo)):
            rep = score(run_dir)
            twin = rep["twin"]
            row = {
                "arm": arm,
                "seed": seed,
                "student": args.student,
                "flops_total": float(last_row(run_dir)["flops_total"]),
                "iterations": int(last_row(run_dir)["iteration"]),
                "twin_success": twin["train_mean"],
                "twin_per_task": twin["train_tasks"],
                "real_success": rep.get("real", {}).get("train_mean"),
                "real_per_task": rep.get("real", {}).get("train_tasks"),
                "wall_s": round(time.perf_counter() - t0, 1),
            }
            print(json.dumps(row), flush=True)
            rows.append(row)
            results[arm].append(list(twin["train_tasks"].values()))

    import numpy as np

    summary = {"tasks": tasks, "seeds": seeds, "episodes_per_task": args.episodes}
    for arm, per_seed in results.items():
        summary[arm] = {
            "twin_success": float(np.mean([np.mean(s) for s in per_seed])),
            "ci95": bootstrap(per_seed),
        }
    diffs = [
        list(np.subtract(g, b)) for g, b in zip(results["bc+grpo"], results["bc"], strict=True)
    ]
    summary["difference"] = {
        "mean": float(np.mean([np.mean(d) for d in diffs])),
        "ci95": bootstrap(diffs),
    }
    reals = {a: [r["real_success"] for r in rows if r["arm"] == a] for a in results}
    if all(v is not None for vs in reals.values() for v in vs):
        summary["real_success"] = {a: float(np.mean(v)) for a, v in reals.items()}
    print(json.dumps({"summary": summary}), flush=True)


if __name__ == "__main__":
    main()
