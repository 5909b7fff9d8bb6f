"""A Ray cluster on this machine: a real ``ray start --head`` with its own temp dir and ports,
optionally with Ray's autoscaler (v2) adding and removing worker nodes, sized after
k8s/base/raycluster.yaml. The tests and ``bench/autoscaling.py`` use it.

A bare ``ray stop`` kills every Ray process on the host (other people's tests included), so
:meth:`LocalHead.stop` kills just the processes that belong to this head: those whose command
line names its private temp dir or its GCS address, and all their descendants (the dashboard's
subprocesses, the raylet's agents and workers, the autoscaler's worker nodes, job drivers).
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import yaml

# Every port Ray would otherwise take from its defaults (10001, 52365, ...), so this head
# cannot collide with another Ray on the host, such as the tests' session Ray.
PORT_FLAGS = (
    "--ray-client-server-port",
    "--dashboard-agent-listen-port",
    "--dashboard-agent-grpc-port",
    "--runtime-env-agent-port",
    "--metrics-export-port",
    "--node-manager-port",
    "--object-manager-port",
)


def free_ports(n: int) -> list[int]:
    """``n`` distinct free ports (all bound at once, so none is handed out twice)."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def venv_env(**extra: str) -> dict[str, str]:
    """This interpreter's environment with its bin dir first on PATH (the job entrypoint's
    ``python`` and ``arena`` are the ones on the PATH of the shell that ran ``ray start``),
    token auth off explicitly for both sides, and no Ray setting inherited from this process:
    no cluster address, and not the token of a Ray this process runs itself (with it, a job's
    driver on an autoscaled node failed to connect to its own head)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env.update(RAY_AUTH_MODE="disabled", RAY_USAGE_STATS_ENABLED="0", OMP_NUM_THREADS="1")
    env.update(extra)
    return env


ROOT = Path(__file__).resolve().parents[1]
K8S_BASE = ROOT / "k8s/base/raycluster.yaml"
HEAD_NODE_ID = "fffffffffffffffffffffffffffffffffffffffffffffffffff00000"
# `ray start` takes about 10 s; on the 2-core machine beside three training processes and a
# busy loop it once took over 120 s.
START_TIMEOUT_S = 300


@dataclass
class Autoscaling:
    """Ray's autoscaler (v2) for a :class:`LocalHead`: one worker type, ``cpu``, whose nodes
    are raylets on this machine (:mod:`cluster.node_provider`)."""

    worker_cpus: float
    max_workers: int
    idle_timeout_s: float
    head_cpus: int = 0

    @classmethod
    def from_manifest(cls, path: Path = K8S_BASE, scale: float = 0.25, max_workers: int = 2):
        """k8s/base's head and ``cpu`` worker group, scaled to fit one small machine: worker
        CPUs and the idle timeout times ``scale``, at most ``max_workers`` workers."""
        spec = yaml.safe_load(path.read_text())["spec"]
        group = next(g for g in spec["workerGroupSpecs"] if g["groupName"] == "cpu")
        limits = group["template"]["spec"]["containers"][0]["resources"]["limits"]
        idle = group.get("idleTimeoutSeconds", spec["autoscalerOptions"]["idleTimeoutSeconds"])
        return cls(
            worker_cpus=float(limits["cpu"]) * scale,
            max_workers=min(group["maxReplicas"], max_workers),
            idle_timeout_s=idle * scale,
            head_cpus=int(spec["headGroupSpec"]["rayStartParams"]["num-cpus"]),
        )

    def config(self, gcs_address: str, node_temp_root: Path) -> dict:
        """The cluster config that ``ray start --head --autoscaling-config`` reads."""
        return {
            "cluster_name": "arena-local",
            "max_workers": self.max_workers,
            "upscaling_speed": 1.0,
            "idle_timeout_minutes": self.idle_timeout_s / 60,
            "provider": {
                "type": "external",
                "module": "cluster.node_provider.LocalNodeProvider",
                "gcs_address": gcs_address,
                "head_node_id": HEAD_NODE_ID,
                "launch_multiple": True,
                "node_temp_root": str(node_temp_root),
                "disable_node_updaters": True,
                "disable_launch_config_check": True,
            },
            "head_node_type": "ray.head.default",
            # Fields the autoscaler's config loader reads, though no node runs a command here.
            "auth": {},
            "file_mounts": {},
            "initialization_commands": [],
            "setup_commands": [],
            "head_setup_commands": [],
            "worker_setup_commands": [],
            "head_start_ray_commands": [],
            "worker_start_ray_commands": [],
            "cluster_synced_files": [],
            "file_mounts_sync_continuously": False,
            "rsync_exclude": [],
            "rsync_filter": [],
            "docker": {},
            "available_node_types": {
                "ray.head.default": {"resources": {}, "node_config": {}, "max_workers": 0},
                "cpu": {
                    "resources": {"CPU": self.worker_cpus},
                    "node_config": {},
                    "min_workers": 0,
                    "max_workers": self.max_workers,
                },
            },
        }

    def env(self) -> dict[str, str]:
        """What the head's processes need: the provider (importable from this checkout) and
        the head's identity as the autoscaler's instance of it."""
        return {
            "RAY_FAKE_CLUSTER": "1",
            "RAY_enable_autoscaler_v2": "1",
            "AUTOSCALER_UPDATE_INTERVAL_S": "1",
            "RAY_CLOUD_INSTANCE_ID": HEAD_NODE_ID,
            "RAY_OVERRIDE_NODE_ID_FOR_TESTING": HEAD_NODE_ID,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        }


@dataclass
class LocalHead:
    temp_dir: Path
    gcs_port: int = 0
    dashboard_port: int = 0
    ports: dict[str, int] = field(default_factory=dict)
    start_s: float = 0.0
    token: str | None = None
    """The head's token when it was started with token auth; :meth:`api` sends it."""

    def __post_init__(self):
        if not (self.gcs_port and self.dashboard_port and self.ports):
            gcs, dashboard, *rest = free_ports(2 + len(PORT_FLAGS))
            self.gcs_port, self.dashboard_port = gcs, dashboard
            self.ports = dict(zip(PORT_FLAGS, rest, strict=True))

    @property
    def address(self) -> str:
        """The job submission (dashboard) address."""
        return f"http://127.0.0.1:{self.dashboard_port}"

    @property
    def gcs_address(self) -> str:
        return f"127.0.0.1:{self.gcs_port}"

    def start(
        self,
        num_cpus: int = 2,
        timeout: float = START_TIMEOUT_S,
        dashboard_host: str | None = "127.0.0.1",
        autoscaling: Autoscaling | None = None,
        **env: str,
    ) -> LocalHead:
        """``ray start --head``; ``dashboard_host=None`` leaves Ray's default; ``env`` goes to
        the head's processes (``RAY_AUTH_MODE="token"``, ``RAY_AUTH_TOKEN=...``)."""
        cmd = [
            str(Path(sys.executable).parent / "ray"),
            "start",
            "--head",
            "--port",
            str(self.gcs_port),
            "--dashboard-port",
            str(self.dashboard_port),
            "--temp-dir",
            str(self.temp_dir),
            "--num-cpus",
            str(num_cpus),
            "--disable-usage-stats",
        ]
        if dashboard_host:
            cmd += ["--dashboard-host", dashboard_host]
        for flag, port in self.ports.items():
            cmd += [flag, str(port)]
        if autoscaling:
            config = self.temp_dir / "autoscaling.yaml"
            config.write_text(yaml.safe_dump(autoscaling.config(self.gcs_address, self.temp_dir)))
            cmd.append(f"--autoscaling-config={config}")
            env = {**autoscaling.env(), **env}
        if env.get("RAY_AUTH_MODE") == "token":
            self.token = env.get("RAY_AUTH_TOKEN")  # else Ray reads ~/.ray/auth_token
        t0 = time.perf_counter()
        proc = subprocess.run(
            cmd, env=venv_env(**env), capture_output=True, text=True, timeout=timeout
        )
        self.start_s = time.perf_counter() - t0
        if proc.returncode != 0:
            raise RuntimeError(f"ray start failed ({proc.returncode}):\n{proc.stdout}{proc.stderr}")
        return self

    def add_worker(self, num_cpus: int = 1, timeout: float = START_TIMEOUT_S, **env: str) -> Path:
        """``ray start --address`` a worker node on this machine, joined to this head, with its
        own temp dir and ports (stopped with the head: its processes name the head's GCS
        address); returns its temp dir."""
        temp = self.temp_dir / f"worker{len(list(self.temp_dir.glob('worker*')))}"
        temp.mkdir(parents=True)
        cmd = [
            str(Path(sys.executable).parent / "ray"),
            "start",
            "--address",
            self.gcs_address,
            "--num-cpus",
            str(num_cpus),
            "--temp-dir",
            str(temp),
            "--disable-usage-stats",
        ]
        flags = [f for f in PORT_FLAGS if f != "--ray-client-server-port"]  # a head's own
        for flag, port in zip(flags, free_ports(len(flags)), strict=True):
            cmd += [flag, str(port)]
        proc = subprocess.run(
            cmd, env=venv_env(**env), capture_output=True, text=True, timeout=timeout
        )
        if proc.returncode != 0:
            raise RuntimeError(f"ray start failed ({proc.returncode}):\n{proc.stdout}{proc.stderr}")
        return temp

    def check_autoscaler(self) -> None:
        """Raises with the autoscaler's error output when its process has ended."""
        table = _process_table()
        monitor = [
            p
            for p in self.pids()
            if any(a.endswith("v2/monitor.py") for a in table.get(p, (0, []))[1])
        ]
        if not monitor:
            err = sorted(self.temp_dir.glob("session_*/logs/monitor.err"))
            tail = err[-1].read_text()[-3000:] if err else "(no monitor.err)"
            raise RuntimeError(
                f"the autoscaler of the head in {self.temp_dir} is not running:\n{tail}"
            )

    def api(self, path: str) -> dict:
        """GET a dashboard route (``/api/v0/nodes?detail=1``) as JSON."""
        request = urllib.request.Request(self.address + path)
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        with urllib.request.urlopen(request, timeout=30) as r:
            return json.load(r)

    def state(self, kind: str) -> list[dict]:
        """Ray's state API: ``nodes``, ``actors``, ... (dead ones included)."""
        return self.api(f"/api/v0/{kind}?detail=1&limit=10000")["data"]["result"]["result"]

    def _owns(self, cmdline: list[str]) -> bool:
        tmp = str(self.temp_dir)
        gcs = f":{self.gcs_port}"
        return any(tmp in arg or ("address" in arg and arg.endswith(gcs)) for arg in cmdline)

    def pids(self) -> set[int]:
        """This head's processes and all their descendants."""
        table = _process_table()
        pids = {pid for pid, (_, cmdline) in table.items() if self._owns(cmdline)}
        while True:
            more = {pid for pid, (ppid, _) in table.items() if ppid in pids} - pids
            if not more:
                break
            pids |= more
        pids.discard(os.getpid())
        return pids

    def stop(self, grace: float = 5) -> int:
        """SIGTERM this head's processes, SIGKILL what is left after ``grace`` seconds, and
        again for any that a dying parent started meanwhile; returns how many there were."""
        stopped: set[int] = set()
        for _ in range(3):
            pids = self.pids()
            if not pids:
                break
            stopped |= pids
            _signal(pids, signal.SIGTERM)
            alive = _wait(pids, grace)
            _signal(alive, signal.SIGKILL)
            _wait(alive, 5)
        return len(stopped)


