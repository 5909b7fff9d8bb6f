"""Teachers that write traces for behaviour cloning.

- :class:`ScriptedTeacher`: an expert per task that reads only the observation text (goal and
  accessibility tree) and the episode's previous actions, so it plays the twin and the real
  page alike; with ``error_rate`` it sometimes clicks a random element instead, so traces hold
  failures as the study's teacher traces do.
- :class:`OpenAITeacher`: a language model behind any OpenAI-compatible chat-completions
  endpoint (vLLM, llama.cpp's server, a hosted API), with its token counts as compute.
"""

from __future__ import annotations

import ast
import json
import re
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from envs.registry import EnvError
from envs.web.actions import SIGNATURES, ParseError, parse

_STRING = r"'(?:[^'\\]|\\.)*'|" + r'"(?:[^"\\]|\\.)*"'
"""A Python string literal, as ``repr`` writes one."""


def _string(literal: str) -> str:
    """The text of a string literal as ``repr`` writes it (fast when nothing is escaped)."""
    return literal[1:-1] if "\\" not in literal else ast.literal_eval(literal)


_LINE = re.compile(rf"^(\t*)\[(\d+)\] (\S+) ({_STRING})(?: value=({_STRING}))?(.*)$")
_QUOTED = re.compile(r'"([^"]*)"')


@dataclass
class Element:
    bid: str
    role: str
    name: str
    props: str
    depth: int
    value: str = ""

    @property
    def checked(self) -> bool:
        return "checked='true'" in self.props


@dataclass
class View:
    """An observation text read back: the goal and the elements with bids, in order."""

    goal: str
    elements: list[Element] = field(default_factory=list)

    @classmethod
    def read(cls, text: str) -> View:
        """Reads the goal (the lines before the first empty one, a flow's two) and the lines
        ``[bid] role 'name' value='...', props`` (names and values are Python string literals,
        as BrowserGym's ``flatten_axtree_to_str`` prints them)."""
        lines = text.splitlines()
        head = lines.index("") if "" in lines else min(len(lines), 1)
        goal = "\n".join(lines[:head]).removeprefix("Goal: ")
        elements = []
        for line in lines[head:]:
            m = _LINE.match(line)
            if m:
                depth, bid, role, name, value, props = m.groups()
                value = _string(value) if value else ""
                elements.append(Element(bid, role, _string(name), props, len(depth), value))
        return cls(goal, elements)

    def find(self, role: str, name: str | None = None) -> Element | None:
        return next(
            (e for e in self.elements if e.role == role and (name is None or e.name == name)), None
        )

    def all(self, role: str) -> list[Element]:
        return [e for e in self.elements if e.role == role]

    def after(self, anchor: Element, role: str) -> Element | None:
        """The first ``role`` element after ``anchor`` (a label's control)."""
        i = self.elements.index(anchor)
        return next((e for e in self.elements[i + 1 :] if e.role == role), None)

    def quoted(self) -> list[str]:
        return _QUOTED.findall(self.goal)


Policy = Callable[[View, list[str]], str | None]


def _click(e: Element | None) -> str | None:
    return None if e is None else f"click('{e.bid}')"


def _fill_then(view: View, pairs: list[tuple[Element | None, str]], submit: str) -> str | None:
    for box, text in pairs:
        if box is not None and box.value != text:
            return f"fill('{box.bid}', {text!r})"
    return _click(view.find("button", submit))


def _checkboxes(view: View, history: list[str]) -> str | None:
    m = re.match(r"Select (.*) and click Submit\.", view.goal)
    wanted = set() if m is None or m.group(1) == "nothing" else set(m.group(1).split(", "))
    for label in view.all("LabelText"):
        box = view.after(label, "checkbox")
        if box is not None and box.checked != (label.name in wanted):
            return _click(box)
    return _click(view.find("button", "Submit"))


