"""Step labels, checklists and preference pairs for a process reward model, for free.

Issue 48, item 1, after Web-Shepherd (Chae et al., "Web-Shepherd: Advancing PRMs for
Reinforcing Web Agents", NeurIPS 2025; github.com/kyle8581/Web-Shepherd). Web-Shepherd judges
an agent's step against a *checklist* of the task's sub-goals, each item answered Yes, In
Progress or No, and is trained on the WebPRM Collection: states of web tasks, each with the
checklist, the page's accessibility tree, the steps so far, and chosen and rejected actions.
On a twin page all of it comes from the page itself and its scripted expert
(:func:`envs.web.teachers.experts`), with no annotator:

- **Cost to go.** At any state the expert is played on a copy of the env (twins copy cheaply,
  :meth:`envs.web.env.WebEnv.__getstate__`) until the page says success: its actions are the
  state's *plan*, their count the state's cost to go (infinite when the expert cannot finish,
  e.g. after a step that ended the episode in failure). A step *advances* the task when it
  lowers the cost to go; the expert's own action always does (by one).
- **Checklist** (:func:`checklist`). The expert's plan from the first state, one target per
  action named from its element's role and name (a field by its label; :class:`Target`), made
  into Web-Shepherd's items by two rules: consecutive form settings (fills, option picks,
  checkbox and radio clicks) and repeats of one click are one item, as Web-Shepherd's
  checklist prompt consolidates "applying multiple filters or selecting several options"
  (``src/webprm/prompts/checklist_prompt.py``); then, while more than five items remain (that
  prompt's limit), the adjacent pair with the fewest actions merges. Printed as that prompt's
  output: ``Checklist 1: <title>`` and ``- Goal: <description>`` lines.
- **Status** (:func:`statuses`). After a step, an item is ``Yes`` when none of its actions is
  left in the state's plan, ``No`` when all are, ``In Progress`` between: Web-Shepherd's three
  judgements (``src/webprm/prompts/judge_prompt.py``, ``JUDGE_OURS_USER_PROMPT_FORMAT``). The
  reward is theirs: (Yes + 0.5 In Progress) / items (``src/utils/eval_utils.py``,
  ``get_score``).
- **Preference pairs** (:func:`pairs_at`). At each state of a trace from which the expert can
  finish: chosen = the expert's action, then any sampled action that also advances; rejected
  = actions sampled from the page's elements (clicks, fills with the wrong text, other
  options) that do not, each stepped on a copy of the env to check. Records are shaped as the
  rows ``src/evaluate_web_reward_bench.py`` (``setup_for_judgement``) reads: ``task_id``,
  ``step_id``, ``intent``, ``start_url``, ``current_url``, ``text_observation``,
  ``gt_checklist``, ``thought_history``, ``action_history``, ``chosen`` and ``rejected``
  (lists of ``thought``/``action``), ``source_name``; Arena's own fields under ``arena``.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import os
import re
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

import envs
from envs.files import replacing, write_atomic
from envs.web.actions import ParseError, parse
from envs.web.teachers import _STRING, View, _string, experts

YES, IN_PROGRESS, NO = "Yes", "In Progress", "No"
MAX_ITEMS = 5
"""Web-Shepherd's checklist prompt: "should not exceed five critical subgoals"."""
ROLLOUT_STEPS = 40
"""The most expert steps a plan may take from any state (the longest expert episode, a
flow's, takes 12); past it the state counts as one the expert cannot finish."""
SOURCE = "arena_websim"
SETTINGS = frozenset({"fill", "select_option"})
"""Actions that set a control; with checkbox and radio clicks, consecutive ones are one item."""
TOGGLES = frozenset({"checkbox", "radio"})

NOUN = {
    "button": "button",
    "link": "link",
    "StaticText": "text",
    "image": "icon",
    "textbox": "field",
    "checkbox": "checkbox",
    "radio": "radio button",
    "combobox": "list",
    "LabelText": "label",
    "heading": "heading",
    "option": "option",
}
"""How an item names an element of each role (the role itself for the others)."""
VERB = {
    "fill": "Fill",
    "select_option": "Select",
    "dblclick": "Double-click",
    "hover": "Hover over",
    "focus": "Focus",
    "clear": "Clear",
    "press": "Press",
}
"""The verb of each action kind other than click (click's depends on the element)."""

ORDINAL = {1: "st", 2: "nd", 3: "rd"}
_LINE = re.compile(rf"^(\t*)(?:\[(\d+)\] )?(\S+) ({_STRING})")


