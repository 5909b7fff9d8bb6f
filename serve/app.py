"""The Ray Serve application: one deployment holding every served run's policy, one route per
policy, ``@serve.batch`` across concurrent requests.

    arena serve RUN [NAME=RUN ...]                 # from the project root, a local Ray
    serve deploy serve/config.yaml                 # a running Ray cluster (or a KubeRay
                                                   # RayService's serveConfigV2)

The application builder is ``serve.app:build_app``; its args are :class:`ServeArgs`. The
replica restores each RLModule alone from its checkpoint (no Algorithm, no env). The
deployment is a plain ASGI-style callable over ``serve.policy.Api``, not FastAPI: it decodes
and validates the body itself, so bad input is always a 4xx, and it skips FastAPI's per-request
overhead. Language-model policies (``serve.lm``) batch their generations in a queue of their
own, run off the event loop.
"""

from __future__ import annotations

import asyncio
import os
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, field_validator
from ray import serve
from starlette.requests import Request
from starlette.responses import Response

from serve.policy import MAX_BODY_BYTES, Act, Api, PolicySpec, Reply, load, spec_from_run

APP_NAME = "arena"


class ServeArgs(BaseModel):
    """Arguments of the application builder (``args:`` in serve/config.yaml)."""

    runs: list[str] = Field(description="run directories, each optionally as NAME=RUN")
    replicas: int = Field(1, ge=1, description="replicas when not autoscaling")
    autoscale: str | None = Field(None, description="MIN:MAX replicas, autoscaled")
    seed_index: int | None = Field(
        None, ge=0, description="the seed served of runs trained with --seeds N"
    )
    replica_cpus: float = Field(1.0, gt=0, description="CPUs reserved per replica")
    max_batch_size: int = Field(64, ge=1, description="requests per forward pass")
    batch_wait_s: float = Field(0.0, ge=0, description="wait for a fuller batch (0: none)")
    max_ongoing_requests: int = Field(128, ge=1, description="in flight per replica")
    body_timeout_s: float = Field(
        10.0, gt=0, le=300, description="a request body must arrive within this (else 408)"
    )

    @field_validator("runs", mode="before")
    @classmethod
    def _split(cls, v):  # "a,b" from the command line
        return [s for s in v.split(",") if s] if isinstance(v, str) else v

    @field_validator("autoscale")
    @classmethod
    def _autoscale(cls, v):
        if v is not None:
            m = re.fullmatch(r"(\d+):(\d+)", v)
            if not m or not 0 < int(m[1]) <= int(m[2]):
                raise ValueError(f"autoscale must be MIN:MAX with 0 < MIN <= MAX, got {v!r}")
        return v


def resolve(runs: list[str], seed_index: int | None = None) -> list[PolicySpec]:
    """Specs of ``runs`` (``RUN`` or ``NAME=RUN``; ``seed_index``: the seed of stacked runs).
    A default name is ``<algo>-<env name>``; where two runs share it, each gets its run
    directory's name appended."""
    items = [item.split("=", 1) if "=" in item else (None, item) for item in runs]
    specs = [spec_from_run(run, name, seed_index) for name, run in items]
    names = [s.name for s in specs]
    specs = [
        s if name or names.count(s.name) == 1 else replace(s, name=f"{s.name}.{Path(s.run).name}")
        for s, (name, _) in zip(specs, items, strict=True)
    ]
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise ValueError(f"policy names must be unique, got {names}; name them NAME=RUN")
    return specs


