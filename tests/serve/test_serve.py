"""The policy server: validation without a server, then real Ray Serve over real HTTP (in the
shared Ray session, Serve's own proxy), then ``arena serve`` as a user runs it (a subprocess
with its own Ray and the HAProxy front): a bounded load, a killed replica, metrics."""

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

import training
from serve.client import PolicyClient, ServeError
from serve.policy import Api, Reply, load, spec_from_run
from serve.server import free_port
from tests.serve.clients import concurrently
from training.config import TrainConfig, apply_overrides

SMALL = ["train_batch_size=256", "minibatch_size=128", "num_epochs=1", "num_envs_per_env_runner=4"]
MPE, MASKED = "mpe/simple_spread-v3", "test/masked_grid-v0"
MPE_NAME, MASKED_NAME = "mappo-simple_spread-v3", "mappo-masked_grid-v0"
TAG, TAG_NAME = "mpe/simple_tag-v3", "mappo-simple_tag-v3"
ZERO18 = [0.0] * 18
ONE_HOT = [0.0, 1.0, 0.0, 0.0, 0.0]
DEEP = '{"observations": {"agent_0": ' + "[" * 10_000 + "]" * 10_000 + "}}"
BIG_INT = b'{"observations": {"agent_0": [' + b"7" * 5000 + b", 0" * 17 + b"]}}"


@pytest.fixture(scope="module")
def runs(ray_session, tmp_path_factory):
    out = tmp_path_factory.mktemp("runs")
    made = {}
    for env_id in (MPE, MASKED, TAG):
        cfg = TrainConfig(env=env_id, algo="mappo", iterations=1)
        apply_overrides(cfg, SMALL)
        made[env_id] = training.train(cfg, out=str(out), name="t", console=Console(quiet=True))
    return made


@pytest.fixture(scope="module")
def api(runs):
    specs = [spec_from_run(runs[MPE]), spec_from_run(runs[MASKED]), spec_from_run(runs[TAG])]
    return Api({s.name: load(s) for s in specs})


def act_path(name):
    return f"/v1/policies/{name}/act"


def masked(obs, mask):
    return {"observations": obs, "action_mask": mask}


# (policy, body, status, words the message must contain)
BAD = [
    (MPE_NAME, b"{not json", 400, "malformed JSON"),
    (MPE_NAME, b"\xff\xfe", 400, "malformed JSON"),
    (MPE_NAME, b"[1, 2]", 400, "JSON object"),
    (MPE_NAME, {"observations": {}}, 400, "one or more of"),
    (MPE_NAME, {"obs": {"agent_0": ZERO18}}, 400, "unknown key"),
    (MPE_NAME, {"observations": {"agent_9": ZERO18}}, 400, "unknown agent 'agent_9'"),
    (MPE_NAME, {"observations": {"agent_0": ZERO18[:17]}}, 400, "shape [17]; expected [18]"),
    (MPE_NAME, {"observations": {"agent_0": [ZERO18, ZERO18[:3]]}}, 400, "ragged"),
    (MPE_NAME, {"observations": {"agent_0": ["x"] * 18}}, 400, "must be numbers"),
    (MPE_NAME, {"observations": {"agent_0": None}}, 400, "must be numbers"),
    (MPE_NAME, {"observations": {"agent_0": [[ZERO18]]}}, 400, "shape [1, 1, 18]"),
    (MPE_NAME, b'{"observations": {"agent_0": [NaN' + b", 0" * 17 + b"]}}", 400, "NaN"),
    (MPE_NAME, {"observations": {"agent_0": ZERO18}, "explore": "yes"}, 400, "true or false"),
    (MPE_NAME, {"observations": {"agent_0": [ZERO18] * 8193}}, 413, "at most 8192"),
    # json.loads(bytes) reads UTF-16 and UTF-32 too, where a depth scan of the bytes is blind
    (MPE_NAME, DEEP.encode("utf-16"), 400, "must be UTF-8"),
    (MPE_NAME, DEEP.encode("utf-32"), 400, "must be UTF-8"),
    (MPE_NAME, DEEP.encode("utf-16-le"), 400, "nested 10002 deep"),  # no BOM: UTF-8 with NULs
    (
        MPE_NAME,
        json.dumps({"observations": {"agent_0": [True] * 18}}).encode("utf-16"),
        400,
        "UTF-8",
    ),
    (MPE_NAME, BIG_INT, 400, "5000 digits; at most 40"),  # past 4,300 digits int() raises
    (MASKED_NAME, {"observations": {"a0": ONE_HOT}}, 400, "masks actions"),
    (MASKED_NAME, {"observations": {"a0": masked(ONE_HOT, [0, 0, 0])}}, 400, "no legal action"),
    (MASKED_NAME, {"observations": {"a0": masked(ONE_HOT, [1, 0])}}, 400, "action_mask has shape"),
    (MASKED_NAME, {"observations": {"a0": masked(ONE_HOT, [1, 2, 0])}}, 400, "0 or 1"),
    (MASKED_NAME, {"observations": {"a0": masked([2.0] + ONE_HOT[1:], [1, 1, 1])}}, 400, "bounds"),
    (
        MASKED_NAME,
        {"observations": {"a0": masked([ONE_HOT, ONE_HOT], [1, 1, 1])}},
        400,
        "2 observation(s) but 1 action mask(s)",
    ),
]


