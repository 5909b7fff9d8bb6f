"""A process reward model (an ``arena prm train`` run) behind ``POST /v1/reward``.

The request is one state of a web task and the candidate steps to judge there, with the
fields of a WebRewardBench row (Web-Shepherd's ``src/evaluate_web_reward_bench.py``)::

    {"model": "prm-RUN",                      # optional when one PRM is served
     "intent": "Enter the username ...",      # the user instruction
     "gt_checklist": "Checklist 1: ...",      # the task's checklist
     "text_observation": "RootWebArea ...",   # the page's accessibility tree
     "current_url": "...", "thought_history": [...], "action_history": [...],   # optional
     "responses": [{"thought": "...", "action": "click('5')"}, ...]}

and the answer each candidate's step reward (the mean over items of P(Yes) + 0.5 P(In
Progress)) and its judgements::

    {"rewards": [0.81, 0.12], "judgements": [[{"Yes": 0.9, "In Progress": 0.05, "No": 0.05},
     ...], ...], "model": "prm-RUN", "version": "RUN/step300"}

``POST /v1/policies/{name}/act`` takes the same body. Requests are answered one state at a
time (a state's candidates share one read of their common prompt), off the event loop.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from serve.policy import PolicySpec, RequestError

MAX_RESPONSES = 16
"""Most candidates judged in one request (a 413 past it: split it)."""
REQUIRED = ("intent", "gt_checklist", "text_observation", "responses")
OPTIONAL = ("model", "current_url", "thought_history", "action_history")


def is_prm_run(run: str | Path) -> bool:
    return (Path(run) / "prm.json").is_file()


def prm_spec(run: str | Path, name: str | None = None) -> PolicySpec:
    """The spec of an ``arena prm train`` run (no env, no spaces: it judges text)."""
    from training.prm import PRMError

    run = Path(run)
    progress = run / "progress.json"
    if not progress.is_file() or not (run / "checkpoint.pt").is_file():
        raise PRMError(f"{run}: a PRM run with no checkpoint yet (arena prm train writes one)")
    step = json.loads(progress.read_text())["step"]
    return PolicySpec(
        name=name or f"prm-{run.name}",
        env="",
        algo="prm",
        run=str(run.resolve()),
        checkpoint=str((run / "checkpoint.pt").resolve()),
        version=f"{run.name}/step{step}",
        agents=(),
        observation_spaces={},
        action_spaces={},
        meta={"steps": step, "route": "POST /v1/reward"},
    )


def _text(payload: dict, key: str, default: str | None = None) -> str:
    value = payload.get(key, default)
    if not isinstance(value, str) or (default is None and not value.strip()):
        raise RequestError(f"{key!r} must be a non-empty string")
    return value


def _texts(payload: dict, key: str) -> list[str]:
    value = payload.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise RequestError(f"{key!r} must be a list of strings")
    return value


class PRMServed:
    """A PRM run answering reward requests."""

    slow = True

    def __init__(self, spec: PolicySpec):
        from policies.prm import items_of
        from training.prm import load_prm

        self.spec, self.prm, self.items_of = spec, load_prm(spec.run), items_of

    def parse(self, payload: Any) -> dict:
        """A validated request as the row :meth:`ProcessRewardModel.judge` reads."""
        if not isinstance(payload, dict):
            raise RequestError(f"the body must be a JSON object with keys {list(REQUIRED)}")
        unknown = sorted(set(payload) - set(REQUIRED) - set(OPTIONAL))
        if unknown:
            raise RequestError(
                f"unknown key(s) {unknown}; allowed: {list(REQUIRED) + list(OPTIONAL)}"
            )
        row = {k: _text(payload, k) for k in ("intent", "gt_checklist", "text_observation")}
        if not self.items_of(row["gt_checklist"]):
            raise RequestError("'gt_checklist' has no 'Checklist 1: ...' line")
        row["current_url"] = _text(payload, "current_url", "")
        row["thought_history"] = _texts(payload, "thought_history")
        row["action_history"] = _texts(payload, "action_history")
        if len(row["thought_history"]) != len(row["action_history"]):
            raise RequestError("'thought_history' and 'action_history' must be as long")
        responses = payload["responses"]
        if not isinstance(responses, list) or not responses:
            raise RequestError("'responses' must be a list of {'thought', 'action'} objects")
        if len(responses) > MAX_RESPONSES:
            raise RequestError(f"{len(responses)} responses; at most {MAX_RESPONSES}", 413)
        for r in responses:
            if not isinstance(r, dict) or set(r) - {"thought", "action"} or "action" not in r:
                raise RequestError("each response is {'action': str, 'thought': str (optional)}")
            _text(r, "action")
            _text(r, "thought", "")
        row["responses"] = [
            {"thought": r.get("thought", ""), "action": r["action"]} for r in responses
        ]
        return row

    def act(self, requests: list[dict]) -> list[dict[str, Any]]:
        from policies.prm import JUDGEMENTS, step_reward

        out = []
        for row in requests:
            judged = self.prm.judge(row, row["responses"])
            out.append(
                {
                    "rewards": [step_reward(items) for items in judged],
                    "judgements": [
                        [dict(zip(JUDGEMENTS, p, strict=True)) for p in items] for items in judged
                    ],
                    "model": self.spec.name,
                    "version": self.spec.version,
                }
            )
        return out
