"""Run an ``arena`` command on a Ray cluster as a Ray job, and follow it to the end.

    arena submit [--address http://HEAD:8265] [--working-dir .] [--no-wait]
                 [--entrypoint-num-cpus N] [--token-file FILE] -- arena train ...

is ``ray job submit --runtime-env cluster/runtime_env.yaml -- arena train ...`` with three
additions: the command is checked here first (a typo fails now, not after the upload), the
entrypoint is ``python -m arena`` so the uploaded code runs even where no ``arena``
script is installed, and the exit status is the job's (0 SUCCEEDED, 1 FAILED or STOPPED).

The address is the head's dashboard (job API), not the GCS port: ``--address``, else
``RAY_API_SERVER_ADDRESS``, else an ``http(s)://`` ``RAY_ADDRESS``, else
``http://127.0.0.1:8265``. The entrypoint runs on the head with the head's Python, so the
cluster must already have Arena's dependencies (the venv that ran ``ray start``, or the image
of k8s/Dockerfile); only the code travels with the job. A head with token auth (as
docs/cluster.md starts it) gets the token of ``--token-file``, or Ray's own with
``RAY_AUTH_MODE=token``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shlex
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

DEFAULT_ADDRESS = "http://127.0.0.1:8265"
RUNTIME_ENV_FILE = Path(__file__).with_name("runtime_env.yaml")
TERMINAL_WAIT_S = 60  # the log stream can close a moment before the status turns terminal


class SubmitError(ValueError):
    """A submission that cannot be made (bad command, no cluster at the address, ...)."""


@dataclass
class Submission:
    """One ``arena`` command to run as a Ray job."""

    argv: list[str]
    """The arena command line without the leading ``arena``, e.g. ``["train", "mpe/..."]``."""
    address: str
    """Job API address of the head, ``http://host:8265``."""
    working_dir: Path
    """The checkout to upload (becomes the job's current directory on the cluster)."""
    wait: bool = True
    """Follow the logs until the job ends; otherwise return once it is submitted."""
    entrypoint_num_cpus: float | None = None
    """CPUs reserved for the driver: > 0 places it on a worker with free CPUs (the KubeRay
    head has none), where its local learner then runs."""
    token_file: Path | None = None
    """The cluster's auth token, sent as ``Authorization: Bearer``. Without it, Ray's own
    rule: with ``RAY_AUTH_MODE=token``, the token of ``RAY_AUTH_TOKEN``,
    ``RAY_AUTH_TOKEN_PATH`` or ``~/.ray/auth_token``."""

    @property
    def entrypoint(self) -> str:
        return shlex.join(["python", "-m", "arena", *self.argv])


def job_address(address: str | None) -> str:
    env = os.environ.get("RAY_ADDRESS", "")
    address = (
        address
        or os.environ.get("RAY_API_SERVER_ADDRESS")
        or (env if env.startswith(("http://", "https://")) else "")
        or DEFAULT_ADDRESS
    )
    return address if "://" in address else f"http://{address}"


def arena_argv(command: list[str], parser: argparse.ArgumentParser) -> list[str]:
    """The arena command after ``--``, checked with the CLI's own ``parser`` (which prints
    the usage and exits 2 on bad arguments)."""
    argv = list(command)
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if argv[:1] == ["arena"]:
        argv = argv[1:]
    if not argv:
        raise SubmitError(
            "nothing to submit: give an arena command after --, e.g. -- arena train ..."
        )
    ns = parser.parse_args(argv)
    if ns.command == "submit":
        raise SubmitError("arena submit cannot submit itself")
    if ns.command == "train" and not os.path.isabs(ns.out):
        print(
            f"arena submit: note: --out {ns.out} is relative to the job's copy of the code on the "
            "cluster, which Ray deletes later; give an absolute --out on storage you keep.",
            file=sys.stderr,
        )
    return argv


def runtime_env(working_dir: Path) -> dict:
    if not (working_dir / "arena" / "cli.py").is_file():
        raise SubmitError(f"--working-dir {working_dir} is not an Arena checkout (no arena/cli.py)")
    env = yaml.safe_load(RUNTIME_ENV_FILE.read_text())
    env["working_dir"] = str(working_dir.resolve())
    return env


