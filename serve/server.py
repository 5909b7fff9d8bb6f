"""``arena serve``: start (or join) Ray, deploy the runs' policies, wait until interrupted.

arena serve RUN [NAME=RUN ...] [--host 127.0.0.1] [--port 8000]
            [--replicas N | --autoscale MIN:MAX] [--address A]
"""

from __future__ import annotations

import signal
import sys
import threading
from dataclasses import dataclass


@dataclass
class ServeOptions:
    """Where and how ``arena serve`` listens.

    Args:
        host: interface of the HTTP proxy (127.0.0.1: this machine only).
        port: its port.
        address: a Ray cluster to deploy to (default: RAY_ADDRESS, else an embedded Ray).
    """

    host: str = "127.0.0.1"
    port: int = 8000
    address: str | None = None


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


def main(ns) -> int:
    """Runs ``arena serve`` from parsed arguments; bad arguments exit with 2."""
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
        return serve_forever(args, ServeOptions(ns.host, ns.port, ns.address))
    except ValueError as e:  # a bad policy name, two runs of one name
        print(f"arena: error: {e}", file=sys.stderr)
        return 2


def start(args, opts: ServeOptions) -> dict:
    """Deploys ``args`` and returns what is served (``/v1/policies``'s list, the URLs)."""
    from ray import serve

    from cluster import runtime
    from serve.app import APP_NAME, make_app, resolve

    specs = resolve(args.runs)  # a bad run fails before Ray starts
    runtime.connect(opts.address)
    serve.start(http_options={"host": opts.host, "port": opts.port})
    serve.run(make_app(args, specs), name=APP_NAME, route_prefix="/", blocking=False)
    url = f"http://{opts.host}:{opts.port}"
    return {
        "url": url,
        "policies": {s.name: f"{url}/v1/policies/{s.name}/act" for s in specs},
        "metrics": metrics_url(),
    }


def serve_forever(args, opts: ServeOptions) -> int:
    from ray import serve

    info = start(args, opts)
    print(f"serving on {info['url']}  (GET /healthz, GET /v1/policies)", flush=True)
    for name, url in info["policies"].items():
        print(f"  {name}: POST {url}", flush=True)
    if info["metrics"]:
        print(f"  Prometheus metrics: {info['metrics']}", flush=True)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    print("shutting down", flush=True)
    serve.shutdown()
    return 0
