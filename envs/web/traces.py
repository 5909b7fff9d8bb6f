"""Teacher traces: episodes played by a teacher, written as JSONL, resumable after a kill.

One line per step: task, seed, goal, observation, action, reward, done, success, the
teacher's name and its compute. An episode is appended whole and flushed to disk, so a
killed run leaves whole episodes (a torn last line is dropped on resume) and ``--resume``
plays only the (task, seed) pairs not yet on disk.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import envs


@dataclass(frozen=True)
class TeacherSpec:
    """How to build a teacher in any process (a Ray actor builds its own)."""

    kind: str = "scripted"  # scripted | openai
    error_rate: float = 0.0
    url: str = ""
    model: str = ""
    temperature: float = 0.25
    params: float | None = None

    def build(self, task: str, seed: int):
        from envs.web.teachers import OpenAITeacher, ScriptedTeacher

        if self.kind == "scripted":
            return ScriptedTeacher(task, self.error_rate, seed)
        if self.kind == "openai":
            if not self.url or not self.model:
                raise ValueError("the openai teacher needs --url and --model")
            return OpenAITeacher(
                self.url,
                self.model,
                self.temperature,
                params=self.params,
                api_key=os.environ.get("OPENAI_API_KEY"),
            )
        raise ValueError(f"teacher must be 'scripted' or 'openai', got {self.kind!r}")


def task_of(env_id: str) -> str:
    return env_id.split("/", 1)[1].rsplit("-v", 1)[0]


def play(env, env_id: str, seed: int, teacher) -> list[dict]:
    """One episode of ``teacher`` on page ``seed``; its step records."""
    obs, _ = env.reset(seed=seed, options={"task_seed": seed})
    history, rows = [], []
    while env.agents:
        text = obs["agent_0"]
        step = teacher.act(text, history)
        history.append(step.action)
        obs, rew, term, trunc, info = env.step({"agent_0": step.action})
        done = bool(term["agent_0"] or trunc["agent_0"])
        rows.append(
            {
                "env": env_id,
                "task": task_of(env_id),
                "seed": seed,
                "step": len(rows),
                "goal": text.splitlines()[0].removeprefix("Goal: "),
                "observation": text,
                "action": step.action,
                "reward": rew["agent_0"],
                "done": done,
                "success": bool(done and rew["agent_0"] > 0.5),
                "error": info["agent_0"]["error"],
                "teacher": teacher.name,
                "compute": step.compute,
            }
        )
    return rows


def done_episodes(path: Path) -> set[tuple[str, int]]:
    """(env, seed) of the whole episodes in ``path``; cuts a torn last line."""
    if not path.exists():
        return set()
    done, good = set(), 0
    with path.open("rb") as f:
        for line in f:
            try:
                row = json.loads(line)
            except ValueError:
                break
            good += len(line)
            if row.get("done"):
                done.add((row["env"], int(row["seed"])))
    if good < path.stat().st_size:
        with path.open("r+b") as f:
            f.truncate(good)
    return done


def append_episode(path: Path, rows: list[dict]) -> None:
    with path.open("a") as f:
        f.write("".join(json.dumps(r) + "\n" for r in rows))
        f.flush()
        os.fsync(f.fileno())


def write_traces(
    env_ids: Iterable[str],
    episodes: int,
    out: Path,
    teacher: TeacherSpec,
    seed: int = 0,
    workers: int = 0,
    progress: Callable[[int, int, float], None] | None = None,
) -> dict:
    """Plays ``episodes`` seeds per env id into ``out/traces.jsonl``, skipping those on disk.

    ``workers`` > 0 plays in that many Ray actors (:class:`envs.web.pool.EpisodePool`).
    Returns counts: episodes written now, already there, successes now.
    """
    out.mkdir(parents=True, exist_ok=True)
    path = out / "traces.jsonl"
    have = done_episodes(path)
    todo = [(e, seed + i) for e in env_ids for i in range(episodes) if (e, seed + i) not in have]
    wins = 0
    if workers > 0:
        from envs.web.pool import EpisodePool

        pool = EpisodePool(workers)
        results = pool.play(todo, teacher)
    else:
        pool = None
        built: dict[str, object] = {}

        def local():
            for env_id, s in todo:
                env = built.get(env_id) or built.setdefault(env_id, envs.make(env_id))
                yield play(env, env_id, s, teacher.build(task_of(env_id), s))
            for env in built.values():
                env.close()

        results = local()
    try:
        for n, rows in enumerate(results, 1):
            append_episode(path, rows)
            wins += rows[-1]["success"]
            if progress:
                progress(n, len(todo), wins / n)
    finally:
        if pool is not None:
            pool.close()
    return {"written": len(todo), "skipped": len(have), "successes": wins, "path": str(path)}