# --- what an action acts on ----------------------------------------------------------------
@dataclass(frozen=True)
class Target:
    """An action by what it does, not by bid (bids change as the page changes): its kind, the
    element's role and label (its name; a field's label or the text before it; else ``#k``,
    its place among the unnamed elements of its role), the value typed or picked, the page
    (a flow's, 0-based) and, for a checkbox, whether the click checks it."""

    kind: str
    role: str = ""
    label: str = ""
    value: str = ""
    page: int = 0
    checks: bool = True

    def ref(self) -> str:
        noun = NOUN.get(self.role, self.role or "page")
        if self.label.startswith("#"):
            n = int(self.label[1:])
            return f"{n}{ORDINAL.get(n, 'th')} {noun}"
        return f"{self.label!r} {noun}" if self.label else noun

    def verb(self) -> str:
        if self.kind != "click":
            return VERB.get(self.kind, self.kind.capitalize())
        if self.role == "checkbox":
            return "Check" if self.checks else "Uncheck"
        return "Select" if self.role == "radio" else "Click"

    def phrase(self, value: bool = True) -> str:
        """``Fill the 'Username' field with 'kate'`` (without ``with ...`` if not ``value``)."""
        if self.kind == "noop":
            return "Wait"
        if self.kind == "invalid":
            return f"Write {self.value!r}"
        text = f"{self.verb()} the {self.ref()}"
        if value and self.kind in ("fill", "select_option", "press"):
            text += f" with {self.value!r}" if self.kind != "press" else f" key {self.value!r}"
        return text


def _context_labels(text: str) -> dict[str, str]:
    """bid -> the label an item gives it (:class:`Target`), from the observation's lines."""
    lines = text.splitlines()
    start = lines.index("") + 1 if "" in lines else 0
    rows = [m.groups() for line in lines[start:] if (m := _LINE.match(line))]
    labels, unnamed, places = {}, Counter(), {}
    for i, (depth, bid, role, name) in enumerate(rows):
        if bid is None:
            continue
        label = _string(name)
        if not label and role in TOGGLES:  # a box inside its label
            label = next((_string(r[3]) for r in reversed(rows[:i]) if len(r[0]) < len(depth)), "")
        elif not label and role in ("textbox", "combobox") and i > 0:
            prev = rows[i - 1]
            if prev[2] in ("LabelText", "StaticText") and len(prev[0]) == len(depth):
                label = _string(prev[3])
        if not label:
            unnamed[role] += 1
            places[bid] = role
            label = f"#{unnamed[role]}"
        labels[bid] = label
    for bid, role in places.items():  # the only unnamed one of its role needs no number
        if unnamed[role] == 1:
            labels[bid] = ""
    return labels


def describe(text: str, action: str, page: int = 0) -> Target:
    """The :class:`Target` of ``action`` on the page of observation ``text``."""
    try:
        act = parse(action)
    except ParseError:
        return Target("invalid", value=action, page=page)
    value = str(act.args[1]) if act.name in ("fill", "select_option", "press") else ""
    bid = act.bid
    if bid is None:
        return Target(act.name, value=value, page=page)
    view = View.read(text)
    element = next((e for e in view.elements if e.bid == bid), None)
    if element is None:
        return Target(act.name, label=f"bid {bid}", value=value, page=page)
    label = _context_labels(text).get(bid, element.name)
    checks = not element.checked
    return Target(act.name, element.role, label, value, page, checks)


# --- checklists ----------------------------------------------------------------------------
@dataclass
class Item:
    """A checklist item: its targets (the expert actions it stands for), title and goal."""

    targets: list[Target]
    title: str
    goal: str

    def to_json(self) -> dict:
        return {
            "title": self.title,
            "goal": self.goal,
            "actions": [dataclasses.asdict(t) for t in self.targets],
        }


