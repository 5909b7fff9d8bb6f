"""The autoscaling timeline of one training on a local autoscaled Ray cluster.

    .venv/bin/python bench/autoscaling.py [--env-runners 2] [--iterations 5] [--repeat 1]

Starts a head with no CPUs and Ray's autoscaler (v2) over one CPU worker type sized after
k8s/base/raycluster.yaml (scaled down by 4: 2-CPU workers, at most 2, 15 s idle timeout; see
cluster/local.py), submits ``arena train mpe/simple_spread-v3 --algo mappo`` with ``arena
submit --entrypoint-num-cpus 1``, and follows it until every worker node it brought up is gone
again. Prints one JSON line per repeat: seconds after the submission at which each worker node
came up, the first training iteration was logged, the job ended and each node was removed
(Ray's own node and job times; the first iteration polled every 0.5 s). The head is stopped by
its own processes at the end, also on error.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cluster.local import Autoscaling, LocalHead, follow_job, short_temp_dir  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--env-runners", type=int, default=2)
    p.add_argument("--iterations", type=int, default=5)
    p.add_argument("--repeat", type=int, default=1, help="jobs, one after the other")
    args = p.parse_args()

    auto = Autoscaling.from_manifest()
    head = LocalHead(short_temp_dir())
    out = Path(tempfile.mkdtemp(prefix="arena-autoscaling-"))
    try:
        t0 = time.perf_counter()
        head.start(num_cpus=auto.head_cpus, autoscaling=auto)
        head_s = time.perf_counter() - t0
        for i in range(args.repeat):
            name = f"auto{i}"
            command = [
                "train",
                "mpe/simple_spread-v3",
                "--algo",
                "mappo",
                "--iterations",
                str(args.iterations),
                "--env-runners",
                str(args.env_runners),
                "--out",
                str(out),
                "--name",
                name,
            ]
            metrics = out / "mpe/simple_spread-v3/mappo" / name / "metrics.csv"
            tl = follow_job(head, command, metrics)
            if tl.exit_code != 0:
                print(tl.output[-4000:], file=sys.stderr)
            summary = tl.summary()
            for key in ("driver_node", "env_runner_nodes", "worker_nodes"):  # ids: counts
                value = summary.pop(key)
                summary[f"{key}_count"] = len(set(value)) if isinstance(value, list) else 1
            print(
                json.dumps(
                    {
                        "bench": "autoscaling",
                        "repeat": i,
                        "head_start_s": round(head_s, 1),
                        "worker_cpus": auto.worker_cpus,
                        "max_workers": auto.max_workers,
                        "idle_timeout_s": auto.idle_timeout_s,
                        "env_runners": args.env_runners,
                        "iterations": args.iterations,
                        **summary,
                    }
                ),
                flush=True,
            )
    finally:
        head.stop()
        shutil.rmtree(head.temp_dir, ignore_errors=True)
        shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
