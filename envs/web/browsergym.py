"""BrowserGym's interface on Arena's web envs, so an AgentLab-style agent runs on them unchanged.

:class:`BrowserGymEnv` is a ``gymnasium.Env`` over :class:`envs.web.env.WebEnv` (either
backend). Its observation is the dict that BrowserGym's ``BrowserEnv`` returns
(browsergym-core 0.14.3, ``browsergym/core/env.py``, github.com/ServiceNow/BrowserGym); its
action is one BrowserGym action string such as ``click('13')``; reward, ``terminated``,
``truncated`` and ``info`` are WebEnv's (a parse error is a step that does nothing and costs a
factor 0.99; an action that cannot be carried out ends the episode at -1)::

    env = browsergym_env("click-test-2", backend="twin")   # or "browser": the real page
    obs, info = env.reset(seed=0)
    text = flatten_axtree_to_str(obs["axtree_object"])     # BrowserGym's own function
    obs, reward, terminated, truncated, info = env.step("click('2')")

The keys, and what each holds here:

- ``chat_messages``: BrowserGym's chat: its greeting, then the goal as the user's message;
  ``send_msg_to_user(text)`` adds ``text`` as the assistant's. Timestamps are ``time.time()``.
- ``goal`` (the deprecated string) and ``goal_object`` (``({"type": "text", "text": goal},)``):
  MiniWoB++'s utterance, as in BrowserGym's MiniWoB tasks.
- ``url``, ``open_pages_urls``, ``open_pages_titles``, ``active_page_index``: one page, the
  task's HTML file in the ``miniwob`` package (the twin names the page it models). A
  multi-page flow (:mod:`envs.web.flow`, ``browsergym_env("flow-search")``) walks its pages in
  that one tab, as the real backend does: ``url`` and the title are the page shown, and
  ``goal`` is the flow's (the errand, and the page shown with the step it opened at).
- ``axtree_object``: Arena's accessibility tree (:meth:`envs.web.page.Rendered.axtree`) in the
  shape of Chrome DevTools' ``Accessibility.getFullAXTree``, with ``browsergym_id`` on nodes
  that have a bid. BrowserGym's ``flatten_axtree_to_str`` of it is, line for line, the tree of
  WebEnv's text observation. It is Arena's tree, not Chrome's: roles, names and properties
  follow Arena's rules (a ``LabelText`` is named by its text and its check box is unnamed;
  an element holding only text is one ``StaticText`` with the element's bid; a text box shows
  ``value`` only when it holds text; options hang from their combo box; input types Arena
  does not name keep their type as role, e.g. ``range``; ``focused`` shows on form controls
  only; layout containers are unnamed ``generic`` nodes without bids; no ``backendDOMNodeId``
  or ``chromeRole``).
- ``focused_element_bid``: the bid of the focused element; "" when nothing with a bid has focus.
- ``last_action``, ``last_action_error``: the action string as given ("" after reset) and
  WebEnv's error text for it ("" when none), which WebEnv's text shows too.
- ``elapsed_time``: seconds since reset, as ``np.asarray([t])``.
- ``dom_object``: a ``DOMSnapshot.captureSnapshot`` of the page. On real pages it is Chrome's
  own, taken after Arena's bids are written into the page as BrowserGym writes them (``bid``,
  ``browsergym_visibility_ratio``, ``browsergym_set_of_marks``, and the live ``value`` and
  ``checked``, as attributes of the elements with a bid; BrowserGym marks every element), with
  Arena's own ``data-arena`` numbers taken out. The twin has no browser: its snapshot is built
  from the twin's page model (its elements, their attributes and text, input values, checked
  boxes, selected options, click handlers), with no ``<head>``, no layout and no styles.
- ``extra_element_properties``: ``{bid: {"visibility", "bbox", "clickable", "set_of_marks"}}``,
  read from ``dom_object`` as BrowserGym reads them. Real pages: ``bbox`` ``[x, y, w, h]``
  from Chrome's layout (None for an element with no box), ``clickable`` Chrome's
  ``isClickable``, ``visibility`` the share of the element's box inside the viewport (what
  BrowserGym's IntersectionObserver measures), ``set_of_marks`` BrowserGym's rule (the click
  at the centre reaches the element; a control tag, an ``onclick`` or a pointer cursor; at
  least 20 px²; not inside a marked button or link; a marked element unmarks its ancestors)
  applied to the elements with bids. The twin measures nothing: ``bbox`` None,
  ``visibility`` 1.0 for every element it shows (hidden ones have no bid), ``set_of_marks``
  False (no boxes to draw), ``clickable`` True for a control (a, button, input, select,
  option, textarea, label) or an element with its own click handler.
- ``screenshot``: real pages, the viewport as an ``(H, W, 3)`` uint8 array (Selenium's
  screenshot); the twin draws nothing and gives an empty ``(0, 0, 3)`` array (so does a real
  page with ``screenshot=False``).

Where else it differs from BrowserGym:

- Bids are numbered 1..n in document order every time the page is rendered (BrowserGym's stay
  with an element for the episode): act on the observation just read.
- Actions are Arena's language (:mod:`envs.web.actions`): BrowserGym's ``bid`` subset less
  ``drag_and_drop`` and ``upload_file``, plus ``send_msg_to_user``; one action per step (as
  ``HighLevelActionSet(multiaction=False)``). ``click``/``dblclick`` take no ``button`` or
  ``modifiers``, ``press`` no key combinations, ``select_option`` one option;
  ``fill(..., enable_autocomplete_menu)`` and ``noop(wait_ms)`` are checked and ignored.
  BrowserGym's actions a MiniWoB++ page cannot use (coordinates, keyboard at large, tabs,
  navigation, ``report_infeasible``) are refused with a message that says why. A refused or
  malformed action is WebEnv's parse error: nothing happens, the final reward takes a factor
  0.99, the message is ``last_action_error`` (BrowserGym reports a Python exception).
- Reward, ``truncated`` (after ``max_steps``, 10) and ``info`` (task, seed, step, error, raw
  reward, success...) are WebEnv's; BrowserGym's ``info`` holds its task's and timings. The
  chat is a record only: MiniWoB++ grades the page, never a message.
- ``active_page_index`` and ``elapsed_time`` are arrays of shape (1,) as BrowserGym returns
  them; the space here says (1,) too (BrowserGym's says ()).

The ids ``browsergym/miniwob.<task>`` (real pages) and ``browsergym/arena-twin.<task>`` are
registered with gymnasium when this module is imported, unless an id is taken (BrowserGym's
own ``browsergym-miniwob`` registers the first kind for its pages).
"""