def encode(body):
    return body if isinstance(body, bytes) else json.dumps(body).encode()


@pytest.mark.parametrize(("name", "body", "status", "words"), BAD)
def test_bad_input_is_a_4xx_that_says_why(api, name, body, status, words):
    out = api.answer("POST", act_path(name), encode(body))
    assert isinstance(out, Reply) and out.status == status, out
    assert words in out.payload["error"], out.payload


def test_routes_methods_and_unknown_policy(api):
    assert api.answer("GET", "/healthz", b"").status == 200
    assert api.answer("GET", act_path(MPE_NAME), b"").status == 405
    assert api.answer("POST", "/v1/policies", b"").status == 405
    assert api.answer("GET", "/nowhere", b"").status == 404
    out = api.answer("POST", act_path("nobody"), b"{}")
    assert out.status == 404 and MPE_NAME in out.payload["error"]


def test_batch_of_a_vectorised_env_equals_one_request_per_env(api):
    rng = np.random.default_rng(0)
    obs = {a: rng.standard_normal((16, 18)).tolist() for a in ("agent_0", "agent_1", "agent_2")}
    batch = api.answer("POST", act_path(MPE_NAME), encode({"observations": obs})).payload
    for i in range(16):
        one = {a: rows[i] for a, rows in obs.items()}
        single = api.answer("POST", act_path(MPE_NAME), encode({"observations": one})).payload
        assert single["actions"] == {a: batch["actions"][a][i] for a in obs}


def test_one_request_spans_the_modules_of_a_two_policy_run(api):
    served = api.policies[TAG_NAME]
    assert set(served.policy.modules) == {"adversary", "agent"}
    rng = np.random.default_rng(0)
    obs = {f"adversary_{i}": rng.normal(size=16).tolist() for i in range(3)}
    obs["agent_0"] = rng.normal(size=14).tolist()
    reply = api.answer("POST", act_path(TAG_NAME), encode({"observations": obs}))
    assert reply.status == 200, reply.payload
    local = training.load_policy(served.spec.run)
    expected = local.act({a: np.asarray(o, np.float32) for a, o in obs.items()})
    assert reply.payload["actions"] == expected
    bad = api.answer("POST", act_path(TAG_NAME), encode({"observations": {"agent_0": [0.0] * 16}}))
    assert bad.status == 400 and "[14]" in bad.payload["error"]


def test_sampled_actions_respect_the_mask(api):
    rng = np.random.default_rng(1)
    masks = rng.integers(0, 2, (300, 3))
    masks[masks.sum(1) == 0, 0] = 1
    obs = np.eye(5)[rng.integers(0, 5, 300)]
    body = {"observations": {"a0": masked(obs.tolist(), masks.tolist())}, "explore": True}
    actions = api.answer("POST", act_path(MASKED_NAME), encode(body)).payload["actions"]["a0"]
    assert all(masks[i, a] == 1 for i, a in enumerate(actions))
    assert len(set(actions)) == 3  # sampled, not one greedy choice