def _group_item(targets: list[Target]) -> Item:
    """An item of targets that one rule put together (settings, or one repeated click)."""
    t0 = targets[0]
    if len(targets) > 1 and all(t == t0 for t in targets):
        times = "twice" if len(targets) == 2 else f"{len(targets)} times"
        title = goal = f"{t0.phrase()} {times}"
    elif len(targets) > 1:
        same_verb = len({t.verb() for t in targets}) == 1
        refs = [t.ref() for t in targets]
        if same_verb and len({t.role for t in targets}) == 1:
            noun = NOUN.get(t0.role, t0.role)
            names = [r.removesuffix(" " + noun) for r in refs]
            plural = noun + ("es" if noun.endswith("x") else "s")
            title = f"{t0.verb()} the {', '.join(names[:-1])} and {names[-1]} {plural}"
        else:
            title = ", then ".join(t.phrase(value=False) for t in targets)
        phrases = [t.phrase() for t in targets]
        if same_verb:  # Fill the 'A' field with 'a' and the 'B' field with 'b'
            verb = t0.verb() + " "
            phrases = [phrases[0]] + [p.removeprefix(verb) for p in phrases[1:]]
        goal = ", ".join(phrases[:-1]) + " and " + phrases[-1]
    else:
        title, goal = t0.phrase(value=False), t0.phrase()
    return Item(list(targets), title, goal)


def _finish(items: list[Item], pages: list[str]) -> None:
    """Capitalizes and ends each goal; says which item completes a page, or the task."""
    for i, item in enumerate(items):
        page = item.targets[-1].page
        ends_page = i + 1 == len(items) or items[i + 1].targets[0].page != page
        goal = item.goal[:1].upper() + item.goal[1:]
        if ends_page and len(pages) > 1:
            goal += f", which completes page {page + 1} of {len(pages)} ({pages[page]})"
        elif ends_page:
            goal += ", which completes the task"
        item.goal = goal + "."
        item.title = item.title[:1].upper() + item.title[1:]


def checklist(plan: list[Target], pages: list[str] | None = None) -> list[Item]:
    """The checklist of an expert's plan (module doc): settings and repeated clicks grouped,
    then adjacent items merged, fewest actions first, until at most :data:`MAX_ITEMS`."""
    pages = pages or [""]
    groups: list[list[Target]] = []
    for t in plan:
        prev = groups[-1][-1] if groups else None
        setting = t.kind in SETTINGS or (t.kind == "click" and t.role in TOGGLES)
        same_kind = prev is not None and prev.page == t.page and prev.kind == t.kind
        if prev is not None and ((setting and same_kind and prev.role == t.role) or prev == t):
            groups[-1].append(t)
        else:
            groups.append([t])
    items = [_group_item(g) for g in groups]
    while len(items) > MAX_ITEMS:
        sizes = [
            (len(a.targets) + len(b.targets) + (a.targets[0].page != b.targets[0].page) * 100, i)
            for i, (a, b) in enumerate(zip(items, items[1:], strict=False))
        ]
        _, i = min(sizes)
        a, b = items[i], items[i + 1]
        items[i : i + 2] = [
            Item(a.targets + b.targets, f"{a.title}, then {b.title[:1].lower()}{b.title[1:]}",
                 f"{a.goal}, then {b.goal[:1].lower()}{b.goal[1:]}")
        ]  # fmt: skip
    _finish(items, pages)
    return items


def checklist_text(items: list[Item]) -> str:
    """The checklist as Web-Shepherd's checklist prompt asks a model to write it."""
    return "\n".join(
        f"Checklist {i}: {it.title}\n- Goal: {it.goal}" for i, it in enumerate(items, 1)
    )


def statuses(items: list[Item], plan: list[Target]) -> list[str]:
    """Each item's judgement given the plan left (module doc). A target left in the plan
    counts against the last item that holds it."""
    left = Counter(plan)
    out = []
    for item in reversed(items):
        pending = 0
        for t in item.targets:
            if left[t] > 0:
                left[t] -= 1
                pending += 1
        out.append(YES if pending == 0 else NO if pending == len(item.targets) else IN_PROGRESS)
    return out[::-1]


def reward(judgements: list[str]) -> float:
    """Web-Shepherd's score of a checklist judgement: (Yes + 0.5 In Progress) / items."""
    if not judgements:
        return 0.0
    return (judgements.count(YES) + 0.5 * judgements.count(IN_PROGRESS)) / len(judgements)


# --- the expert's plan from a state --------------------------------------------------------
@dataclass
class State:
    """An env mid-episode, the actions taken, and how it ended (if it has)."""

    env: object
    history: list[str]
    ended: bool = False
    success: bool = False
    obs: str = ""

    def copy(self) -> State:
        return State(
            copy.deepcopy(self.env), list(self.history), self.ended, self.success, self.obs
        )

    @property
    def page(self) -> int:
        return getattr(self.env, "index", 0)

    def step(self, action: str) -> None:
        obs, rew, term, trunc, info = self.env.step({"agent_0": action})
        self.history.append(action)
        self.obs = obs["agent_0"]
        if term["agent_0"] or trunc["agent_0"]:
            self.ended = True
            self.success = bool(term["agent_0"] and info["agent_0"]["success"])