from __future__ import annotations

import difflib
import io
import time
from typing import Any

import gymnasium as gym
import numpy as np

from envs.web import FLOWS, TASKS, TWIN_TASKS
from envs.web import actions as lang
from envs.web.env import AGENT, TextSpace, WebEnv, check_task_args
from envs.web.page import Node, Rendered

BID_ATTR = "bid"
VIS_ATTR = "browsergym_visibility_ratio"
SOM_ATTR = "browsergym_set_of_marks"
"""The attributes BrowserGym writes into a page (``browsergym/core/constants.py``)."""

GREETING = "Hi! I am your UI assistant, I can perform web tasks for you. What can I help you with?"
"""BrowserGym's first chat message (``BrowserEnv.reset``)."""

BACKENDS = ("twin", "browser")
CLICKABLE_TAGS = frozenset({"a", "button", "input", "select", "option", "textarea", "label"})
MOUSE_EVENTS = frozenset({"click", "dblclick", "mousedown", "mouseup"})

MARK_JS = r"""
// Writes Arena's bids into the page as BrowserGym does (browsergym/core/javascript/
// frame_mark_elements.js), with the visibility ratio and the set-of-marks flag.
var pairs = arguments[0], vw = window.innerWidth, vh = window.innerHeight;
var tags = {INPUT: 1, TEXTAREA: 1, SELECT: 1, BUTTON: 1, A: 1, IFRAME: 1, VIDEO: 1, LI: 1,
            TD: 1, OPTION: 1};
document.querySelectorAll('[bid]').forEach(function (e) {
  ['bid', 'browsergym_visibility_ratio', 'browsergym_set_of_marks'].forEach(function (a) {
    e.removeAttribute(a);
  });
});
var buttons = [];
pairs.forEach(function (p) {
  var e = document.querySelector('[data-arena="' + p[0] + '"]');
  if (!e) return;
  e.setAttribute('bid', p[1]);
  if (typeof e.value !== 'undefined') e.setAttribute('value', e.value);  // live state
  if (typeof e.checked !== 'undefined') {
    if (e.checked) e.setAttribute('checked', ''); else e.removeAttribute('checked');
  }
  var r = e.getBoundingClientRect(), area = r.width * r.height;
  var w = Math.max(0, Math.min(r.right, vw) - Math.max(r.left, 0));
  var h = Math.max(0, Math.min(r.bottom, vh) - Math.max(r.top, 0));
  var inside = r.left >= 0 && r.top >= 0 && r.left <= vw && r.top <= vh;
  var ratio = area > 0 ? w * h / area : (inside ? 1 : 0);
  e.setAttribute('browsergym_visibility_ratio', Math.round(ratio * 100) / 100);
  e.setAttribute('browsergym_set_of_marks', '0');
  var hit = area >= 20 && document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
  if (hit && e.contains(hit) &&
      (tags[e.tagName] || e.onclick != null || getComputedStyle(e).cursor === 'pointer') &&
      buttons.every(function (b) { return !b.contains(e); })) {
    e.setAttribute('browsergym_set_of_marks', '1');
    if (e.matches('button, a, input[type="button"], div[role="button"]')) buttons.push(e);
    for (var up = e.parentElement; up; up = up.parentElement) {
      if (up.getAttribute('browsergym_set_of_marks') === '1') {
        up.setAttribute('browsergym_set_of_marks', '0');
      }
    }
  }
});
"""