def test_media_type_head_nesting_and_booleans(api):
    body = encode({"observations": {"agent_0": ZERO18}})
    for content_type in (None, "text/plain", "application/x-www-form-urlencoded"):
        reply = api.route("POST", act_path(MPE_NAME), body, content_type)
        assert reply.status == 415 and "application/json" in reply.payload["error"]
    ok = api.route("POST", act_path(MPE_NAME), body, "application/json; charset=utf-8")
    assert not isinstance(ok, Reply)
    assert api.answer("HEAD", "/healthz", b"").status == 200
    assert api.answer("HEAD", act_path(MPE_NAME), b"").status == 405
    deep = b'{"observations": {"agent_0": ' + b"[" * 10_000 + b"]" * 10_000 + b"}}"
    reply = api.answer("POST", act_path(MPE_NAME), deep)
    assert reply.status == 400 and "nested 10002 deep" in reply.payload["error"]
    for bad in ([True] + ZERO18[1:], ZERO18[:-1] + [False]):
        reply = api.answer("POST", act_path(MPE_NAME), encode({"observations": {"agent_0": bad}}))
        assert reply.status == 400 and "not true/false" in reply.payload["error"]
    flag = encode({"observations": {"agent_0": ZERO18}, "explore": True})
    assert api.answer("POST", act_path(MPE_NAME), flag).status == 200
    swapped = b'{"observations": {"agent_0": [true' + b", 0" * 17 + b']}, "explore": 1}'
    assert api.answer("POST", act_path(MPE_NAME), swapped).status == 400


# ---------------------------------------------------------------- Ray Serve, in this session
@pytest.fixture(scope="module")
def served(runs):
    from ray import serve

    from serve.app import APP_NAME, ServeArgs, build_app

    port = free_port()
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    args = ServeArgs(
        runs=[str(runs[MPE]), f"grid={runs[MASKED]}"], replica_cpus=0.5, body_timeout_s=2.0
    )
    serve.run(build_app(args.model_dump()), name=APP_NAME, route_prefix="/")
    yield f"http://127.0.0.1:{port}"
    serve.shutdown()


def test_policies_describe_spaces_and_version(served):
    with PolicyClient(served) as c:
        policies = {p["name"]: p for p in c.policies()}
        assert c.health()["status"] == "ok"
    assert set(policies) == {MPE_NAME, "grid"}
    grid = policies["grid"]
    assert grid["env"] == MASKED and grid["agents"] == ["a0", "a1"] and grid["masked"]
    assert grid["action_spaces"]["a0"] == {"type": "Discrete", "n": 3, "start": 0}
    assert policies[MPE_NAME]["observation_spaces"]["agent_0"]["shape"] == [18]
    assert grid["version"] == "t/iter_000001"


def test_every_bad_input_is_the_same_4xx_over_http(served):
    names = {MPE_NAME: MPE_NAME, MASKED_NAME: "grid"}
    with PolicyClient(served) as c:
        for name, body, status, words in BAD:
            got, data = c.request("POST", act_path(names[name]), encode(body))
            assert got == status and words in json.loads(data)["error"], (name, body, data)
        assert c.request("GET", act_path("grid"))[0] == 405


def raw_request(url: str, head: bytes, body: bytes, wait_s: float) -> bytes:
    """Sends ``head`` and ``body`` over a raw loopback socket and reads the answer for at most
    ``wait_s`` seconds."""
    import socket

    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=wait_s) as sock:
        sock.sendall(head + body)
        data = b""
        try:
            while b"\r\n\r\n" not in data:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                data += chunk
        except TimeoutError:
            pass
        return data


def assert_slow_and_big_bodies_refused(url: str, within_s: float) -> None:
    """A body that never completes is a 408 within ``within_s``; a 1 GB Content-Length is a
    413 before the body is read."""
    path = act_path(MPE_NAME).encode()
    head = b"POST " + path + b" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    t0 = time.perf_counter()
    answer = raw_request(url, head + b"Content-Length: 100\r\n\r\n", b'{"obs', within_s + 5)
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
    assert time.perf_counter() - t0 < within_s
    # (32 KB of it: HAProxy forwards a request once its body fills a 16 KB buffer)
    big = head + b"Content-Length: 1000000000\r\n\r\n"
    answer = raw_request(url, big, b"[" + b"0," * 16_000, within_s + 5)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]


