"""Episodes of web envs played by a student, all envs in lockstep: each step batches the
prompts of every env still running into one generation call.

Used by the GRPO sampler (groups of attempts at one page), by behaviour cloning's held-out
evaluation and by ``arena eval``. Nothing here imports Ray, so a study can also run these
pieces in one plain process (``bench/lm_study_direct.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from envs.web.env import AGENT
from policies.lm.student import Completion, Student

TRAIN_SEEDS = 1_000_000
"""Training pages are seeds below this (teacher traces use 0, 1, ...); held-out pages at and
above it."""


def env_id_for(task: str, backend: str) -> str:
    return f"websim/{task}-v0" if backend == "twin" else f"web/{task}-v1"


class EnvPool:
    """Web envs per env id, made once and reused; ``jobs`` hands each page its own env, since
    :func:`play` runs them all at the same time."""

    def __init__(self, make: Callable[[str], object]):
        self.make = make
        self.envs: dict[str, list] = {}

    def jobs(self, pages: list[tuple[str, int, int]], backend: str = "twin") -> list:
        """``(env, task, seed, group)`` for each page ``(task, seed, group)``."""
        used: dict[str, int] = {}
        out = []
        for task, seed, group in pages:
            env_id = env_id_for(task, backend)
            have = self.envs.setdefault(env_id, [])
            k = used.get(env_id, 0)
            if k == len(have):
                have.append(self.make(env_id))
            used[env_id] = k + 1
            out.append((have[k], task, seed, group))
        return out

    def close(self) -> None:
        for pool in self.envs.values():
            for env in pool:
                env.close()
        self.envs.clear()


@dataclass
class Turn:
    """One action turn: prompt tokens, the sampled answer."""

    prompt: list[int]
    answer: Completion


@dataclass
class Episode:
    task: str
    seed: int
    group: int
    reward: float = 0.0
    success: bool = False
    parse_errors: int = 0
    turns: list[Turn] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)
    observations: list[str] = field(default_factory=list)
    """The page text each action was taken on (what a process reward model judges)."""
    pages: list[int] = field(default_factory=list)
    """Which page of a multi-page flow each action was taken on."""

    @property
    def tokens(self) -> int:
        """Tokens the student read and wrote (prompt and answer of every turn)."""
        return sum(len(t.prompt) + len(t.answer.tokens) for t in self.turns)


def play(
    student: Student,
    jobs: list[tuple[object, str, int, int]],
    temperature: float,
    generator: torch.Generator | None = None,
) -> list[Episode]:
    """Plays one episode per job ``(env, task, page seed, group id)``; the envs must be
    distinct objects (they run at the same time)."""
    episodes = [Episode(task, seed, group) for _, task, seed, group in jobs]
    obs = {}
    for i, (env, _, seed, _) in enumerate(jobs):
        o, _ = env.reset(seed=seed, options={"task_seed": seed})
        obs[i] = o[AGENT]
    while obs:
        live = sorted(obs)
        prompts = [student.prompt(obs[i], episodes[i].actions) for i in live]
        answers = student.generate(prompts, temperature, generator)
        for i, prompt, answer in zip(live, prompts, answers, strict=True):
            ep, env = episodes[i], jobs[i][0]
            ep.turns.append(Turn(prompt, answer))
            ep.actions.append(answer.text)
            ep.observations.append(obs[i])
            ep.pages.append(getattr(env, "index", 0))
            o, rew, term, trunc, info = env.step({AGENT: answer.text})
            if term[AGENT] or trunc[AGENT]:
                ep.reward = float(rew[AGENT])
                ep.success = ep.reward > 0.5
                ep.parse_errors = int(info[AGENT]["parse_errors"])
                del obs[i]
            else:
                obs[i] = o[AGENT]
    return episodes


def episode_record(ep: Episode) -> dict[str, Any]:
    """An episode as plain data (what crosses from a runner actor to the driver)."""
    return {
        "task": ep.task,
        "seed": ep.seed,
        "group": ep.group,
        "reward": ep.reward,
        "success": ep.success,
        "parse_errors": ep.parse_errors,
        "length": len(ep.turns),
        "tokens": ep.tokens,
        "actions": ep.actions,
        "turns": [
            {
                "prompt": t.prompt,
                "answer": t.answer.tokens,
                "logps": t.answer.logps,
                "truncated": t.answer.truncated,
            }
            for t in ep.turns
        ],
    }
