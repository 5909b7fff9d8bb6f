"""Ray's autoscaler (v2) scaling an Arena training on this machine, end to end.

The head has no CPUs for work and one CPU worker type, both after k8s/base/raycluster.yaml
(scaled down); worker nodes are real raylets started by Ray's fake multi-node provider
(cluster/node_provider.py). A training submitted with ``arena submit`` asks for more CPUs than
the cluster has: the autoscaler adds two nodes, the job finishes with its run directory, the
EnvRunners ran on both nodes and learned exactly what they learn on one, and the idle nodes are
removed after the idle timeout.
"""

import csv
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from cluster.local import K8S_BASE, Autoscaling, LocalHead, follow_job, short_temp_dir, venv_env

ROOT = Path(__file__).resolve().parents[2]
# Driver (1 CPU) + 2 EnvRunners (1 CPU each) = 3 CPUs: more than one 2-CPU worker node.
TRAIN = [
    "train",
    "mpe/simple_spread-v3",
    "--algo",
    "mappo",
    "--iterations",
    "2",
    "--env-runners",
    "2",
    "--seed",
    "3",
    "--name",
    "auto",
    *("--set", "train_batch_size=256", "--set", "minibatch_size=128"),
    *("--set", "num_epochs=2", "--set", "num_envs_per_env_runner=4"),
]
TIMING = {"time_s", "sample_s", "learn_s", "env_steps_per_s"}


def test_sizes_come_from_the_k8s_manifest():
    spec = yaml.safe_load(K8S_BASE.read_text())["spec"]
    cpu = next(g for g in spec["workerGroupSpecs"] if g["groupName"] == "cpu")
    auto = Autoscaling.from_manifest()
    assert auto.head_cpus == int(spec["headGroupSpec"]["rayStartParams"]["num-cpus"]) == 0
    pod_cpus = float(cpu["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"])
    assert auto.worker_cpus == pod_cpus / 4
    assert auto.max_workers == min(cpu["maxReplicas"], 2)
    assert auto.idle_timeout_s == spec["autoscalerOptions"]["idleTimeoutSeconds"] / 4

    # The config is one Ray's autoscaler accepts, with those sizes.
    from ray.autoscaler.v2.instance_manager.config import AutoscalingConfig

    config = AutoscalingConfig(auto.config("127.0.0.1:6379", Path("/tmp/nodes")))
    assert config.get_idle_timeout_s() == auto.idle_timeout_s
    worker = config.get_node_type_configs()["cpu"]
    assert worker.resources == {"CPU": auto.worker_cpus}
    assert (worker.min_worker_nodes, worker.max_worker_nodes) == (0, auto.max_workers)


@pytest.fixture(scope="module")
def autoscaling_head(busy_machine):  # on a loaded machine: its timing must hold there
    auto = Autoscaling.from_manifest()
    head = LocalHead(short_temp_dir())
    try:
        yield head.start(num_cpus=auto.head_cpus, autoscaling=auto), auto
    finally:
        head.stop()
        left = head.pids()
        shutil.rmtree(head.temp_dir, ignore_errors=True)
        assert not left, f"processes of the test cluster survived: {sorted(left)}"


def metrics(run: Path) -> list[dict]:
    return list(csv.DictReader((run / "metrics.csv").open()))


def test_a_training_scales_the_cluster_up_and_back_down(autoscaling_head, tmp_path):
    head, auto = autoscaling_head
    assert [n["is_head_node"] for n in head.state("nodes")] == [True]  # only the head

    out = tmp_path / "runs"  # on the storage every node shares (on k8s: the PVC)
    run = out / "mpe/simple_spread-v3/mappo/auto"
    tl = follow_job(head, [*TRAIN, "--out", str(out)], run / "metrics.csv", timeout_s=420)
    print("timeline:", json.dumps(tl.summary()))
    # The driver's own output is in the log dir of the node it ran on (docs/cluster.md).
    drivers = sorted(head.temp_dir.glob("0*/session_latest/logs/job-driver-*.log"))
    assert tl.exit_code == 0, tl.output[-2000:] + "".join(p.read_text()[-4000:] for p in drivers)
    assert "SUCCEEDED" in tl.output

    # Scaled up: two worker nodes for three CPUs, the driver and EnvRunners on them.
    assert len(tl.worker_nodes) == 2, tl.summary()
    assert tl.driver_node in tl.worker_nodes
    assert sorted(tl.env_runner_nodes) == sorted(tl.worker_nodes)  # spread over both
    # In order: nodes up, first iteration (polled, so it may be noted after the job's end on
    # a busy machine), job end, then the driver's node down.
    assert len(tl.node_down) == 2, tl.summary()
    assert 0 < tl.node_up[0] <= tl.node_up[1] < tl.first_iteration < min(tl.node_down)
    assert tl.node_up[1] < tl.job_end < tl.driver_node_down
    # Each node went for being idle past the timeout, by Ray's own record of its idle time. A
    # node turns idle when its last actor ends, which on a loaded machine can be well before
    # the job's end (measured beside two busy loops: an EnvRunner's node went 3.2 s after the
    # job's end, the driver having taken 12 s to exit): the job's end is a lower bound only
    # for the driver's node, which holds the job until then.
    assert all(s is not None and s >= auto.idle_timeout_s for s in tl.node_idle_s), tl.summary()
    assert tl.driver_node_down - tl.job_end >= auto.idle_timeout_s, tl.summary()
    for down in tl.node_down:  # and no node lingers long past the timeout
        assert down - tl.job_end <= auto.idle_timeout_s + 30, tl.summary()

    # The run landed under --out, complete.
    assert (run / "checkpoints/latest").read_text() == "iter_000002"
    assert (run / "checkpoints/iter_000002/arena.json").is_file()
    cluster_rows = metrics(run)
    assert [r["iteration"] for r in cluster_rows] == ["1", "2"]

    # The same training on one node (embedded Ray) learns exactly the same numbers.
    local = tmp_path / "local"
    proc = subprocess.run(
        [sys.executable, "-m", "arena", *TRAIN, "--out", str(local)],
        cwd=ROOT,
        env=venv_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    local_rows = metrics(local / "mpe/simple_spread-v3/mappo/auto")
    assert list(local_rows[0]) == list(cluster_rows[0])
    for ours, theirs in zip(cluster_rows, local_rows, strict=True):
        for column in set(ours) - TIMING:
            mine, other = float(ours[column]), float(theirs[column])
            assert mine == pytest.approx(other, rel=1e-5, nan_ok=True), (column, mine, other)
    assert cluster_rows[-1]["episode_return_mean"] != "nan"  # episodes ended: returns compared
