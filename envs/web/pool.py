"""Many web envs in parallel: each Ray actor owns its envs (a browser each, for ``web/`` ids)
and plays whole episodes; the pool hands out (env id, seed) jobs and yields episodes as they
finish. An actor that dies takes its browsers with it (chromedriver dies with its parent,
Chromium with chromedriver) and its job is retried on a fresh actor."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import ray


@ray.remote(num_cpus=1, max_restarts=2)
class EpisodeWorker:
    def __init__(self):
        self.envs = {}

    def play(self, env_id: str, seed: int, teacher) -> list[dict]:
        import envs
        from envs.web.traces import play, task_of

        env = self.envs.get(env_id) or self.envs.setdefault(env_id, envs.make(env_id))
        return play(env, env_id, seed, teacher.build(task_of(env_id), seed))

    def browser_pids(self) -> list[int]:
        return [
            e.page_backend.pid for e in self.envs.values() if getattr(e.page_backend, "pid", None)
        ]

    def close(self) -> None:
        for env in self.envs.values():
            env.close()
        self.envs = {}


class EpisodePool:
    """``size`` :class:`EpisodeWorker` actors on the connected (or a new local) Ray."""

    def __init__(self, size: int):
        if not ray.is_initialized():
            ray.init(
                address="local", num_cpus=max(size, 1), include_dashboard=False, log_to_driver=False
            )
        cpus = ray.cluster_resources().get("CPU", 0)
        if size > cpus:
            raise ValueError(f"a pool of {size} actors needs {size} CPUs; Ray has {cpus:g}")
        self.workers = [EpisodeWorker.remote() for _ in range(size)]

    def play(self, jobs: list[tuple[str, int]], teacher) -> Iterator[list[dict]]:
        """Episodes of ``jobs`` in the order they finish."""
        queue, running = list(jobs), {}
        free = list(self.workers)
        while queue or running:
            while queue and free:
                worker, job = free.pop(), queue.pop(0)
                running[worker.play.remote(*job, teacher)] = (worker, job)
            ready, _ = ray.wait(list(running), num_returns=1)
            worker, job = running.pop(ready[0])
            free.append(worker)
            try:
                rows = ray.get(ready[0])
            except ray.exceptions.RayActorError:
                queue.append(job)  # the actor restarts; play the episode again
                continue
            yield rows

    def close(self) -> None:
        for w in self.workers:
            # a dead actor has nothing to close; a stuck one is killed below
            with contextlib.suppress(ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
                ray.get(w.close.remote(), timeout=30)
            ray.kill(w)
        self.workers = []
