"""``arena report`` on a compute-allocation sweep folder written by hand (no Ray, no
training): what ran is named, every arm has a row at B, 2/3 B and 1/3 B with its status (an
arm none of whose trials reached the budget too), and the tables warn under 5 seeds."""

import json
from pathlib import Path

import pandas as pd
import yaml

from tune.report import write_report
from tune.sweeps import make_sweep, sweep_values

SEEDS = (0, 1, 2)
BUDGET = 100.0  # each BC run: 10 steps of 10 FLOPs


def _run_config(algo: str, seed: int) -> dict:
    from training.config import TrainConfig, set_value

    cfg = TrainConfig(env="websim/click-test-2-v0", algo=algo, seed=seed)
    set_value(cfg, "model.kind", "tiny")
    set_value(cfg, "tasks", ["focus-text"])
    return cfg.to_dict()


def _trial(sweep_dir: Path, stage: str, name: str, study: dict, curve: list[tuple], bill=None):
    """A finished trial: its labels, its run's config and metrics (flops_total,
    flops_teacher, eval_success per iteration), and BC's teacher_bill.json."""
    run = sweep_dir / stage / name / "run"
    run.mkdir(parents=True)
    (run.parent / "params.json").write_text(json.dumps({"trial": {"study": study}}))
    (run / "config.yaml").write_text(yaml.safe_dump(_run_config(stage, study["seed"])))
    rows = [
        {"iteration": i, "env_steps": 10 * i, "flops_total": f, "flops_teacher": t,
         "eval_success": s, "eval_auc": s}
        for i, (f, t, s) in enumerate(curve, 1)
    ]  # fmt: skip
    pd.DataFrame(rows).to_csv(run / "metrics.csv", index=False)
    (run / "trial.json").write_text(json.dumps({"ended": "target"}))
    if bill:
        (run / "teacher_bill.json").write_text(json.dumps(bill))


def fake_sweep(sweep_dir: Path) -> None:
    """Three seeds. BC reaches success 1 at B. GRPO from half of B reaches B; GRPO from the
    untrained student stops at 60% of B on every seed (``grpo_max_iterations``)."""
    values = {"fractions": [0.0, 0.5, 1.0], "samples": 1, "seeds": 3, "space": {"lr": [1e-3]}}
    sweep = make_sweep("compute_allocation", values, check=False)
    saved = {"name": "compute_allocation", "values": sweep_values(sweep), "max_concurrent": 0}
    sweep_dir.mkdir()
    (sweep_dir / "sweep.yaml").write_text(yaml.safe_dump(saved, sort_keys=False))
    bill = {"flops": 60.0, "tokens": 3, "teacher_params": 10.0, "recorded_steps": 0,
            "stand_in_steps": 5, "source": "stand-in: the teacher's prompt and answer in the "
            "student's tokenizer", "student_params": 147_968, "teacher_ratio": 8.75}  # fmt: skip
    for seed in SEEDS:
        bc = [(10.0 * i, 6.0 * i, 0.0 if i < 8 else 1.0) for i in range(1, 11)]
        _trial(sweep_dir, "bc", f"bc_{seed}", {"arm": "bc", "seed": seed, "fraction": 1.0}, bc,
               bill)  # fmt: skip
        grpo = {"arm": "grpo", "seed": seed, "budget": BUDGET, "lr": 1e-3}
        half = [(50.0 + 10 * i, 30.0, 0.5) for i in range(1, 6)]
        _trial(sweep_dir, "grpo", f"half_{seed}",
               {**grpo, "fraction": 0.5, "config": "f1c0", "branch_flops": 50.0}, half)  # fmt: skip
        short = [(20.0 * i, 0.0, 0.0) for i in range(1, 4)]  # 60: stopped short of B
        _trial(sweep_dir, "grpo", f"none_{seed}",
               {**grpo, "fraction": 0.0, "config": "f0c0", "branch_flops": 0.0}, short)  # fmt: skip


def _table(md: str, heading: str) -> pd.DataFrame:
    """The Markdown table under ``### heading`` as a frame."""
    part = md.split(f"### {heading}\n", 1)[1].strip().split("\n\n", 1)[0]
    lines = [line.strip("|").split(" | ") for line in part.splitlines() if line.startswith("|")]
    head, body = [c.strip() for c in lines[0]], [[c.strip() for c in r] for r in lines[2:]]
    return pd.DataFrame(body, columns=head).set_index("teacher fraction")


def test_the_allocation_report_names_what_ran_and_lists_every_arm(tmp_path):
    sweep_dir = tmp_path / "sweep"
    fake_sweep(sweep_dir)
    md = write_report(sweep_dir).with_suffix(".md").read_text()

    # what was trained, the budget's definition and the teacher's price
    what = md.split("## What ran", 1)[1].split("\n## ", 1)[0]
    assert "behaviour cloning (`bc`)" in what and "GRPO (`grpo`)" in what
    assert "click-test-2, focus-text, click-dialog" in what
    assert "kind=tiny (147,968 parameters)" in what
    assert "`bc_steps` = 40 steps" in what
    assert "8.75 x the student's parameters" in what and "tokens from: stand-in" in what
    assert "| bc | bc | websim/click-test-2-v0 | focus-text | tiny | 0, 1, 2 | 3 |" in what

    # every arm at B, pure GRPO too though none of its trials reached B
    at_b = _table(md, "At B")
    assert list(at_b.index) == ["0.000", "0.500", "1.000"]
    assert at_b.loc["0.000", "status"] == "0/3 reached B"
    assert at_b.loc["0.000", "success (95% CI)"] == "n/a"
    assert at_b.loc["0.500", "status"] == "3/3 reached B"
    assert at_b.loc["1.000", "status"] == "3/3 reached B"
    assert at_b.loc["1.000", "success (95% CI)"].startswith("1.00")
    # at 2/3 B (67): GRPO from half of B is fraction 0.75 there; pure GRPO still stopped short
    at_two_thirds = _table(md, "At 0.67 B")
    assert list(at_two_thirds.index) == ["0.000", "0.750", "1.000"]
    assert at_two_thirds.loc["0.000", "status"] == "0/3 reached 0.67 B"
    # at 1/3 B (33) pure GRPO reached it (40 is past it: its value is the one at 20)
    at_third = _table(md, "At 0.33 B")
    assert list(at_third.index) == ["0.000", "1.000"]  # half of B is still BC there
    assert at_third.loc["0.000", "status"] == "3/3 reached 0.33 B"
    # three seeds: each table warns that its intervals are too narrow to trust
    assert md.count("Fewest seeds behind an interval here: 3. With 3 seeds") == 3
    assert "seed 0: 100 (teacher 60%)" in md


def test_a_sweep_without_teacher_bills_is_flagged_as_the_old_accounting(tmp_path):
    sweep_dir = tmp_path / "sweep"
    fake_sweep(sweep_dir)
    for bill in sweep_dir.glob("bc/*/run/teacher_bill.json"):
        bill.unlink()
    md = write_report(sweep_dir).with_suffix(".md").read_text()
    assert "No BC run has a `teacher_bill.json`" in md