def _option(view: View, history: list[str]) -> str | None:
    m = re.match(r"Select (.*) and click Submit\.", view.goal)
    label = view.find("LabelText", m.group(1)) if m else None
    radio = view.after(label, "radio") if label else None
    if radio is not None and not radio.checked:
        return _click(radio)
    return _click(view.find("button", "Submit"))


def _choose_list(view: View, history: list[str]) -> str | None:
    m = re.match(r"Select (.*) from the list and click Submit\.", view.goal)
    box = view.find("combobox")
    if m and box is not None and box.value != m.group(1):
        return f"select_option('{box.bid}', {m.group(1)!r})"
    return _click(view.find("button", "Submit"))


def _enter_text_2(view: View, history: list[str]) -> str | None:
    text = view.quoted()[0]
    text = text.upper() if "upper case" in view.goal else text.lower()
    return _fill_then(view, [(view.find("textbox"), text)], "Submit")


def _login(view: View, history: list[str]) -> str | None:
    user, password = view.quoted()[:2]
    boxes = view.all("textbox")
    return _fill_then(view, list(zip(boxes, [user, password], strict=False)), "Login")


def _password(view: View, history: list[str]) -> str | None:
    password = view.quoted()[0]
    return _fill_then(view, [(b, password) for b in view.all("textbox")], "Submit")


def _nth_textbox(view: View, history: list[str]) -> str | None:
    m = re.search(r"the (\d)\w\w input", view.goal)
    boxes = view.all("textbox")
    n = int(m.group(1)) - 1 if m else 0
    return _click(boxes[n]) if n < len(boxes) else None


def _tabs(view: View, history: list[str]) -> str | None:
    target = view.find("StaticText", view.quoted()[0])
    if target is not None and target.bid not in [t.bid for t in view.all("link")]:
        return _click(target)
    tabs = [t for t in view.all("link")[1:] if _click(t) not in history]
    return _click(tabs[0]) if tabs else None


EXPERTS: dict[str, Policy] = {
    "click-test": lambda v, h: _click(v.find("button")),
    "click-test-2": lambda v, h: _click(v.find("button", "ONE")),
    "click-button": lambda v, h: _click(v.find("button", v.quoted()[0])),
    "click-button-sequence": lambda v, h: _click(v.find("button", "TWO" if h else "ONE")),
    "click-link": lambda v, h: _click(v.find("StaticText", v.quoted()[0])),
    "click-checkboxes": _checkboxes,
    "click-option": _option,
    "enter-text": lambda v, h: _fill_then(v, [(v.find("textbox"), v.quoted()[0])], "Submit"),
    "enter-text-2": _enter_text_2,
    "enter-password": _password,
    "login-user": _login,
    "focus-text": lambda v, h: _click(v.find("textbox")),
    "focus-text-2": _nth_textbox,
    "choose-list": _choose_list,
    "click-tab-2": _tabs,
    "click-dialog": lambda v, h: _click(v.find("button", "Close")),
}
"""Task -> its scripted expert for the small pages; :func:`experts` adds the larger ones."""


def experts() -> dict[str, Policy]:
    """Every scripted expert (the same for ``web/`` and ``websim/`` ids), a flow's made of its
    pages' (:func:`envs.web.flow.expert`)."""
    from envs.web import FLOWS, extra, flow  # extra's modules import this one

    pages = {**EXPERTS, **extra.experts()}
    return {**pages, **{f: flow.expert([pages[t] for t in ts]) for f, ts in FLOWS.items()}}


@dataclass
class Step:
    """A teacher's answer: the action text and the compute it cost."""

    action: str
    compute: dict = field(default_factory=dict)


