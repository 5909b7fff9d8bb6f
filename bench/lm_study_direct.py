"""The BC+GRPO against BC study of ``bench/lm_study.py`` in one plain process, without Ray: for
a machine with a GPU but no Ray (the accelerator machine lent to this project has none).

It runs the pieces the ``bc`` and ``grpo`` algorithms run (the student, ``policies.lm.play``,
``policies.lm.turns``, ``policies.lm.objective.lm_loss``, Adam with the same gradient-norm
clip, the same FLOP counts) in a loop of its own, on ``--device``. Per seed: behaviour cloning
on the scripted teacher's traces of every task up to the branch point; from there (a) GRPO for
``--grpo-minutes``, (b) more behaviour cloning on traces not yet used, which the teacher has
to be paid for (``bc``), and (c) more behaviour cloning on the traces used before the branch
only, at no further teacher cost (``bc-reuse``); (b) and (c) run until their FLOPs reach
GRPO's. The teacher's bill is the ``bc`` algorithm's (``policies.lm.teacher``: its own tokens
at ``--teacher-ratio`` times the student's size), paid for traces as they are first used
(``policies.lm.turns.teacher_share``), as in the ``bc`` algorithm. Every arm is scored
greedily on held-out page seeds of every task (twin) along the way, so the result is a
success-against-FLOPs curve per arm. Writes ``OUT/<name>-seed<N>.json`` after every stage.

    python bench/lm_study_direct.py --student smollm2 --device cuda --seed 0 --out DIR
    python bench/lm_study_direct.py --summarise DIR [DIR2]   # intervals per arm, a plot
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TASKS = ["click-test-2", "click-button", "click-link", "focus-text", "click-dialog"]


def write_json(path: Path, doc: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=1))
    os.replace(tmp, path)


class Trainer:
    """A student, its optimizer and the FLOPs spent on it so far."""

    def __init__(self, student, lr: float, grad_clip: float, cfg: dict, flops: dict):
        import torch

        self.student, self.cfg, self.flops = student, cfg, dict(flops)
        self.grad_clip = grad_clip
        self.opt = torch.optim.Adam(student.model.parameters(), lr=lr)
        self.device = next(student.model.parameters()).device

    def fork(self) -> Trainer:
        """An independent copy: the student's weights, the optimizer's state, the FLOPs."""
        from policies.lm.student import Student

        model = copy.deepcopy(self.student.model)
        twin = Trainer(
            Student(model, self.student.tok, self.student.settings),
            self.opt.param_groups[0]["lr"], self.grad_clip, self.cfg, self.flops,
        )  # fmt: skip
        twin.opt.load_state_dict(self.opt.state_dict())
        return twin

    def total(self) -> float:
        return sum(self.flops.values())

    def step(self, turns: list[dict], micro: int = 0) -> dict:
        """One gradient step on ``turns`` (``cfg["mode"]``'s loss); returns what it logged.
        ``micro`` > 0 accumulates the gradient over chunks of that many turns, each chunk's
        loss weighted by its share of the batch (tokens for token-mean, else sequences), so
        a large batch fits in memory and the step is the one the whole batch would take."""
        import torch

        from policies.lm.objective import lm_loss
        from policies.lm.student import train_flops
        from policies.lm.turns import turn_batch

        chunks = [turns[i : i + micro] for i in range(0, len(turns), micro)] if micro else [turns]
        by_tokens = self.cfg["loss_agg"] == "token-mean"
        sizes = [sum(len(t["answer"]) for t in c) if by_tokens else len(c) for c in chunks]
        self.student.model.train()
        self.opt.zero_grad(set_to_none=True)
        logs: dict[str, float] = {}
        for chunk, size in zip(chunks, sizes, strict=True):
            arrays = turn_batch(chunk, self.student.tok.pad_id)
            batch = {k: torch.as_tensor(v, device=self.device) for k, v in arrays.items()}
            logp, entropy = self.student.token_logps(
                batch["tokens"], batch["attention"], batch["targets"], self.cfg["temperature"]
            )
            loss, log = lm_loss(logp, entropy, batch, self.cfg)
            weight = size / sum(sizes)
            (loss * weight).backward()
            for k, v in log.items():
                logs[k] = logs.get(k, 0.0) + weight * float(v.detach() if torch.is_tensor(v) else v)
            tokens = int(arrays["attention"].sum())
            self.flops["train"] += train_flops(self.student.params, tokens)
        torch.nn.utils.clip_grad_norm_(self.student.model.parameters(), self.grad_clip)
        self.opt.step()
        return logs


def run_seed(a) -> None:
    import numpy as np
    import torch

    import envs
    from policies.lm.evaluation import EVAL_SEED0, success_rates
    from policies.lm.play import TRAIN_SEEDS, EnvPool, episode_record, play
    from policies.lm.student import Student, StudentSettings, forward_flops, train_flops
    from policies.lm.teacher import teacher_bill, teacher_params
    from policies.lm.turns import (
        grpo_turns,
        read_traces,
        scripted_traces,
        stream_indices,
        teacher_share,
    )

    torch.set_num_threads(1)
    torch.backends.cuda.matmul.allow_tf32 = True  # fp32 weights; TF32 products on a GPU
    dev = torch.device(
        a.device if a.device != "auto" else "cuda" if torch.cuda.is_available() else "cpu"
    )
    tasks = a.tasks.split(",")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{a.name}-seed{a.seed}.json"
    doc = {"settings": vars(a), "device": str(dev), "arms": {}, "timing_s": {}}
    if dev.type == "cuda":
        doc["gpu"] = torch.cuda.get_device_name(dev)
    t0 = time.perf_counter()
    rng = np.random.default_rng(a.seed)
    settings = StudentSettings(kind=a.student)
    student = Student.build(settings, seed=a.seed)
    student.model.to(dev)
    gen = torch.Generator(device=dev).manual_seed(a.seed)
    # GRPO's training pages end after --max-steps actions (scores always allow the task's 10)
    pool = EnvPool(lambda env_id: envs.make(env_id, max_steps=a.max_steps))
    doc["timing_s"]["load"] = round(time.perf_counter() - t0, 1)

    # --- behaviour cloning to the branch point ------------------------------------------
    traces = scripted_traces(tasks, a.trace_episodes, a.teacher_error_rate)
    steps, _ = read_traces(traces, successes_only=True)
    every, _ = read_traces(traces, successes_only=False)
    bc_turns = [
        {"prompt": student.prompt(r["observation"], r["history"]),
         "answer": student.answer(r["action"])}
        for r in steps
    ]  # fmt: skip
    turn_tokens = float(np.mean([len(t["prompt"]) + len(t["answer"]) for t in bc_turns]))
    # the bc algorithm's bill (policies.lm.teacher): every trace, paid as BC first uses it
    size = teacher_params(student.params, a.teacher_ratio, a.teacher_params)
    bill = teacher_bill(every, student, size)
    doc["teacher_bill"] = {**bill.as_dict(), "student_params": student.params}
    print(json.dumps({"seed": a.seed, "teacher_bill": doc["teacher_bill"]}), flush=True)
    teacher_flops = bill.flops
    flops = {"teacher": 0.0, "sampling": 0.0, "train": 0.0}
    common = {"loss_agg": "token-mean", "max_new_tokens": settings.max_new_tokens}
    bc = Trainer(student, a.bc_lr, 1.0, {"mode": "bc", "temperature": 1.0, **common}, flops)
    drawn = 0  # where BC is in its stream of trace turns

    def bc_step(n: int = a.bc_batch) -> dict:
        """One BC step on the next ``n`` turns of the stream (a new pass when it ends),
        paying the teacher for the traces first used."""
        nonlocal drawn
        picked = [bc_turns[i] for i in stream_indices(len(bc_turns), a.seed, drawn, n)]
        drawn += n
        bc.flops["teacher"] = teacher_flops * teacher_share(drawn, len(bc_turns))
        return bc.step(picked, a.micro)

    def step_cost(n: int) -> float:
        """About what ``bc_step(n)`` costs: training, and the teacher for unused traces."""
        more = teacher_share(drawn + n, len(bc_turns)) - teacher_share(drawn, len(bc_turns))
        return reuse_cost(n) + teacher_flops * more

    def reuse_cost(n: int) -> float:
        """About what a BC step of ``n`` turns costs in training alone."""
        return train_flops(student.params, n * turn_tokens)

    def score(arm: str, trainer: Trainer, **extra) -> None:
        seeds = list(range(EVAL_SEED0, EVAL_SEED0 + a.episodes))
        per_task = success_rates(trainer.student, tasks, seeds, "twin", batch=64)
        point = {"flops": trainer.total(), "success": float(np.mean(list(per_task.values())))}
        doc["arms"].setdefault(arm, {"curve": []})
        doc["arms"][arm]["curve"].append({**point, **extra})
        doc["arms"][arm].update(per_task=per_task, **point)
        print(json.dumps({"seed": a.seed, "arm": arm, **point, **extra}), flush=True)
        write_json(path, doc)

    t = time.perf_counter()
    for i in range(a.bc_iterations):
        log = bc_step()
        if (i + 1) % max(1, a.bc_iterations // 4) == 0:
            row = {"seed": a.seed, "bc_step": i + 1, "loss": log["policy_loss"]}
            print(json.dumps(row), flush=True)
    doc["timing_s"]["bc_branch"] = round(time.perf_counter() - t, 1)
    score("branch", bc, step=a.bc_iterations)
    for arm in ("bc", "bc-reuse", "bc+grpo"):  # every arm starts here
        doc["arms"][arm] = copy.deepcopy(doc["arms"]["branch"])
    doc["branch_turns"] = drawn
    reuse, seen = bc.fork(), [bc_turns[i] for i in stream_indices(len(bc_turns), a.seed, 0, drawn)]

    # --- (a) GRPO from the branch ------------------------------------------------------
    g_student = Student(copy.deepcopy(student.model), student.tok, settings)
    g_cfg = {
        "mode": "grpo", "temperature": a.temperature, "eps_low": 0.2, "eps_high": 0.2,
        "clip": True, "std_normalise": False, "filter_zero_std": True,
        "discount": a.discount, "mask_truncated": True, **common,
    }  # fmt: skip
    grpo = Trainer(g_student, a.grpo_lr, 1.0, g_cfg, bc.flops)
    t = time.perf_counter()
    it, next_eval = 0, a.eval_every
    while time.perf_counter() - t < a.grpo_minutes * 60:
        pages = []
        for g in range(a.groups):
            task = tasks[int(rng.integers(len(tasks)))]
            pages += [(task, int(rng.integers(TRAIN_SEEDS)), g)] * a.group_size
        episodes = [
            episode_record(e) for e in play(g_student, pool.jobs(pages), a.temperature, gen)
        ]
        grpo.flops["sampling"] += forward_flops(student.params, sum(e["tokens"] for e in episodes))
        turns, stats = grpo_turns(episodes, g_cfg)
        logs = []
        for _ in range(a.epochs):
            perm = rng.permutation(len(turns))
            size = a.minibatch or max(len(turns), 1)  # no turns: every group was flat
            for j in range(0, len(turns), size):
                logs.append(grpo.step([turns[x] for x in perm[j : j + size]], a.micro))
        it += 1
        row = {"seed": a.seed, "grpo_iteration": it, "flops": grpo.total(), **stats}
        if logs:
            row.update(
                {k: float(np.mean([lg[k] for lg in logs])) for k in ("clip_fraction", "entropy")}
            )
        print(json.dumps(row), flush=True)
        if it >= next_eval:
            next_eval += a.eval_every
            score("bc+grpo", grpo, iteration=it)
    doc["timing_s"]["grpo"] = round(time.perf_counter() - t, 1)
    score("bc+grpo", grpo, iteration=it)

    # --- (b) behaviour cloning on new traces, (c) on the branch's: to GRPO's FLOPs -------
    def reuse_step(n: int) -> dict:
        return reuse.step([seen[int(k)] for k in rng.integers(len(seen), size=n)], a.micro)

    for arm, trainer, cost, take in (
        ("bc", bc, step_cost, bc_step),
        ("bc-reuse", reuse, reuse_cost, reuse_step),
    ):
        t = time.perf_counter()
        marks = [p["flops"] for p in doc["arms"]["bc+grpo"]["curve"][1:]]
        step = turns = 0
        while True:
            room = grpo.total() - trainer.total()
            n = a.bc_batch
            while n and cost(n) > room:  # the last step takes only the turns it can afford
                n //= 2
            if not n:
                break
            take(n)
            step, turns = step + 1, turns + n
            if marks and trainer.total() >= marks[0]:
                marks.pop(0)
                score(arm, trainer, step=step, turns=turns)
        doc["timing_s"][f"{arm}_matched"] = round(time.perf_counter() - t, 1)
        if turns:  # else it stays the branch, scored already
            score(arm, trainer, step=step, turns=turns)
        doc["arms"][arm]["turns"] = turns
    if a.real:  # the final students on the real MiniWoB++ pages of the same tasks
        t = time.perf_counter()
        seeds = list(range(EVAL_SEED0, EVAL_SEED0 + a.real))
        for arm, trainer in (("bc", bc), ("bc-reuse", reuse), ("bc+grpo", grpo)):
            real = success_rates(trainer.student, tasks, seeds, "browser", batch=2)
            doc["arms"][arm]["real_per_task"] = real
            doc["arms"][arm]["real_success"] = float(np.mean(list(real.values())))
            print(json.dumps({"seed": a.seed, "arm": arm, "real": real}), flush=True)
        doc["timing_s"]["real"] = round(time.perf_counter() - t, 1)
    doc["timing_s"]["total"] = round(time.perf_counter() - t0, 1)
    doc["done"] = True
    write_json(path, doc)


def summarise_one(folder: Path) -> tuple[dict, list[dict]]:
    """Every finished seed of ``folder``: mean success per arm with 95% bootstrap intervals
    (seeds, then tasks) and the difference BC+GRPO - BC, written to ``summary.json``."""
    import numpy as np
    from lm_study import bootstrap

    docs = [json.loads(p.read_text()) for p in sorted(folder.glob("*-seed*.json"))]
    docs = [d for d in docs if d.get("done")]
    if not docs:
        sys.exit(f"no finished seed in {folder}")
    tasks = docs[0]["settings"]["tasks"].split(",")
    per = {
        arm: [[d["arms"][arm]["per_task"][t] for t in tasks] for d in docs]
        for arm in ("branch", "bc", "bc-reuse", "bc+grpo")
    }
    summary = {
        "folder": str(folder),
        "seeds": [d["settings"]["seed"] for d in docs],
        "tasks": tasks,
        "episodes_per_task": docs[0]["settings"]["episodes"],
        "branch_bc_steps": docs[0]["settings"]["bc_iterations"],
        "device": docs[0]["device"],
        "gpu": docs[0].get("gpu"),
        "flops_total": {
            arm: float(np.mean([d["arms"][arm]["flops"] for d in docs])) for arm in per
        },
    }
    for arm, rows in per.items():
        summary[arm] = {"twin_success": float(np.mean(rows)), "ci95": bootstrap(rows)}
        summary[arm]["per_task"] = dict(zip(tasks, np.mean(rows, 0).round(3).tolist(), strict=True))
        real = [d["arms"][arm].get("real_per_task") for d in docs]
        if all(real):
            rows = [[r[t] for t in tasks] for r in real]
            summary[arm]["real_success"] = float(np.mean(rows))
            summary[arm]["real_ci95"] = bootstrap(rows)
    for base in ("bc", "bc-reuse"):
        diffs = [list(np.subtract(g, b)) for g, b in zip(per["bc+grpo"], per[base], strict=True)]
        summary[f"bc+grpo - {base}"] = {"mean": float(np.mean(diffs)), "ci95": bootstrap(diffs)}
    write_json(folder / "summary.json", summary)
    print(json.dumps({"summary": summary}), flush=True)
    return summary, docs


def summarise(folders: list[Path]) -> None:
    """Summarises each folder and plots success against the FLOPs spent after the branch
    point, one panel per folder, into the first folder's ``summary.png``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(folders), figsize=(6 * len(folders), 4), squeeze=False)
    for ax, folder in zip(axes[0], folders, strict=True):
        summary, docs = summarise_one(folder)
        arms = (("bc", "tab:blue"), ("bc-reuse", "tab:green"), ("bc+grpo", "tab:orange"))
        for arm, colour in arms:
            for k, d in enumerate(docs):
                c, start = d["arms"][arm]["curve"], d["arms"]["branch"]["flops"]
                ax.plot([(p["flops"] - start) / 1e15 for p in c], [100 * p["success"] for p in c],
                        color=colour, marker=".", alpha=0.8, label=arm if k == 0 else None)  # fmt: skip
        ax.set(xlabel="FLOPs after the branch point (1e15)", ylabel="held-out success (%)")
        ax.set_ylim(-2, 102)
        ax.set_title(
            f"branch after {summary['branch_bc_steps']} BC steps, {len(docs)} seeds, "
            f"{summary['device']}"
        )
        ax.grid(alpha=0.3)
        ax.legend(loc="lower right")
    fig.suptitle("BC on and GRPO from the same branch:\ngreedy success on held-out twin pages")
    fig.tight_layout()
    fig.savefig(folders[0] / "summary.png", dpi=110)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--summarise", metavar="DIR", nargs="+", help="summarise the seeds in DIR")
    p.add_argument("--student", default="tiny", choices=["tiny", "smollm2"])
    p.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:1 ...")
    p.add_argument("--tasks", default=",".join(TASKS))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--name", default="study", help="file name prefix in --out")
    p.add_argument("--trace-episodes", type=int, default=100, help="teacher episodes per task")
    p.add_argument("--teacher-error-rate", type=float, default=0.1)
    p.add_argument(
        "--teacher-ratio", type=float, default=None,
        help="teacher's parameters per student parameter (default 70/8, as the bc algorithm)",
    )  # fmt: skip
    p.add_argument(
        "--teacher-params", type=float, default=None, help="the teacher's size outright instead"
    )
    p.add_argument("--bc-iterations", type=int, default=40, help="BC steps to the branch point")
    p.add_argument("--bc-lr", type=float, default=3e-3)
    p.add_argument("--bc-batch", type=int, default=32, help="BC turns per step")
    p.add_argument("--grpo-minutes", type=float, default=1.0, help="GRPO wall time")
    p.add_argument("--grpo-lr", type=float, default=3e-4)
    p.add_argument("--groups", type=int, default=4, help="GRPO groups per iteration")
    p.add_argument("--group-size", type=int, default=8)
    p.add_argument("--epochs", type=int, default=2, help="GRPO passes per iteration")
    p.add_argument("--minibatch", type=int, default=32, help="GRPO turns per step (0: all)")
    p.add_argument("--micro", type=int, default=0, help="turns per gradient chunk (0: all)")
    p.add_argument("--temperature", type=float, default=0.5)
    p.add_argument("--discount", type=float, default=0.5)
    p.add_argument("--max-steps", type=int, default=10, help="actions per GRPO episode")
    p.add_argument("--eval-every", type=int, default=5, help="GRPO iterations between scores")
    p.add_argument("--episodes", type=int, default=32, help="held-out seeds per task")
    p.add_argument("--real", type=int, default=0, help="real-page seeds per task at the end")
    p.add_argument("--out", default="runs/lm_study_direct")
    a = p.parse_args()
    if a.teacher_ratio is not None and a.teacher_params is not None:
        p.error("give --teacher-ratio or --teacher-params, not both")
    if a.summarise:
        summarise([Path(f) for f in a.summarise])
    else:
        run_seed(a)


if __name__ == "__main__":
    main()