@serve.deployment(name="PolicyServer", health_check_period_s=2, health_check_timeout_s=10)
class PolicyServer:
    """Serves ``specs``; ``max_batch_size`` and ``batch_wait_s`` tune ``@serve.batch``."""

    def __init__(
        self,
        specs: list[PolicySpec],
        max_batch_size: int,
        batch_wait_s: float,
        body_timeout_s: float = 10.0,
    ):
        import torch

        self.body_timeout_s = body_timeout_s

        torch.set_num_threads(1)  # one core per replica; threads only contend here
        self.api = Api({s.name: load(s) for s in specs})
        for batch in (self._act, self._generate):
            batch.set_max_batch_size(max_batch_size)
            batch.set_batch_wait_timeout_s(batch_wait_s)

    @serve.batch(max_batch_size=64, batch_wait_timeout_s=0.0)
    async def _act(self, calls: list[Act]) -> list[dict[str, Any]]:
        return answer(calls)

    @serve.batch(max_batch_size=64, batch_wait_timeout_s=0.0)
    async def _generate(self, calls: list[Act]) -> list[dict[str, Any]]:
        # Token-by-token generation takes from milliseconds to seconds: in a worker thread the
        # event loop keeps reading requests (the next batch) and answering health checks.
        return await asyncio.to_thread(answer, calls)

    async def _read_body(self, request: Request) -> bytes | Reply:
        """The body, refused (413) past ``MAX_BODY_BYTES`` by its Content-Length before
        reading, or as it arrives; one that takes over ``body_timeout_s`` is a 408, so slow
        clients cannot hold the replica's request slots."""
        length = request.headers.get("content-length")
        if length is not None:
            if not length.isdigit():
                return Reply(400, {"error": f"bad Content-Length {length[:40]!r}"})
            if int(length) > MAX_BODY_BYTES:
                return Reply(413, {"error": f"request body over {MAX_BODY_BYTES} bytes; split it"})

        async def read() -> bytes | Reply:
            chunks, size = [], 0
            async for chunk in request.stream():
                size += len(chunk)
                if size > MAX_BODY_BYTES:
                    return Reply(413, {"error": f"request body over {MAX_BODY_BYTES} bytes"})
                chunks.append(chunk)
            return b"".join(chunks)

        try:
            return await asyncio.wait_for(read(), self.body_timeout_s)
        except TimeoutError:
            return Reply(
                408, {"error": f"request body not received within {self.body_timeout_s} s"}
            )

    async def __call__(self, request: Request) -> Response:
        body = await self._read_body(request) if request.method == "POST" else b""
        if isinstance(body, Reply):
            out = body
        else:
            out = self.api.route(
                request.method, request.url.path, body, request.headers.get("content-type")
            )
        if isinstance(out, Act):
            out = Reply(200, await (self._generate if out.policy.slow else self._act)(out))
        content = b"" if request.method == "HEAD" else out.body()
        return Response(content, status_code=out.status, media_type="application/json")


def answer(calls: list[Act]) -> list[dict[str, Any]]:
    """Answers a batch of calls, grouped by policy: one forward pass (or generation call) per
    policy per batch."""
    out: list[Any] = [None] * len(calls)
    groups: dict[str, list[int]] = {}
    for i, call in enumerate(calls):
        groups.setdefault(call.policy.spec.name, []).append(i)
    for idx in groups.values():
        policy = calls[idx[0]].policy
        for i, reply in zip(idx, policy.act([calls[i].parsed for i in idx]), strict=True):
            out[i] = reply
    return out


def build_app(args: ServeArgs) -> serve.Application:
    """The Serve application of ``args.runs`` (the builder ``serve deploy`` calls)."""
    if not isinstance(args, ServeArgs):
        args = ServeArgs.model_validate(args)
    return make_app(args, resolve(args.runs, args.seed_index))


def make_app(args: ServeArgs, specs: list[PolicySpec]) -> serve.Application:
    """The application serving ``specs`` with the deployment settings of ``args``."""
    options: dict[str, Any] = {
        "ray_actor_options": {
            "num_cpus": args.replica_cpus,
            "runtime_env": {"env_vars": {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}},
        },
        "max_ongoing_requests": args.max_ongoing_requests,
        # A log line per request costs the replica more CPU than the forward pass.
        "logging_config": {"enable_access_log": False, "log_level": "WARNING"},
    }
    if args.autoscale:
        lo, hi = map(int, args.autoscale.split(":"))
        options["autoscaling_config"] = {
            "min_replicas": lo,
            "max_replicas": hi,
            "target_ongoing_requests": 8,
        }
    else:
        options["num_replicas"] = args.replicas
    return PolicyServer.options(**options).bind(
        specs, args.max_batch_size, args.batch_wait_s, args.body_timeout_s
    )


def __getattr__(name: str):
    # `serve build serve.app:app` needs an Application object: build it from ARENA_SERVE_RUNS.
    if name == "app":
        return build_app({"runs": os.environ.get("ARENA_SERVE_RUNS", "")})
    raise AttributeError(name)


def write_config(runs: list[str], path: str) -> None:
    """Writes ``path`` with ``serve build``, then points its import path at the builder with
    ``args: {runs: ...}``, so ``serve deploy`` and a RayService build the same app anywhere."""
    import yaml
    from ray.serve.scripts import build

    os.environ["ARENA_SERVE_RUNS"] = ",".join(runs)
    build.main(["serve.app:app", "-o", path], standalone_mode=False)
    text = Path(path).read_text()
    header = "".join(line + "\n" for line in text.splitlines() if line.startswith("#"))
    config = yaml.safe_load(text)
    for app in config["applications"]:
        app.update(name=APP_NAME, import_path="serve.app:build_app", args={"runs": list(runs)})
    Path(path).write_text(
        header
        + "# Then: import_path -> serve.app:build_app, args.runs (python -m serve.app).\n\n"
        + yaml.safe_dump(config, sort_keys=False)
    )


if __name__ == "__main__":  # python -m serve.app RUN [RUN ...] -o serve/config.yaml
    import argparse

    p = argparse.ArgumentParser(description="write a Serve config for runs")
    p.add_argument("runs", nargs="+")
    p.add_argument("-o", "--output", default="serve/config.yaml")
    a = p.parse_args()
    write_config(a.runs, a.output)