def auth_headers(token_file: Path | None) -> dict[str, str]:
    if token_file is None:
        return {}
    try:
        token = token_file.read_text().strip()
    except OSError as e:
        raise SubmitError(f"--token-file {token_file}: {e.strerror}") from e
    if not token:
        raise SubmitError(f"--token-file {token_file} is empty")
    return {"Authorization": f"Bearer {token}"}


def _client(address: str, headers: dict[str, str]):
    from ray.job_submission import JobSubmissionClient

    try:
        return JobSubmissionClient(address, headers=headers or None)
    except ConnectionError as e:
        raise SubmitError(
            f"no Ray job API at {address} ({e}); start a head with `ray start --head` "
            "or port-forward the cluster's dashboard (port 8265)"
        ) from e
    except RuntimeError as e:
        raise SubmitError(f"cannot use the job API at {address}: {e}") from e


async def _print_logs(client, job_id: str) -> None:
    async for chunk in client.tail_job_logs(job_id):
        print(chunk, end="", flush=True)


def _final_status(client, job_id: str):
    from ray.job_submission import JobStatus

    deadline = time.monotonic() + TERMINAL_WAIT_S
    while True:
        info = client.get_job_info(job_id)
        if info.status.is_terminal() or time.monotonic() > deadline:
            return info
        time.sleep(0.5 if info.status != JobStatus.PENDING else 2)


def submit(sub: Submission) -> int:
    """Submits ``sub``; with ``wait``, follows its logs and returns the job's exit status."""
    from ray.exceptions import AuthenticationError

    env = runtime_env(sub.working_dir)
    try:
        client = _client(sub.address, auth_headers(sub.token_file))
        job_id = client.submit_job(
            entrypoint=sub.entrypoint, runtime_env=env, entrypoint_num_cpus=sub.entrypoint_num_cpus
        )
    except AuthenticationError as e:
        # A head started where ~/.ray/auth_token exists turns token auth on by itself.
        raise SubmitError(
            f"the cluster at {sub.address} wants a token: {e.message}. Pass --token-file FILE, "
            "or set RAY_AUTH_MODE=token and RAY_AUTH_TOKEN (or RAY_AUTH_TOKEN_PATH) as the "
            "cluster has them"
        ) from e
    print(f"arena submit: job {job_id} on {sub.address}: {sub.entrypoint}", flush=True)
    if not sub.wait:
        print(f"follow it with: ray job logs -f {job_id} --address {sub.address}")
        return 0
    try:
        asyncio.run(_print_logs(client, job_id))
        info = _final_status(client, job_id)
    except KeyboardInterrupt:
        print(
            f"\narena submit: job {job_id} keeps running; stop it with "
            f"`ray job stop {job_id} --address {sub.address}`",
            file=sys.stderr,
        )
        return 130
    took = ""
    if info.start_time and info.end_time:
        took = f" after {(info.end_time - info.start_time) / 1000:.1f} s"
    print(f"arena submit: job {job_id} {info.status.value}{took}", flush=True)
    if info.status.value == "SUCCEEDED":
        return 0
    if info.message:
        # The message repeats the tail of the logs printed above: its first line is enough.
        print(f"arena submit: {info.message.splitlines()[0]}", file=sys.stderr)
    return 1


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--address", help=f"head's job API (default {DEFAULT_ADDRESS})")
    p.add_argument("--working-dir", default=".", help="checkout to upload (default: .)")
    p.add_argument("--no-wait", action="store_true", help="return once the job is submitted")
    p.add_argument(
        "--entrypoint-num-cpus",
        type=float,
        metavar="N",
        help="CPUs reserved for the driver (puts it on a worker; default: none)",
    )
    p.add_argument(
        "--token-file",
        type=Path,
        metavar="FILE",
        help="the cluster's auth token (default: Ray's, with RAY_AUTH_MODE=token)",
    )
    # Not "command": that is the dest of the subcommand itself.
    p.add_argument(
        "arena_command",
        nargs=argparse.REMAINDER,
        metavar="-- arena COMMAND ...",
        help="what to run",
    )


def main(args: argparse.Namespace) -> int:
    try:
        sub = Submission(
            argv=arena_argv(args.arena_command, args.arena_parser),
            address=job_address(args.address),
            working_dir=Path(args.working_dir),
            wait=not args.no_wait,
            entrypoint_num_cpus=args.entrypoint_num_cpus,
            token_file=args.token_file,
        )
        return submit(sub)
    except SubmitError as e:
        print(f"arena: error: {e}", file=sys.stderr)
        return 2
