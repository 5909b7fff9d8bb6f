"""One place that connects to Ray: an embedded local Ray sized for this machine (the default)
or an existing cluster given by ``--address`` / ``RAY_ADDRESS``.

The embedded Ray requires a token: without one any process that reaches its ports could join
as a driver or submit a job and run code. Each session makes a fresh random token
(``RAY_AUTH_MODE=token``, ``RAY_AUTH_TOKEN``) that only this process and the workers it starts
know. Its node's address is 127.0.0.1 (:func:`loopback_node`), so what Ray binds to the
node's address (GCS, raylet, agents, metrics) listens on loopback only; the dashboard is
bound to 127.0.0.1 as well. Other users of the same machine can still reach loopback: the
token stays.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import stat
import tempfile

# Set before Ray (and torch) start threads; workers inherit them through the runtime env.
WORKER_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "RAY_USAGE_STATS_ENABLED": "0"}
OBJECT_STORE_CAP = 2 * 1024**3  # bytes; plenty for rollouts of small models
for _k, _v in WORKER_ENV.items():
    os.environ.setdefault(_k, _v)


def local_resources() -> dict:
    """CPUs from the OS (respecting the process's CPU affinity) and a capped object store."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return {"num_cpus": cpus or 1, "object_store_memory": int(min(OBJECT_STORE_CAP, 0.1 * mem))}


KEEP_ENDED_SESSIONS = 3
"""Folders of ended embedded Ray sessions kept (their logs), newest first; older ones go."""


def private_temp_root() -> str:
    """The embedded Ray's temp root: ``<tmp>/arena-ray-<uid>``, owner-only (0700). Where that
    name is taken by another user, or is no plain folder of ours, a fresh unpredictable one
    (``mkdtemp``) instead: nobody else can plant or read what Ray keeps there."""
    root = os.path.join(tempfile.gettempdir(), f"arena-ray-{os.getuid()}")
    try:
        os.mkdir(root, 0o700)
    except FileExistsError:
        info = os.lstat(root)
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
            return tempfile.mkdtemp(prefix="arena-ray-")
        os.chmod(root, 0o700)
    return root


def prune_sessions(root: str, keep: int = KEEP_ENDED_SESSIONS) -> None:
    """Removes the folders of ended Ray sessions under ``root`` but the newest ``keep`` (a
    session folder ends in its driver's PID; a live driver's is never touched)."""
    import shutil

    ended = []
    for entry in os.scandir(root):
        name = entry.name
        if not (name.startswith("session_2") and entry.is_dir(follow_symlinks=False)):
            continue
        pid = name.rsplit("_", 1)[-1]
        if pid.isdigit() and _alive(int(pid)):
            continue
        ended.append((entry.stat(follow_symlinks=False).st_mtime, entry.path))
    for _, path in sorted(ended, reverse=True)[keep:]:
        shutil.rmtree(path, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def require_token(token: str) -> None:
    """Token authentication with ``token`` for the Ray this process starts next (Ray's own
    processes inherit it from the environment). Ray reads the mode into a cached config when
    it is imported, so the cache is refreshed here, as Ray's own ``_enable_token_auth`` does."""
    from ray._raylet import AuthenticationTokenLoader, Config

    os.environ["RAY_AUTH_MODE"] = "token"
    os.environ["RAY_AUTH_TOKEN"] = token
    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()


@contextlib.contextmanager
def scoped_env(**values: str):
    """``values`` in ``os.environ`` while open (the Ray processes started then inherit them),
    put back afterwards (later children of this process do not)."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@contextlib.contextmanager
def loopback_node():
    """While it is open, a Ray started here takes 127.0.0.1 as its node's address, as Ray
    does on macOS and Windows. Ray binds much to the node's address, or to every interface
    where that address is not loopback: the dashboard agent's HTTP and Prometheus ports, the
    runtime-env agent, the dashboard's and the autoscaler's metrics, the GCS and raylet gRPC
    ports. Ray reads the setting when it is imported: the driver's copy is set here, the
    processes it starts inherit the variable. Both are put back afterwards, so a later
    ``ray.init(address=...)`` of this process finds its real address."""
    from ray._private import ray_constants

    saved = ray_constants.ENABLE_RAY_CLUSTER
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        with scoped_env(**{ray_constants.ENABLE_RAY_CLUSTERS_ENV_VAR: "0"}):
            yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = saved


def connect(
    address: str | None = None,
    *,
    num_cpus: int | None = None,
    dashboard: bool = True,
    dashboard_port: int | None = None,
    temp_dir: str | None = None,
) -> dict:
    """Connects this process to Ray once; returns the cluster's resources.

    Args:
        address: a Ray cluster (``ray://...``, ``host:port`` or ``auto``); default
            ``RAY_ADDRESS``, else an embedded local Ray.
        num_cpus: CPUs of the embedded Ray (default: the machine's).
        dashboard: start the dashboard of the embedded Ray on 127.0.0.1.
        dashboard_port: its port (default Ray's, 8265).
        temp_dir: Ray's session directory root for the embedded Ray.
    """
    import ray

    import envs.registry
    from training import quiet

    if not ray.is_initialized():
        address = address or os.environ.get("RAY_ADDRESS") or None
        common = dict(
            runtime_env={"env_vars": dict(WORKER_ENV)},
            logging_level=logging.WARNING,
            log_to_driver=not quiet.enabled(),  # the workers' lines only with --verbose
        )
        if address:
            ray.init(address=address, **common)
        else:
            require_token(secrets.token_hex(32))
            res = local_resources()
            if num_cpus is not None:
                res["num_cpus"] = num_cpus
            # The dashboard's and the autoscaler's metrics take fixed ports by default (44227,
            # 44217): with a second Ray on the host one of them would not start.
            ports = {
                var: os.environ.get(var) or str(_free_port())
                for var in ("DASHBOARD_METRIC_PORT", "AUTOSCALER_METRIC_PORT")
            }
            with loopback_node(), scoped_env(**ports):
                ray.init(
                    address="local",
                    include_dashboard=dashboard,
                    dashboard_host="127.0.0.1",
                    **({"dashboard_port": dashboard_port} if dashboard_port else {}),
                    _temp_dir=temp_dir or _session_root(),
                    **res,
                    **common,
                )
    envs.registry.register_with_ray()
    return ray.cluster_resources()


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _session_root() -> str:
    root = private_temp_root()
    prune_sessions(root)
    return root


def shutdown() -> None:
    import ray

    if ray.is_initialized():
        ray.shutdown()