class Unicode(gym.Space):
    """Any string (BrowserGym's ``Unicode`` space)."""

    def contains(self, x: Any) -> bool:
        return isinstance(x, str)

    def __repr__(self) -> str:
        return "Unicode()"


class Float(gym.Space):
    def contains(self, x: Any) -> bool:
        return isinstance(x, float)

    def __repr__(self) -> str:
        return "Float()"


class AnyDict(gym.Space):
    """Any dict (BrowserGym's ``AnyDict``: the DOM snapshot, the AX tree...)."""

    def contains(self, x: Any) -> bool:
        return isinstance(x, dict)

    def __repr__(self) -> str:
        return "AnyDict()"


class Image(gym.Space):
    """An ``(H, W, 3)`` uint8 image of any size, empty included (BrowserGym's ``AnyBox``)."""

    def contains(self, x: Any) -> bool:
        return isinstance(x, np.ndarray) and x.dtype == np.uint8 and x.ndim == 3 and x.shape[2] == 3

    def __repr__(self) -> str:
        return "Image(H, W, 3)"


def observation_space() -> gym.spaces.Dict:
    """BrowserGym's observation space (``BrowserEnv.__init__``); its two ``Box`` entries have
    the shape ``(1,)`` of the arrays it returns."""
    message = gym.spaces.Dict({"role": Unicode(), "timestamp": Float(), "message": Unicode()})
    return gym.spaces.Dict(
        {
            "chat_messages": gym.spaces.Sequence(message),
            "goal": Unicode(),
            "goal_object": gym.spaces.Sequence(AnyDict()),
            "open_pages_urls": gym.spaces.Sequence(Unicode()),
            "open_pages_titles": gym.spaces.Sequence(Unicode()),
            "active_page_index": gym.spaces.Box(0, 255, (1,), dtype=np.int64),
            "url": Unicode(),
            "screenshot": Image(),
            "dom_object": AnyDict(),
            "axtree_object": AnyDict(),
            "extra_element_properties": AnyDict(),
            "focused_element_bid": Unicode(),
            "last_action": Unicode(),
            "last_action_error": Unicode(),
            "elapsed_time": gym.spaces.Box(0.0, np.inf, (1,), dtype=np.float64),
        }
    )