class ScriptedTeacher:
    name = "scripted"

    def __init__(self, task: str, error_rate: float = 0.0, seed: int = 0):
        known = experts()
        if task not in known:
            raise ValueError(
                f"no scripted expert for {task!r}; experts exist for {', '.join(known)}"
            )
        self.policy = known[task]
        if not 0.0 <= error_rate <= 1.0:
            raise ValueError(f"error_rate must be in [0, 1], got {error_rate}")
        self.task, self.error_rate = task, error_rate
        self.rng = np.random.default_rng(seed)

    def act(self, observation: str, history: list[str]) -> Step:
        view = View.read(observation)
        if self.error_rate and self.rng.random() < self.error_rate and view.elements:
            slip = view.elements[int(self.rng.integers(len(view.elements)))]
            return Step(f"click('{slip.bid}')", {"flops": 0})
        try:
            action = self.policy(view, history)
        except (IndexError, ValueError):  # the goal is not one the expert knows
            action = None
        return Step(action or "noop()", {"flops": 0})


SYSTEM_PROMPT = (
    "You operate a web page. Each turn you get the goal and the page as an accessibility "
    "tree whose elements carry ids in brackets. Answer with exactly one action, one of: "
    + ", ".join(f"{a}({', '.join(p)})" for a, p in SIGNATURES.items())
    + ". Ids are strings, e.g. click('13') or fill('7', 'hello')."
)


def first_action(text: str) -> str:
    """The first line of a model's reply that parses as an action (else the reply)."""
    for line in text.replace("```", "\n").splitlines():
        line = line.strip().removeprefix("python").strip()
        try:
            parse(line)
            return line
        except ParseError:
            continue
    return text.strip()


def chat_messages(observation: str, history: list[str]) -> list[dict]:
    """The chat a language-model teacher is sent for one step: the system prompt, the
    episode's earlier actions (all of them), the page. BC's bill counts this prompt where a
    trace has no recorded usage (``policies.lm.teacher``)."""
    messages = [{"role": "system", "content": SYSTEM_PROMPT}]
    if history:
        messages.append({"role": "user", "content": "Previous actions:\n" + "\n".join(history)})
    messages.append({"role": "user", "content": observation})
    return messages


class TeacherError(EnvError):
    """The teacher's server cannot be reached or answers with an error (one line, exit 2)."""


class OpenAITeacher:
    """A chat model at ``{url}/chat/completions`` (OpenAI's protocol)."""

    def __init__(
        self,
        url: str,
        model: str,
        temperature: float = 0.25,
        api_key: str | None = None,
        params: float | None = None,
        timeout_s: float = 60.0,
    ):
        self.url = url.rstrip("/") + "/chat/completions"
        self.model, self.temperature, self.api_key = model, temperature, api_key
        self.params, self.timeout_s = params, timeout_s
        self.name = f"openai:{model}"

    def act(self, observation: str, history: list[str]) -> Step:
        messages = chat_messages(observation, history)
        body = json.dumps(
            {"model": self.model, "messages": messages, "temperature": self.temperature}
        ).encode()
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        request = urllib.request.Request(self.url, body, headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as reply:
                raw = reply.read()
        except urllib.error.HTTPError as e:
            raise TeacherError(f"{self.url} answered {e.code}: {e.read()[:200]!r}") from None
        except OSError as e:  # refused or timed out
            raise TeacherError(f"cannot reach the teacher at {self.url}: {e}") from None
        try:
            answer = json.loads(raw)
            text = answer["choices"][0]["message"]["content"] or ""
        except (ValueError, KeyError, IndexError, TypeError):
            raise TeacherError(
                f"{self.url} did not answer as OpenAI's chat completions do: {raw[:200]!r}"
            ) from None
        usage = answer.get("usage") or {}
        tokens = int(usage.get("prompt_tokens", 0)) + int(usage.get("completion_tokens", 0))
        compute = {
            "prompt_tokens": usage.get("prompt_tokens", 0),
            "completion_tokens": usage.get("completion_tokens", 0),
        }
        if self.params:
            compute["flops"] = 2.0 * self.params * tokens  # forward pass, ~2 FLOPs/param/token
        return Step(first_action(text), compute)