def plan(state: State, expert, limit: int = ROLLOUT_STEPS) -> list[tuple[str, Target]] | None:
    """The expert's actions from ``state`` to success (on a copy), or None if it fails or
    needs more than ``limit``."""
    if state.ended:
        return [] if state.success else None
    sim = state.copy()
    sim.env.max_steps = sim.env.steps + limit + 1
    out = []
    while not sim.ended:
        if len(out) >= limit:
            return None
        try:
            action = expert(View.read(sim.obs), sim.history)
        except (IndexError, ValueError):
            action = None
        if action is None:
            return None
        out.append((action, describe(sim.obs, action, sim.page)))
        sim.step(action)
    return out if sim.success else None


def start(env_id: str, seed: int, env=None) -> State:
    env = env if env is not None else envs.make(env_id)
    obs, _ = env.reset(seed=seed, options={"task_seed": seed})
    return State(env, [], obs=obs["agent_0"])


def twin_id(env_id: str) -> str:
    """The twin of an env id: ``web/<task>-v1`` -> ``websim/<task>-v0`` (the same page for the
    same seed)."""
    if env_id.startswith("websim/"):
        return env_id
    return "websim/" + env_id.split("/", 1)[1].rsplit("-v", 1)[0] + "-v0"


def pages_of(env_id: str) -> list[str]:
    from envs.web import FLOWS
    from envs.web.traces import task_of

    task = task_of(env_id)
    return list(FLOWS.get(task, (task,)))


def page_url(task: str) -> str:
    """A page's address as the ``miniwob`` package lays its pages out."""
    return f"miniwob/html/miniwob/{task}.html"


def goal_text(obs: str) -> str:
    """The observation's goal line without its ``Goal: `` label (Web-Shepherd's intent)."""
    return obs.splitlines()[0].removeprefix("Goal: ")


def tree_text(obs: str) -> str:
    """The observation without its goal: the accessibility tree (Web-Shepherd's AXTREE)."""
    lines = obs.splitlines()
    return "\n".join(lines[lines.index("") + 1 :]) if "" in lines else obs


# --- labelling an episode ------------------------------------------------------------------
@dataclass
class Episode:
    """An episode labelled step by step, with its checklist and preference records."""

    env_id: str
    seed: int
    goal: str
    items: list[Item]
    labels: list[dict] = field(default_factory=list)
    records: list[dict] = field(default_factory=list)

    def checklist_row(self) -> dict:
        return {
            "env": self.env_id,
            "seed": self.seed,
            "intent": self.goal,
            "checklist": [it.to_json() for it in self.items],
            "gt_checklist": checklist_text(self.items),
        }


def _rng(env_id: str, seed: int, step: int, base: int) -> np.random.Generator:
    return np.random.default_rng([base, zlib.crc32(env_id.encode()), seed, step])


def candidates(obs: str, rng: np.random.Generator) -> list[str]:
    """Actions to try at a state, in a seeded order: a click on each element, each field
    filled with a text the page shows elsewhere (a goal's word, another element's name) or
    with its own text cut short, each other option of each list; then ``noop()``, for a page with nothing else to try."""
    view = View.read(obs)
    words = sorted({*view.quoted(), *(e.name for e in view.elements if e.name)})
    out = [f"click('{e.bid}')" for e in view.elements]
    for e in view.elements:
        if e.role == "textbox":
            picks = [words[i] for i in rng.permutation(len(words))[:2]] if words else []
            picks += [q[:-1] for q in view.quoted()[:1] if len(q) > 1]
            out += [f"fill('{e.bid}', {w!r})" for w in picks if w != e.value]
        elif e.role == "combobox":
            i = view.elements.index(e)
            opts = [
                o.name for o in view.elements[i + 1 :] if o.depth > e.depth and o.role == "option"
            ]
            out += [f"select_option('{e.bid}', {o!r})" for o in opts if o != e.value]
    out = list(dict.fromkeys(out))
    return [out[i] for i in rng.permutation(len(out))] + ["noop()"]  # last: waiting


def _judge(
    items: list[Item], before: list[str], after: list[tuple[str, Target]] | None
) -> list[str]:
    """Statuses after a step: from the plan left, or (no plan: the expert cannot finish)
    those before it."""
    return statuses(items, [t for _, t in after]) if after is not None else list(before)