def check_face_args(task: str, backend: str) -> None:
    """Raises ValueError naming what is allowed for an unknown task or backend."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be 'twin' or 'browser', got {backend!r}")
    known = (TWIN_TASKS if backend == "twin" else TASKS) + tuple(FLOWS)
    if task not in known:
        close = difflib.get_close_matches(str(task), known, n=3, cutoff=0.6)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        where = "the twin models" if backend == "twin" else "MiniWoB++ has"
        raise ValueError(
            f"unknown task {task!r} for backend {backend!r}{hint} ({where} {len(known)}: "
            f"envs.web.{'TWIN_TASKS' if backend == 'twin' else 'TASKS'})"
        )


class BrowserGymEnv(gym.Env):
    """A MiniWoB++ task with BrowserGym's observation dict and action strings (module doc)."""

    metadata = {"render_modes": ["ansi"]}

    def __init__(
        self,
        task: str,
        backend: str = "twin",
        max_steps: int | None = None,
        timeout_s: float = 30.0,
        screenshot: bool = True,
        render_mode: str | None = None,
    ):
        """``max_steps``: None is WebEnv's 10, a flow's 10 a page."""
        check_face_args(task, backend)
        if task in FLOWS:
            from envs.web.flow import FlowEnv

            self.web: WebEnv = FlowEnv(task, backend, max_steps, render_mode, timeout_s)
        else:
            max_steps = 10 if max_steps is None else max_steps
            check_task_args(max_steps)
            self.web = WebEnv(task, backend, max_steps, render_mode, timeout_s)
        self.task, self.backend, self.screenshot = task, backend, screenshot
        self.render_mode = render_mode
        self.observation_space = observation_space()
        self.action_space = TextSpace(1024)
        self._chat: list[dict[str, Any]] = []
        self._last_action = self._last_error = ""
        self._start = time.time()
        self._crashed = False

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """A new page (``options={"task_seed": s}`` asks for page s, as WebEnv)."""
        super().reset(seed=seed)
        _, infos = self.web.reset(seed=seed, options=options)
        self._start = time.time()
        goal = self.web.view.page.utterance
        self._chat = [_message("assistant", GREETING), _message("user", goal)]
        self._last_action = self._last_error = ""
        return self.observe(), infos[AGENT]

    def step(self, action: str):
        if not self.web.agents:
            raise RuntimeError("the episode has ended: call reset() first")
        _, rewards, terms, truncs, infos = self.web.step({AGENT: action})
        info = infos[AGENT]
        self._last_action = action if isinstance(action, str) else repr(action)
        self._last_error = info["error"] or ""
        if not info["error"]:
            said = lang.parse(action)  # it parsed in WebEnv
            if said.name == "send_msg_to_user":
                self._chat.append(_message("assistant", said.args[0]))
        if info["browser_restarted"]:
            self._crashed = True
        return self.observe(), rewards[AGENT], terms[AGENT], truncs[AGENT], info

    @property
    def url(self) -> str:
        """The page shown: its task's HTML file."""
        from envs.web.browser import html_dir

        return (html_dir() / f"{self.web.page_task}.html").as_uri()

    def observe(self) -> dict[str, Any]:
        """The observation dict of the page now shown."""
        view, url = self.web.view, self.url
        page = view.page
        if self.backend == "browser" and not self._crashed:
            dom, shot = self._real_page(view)
        else:  # the twin, or a real page lost with its browser
            dom, shot = model_snapshot(view, url), np.zeros((0, 0, 3), np.uint8)
        self._crashed = False
        return {
            "chat_messages": tuple(dict(m) for m in self._chat),
            "goal": page.utterance,
            "goal_object": ({"type": "text", "text": page.utterance},),
            "open_pages_urls": (url,),
            "open_pages_titles": (page.title,),
            "active_page_index": np.asarray([0]),
            "url": url,
            "screenshot": shot,
            "dom_object": dom,
            "axtree_object": view.axtree(),
            "extra_element_properties": element_properties(dom),
            "focused_element_bid": view.focused_bid,
            "last_action": self._last_action,
            "last_action_error": self._last_error,
            "elapsed_time": np.asarray([time.time() - self._start]),
        }

    def _real_page(self, view: Rendered) -> tuple[dict, np.ndarray]:
        pairs = [[node.handle, bid] for bid, node in view.bids.items()]

        def grab(driver: Any) -> tuple[dict, bytes | None]:
            driver.execute_script(MARK_JS, pairs)
            dom = driver.execute_cdp_cmd(
                "DOMSnapshot.captureSnapshot",
                {"computedStyles": [], "includeDOMRects": True, "includePaintOrder": True},
            )
            return dom, driver.get_screenshot_as_png() if self.screenshot else None

        dom, png = self.web.page_backend.call(grab)
        strip_attribute(dom, "data-arena")  # Arena's own element numbers
        if png is None:
            return dom, np.zeros((0, 0, 3), np.uint8)
        from PIL import Image as PILImage

        return dom, np.asarray(PILImage.open(io.BytesIO(png)).convert("RGB"), dtype=np.uint8)

    def render(self) -> str:
        return self.web.render()

    def close(self) -> None:
        self.web.close()


