"""What a Ray head exposes, with Ray's defaults and with token auth as docs/cluster.md starts
it, and ``arena submit`` against a head with token auth.

Measured on real heads (``ray start --head``, own temp dir and ports, stopped by their own
PIDs): which component listens on which addresses, and what a request without a token gets.
"""

import secrets
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cluster.local import LocalHead, exposure, short_temp_dir, venv_env

ROOT = Path(__file__).resolve().parents[2]
ALL_INTERFACES = {"0.0.0.0", "::"}


def by_component(rows: list[dict]) -> dict[str, dict]:
    return {r["component"]: r for r in rows if r["component"] != "internal"}


def started(**env):
    head = LocalHead(short_temp_dir())
    try:
        head.start(num_cpus=1, dashboard_host=None, **env)  # Ray's default dashboard host
        return head
    except BaseException:
        head.stop()
        raise


def stopped(head: LocalHead) -> None:
    head.stop()
    left = head.pids()
    shutil.rmtree(head.temp_dir, ignore_errors=True)
    assert not left, f"processes of the test head survived: {sorted(left)}"


@pytest.fixture(scope="module")
def token_head():
    head = started(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=secrets.token_hex(32))
    try:
        yield head
    finally:
        stopped(head)


def test_ray_defaults_leave_the_job_agent_open_to_the_network():
    head = started()
    try:
        rows = by_component(exposure(head))
    finally:
        stopped(head)
    print(rows)
    # The dashboard is on loopback by default ...
    assert rows["dashboard (job API)"]["addresses"] == ["127.0.0.1"]
    assert rows["dashboard (job API)"]["without_token"] == {"GET /api/jobs/": 200}
    # ... but the dashboard agent, which also takes jobs, listens on the node's address and
    # handles a submission without any credentials (400: only the empty body was wrong).
    agent = rows["dashboard agent HTTP (job agent API, health probe)"]
    assert set(agent["addresses"]) - {"127.0.0.1"}, agent
    assert agent["without_token"]["POST /api/job_agent/jobs/"] == 400
    # GCS, raylet and object manager take connections on every interface.
    for name in ("GCS", "raylet", "object manager"):
        assert set(rows[name]["addresses"]) & ALL_INTERFACES, rows[name]


def test_token_auth_closes_the_job_apis_and_keeps_the_probes(token_head):
    rows = by_component(exposure(token_head))
    print(rows)
    assert rows["dashboard (job API)"]["without_token"] == {"GET /api/jobs/": 401}
    agent = rows["dashboard agent HTTP (job agent API, health probe)"]["without_token"]
    # Kubernetes' readiness and liveness probes (k8s/) need no token and still pass.
    assert agent == {"POST /api/job_agent/jobs/": 401, "GET /api/healthz": 200}
    # The sockets are the same: token auth guards them, it does not rebind them.
    assert set(rows["GCS"]["addresses"]) & ALL_INTERFACES


def arena_submit(head: LocalHead, *args: str, **env: str):
    cmd = [sys.executable, "-m", "arena", "submit", "--address", head.address, *args]
    cmd += ["--", "arena", "envs", "--no-cache"]
    return subprocess.run(
        cmd, cwd=ROOT, env=venv_env(**env), capture_output=True, text=True, timeout=300
    )


def test_arena_submit_without_the_token_is_a_clear_error(token_head):
    proc = arena_submit(token_head)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"the cluster at {token_head.address} wants a token" in proc.stderr
    assert "--token-file" in proc.stderr and "RAY_AUTH_MODE=token" in proc.stderr


def test_arena_submit_passes_the_token_from_a_file(token_head, tmp_path):
    token = tmp_path / "token"
    token.write_text(token_head.token + "\n")
    proc = arena_submit(token_head, "--token-file", str(token))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "simple_spread" in proc.stdout  # the job's own output, followed
    assert "SUCCEEDED" in proc.stdout

    wrong = tmp_path / "wrong"
    wrong.write_text(secrets.token_hex(32))
    proc = arena_submit(token_head, "--token-file", str(wrong))
    assert proc.returncode == 2 and "wants a token" in proc.stderr, proc.stdout + proc.stderr

    proc = arena_submit(token_head, "--token-file", str(tmp_path / "missing"))
    assert proc.returncode == 2 and "--token-file" in proc.stderr, proc.stderr


def test_arena_submit_uses_rays_token_with_ray_auth_mode_token(token_head):
    proc = arena_submit(token_head, RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=token_head.token)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCEEDED" in proc.stdout
