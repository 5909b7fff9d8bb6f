"""``arena sweep --address``: the same commands on a Ray cluster of two nodes on this machine
(``ray start --head`` with 1 CPU and a ``ray start`` worker node with 1 CPU), so two trials at
once must run on different nodes. The head has its own temp dir and ports and is stopped by its
own PIDs (never a bare ``ray stop``)."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from cluster.local import LocalHead, short_temp_dir, venv_env

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cluster():
    head = LocalHead(short_temp_dir())
    try:
        head.start(num_cpus=1)
        head.add_worker(num_cpus=1)
        yield head
    finally:
        head.stop()
        left = head.pids()
        shutil.rmtree(head.temp_dir, ignore_errors=True)
        assert not left, f"processes of the test cluster survived: {sorted(left)}"


def sweep(cluster: LocalHead, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "arena", "sweep", *args, "--address", cluster.gcs_address],
        cwd=ROOT,
        env=venv_env(COLUMNS="160"),
        capture_output=True,
        text=True,
        timeout=900,
    )


def test_a_compute_allocation_sweep_runs_across_the_nodes(cluster, tmp_path):
    nodes = [n for n in cluster.state("nodes") if n["state"] == "ALIVE"]
    assert len(nodes) == 2
    out = tmp_path / "alloc"
    run = sweep(
        cluster, "compute_allocation", "--samples", "1", "--out", str(out),
        "--set", "seeds=1", "--set", "bc_steps=3", "--set", "fractions=[0, 0.5, 1]",
        "--set", "grpo_max_iterations=2", "--set", "eval_seeds=2",
        "--set", "grpo={groups_per_iteration: 2, epochs: 1}",
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "grpo: 2 trials, 2 at a time" in run.stdout  # the cluster's 2 CPUs, one per node
    trials = pd.read_parquet(out / "trials.parquet")
    grpo = trials[trials["stage"] == "grpo"]
    nodes = {json.loads((Path(d) / "trial.json").read_text())["node"] for d in grpo["run_dir"]}
    assert len(nodes) == 2  # the two GRPO trials, at once, on the two nodes
    assert sorted(trials["stage"]) == ["bc", "grpo", "grpo"]
    assert set(trials["status"]) == {"finished"}
    branched = trials[trials["fraction"] == 0.5].iloc[0]
    rows = pd.read_parquet(out / "results.parquet")
    bc = rows[rows["stage"] == "bc"].sort_values("iteration")
    # GRPO at f=0.5 starts from the BC checkpoint whose FLOPs are nearest half the budget,
    # and counts them
    half = bc["flops_total"].iloc[-1] / 2
    assert branched["branch_flops"] == min(bc["flops_total"], key=lambda f: abs(f - half))
    first = rows[rows["trial"] == branched["trial"]].sort_values("iteration").iloc[0]
    assert first["flops_total"] > branched["branch_flops"]
