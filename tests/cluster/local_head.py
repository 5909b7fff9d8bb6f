"""A real Ray head node on 127.0.0.1 for tests, started with ``ray start --head`` and stopped
by its own processes only.

A bare ``ray stop`` kills every Ray process on the host (other people's tests included), so
:meth:`LocalHead.stop` kills just the processes that belong to this head: those whose command
line names its private temp dir or its GCS address, and all their descendants (the dashboard's
subprocesses, the raylet's agents and workers, job drivers).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def venv_env(**extra: str) -> dict[str, str]:
    """This interpreter's environment with its bin dir first on PATH (the job entrypoint's
    ``python`` and ``arena`` are the ones on the PATH of the shell that ran ``ray start``),
    token auth off explicitly for both sides, and no inherited cluster address."""
    env = {
        k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_API_SERVER_ADDRESS")
    }
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env.update(RAY_AUTH_MODE="disabled", RAY_USAGE_STATS_ENABLED="0", OMP_NUM_THREADS="1")
    env.update(extra)
    return env


@dataclass
class LocalHead:
    temp_dir: Path
    gcs_port: int = field(default_factory=free_port)
    dashboard_port: int = field(default_factory=free_port)
    ports: dict[str, int] = field(default_factory=lambda: {f: free_port() for f in PORT_FLAGS})
    start_s: float = 0.0

    @property
    def address(self) -> str:
        """The job submission (dashboard) address."""
        return f"http://127.0.0.1:{self.dashboard_port}"

    def start(self, num_cpus: int = 2, timeout: float = 120, **env: str) -> LocalHead:
        cmd = [
            str(Path(sys.executable).parent / "ray"),
            "start",
            "--head",
            "--port",
            str(self.gcs_port),
            "--dashboard-host",
            "127.0.0.1",
            "--dashboard-port",
            str(self.dashboard_port),
            "--temp-dir",
            str(self.temp_dir),
            "--num-cpus",
            str(num_cpus),
            "--disable-usage-stats",
        ]
        for flag, port in self.ports.items():
            cmd += [flag, str(port)]
        t0 = time.perf_counter()
        proc = subprocess.run(
            cmd, env=venv_env(**env), capture_output=True, text=True, timeout=timeout
        )
        self.start_s = time.perf_counter() - t0
        if proc.returncode != 0:
            raise RuntimeError(f"ray start failed ({proc.returncode}):\n{proc.stdout}{proc.stderr}")
        return self

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
            pass


def short_temp_dir() -> Path:
    # Ray puts unix sockets under the temp dir; their paths must stay under 107 bytes.
    return Path(tempfile.mkdtemp(prefix="arena-head-", dir="/tmp"))