def _message(role: str, text: str) -> dict[str, Any]:
    return {"role": role, "timestamp": time.time(), "message": text}


def browsergym_env(task: str, backend: str = "twin", **kwargs: Any) -> BrowserGymEnv:
    """BrowserGym's interface on ``websim/<task>-v0`` (``"twin"``) or ``web/<task>-v1``
    (``"browser"``); ``kwargs``: ``max_steps``, ``timeout_s``, ``screenshot``."""
    return BrowserGymEnv(task, backend, **kwargs)


# --- the DOM snapshot --------------------------------------------------------------------


def model_snapshot(view: Rendered, url: str) -> dict[str, Any]:
    """A ``DOMSnapshot.captureSnapshot`` of the twin's page model: a document, ``<html>`` and
    the body, elements with their attributes (and BrowserGym's, for those with a bid), text,
    input values, checked boxes, selected options, clickable elements; no layout."""
    strings: dict[str, int] = {}

    def s(text: str) -> int:
        return strings.setdefault(text, len(strings))

    bid_of = {id(node): bid for bid, node in view.bids.items()}
    nodes: dict[str, list] = {
        k: [] for k in ("parentIndex", "nodeType", "nodeName", "nodeValue", "backendNodeId")
    }
    nodes["attributes"] = []
    rare: dict[str, dict[str, list]] = {
        k: {"index": [], "value": []} for k in ("inputValue", "contentDocumentIndex")
    }
    flags: dict[str, dict[str, list]] = {
        k: {"index": []} for k in ("inputChecked", "optionSelected", "isClickable")
    }

    def add(parent: int, kind: int, name: str, value: str | None, attrs: list[int]) -> int:
        i = len(nodes["parentIndex"])
        nodes["parentIndex"].append(parent)
        nodes["nodeType"].append(kind)
        nodes["nodeName"].append(s(name))
        nodes["nodeValue"].append(-1 if value is None else s(value))
        nodes["backendNodeId"].append(i + 1)
        nodes["attributes"].append(attrs)
        return i

    def element(node: Node, parent: int) -> None:
        live = dict(node.attrs)
        bid = bid_of.get(id(node))
        if bid is not None:  # BrowserGym's marks, and the live state it writes (MARK_JS)
            live |= {BID_ATTR: bid, VIS_ATTR: "1", SOM_ATTR: "0"}
            if node.tag in ("input", "textarea"):
                live["value"] = node.value
            if node.checked:
                live["checked"] = ""
            else:
                live.pop("checked", None)
        attrs = [s(x) for k, v in live.items() for x in (k, v)]
        i = add(parent, 1, node.tag.upper(), None, attrs)
        if node.tag in ("input", "textarea"):
            rare["inputValue"]["index"].append(i)
            rare["inputValue"]["value"].append(s(node.value))
        if node.checked:
            flags["inputChecked"]["index"].append(i)
        if node.tag == "option" and node.selected:
            flags["optionSelected"]["index"].append(i)
        clickable = node.tag in CLICKABLE_TAGS or bool(MOUSE_EVENTS & node.on.keys())
        if clickable and not node.disabled:
            flags["isClickable"]["index"].append(i)
        for kid in node.kids:
            if isinstance(kid, str):
                add(i, 3, "#text", kid, [])
            else:
                element(kid, i)

    document = add(-1, 9, "#document", None, [])
    html = add(document, 1, "HTML", None, [])
    element(view.page.body, html)
    empty = ("nodeIndex", "styles", "bounds", "text", "stackingContexts", "paintOrders")
    layout = {k: [] for k in empty} | {"offsetRects": [], "scrollRects": [], "clientRects": []}
    doc = {
        "documentURL": s(url),
        "title": s(view.page.title),
        "baseURL": s(url),
        "nodes": nodes | rare | flags,
        "layout": layout,
        "textBoxes": {"layoutIndex": [], "bounds": [], "start": [], "length": []},
        "scrollOffsetX": 0,
        "scrollOffsetY": 0,
    }
    return {"documents": [doc], "strings": list(strings)}