def test_slow_and_oversized_bodies_are_refused(served):
    assert_slow_and_big_bodies_refused(served, within_s=15)
    with PolicyClient(served) as c:  # the server still answers
        assert c.act(MPE_NAME, {"agent_0": ZERO18})["agent_0"] in range(5)


# Bodies that cost the old pre-check seconds to hours of replica CPU (its string regex was
# quadratic), or reached the parser past the checks and came back as 500s.
ATTACKS = {
    "quadratic string, 32 KB": b'"' + b'\\"' * 16_000,  # 7 s with the old regex
    "quadratic string, 1 MiB": b'"' + b'\\"' * (1 << 19),  # hours
    "nested 10,000 deep, UTF-8": DEEP.encode(),
    "nested 10,000 deep, UTF-16": DEEP.encode("utf-16"),
    "nested 10,000 deep, UTF-32": DEEP.encode("utf-32"),
    "5,000-digit integer": BIG_INT,
}


def assert_attacks_refused_while_serving(url: str) -> None:
    """Each attack body is a 4xx, and a normal act request sent while it is on its way or
    being processed is answered within 5 s."""
    good = encode({"observations": {"agent_0": ZERO18}})
    for name, body in ATTACKS.items():
        attacked: dict[str, object] = {}

        def attack(body=body, attacked=attacked):
            with PolicyClient(url, timeout=120) as c:
                attacked["status"], attacked["data"] = c.request("POST", act_path(MPE_NAME), body)

        thread = threading.Thread(target=attack)
        thread.start()
        time.sleep(0.1)  # the attack goes first
        t0 = time.monotonic()
        with PolicyClient(url, timeout=30) as c:
            status, data = c.request("POST", act_path(MPE_NAME), good)
        waited = time.monotonic() - t0
        assert status == 200 and waited < 5, (name, status, data, waited)
        thread.join(120)
        assert 400 <= attacked.get("status", 0) < 500, (name, attacked)


def test_hostile_bodies_are_4xx_and_the_replica_keeps_answering(served):
    # one replica: a body that held it would hold every other request too
    assert_attacks_refused_while_serving(served)


def test_concurrent_requests_are_answered_each_with_its_own_mask(served):
    # 24 clients at once, each allowing one action: every answer must be that action.
    def ask(c, i):
        allowed = i % 3
        mask = [int(k == allowed) for k in range(3)]
        return allowed, c.act("grid", {"a0": masked(ONE_HOT, mask), "a1": masked(ONE_HOT, mask)})

    results, errors = concurrently(served, clients=24, calls=5, call=ask)
    assert not errors
    assert sum(len(v) for v in results.values()) == 24 * 5
    for answers in results.values():
        for allowed, out in answers:
            assert out == {"a0": allowed, "a1": allowed}


# ------------------------------------------------------- arena serve, as a user runs it
def descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def replica_pids(server_pid: int) -> set[int]:
    pids = set()
    for pid in descendants(server_pid):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"ServeReplica:arena:PolicyServer" in cmd:
            pids.add(pid)
    return pids


@pytest.fixture(scope="module")
def cli_server(runs, tmp_path_factory):
    port = free_port()
    log = tmp_path_factory.mktemp("serve") / "arena-serve.log"
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "OMP_NUM_THREADS": "1"}
    env.pop("RAY_ADDRESS", None)
    cmd = [sys.executable, "-m", "arena", "serve", str(runs[MPE]), "--port", str(port)]
    cmd += ["--replicas", "2", "--replica-cpus", "0.5"]
    with log.open("w") as f:
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    client = PolicyClient(url, timeout=5)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if "serving on" in log.read_text() and client.health()["status"] == "ok":
                break
        except (OSError, ServeError):
            pass
        time.sleep(1)
    else:
        proc.kill()
        pytest.fail(f"arena serve did not come up:\n{log.read_text()[-3000:]}")
    folder = haproxy_folder(proc.pid)
    yield proc, url, log
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    assert proc.returncode == 0, log.read_text()[-3000:]
    assert not folder.exists()  # removed on the way out