def _effect(cost_before: float, cost_after: float, state: State) -> str:
    if state.ended and not state.success:
        return "failure"
    if cost_after < cost_before:
        return "advance"
    return "regress" if cost_after > cost_before else "none"


def step_thought(target: Target) -> str:
    """A step's thought: what the action does, written the same way for every action (so a
    reward model cannot tell chosen from rejected by the wording)."""
    return f"I will {target.phrase()[:1].lower()}{target.phrase()[1:]}."


def label_episode(
    env_id: str,
    seed: int,
    actions: Iterable[str] | Callable[[State], str],
    rejected: int = 3,
    pair_seed: int = 0,
    env=None,
) -> Episode | None:
    """Labels each step of an episode (its ``actions``, or a policy of the state that gives
    them) and builds its preference records; None when the expert cannot solve the page from
    the start (its plan is the checklist)."""
    env_id = twin_id(env_id)
    from envs.web.traces import task_of

    expert = experts()[task_of(env_id)]
    state = start(env_id, seed, env)
    first = plan(state, expert)
    if first is None:
        return None
    pages = pages_of(env_id)
    items = checklist([t for _, t in first], pages)
    goal = goal_text(state.obs)
    ep = Episode(env_id, seed, goal, items)
    # The episode ends at the env's step limit, but plans look past it (a right step that
    # meets the limit still advances the task): the env itself never truncates.
    limit, state.env.max_steps = state.env.max_steps, 1 << 30
    now, judged = first, [NO] * len(items)
    given = None if callable(actions) else iter(actions)
    thoughts: list[str] = []
    step = 0
    try:
        while not state.ended and step < limit:
            if given is not None:
                action = next(given, None)
                if action is None:
                    break
            else:
                action = actions(state)
            cost = math.inf if now is None else len(now)
            if now is not None and rejected > 0:
                rec = pairs_at(ep, state, now, judged, thoughts, expert, rejected, step, pair_seed)
                if rec is not None:
                    ep.records.append(rec)
            page = state.page
            target = describe(state.obs, action, page)
            state.step(action)
            after = plan(state, expert)
            cost_after = math.inf if after is None else len(after)
            judged = _judge(items, judged, after)
            expert_action = now[0][0] if now else None
            ep.labels.append(
                {
                    "env": env_id,
                    "seed": seed,
                    "step": step,
                    "page": page,
                    "action": action,
                    "expert_action": expert_action,
                    "matches_expert": action == expert_action,
                    "advanced": cost_after < cost,
                    "effect": _effect(cost, cost_after, state),
                    "cost_before": None if cost == math.inf else cost,
                    "cost_after": None if cost_after == math.inf else cost_after,
                    "checklist": judged,
                    "reward": reward(judged),
                    "done": state.ended or step + 1 == limit,
                    "success": state.success,
                }
            )
            thoughts.append(step_thought(target))
            now, step = after, step + 1
    finally:
        state.env.max_steps = limit
    return ep


def pairs_at(
    ep: Episode,
    state: State,
    now: list[tuple[str, Target]],
    judged: list[str],
    thoughts: list[str],
    expert,
    rejected: int,
    step: int,
    pair_seed: int,
) -> dict | None:
    """The preference record at ``state`` (module doc), or None when no sampled action is
    rejected. Each candidate is stepped on a copy and the expert's plan from there decides."""
    cost = len(now)
    chosen_action, chosen_target = now[0]
    chosen = [
        (chosen_action, chosen_target, statuses(ep.items, [t for _, t in now[1:]]), "advance")
    ]
    bad = []
    rng = _rng(ep.env_id, ep.seed, step, pair_seed)
    tries = 0
    for action in candidates(state.obs, rng):
        if len(bad) >= rejected or tries >= 4 * rejected:
            break
        if action == chosen_action:
            continue
        tries += 1
        sim = state.copy()
        target = describe(state.obs, action, state.page)
        sim.step(action)
        after = plan(sim, expert)
        cost_after = math.inf if after is None else len(after)
        entry = (action, target, _judge(ep.items, judged, after), _effect(cost, cost_after, sim))
        if cost_after < cost:
            chosen.append(entry)
        else:
            bad.append(entry)
    if not bad:
        return None

    def response(entry) -> dict:
        action, target, judgement, effect = entry
        return {
            "thought": step_thought(target),
            "action": action,
            "checklist_evaluation": judgement,
            "reward": reward(judgement),
            "effect": effect,
        }

    task = pages_of(ep.env_id)[state.page]
    return {
        "task_id": f"{ep.env_id}:{ep.seed}",
        "step_id": step,
        "intent": ep.goal,
        "start_url": page_url(pages_of(ep.env_id)[0]),
        "current_url": page_url(task),
        "text_observation": tree_text(state.obs),
        "gt_checklist": checklist_text(ep.items),
        "thought_history": list(thoughts),
        "action_history": list(state.history),
        "chosen": [response(c) for c in chosen],
        "rejected": [response(b) for b in bad],
        "source_name": SOURCE,
        "arena": {
            "env": ep.env_id,
            "seed": ep.seed,
            "page": state.page,
            "cost_to_go": cost,
            "checklist_before": list(judged),
        },
    }