def _wait(pids: set[int], timeout: float) -> set[int]:
    """Waits up to ``timeout`` s for ``pids`` to end; returns those still alive."""
    deadline = time.monotonic() + timeout
    while (alive := {p for p in pids if _alive(p)}) and time.monotonic() < deadline:
        time.sleep(0.2)
    return alive


def _process_table() -> dict[int, tuple[int, list[str]]]:
    """pid -> (parent pid, command line) from /proc (Linux)."""
    table = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        # The command name in stat may hold spaces and parentheses: parse after the last ')'.
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        table[int(entry.name)] = (ppid, [a for a in cmdline if a])
    return table


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _signal(pids, sig) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass  # it ended on its own meanwhile


def short_temp_dir() -> Path:
    # Ray puts unix sockets under the temp dir; their paths must stay under 107 bytes.
    return Path(tempfile.mkdtemp(prefix="arena-head-", dir="/tmp"))


def listening_sockets(pids: set[int]) -> list[tuple[str, int, str]]:
    """(address, port, process name) of every TCP socket ``pids`` listen on."""
    import importlib

    importlib.import_module("ray")  # puts the psutil Ray ships (ray/thirdparty_files) on the path
    psutil = importlib.import_module("psutil")

    found = set()
    for c in psutil.net_connections("tcp"):
        if c.status == psutil.CONN_LISTEN and c.pid in pids:
            try:
                name = psutil.Process(c.pid).name()
            except psutil.NoSuchProcess:
                continue
            found.add((c.laddr.ip, c.laddr.port, name))
    return sorted(found)