def haproxy_folder(server_pid: int) -> Path:
    """The folder ``arena serve`` made for HAProxy's files (config, sockets), from the
    ``-f CONFIG`` of its HAProxy: ``<folder>/<node id>/haproxy.cfg``."""
    for pid in descendants(server_pid):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"haproxy" in cmd[0] and b"-f" in cmd:
            return Path(cmd[cmd.index(b"-f") + 1].decode()).parent.parent
    raise AssertionError("no HAProxy under arena serve")


LOOPBACK = ("127.", "::1", "::ffff:127.")


def run_load(url, seconds, concurrency, during=None):
    """Posts one observation from ``concurrency`` clients for ``seconds``; per-request
    outcomes (status or exception name) with their send times."""
    body = encode({"observations": {"agent_1": ZERO18}})
    outcomes: list[tuple[float, object]] = []
    sent = [0]
    lock = threading.Lock()
    stop = time.monotonic() + seconds

    def worker():
        c = PolicyClient(url, timeout=30)
        while time.monotonic() < stop:
            t = time.monotonic()
            with lock:
                sent[0] += 1
            try:
                status, data = c.request("POST", act_path(MPE_NAME), body)
                ok = status == 200 and isinstance(json.loads(data)["actions"]["agent_1"], int)
                outcome = "ok" if ok else status
            except OSError as e:
                outcome = type(e).__name__
            with lock:
                outcomes.append((t, outcome))
        c.close()

    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for t in threads:
        t.start()
    if during:
        during()
    for t in threads:
        t.join()
    return sent[0], outcomes


def test_bounded_load_has_no_5xx_and_loses_no_request(cli_server):
    _, url, _ = cli_server
    sent, outcomes = run_load(url, seconds=30, concurrency=16)
    counts = Counter(o for _, o in outcomes)
    assert len(outcomes) == sent  # every request sent was answered
    assert counts == {"ok": sent}, counts


def test_haproxy_front_buffers_requests_and_keeps_short_timeouts(cli_server):
    proc, url, _ = cli_server
    port = url.rsplit(":", 1)[1]
    base = haproxy_folder(proc.pid)
    # a fresh folder (mkdtemp), nobody else's: a fixed name could have been planted
    assert base.parent == Path("/tmp") and base.name.startswith(f"ahp{port}-"), base
    assert base.stat().st_uid == os.getuid() and base.stat().st_mode & 0o777 == 0o700
    config = next(base.rglob("haproxy.cfg")).read_text()
    assert "timeout client 30s" in config and "timeout server 60s" in config
    # whole requests before a replica sees them, within 5 s
    assert "option http-buffer-request" in config and "timeout http-request 5s" in config
    # Ray's template binds the stats page and the exporter to every interface and makes the
    # admin socket 666: Arena's wrapper binds them to 127.0.0.1 and makes the socket 600, and
    # the folder around it admits its owner only.
    assert "bind *:" not in config and not re.search(r"^\s*bind :\d+\s*$", config, re.M)
    assert "mode 600 level admin" in config
    sock = next(base.rglob("admin.sock"))
    assert sock.stat().st_mode & 0o077 == 0
    assert next(base.rglob("metrics.sock"))  # not in Ray's shared /tmp/haproxy-serve
    # A body that never completes is HAProxy's own 408 (text/html), not the replica's.
    path = act_path(MPE_NAME).encode()
    head = b"POST " + path + b" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    answer = raw_request(url, head + b"Content-Length: 100\r\n\r\n", b'{"obs', 30)
    assert answer.startswith(b"HTTP/1.1 408") and b"text/html" in answer.lower(), answer[:300]
    assert_slow_and_big_bodies_refused(url, within_s=20)


def test_arena_serve_listens_on_loopback_only(cli_server):
    import psutil

    proc, _, _ = cli_server
    tree = set(descendants(proc.pid)) | {proc.pid}
    listening = {
        (c.pid, c.laddr.ip, c.laddr.port)
        for c in psutil.net_connections("tcp")
        if c.status == "LISTEN" and c.pid in tree
    }
    assert len(listening) > 10, listening  # HAProxy, GCS, raylet, agents, metrics, replicas
    beyond = {(pid, ip, port) for pid, ip, port in listening if not ip.startswith(LOOPBACK)}
    # The one exception: each Serve replica's inter-deployment gRPC server, which Ray 2.60
    # binds to "[::]:0" with no setting (docs/security.md).
    replicas = replica_pids(proc.pid)
    assert replicas and all(pid in replicas and ip == "::" for pid, ip, _ in beyond), beyond