# --- a data set ------------------------------------------------------------------------------
def teacher_policy(task: str, error_rate: float, seed: int) -> Callable[[State], str]:
    """The scripted teacher of ``arena web traces`` (slipping at ``error_rate``) as a policy."""
    from envs.web.teachers import ScriptedTeacher

    teacher = ScriptedTeacher(task, error_rate, seed)
    return lambda s: teacher.act(s.obs, s.history).action


def read_traces(path: Path) -> Iterator[tuple[str, int, list[str]]]:
    """(env, seed, actions) of each whole episode of a traces file (``arena web traces``)."""
    episode: dict[tuple[str, int], list[str]] = {}
    with path.open() as f:
        for line in f:
            try:
                row = json.loads(line)
            except ValueError:
                break
            key = (row["env"], int(row["seed"]))
            episode.setdefault(key, []).append(row["action"])
            if row.get("done"):
                yield key[0], key[1], episode.pop(key)


def write_atomic_lines(path: Path, rows: Iterable[dict]) -> int:
    """Writes JSON lines to a temporary file and renames it over ``path``."""
    n = 0
    with replacing(path) as tmp, tmp.open("w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
            n += 1
        f.flush()
        os.fsync(f.fileno())
    return n


def build(
    episodes: Iterable[tuple[str, int, Iterable[str] | Callable[[State], str]]],
    out: Path,
    rejected: int = 3,
    pair_seed: int = 0,
    progress: Callable[[int], None] | None = None,
) -> dict:
    """Labels each (env, seed, actions or policy) episode and writes ``checklists.jsonl``,
    ``labels.jsonl``, ``pairs.jsonl`` and ``summary.json`` into ``out``, each atomically."""
    import time

    out.mkdir(parents=True, exist_ok=True)
    checklists, labels, records = [], [], []
    per_task: dict[str, dict] = {}
    skipped, built = 0, {}
    t0 = time.perf_counter()
    for n, (env_id, seed, actions) in enumerate(episodes, 1):
        twin = twin_id(env_id)
        env = built.get(twin) or built.setdefault(twin, envs.make(twin))
        ep = label_episode(twin, seed, actions, rejected, pair_seed, env=env)
        if ep is None:
            skipped += 1
            continue
        checklists.append(ep.checklist_row())
        labels += ep.labels
        records += ep.records
        s = per_task.setdefault(
            twin,
            {"episodes": 0, "successes": 0, "steps": 0, "advancing": 0, "records": 0, "pairs": 0, "items": 0},
        )  # fmt: skip
        s["episodes"] += 1
        s["successes"] += bool(ep.labels and ep.labels[-1]["success"])
        s["steps"] += len(ep.labels)
        s["advancing"] += sum(r["advanced"] for r in ep.labels)
        s["records"] += len(ep.records)
        s["pairs"] += sum(len(r["chosen"]) * len(r["rejected"]) for r in ep.records)
        s["items"] += len(ep.items)
        if progress:
            progress(n)
    seconds = time.perf_counter() - t0
    for e in built.values():
        e.close()
    write_atomic_lines(out / "checklists.jsonl", checklists)
    write_atomic_lines(out / "labels.jsonl", labels)
    write_atomic_lines(out / "pairs.jsonl", records)
    summary = {
        "episodes": len(checklists),
        "skipped": skipped,
        "steps": len(labels),
        "advancing": sum(r["advanced"] for r in labels),
        "records": len(records),
        "pairs": sum(len(r["chosen"]) * len(r["rejected"]) for r in records),
        "seconds": round(seconds, 3),
        "tasks": per_task,
    }
    write_atomic(out / "summary.json", json.dumps(summary, indent=1) + "\n")
    return summary