@dataclass
class JobTimeline:
    """One job on an autoscaling :class:`LocalHead`, in seconds after its submission. Ray's
    own records give the node, actor and job times; the first metrics row is polled."""

    exit_code: int
    output: str
    job_id: str | None = None
    node_up: list[float] = field(default_factory=list)
    first_iteration: float | None = None
    job_end: float | None = None
    node_down: list[float] = field(default_factory=list)
    driver_node: str | None = None
    env_runner_nodes: list[str] = field(default_factory=list)
    worker_nodes: list[str] = field(default_factory=list)
    node_idle_s: list[float | None] = field(default_factory=list)
    """For each removed worker node, how long it had been idle when the autoscaler removed it
    (Ray's record: the node's death message); None if it went for another reason."""
    driver_node_down: float | None = None

    def summary(self) -> dict:
        """The timeline as a JSON-able dict (no logs)."""
        rounded = {k: _round(v) for k, v in vars(self).items() if k != "output"}
        return {"request_s": 0.0, **rounded}


def _round(v):
    if isinstance(v, float):
        return round(v, 1)
    if isinstance(v, list):
        return [_round(x) for x in v]
    return v


def follow_job(
    head: LocalHead,
    command: list[str],
    metrics: Path,
    entrypoint_num_cpus: float = 1,
    timeout_s: float = 600,
) -> JobTimeline:
    """``arena submit --address HEAD -- arena <command>``, followed until the job has ended and
    every worker node that came up for it has gone again (or ``timeout_s``). ``metrics`` is
    the run's metrics.csv, to time the first iteration."""
    log = head.temp_dir / f"submit-{time.time_ns()}.log"
    env = venv_env(
        **({"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": head.token} if head.token else {})
    )
    cmd = [sys.executable, "-m", "arena", "submit", "--address", head.address]
    cmd += ["--entrypoint-num-cpus", str(entrypoint_num_cpus), "--", "arena", *command]
    t0 = time.time()
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    first_row = None
    try:
        while time.time() - t0 < timeout_s:
            if first_row is None and metrics.is_file():
                if len(metrics.read_text().splitlines()) > 1:  # header and a first row
                    first_row = time.time() - t0
            head.check_autoscaler()
            workers = [n for n in head.state("nodes") if not n["is_head_node"]]
            if proc.poll() is not None and all(n["state"] == "DEAD" for n in workers):
                break
            time.sleep(0.5)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    output = log.read_text()
    tl = JobTimeline(exit_code=proc.returncode, output=output, first_iteration=first_row)
    found = re.search(r"job (raysubmit_\w+)", output)
    if found:
        tl.job_id = found.group(1)
        job = head.api(f"/api/jobs/{tl.job_id}")
        tl.job_end = job["end_time"] / 1000 - t0 if job.get("end_time") else None
        tl.driver_node = job.get("driver_node_id")
        ray_job = job.get("job_id")
    for node in head.state("nodes"):
        if node["is_head_node"] or node["start_time_ms"] / 1000 < t0:
            continue
        tl.worker_nodes.append(node["node_id"])
        tl.node_up.append(node["start_time_ms"] / 1000 - t0)
        if node.get("end_time_ms"):
            tl.node_down.append(node["end_time_ms"] / 1000 - t0)
            idle = re.search(r"idle for ([0-9.]+) sec", node.get("state_message") or "")
            tl.node_idle_s.append(float(idle.group(1)) if idle else None)
            if node["node_id"] == tl.driver_node:
                tl.driver_node_down = tl.node_down[-1]
    for actor in head.state("actors"):
        if tl.job_id is None or actor["job_id"] != ray_job:
            continue
        if "EnvRunner" in actor["class_name"]:
            tl.env_runner_nodes.append(actor["node_id"])
    tl.node_up.sort()
    tl.node_down.sort()
    return tl


