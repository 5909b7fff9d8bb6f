"""The embedded Ray of a training run refuses a foreign driver and a job submitted without its
token, at the dashboard and at the job agent."""

import contextlib
import json
import os
import socket
import subprocess
import sys
import time

import pytest


def free_ports(n: int) -> list[str]:
    """``n`` distinct ports free on this host (all held open until all are picked)."""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(n)]
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [str(s.getsockname()[1]) for s in socks]


TRAINER = """
import json, os, sys
import ray._private.parameter as parameter
# ray.init has no argument for the dashboard agent's HTTP port: it is always 52365, which only
# one Ray per host gets (any other Ray on the machine may hold it). Give this one its own.
init = parameter.RayParams.__init__
def with_agent_port(self, *args, **kwargs):
    init(self, *args, **kwargs)
    self.dashboard_agent_listen_port = int(sys.argv[3])
parameter.RayParams.__init__ = with_agent_port
from training import runtime
runtime.connect(num_cpus=1, dashboard=True, dashboard_port=int(sys.argv[2]), temp_dir=sys.argv[1])
import ray
from policies import algorithm
ctx = ray.get_runtime_context()
node = ray._private.worker.global_worker.node
print(json.dumps({"gcs": ctx.gcs_address, "dashboard": node.address_info["webui_url"],
                  "agent": f"{node.node_ip_address}:{node.dashboard_agent_listen_port}",
                  "pid": os.getpid()}), flush=True)
info = algorithm.get("ippo")
s = info.settings(train_batch_size=256, minibatch_size=128, num_epochs=1, num_envs_per_env_runner=4)
algo = info.build("mpe/simple_spread-v3", s).build_algo()
while True:  # until the test kills it: every attack below meets a live training
    algo.train()
"""


@pytest.fixture(scope="module")
def training(ray_session, busy_machine, tmp_path_factory):  # the job agent under load
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}
    env["RAY_AUTH_MODE"] = "disabled"  # what the user had: the run must not inherit it
    env.pop("RAY_ADDRESS", None)  # its own embedded Ray, not the test session's
    proc = subprocess.Popen(
        # its own dashboard and agent ports: another Ray on the host (an earlier test's, still
        # letting go, or anyone's) may hold Ray's defaults, 8265 and 52365
        [sys.executable, "-c", TRAINER, str(tmp_path_factory.mktemp("ray")), *free_ports(2)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
        cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))),
    )
    line = proc.stdout.readline()
    assert line, "the training process did not start"
    yield json.loads(line)
    proc.kill()
    proc.wait()


def foreign_env() -> dict:
    return {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}


@pytest.mark.parametrize("mode", ["disabled", "token"])
def test_a_foreign_driver_is_refused(training, mode):
    code = f"import ray; ray.init(address={training['gcs']!r}); print('JOINED')"
    env = {**foreign_env(), "RAY_AUTH_MODE": mode}
    try:
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=30
        )
    except subprocess.TimeoutExpired as e:  # still knocking after 30 s: not let in either
        # (a driver let in prints JOINED within seconds; one kept out retries for minutes:
        # "Failed to connect to GCS ... within 5 seconds", again and again)
        seen = e.stdout or ""
        seen = seen.decode(errors="replace") if isinstance(seen, bytes) else seen
        assert "JOINED" not in seen
        return
    assert out.returncode != 0 and "JOINED" not in out.stdout


def post_job(url: str) -> int:
    """Status of a job submission without the token; waits (bounded) for the server to listen."""
    import urllib.error
    import urllib.request

    body = json.dumps({"entrypoint": "touch /tmp/arena-pwned"}).encode()
    deadline = time.monotonic() + 120  # a loaded 2-core machine can take a minute
    while True:
        request = urllib.request.Request(
            url, data=body, headers={"Content-Type": "application/json"}, method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as reply:
                return reply.status
        except urllib.error.HTTPError as e:
            return e.code
        except OSError:  # not listening yet
            if time.monotonic() > deadline:
                raise
            time.sleep(1)


def test_a_job_post_to_the_dashboard_without_the_token_is_refused(training):
    assert post_job(f"http://{training['dashboard']}/api/jobs/") in (401, 403)


def test_a_job_post_to_the_job_agent_without_the_token_is_refused(training):
    agent = training["agent"]
    assert not agent.endswith(":-1"), "the training Ray's job agent does not listen"
    assert post_job(f"http://{agent}/api/job_agent/jobs/") in (401, 403)


def test_the_embedded_ray_listens_on_loopback_only(training):
    # Ray binds its GCS, raylet, agents and metrics exporters to the node's address (or to
    # every interface): the embedded Ray's node address is 127.0.0.1.
    import psutil

    trainer = psutil.Process(training["pid"])
    tree = {trainer.pid} | {p.pid for p in trainer.children(recursive=True)}
    deadline = time.monotonic() + 60  # the metrics exporters start a little later
    while True:
        listening = {
            (c.laddr.ip, c.laddr.port)
            for c in psutil.net_connections("tcp")
            if c.status == "LISTEN" and c.pid in tree
        }
        if len(listening) >= 6 or time.monotonic() > deadline:
            break
        time.sleep(2)
    assert len(listening) >= 6, listening  # GCS, raylet, dashboard, agent (gRPC, metrics)
    beyond = {(ip, port) for ip, port in listening if not ip.startswith(("127.", "::ffff:127."))}
    assert not beyond, beyond
