"""Training data of the language-model algorithms as plain arrays, without Ray: the scripted
teacher's cached traces, traces read into turns, turns padded into a batch, and GRPO's played
groups turned into turns that carry their group-relative advantage."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from policies.algorithm import AlgorithmMismatch
from policies.lm.objective import group_advantages, process_advantages, turn_advantages
from policies.lm.student import cache_root


def read_traces(path: Path, successes_only: bool) -> tuple[list[dict], int]:
    """Trace steps (``observation``, ``action``, episode history) of ``path``
    (``traces.jsonl`` or a folder holding it), and how many steps it has in all."""
    path = path / "traces.jsonl" if path.is_dir() else path
    if not path.is_file():
        raise AlgorithmMismatch(
            f"no teacher traces at {path}; write some with `arena web traces --tasks TASK "
            "--out DIR` and pass --traces DIR"
        )
    episodes: dict[tuple, list[dict]] = {}
    total = 0
    with path.open() as f:
        for n, line in enumerate(f, 1):
            try:
                row = json.loads(line)
                key = (row["env"], int(row["seed"]))
                row["observation"], row["action"]  # noqa: B018 - both must be there
            except (ValueError, KeyError, TypeError):
                raise AlgorithmMismatch(f"{path}:{n}: not a trace step") from None
            episodes.setdefault(key, []).append(row)
            total += 1
    steps = []
    for rows in episodes.values():
        if successes_only and not rows[-1].get("success"):
            continue
        history: list[str] = []
        for row in rows:
            steps.append({**row, "history": list(history)})
            history.append(row["action"])
    return steps, total


def stream_indices(count: int, seed: int, start: int, n: int) -> list[int]:
    """Which of ``count`` trace turns BC draws at positions ``start`` to ``start + n`` of its
    stream: pass after pass over them, pass ``p`` in the order seeded by ``(seed, p)``, so a
    run resumed at ``start`` draws what it would have drawn."""
    orders: dict[int, np.ndarray] = {}
    out = []
    for k in range(start, start + n):
        p, i = divmod(k, count)
        if p not in orders:
            orders[p] = np.random.default_rng([seed, p]).permutation(count)
        out.append(int(orders[p][i]))
    return out


def teacher_share(drawn: int, turns: int) -> float:
    """The share of the teacher's bill a BC run has paid after drawing ``drawn`` of the
    ``turns`` trace turns it clones. Traces are bought as they are first used, so a BC
    run's FLOPs at any point count the teacher data it has learnt from so far; it pays in
    proportion through its first pass and nothing more for later passes over the same
    traces. The failed traces, which BC never draws, are paid in the same proportion."""
    return min(1.0, drawn / turns)


def turn_batch(turns: list[dict], pad: int) -> dict[str, np.ndarray]:
    """Padded arrays of turns ``{"prompt", "answer", "logps"?, "advantage"?}``."""
    rows = [t["prompt"] + t["answer"] for t in turns]
    B, L = len(rows), max(len(r) for r in rows)
    tokens = np.full((B, L), pad, np.int64)
    attention = np.zeros((B, L), np.int64)
    targets = np.zeros((B, L), bool)
    old = np.zeros((B, L), np.float32)
    for i, (t, r) in enumerate(zip(turns, rows, strict=True)):
        n, p = len(r), len(t["prompt"])
        tokens[i, :n], attention[i, :n], targets[i, p:n] = r, 1, True
        if "logps" in t:
            old[i, p:n] = t["logps"]
    adv = np.array([t.get("advantage", 0.0) for t in turns], np.float32)
    return {
        "tokens": tokens,
        "attention": attention,
        "targets": targets,
        "old_logp": old,
        "advantage": adv,
    }


def grpo_turns(episodes: list[dict], s: dict) -> tuple[list[dict], dict]:
    """The turns GRPO trains on (each with its advantage) from played episode records
    (``policies.lm.play.episode_record``, ``group`` any hashable id), and the iteration's
    statistics. ``s``: ``std_normalise``, ``filter_zero_std``, ``discount``,
    ``mask_truncated``, and ``prm_weight`` for episodes with ``step_rewards`` (a process
    reward model's, ``policies.lm.objective.process_advantages``)."""
    keys = {g: j for j, g in enumerate(dict.fromkeys(e["group"] for e in episodes))}
    gid = np.array([keys[e["group"]] for e in episodes])
    rewards = np.array([e["reward"] for e in episodes])
    adv, flat = group_advantages(rewards, gid, s["std_normalise"])
    dense = all("step_rewards" in e for e in episodes)
    if dense:
        process, process_flat = process_advantages([e["step_rewards"] for e in episodes], gid)
        flat = flat & process_flat  # a group learns from either signal
    else:
        process = [np.zeros(e["length"]) for e in episodes]
    turns = []
    for e, a, f, pa in zip(episodes, adv, flat, process, strict=True):
        if s["filter_zero_std"] and f:
            continue
        outcome = turn_advantages(a, e["length"], s["discount"])
        for t, ta, tp in zip(e["turns"], outcome, pa, strict=True):
            if s["mask_truncated"] and t["truncated"]:
                continue
            turns.append({**t, "advantage": float(ta + s.get("prm_weight", 1.0) * tp)})
    answers = [len(t["answer"]) for e in episodes for t in e["turns"]]
    flat_groups = [j for j in range(len(keys)) if flat[gid == j][0]]
    solved = sum(bool(episodes[int(np.flatnonzero(gid == j)[0])]["success"]) for j in flat_groups)
    stats = {
        "success_rate": float(np.mean([e["success"] for e in episodes])),
        "episode_return_mean": float(rewards.mean()),
        "episode_len_mean": float(np.mean([e["length"] for e in episodes])),
        "zero_std_share": len(flat_groups) / len(keys),
        "groups_sampled": len(keys),
        "groups_mixed": len(keys) - len(flat_groups),
        "groups_flat_solved": solved,
        "groups_flat_failed": len(flat_groups) - solved,
        "answer_tokens": float(np.mean(answers)),
    }
    if dense:
        stats["step_reward_mean"] = float(np.mean([r for e in episodes for r in e["step_rewards"]]))
    return turns, stats


def mixed_groups(episodes: list[dict]) -> int:
    """How many groups (``group`` ids) have rewards that differ, outcomes or (where a process
    reward model scored them) step rewards: the ones GRPO learns from."""
    outcomes: dict = {}
    steps: dict = {}
    for e in episodes:
        outcomes.setdefault(e["group"], set()).add(e["reward"])
        steps.setdefault(e["group"], set()).update(e.get("step_rewards", ()))
    return sum(len(outcomes[g]) > 1 or len(steps[g]) > 1 for g in outcomes)


def scripted_traces(tasks: list[str], episodes: int, error_rate: float) -> Path:
    """A cache folder of scripted-teacher traces for ``tasks`` (written once, resumable)."""
    from envs.web.page import TEXT_FORMAT
    from envs.web.traces import TeacherSpec, write_traces

    # Traces hold observation texts: a new text format writes new ones.
    spec = f"{sorted(tasks)}|{episodes}|{error_rate}|text{TEXT_FORMAT}"
    key = hashlib.sha256(spec.encode()).hexdigest()[:12]
    out = cache_root() / "traces" / key
    write_traces(
        [f"websim/{t}-v0" for t in tasks], episodes, out, TeacherSpec("scripted", error_rate)
    )
    return out