COMPONENTS = {
    "--ray-client-server-port": "Ray client server",
    "--dashboard-agent-listen-port": "dashboard agent HTTP (job agent API, health probe)",
    "--dashboard-agent-grpc-port": "dashboard agent gRPC",
    "--runtime-env-agent-port": "runtime env agent",
    "--metrics-export-port": "metrics export (Prometheus)",
    "--node-manager-port": "raylet",
    "--object-manager-port": "object manager",
}


def _http_status(url: str, data: bytes | None = None) -> int | str:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data=data), timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError as e:
        return type(e).__name__


def exposure(head: LocalHead) -> list[dict]:
    """What the head listens on: one row per port with its component, process, the addresses
    it is bound to, and for the HTTP ones the status of a request without a token (the job
    APIs: listing jobs on the dashboard, submitting one to the dashboard agent with an empty
    body; the metrics page; the agent's health route that Kubernetes probes)."""
    names = {head.gcs_port: "GCS", head.dashboard_port: "dashboard (job API)"}
    names.update({head.ports[flag]: name for flag, name in COMPONENTS.items()})
    agent = f"http://127.0.0.1:{head.ports['--dashboard-agent-listen-port']}"
    probes = {
        head.dashboard_port: {"GET /api/jobs/": _http_status(f"{head.address}/api/jobs/")},
        head.ports["--dashboard-agent-listen-port"]: {
            "POST /api/job_agent/jobs/": _http_status(f"{agent}/api/job_agent/jobs/", b"{}"),
            "GET /api/healthz": _http_status(f"{agent}/api/healthz"),
        },
        head.ports["--metrics-export-port"]: {
            "GET /": _http_status(f"http://127.0.0.1:{head.ports['--metrics-export-port']}/")
        },
    }
    rows: dict[int, dict] = {}
    for ip, port, process in listening_sockets(head.pids()):
        row = rows.setdefault(
            port,
            {
                "port": port,
                "component": names.get(port, "internal"),
                "process": process,
                "addresses": [],
                "without_token": probes.get(port, {}),
            },
        )
        row["addresses"].append(ip)
    return sorted(rows.values(), key=lambda r: (r["component"] == "internal", r["component"]))
