"""Job submission end to end: a real ``ray start --head`` on 127.0.0.1, a short training
submitted with ``ray job submit`` and with ``arena submit``, followed to SUCCEEDED, its run
directory checked; a job that fails; bad input refused before anything is uploaded.

The head has its own temp dir and ports, so it cannot collide with the session Ray of the
other tests, and it is stopped by its own PIDs (never a bare ``ray stop``), also on failure.
"""

import json
import re
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
import yaml

from arena import cli
from cluster.local import LocalHead, free_ports, short_temp_dir, venv_env
from cluster.submit import SubmitError, arena_argv, runtime_env
from tests.arena.test_cli import SMALL

ROOT = Path(__file__).resolve().parents[2]
TRAIN = ["train", "mpe/simple_spread-v3", "--algo", "mappo", "--iterations", "1", *SMALL]


@pytest.fixture(scope="module")
def head():
    h = LocalHead(short_temp_dir())
    try:
        yield h.start()
    finally:
        h.stop()
        left = h.pids()
        shutil.rmtree(h.temp_dir, ignore_errors=True)
        assert not left, f"processes of the test head survived: {sorted(left)}"


def run(*cmd, timeout=300):
    return subprocess.run(
        list(cmd), cwd=ROOT, env=venv_env(), capture_output=True, text=True, timeout=timeout
    )


def arena_submit(*args, timeout=300):
    return run(sys.executable, "-m", "arena", "submit", *args, timeout=timeout)


def job_info(head: LocalHead, job_id: str) -> dict:
    with urllib.request.urlopen(f"{head.address}/api/jobs/{job_id}", timeout=30) as r:
        return json.load(r)


def job_status(head: LocalHead, job_id: str) -> str:
    return job_info(head, job_id)["status"]


def check_run(run_dir: Path) -> None:
    assert (run_dir / "config.yaml").is_file()
    assert (run_dir / "checkpoints/latest").read_text() == "iter_000001"
    assert (run_dir / "checkpoints/iter_000001/arena.json").is_file()
    rows = (run_dir / "metrics.csv").read_text().splitlines()
    assert len(rows) == 2 and rows[1].startswith("1,"), rows


def test_ray_job_submit_runs_arena_train(head, tmp_path):
    """The plain Ray way, as docs/cluster.md shows it: the `arena` on the head's PATH."""
    proc = run(
        str(Path(sys.executable).parent / "ray"),
        "job",
        "submit",
        "--address",
        head.address,
        "--working-dir",
        ".",
        "--",
        "arena",
        *TRAIN,
        "--out",
        str(tmp_path),
        "--name",
        "plain",
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    job_id = re.search(r"Job '(raysubmit_\w+)' succeeded", out).group(1)
    assert job_status(head, job_id) == "SUCCEEDED"
    check_run(tmp_path / "mpe/simple_spread-v3/mappo/plain")


def test_arena_submit_follows_training_to_succeeded(head, tmp_path):
    proc = arena_submit(
        "--address",
        head.address,
        "--entrypoint-num-cpus",
        "1",
        "--",
        "arena",
        *TRAIN,
        "--out",
        str(tmp_path),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    job_id = re.search(r"job (raysubmit_\w+) SUCCEEDED after", proc.stdout).group(1)
    assert job_status(head, job_id) == "SUCCEEDED"
    # The followed logs are the training's own output.
    run_dir = Path(re.search(r"^run: (.+)$", proc.stdout, re.M).group(1))
    assert run_dir.parent == tmp_path / "mpe/simple_spread-v3/mappo"
    check_run(run_dir)
    # What travelled: the code, not the venv, the git history or run directories.
    unpacked = head.temp_dir / "session_latest/runtime_resources/working_dir_files"
    packages = [p for p in unpacked.iterdir() if p.is_dir()]
    assert packages and all((p / "arena/cli.py").is_file() for p in packages)
    for p in packages:
        assert not {".venv", ".git", "runs"} & {c.name for c in p.iterdir()}, sorted(p.iterdir())


def test_sweep_example_runs_as_a_job(head, tmp_path):
    """docs/examples/sweep.py with the project's runtime env file, as docs/cluster.md shows."""
    proc = run(
        str(Path(sys.executable).parent / "ray"),
        "job",
        "submit",
        "--address",
        head.address,
        "--runtime-env",
        "cluster/runtime_env.yaml",
        "--",
        "python",
        "docs/examples/sweep.py",
        "--out",
        str(tmp_path),
        "--lr",
        "1e-3",
        "3e-3",
        "--seeds",
        "0",
        "--iterations",
        "1",
        *SMALL,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    for lr in ("0.001", "0.003"):
        found = re.search(rf"lr {lr} seed 0: return -?\d+\.\d+  (\S+)", out)
        assert found, out
        run_dir = Path(found.group(1))
        assert run_dir.parent.parent == tmp_path / "sweep" and run_dir.name == "run"
        check_run(run_dir)


def test_the_manifests_probe_answers_on_a_real_head(head):
    """k8s/ probes every Ray pod with an HTTP GET on the dashboard agent (52365 on a pod; this
    head's agent listens on a free port instead)."""
    spec = yaml.safe_load((ROOT / "k8s/base/raycluster.yaml").read_text())["spec"]
    probe = spec["headGroupSpec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGet"]
    assert probe["port"] == 52365  # Ray's default --dashboard-agent-listen-port
    port = head.ports["--dashboard-agent-listen-port"]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{probe['path']}", timeout=30) as r:
        body = r.read().decode()
    assert r.status == 200 and "raylet: success" in body and "gcs: success" in body, body


def test_arena_submit_reports_a_failed_job(head):
    proc = arena_submit("--address", head.address, "--", "train", "--resume", "/no/such/run")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "not a run directory" in proc.stdout  # the job's own error, followed
    job_id = re.search(r"job (raysubmit_\w+) FAILED", proc.stdout).group(1)
    assert job_status(head, job_id) == "FAILED"
    assert "exit code 2" in proc.stderr


@pytest.mark.parametrize(
    "command, message",
    [
        (["--"], "nothing to submit"),
        (["--", "arena", "submit", "--", "envs"], "cannot submit itself"),
    ],
)
def test_bad_commands_are_refused_before_upload(command, message):
    with pytest.raises(SubmitError, match=message):
        arena_argv(command, cli.parser())


def test_bad_arguments_get_the_subcommands_usage(capsys):
    with pytest.raises(SystemExit) as e:
        arena_argv(
            ["--", "arena", "train", "mpe/simple_spread-v3", "--algo", "bogus"], cli.parser()
        )
    assert e.value.code == 2 and "invalid choice: 'bogus'" in capsys.readouterr().err


def test_working_dir_must_be_a_checkout(tmp_path):
    with pytest.raises(SubmitError, match="not an Arena checkout"):
        runtime_env(tmp_path)
    env = runtime_env(ROOT)
    assert env["working_dir"] == str(ROOT) and {".venv/", "runs/"} <= set(env["excludes"])


def test_no_cluster_at_the_address_is_a_clear_error():
    # An address where nothing listens: a slip here must never reach a real cluster.
    proc = arena_submit(
        "--address", f"127.0.0.1:{free_ports(1)[0]}", "--", "arena", "envs", timeout=120
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "no Ray job API at http://127.0.0.1:" in proc.stderr