def test_hostile_bodies_through_haproxy(cli_server):
    _, url, _ = cli_server
    assert_attacks_refused_while_serving(url)


def test_killed_replica_is_replaced_and_traffic_continues(cli_server):
    proc, url, _ = cli_server
    before = replica_pids(proc.pid)
    assert len(before) == 2, before
    victim = min(before)
    killed_at = []

    def kill():
        time.sleep(3)
        os.kill(victim, signal.SIGKILL)
        killed_at.append(time.monotonic())

    sent, outcomes = run_load(url, seconds=12, concurrency=8, during=kill)
    assert len(outcomes) == sent
    after = [o for t, o in outcomes if t > killed_at[0] + 5]
    assert after and Counter(after) == {"ok": len(after)}, Counter(after)
    failed = [o for _, o in outcomes if o != "ok"]
    assert len(failed) <= 0.01 * sent, Counter(failed)  # only requests in flight may fail
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        now = replica_pids(proc.pid)
        if victim not in now and len(now) == 2:
            break
        time.sleep(1)
    assert victim not in now and len(now) == 2, (before, now)


def test_metrics_endpoint_exports_serve_metrics(cli_server):
    import urllib.request

    _, _, log = cli_server
    found = re.search(r"Prometheus metrics: (\S+)", log.read_text())
    assert found, log.read_text()[-2000:]
    deadline, text = time.monotonic() + 30, ""
    while time.monotonic() < deadline and "ray_serve_" not in text:
        text = urllib.request.urlopen(found[1], timeout=5).read().decode()
        time.sleep(2)
    assert re.search(r"^ray_serve_\w+", text, re.M), text[:500]


def arena_serve(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    env.pop("RAY_ADDRESS", None)
    return subprocess.run(
        [sys.executable, "-m", "arena", "serve", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def assert_refused(proc: subprocess.CompletedProcess, *words: str) -> None:
    """Exit 2 with one line, before Ray started."""
    assert proc.returncode == 2, proc.stderr[-3000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("arena: error: "), proc.stderr[-3000:]
    assert all(w in lines[0] for w in words), lines[0]
    assert "starting Ray" not in proc.stdout, proc.stdout


def test_arena_serve_refuses_a_bad_run_with_one_line(tmp_path):
    assert_refused(
        arena_serve(str(tmp_path / "nowhere"), "--port", str(free_port())), "not a run directory"
    )


def test_arena_serve_refuses_weights_that_do_not_fit_the_config(runs, tmp_path):
    import shutil

    import yaml

    run = tmp_path / "narrow"
    shutil.copytree(runs[MPE], run)
    cfg = yaml.safe_load((run / "config.yaml").read_text())
    cfg["mappo"]["model"]["hidden"] = [32, 32]  # the weights hold 64-unit layers
    (run / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    assert_refused(arena_serve(str(run), "--port", str(free_port())), "size mismatch")


def test_arena_serve_refuses_a_port_in_use_and_replicas_that_do_not_fit(runs):
    import socket

    import training.runtime

    run = str(runs[MPE])
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = str(busy.getsockname()[1])
        assert_refused(arena_serve(run, "--port", port), f"127.0.0.1:{port} is in use")
    cpus = training.runtime.local_resources()["num_cpus"]
    port = str(free_port())
    assert_refused(
        arena_serve(run, "--port", port, "--replicas", str(cpus + 1)),
        f"--replicas {cpus + 1} x --replica-cpus 1 need {cpus + 1} CPUs",
        f"has {cpus}",
    )
    assert_refused(
        arena_serve(run, "--port", port, "--replica-cpus", str(cpus + 0.5)),
        f"more than the {cpus} CPUs",
    )
    assert_refused(
        arena_serve(
            run, "--port", port, "--autoscale", f"1:{2 * cpus + 1}", "--replica-cpus", "0.5"
        ),
        f"--autoscale 1:{2 * cpus + 1}",
    )