def strip_attribute(dom: dict[str, Any], name: str) -> None:
    """Removes attribute ``name`` from every element of a DOM snapshot, in place."""
    if name not in dom["strings"]:
        return
    drop = dom["strings"].index(name)
    for doc in dom["documents"]:
        doc["nodes"]["attributes"] = [
            [x for k in range(0, len(flat), 2) if flat[k] != drop for x in flat[k : k + 2]]
            for flat in doc["nodes"]["attributes"]
        ]


def element_properties(dom: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """``{bid: {"visibility", "bbox", "clickable", "set_of_marks"}}`` of a one-document DOM
    snapshot, as BrowserGym's ``extract_dom_extra_properties`` reads them (at scale 1)."""
    strings = dom["strings"]
    out: dict[str, dict[str, Any]] = {}
    for doc in dom["documents"]:
        nodes, layout = doc["nodes"], doc["layout"]
        clickable = set(nodes["isClickable"]["index"])
        dx, dy = -doc["scrollOffsetX"], -doc["scrollOffsetY"]
        boxes = {
            i: [b[0] + dx, b[1] + dy, *b[2:]] if rects else None
            for i, b, rects in zip(
                layout["nodeIndex"], layout["bounds"], layout["clientRects"], strict=True
            )
        }
        for i, flat in enumerate(nodes["attributes"]):
            attrs = {strings[flat[k]]: strings[flat[k + 1]] for k in range(0, len(flat), 2)}
            bid = attrs.get(BID_ATTR)
            if bid:
                vis, som = attrs.get(VIS_ATTR), attrs.get(SOM_ATTR)
                out[bid] = {
                    "visibility": None if vis is None else float(vis),
                    "bbox": boxes.get(i),
                    "clickable": i in clickable,
                    "set_of_marks": None if som is None else som == "1",
                }
    return out


# --- gymnasium ids -----------------------------------------------------------------------


def register_gym_ids() -> None:
    """``browsergym/miniwob.<task>`` (real pages) and ``browsergym/arena-twin.<task>``, each
    unless gymnasium already has the id."""
    ids = [(f"browsergym/miniwob.{t}", t, "browser") for t in TASKS]
    ids += [(f"browsergym/arena-twin.{t}", t, "twin") for t in TWIN_TASKS]
    for env_id, task, backend in ids:
        if env_id not in gym.registry:
            gym.register(
                env_id,
                entry_point="envs.web.browsergym:BrowserGymEnv",
                kwargs={"task": task, "backend": backend},
                nondeterministic=backend == "browser",
            )


register_gym_ids()
