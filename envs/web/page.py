"""One page model and one text rendering for both web backends.

The browser backend dumps the live DOM into :class:`Node` trees; the twin builds the same
trees from its task logic. :func:`render` turns a page into the observation: the goal
utterance and an accessibility tree in which every element an agent can act on carries an id
(bid), printed line for line as BrowserGym's ``flatten_axtree_to_str`` prints a tree
(github.com/ServiceNow/BrowserGym, ``browsergym/utils/obs.py``)::

    Goal: Click on the "Okay" button.

    RootWebArea 'Click Button Task'
    \t[1] StaticText 'lorem ipsum dolor'
    \t[2] button 'Okay'
    \t[3] textbox '' value='abc', focused
    \t[4] checkbox '', checked='false'

Bids are numbered in document order each time a page is rendered, so an action always
refers to the observation the agent just read. The same walk gives the tree in Chrome
DevTools' shape (:meth:`Rendered.axtree`), BrowserGym's ``axtree_object``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any

TEXT_FORMAT = 2
"""The observation text's format: 1, Arena's own lines (``textbox, value='x'``); 2,
BrowserGym's (``textbox '' value='x'``). Caches of texts (teacher traces) key on it."""

VOID = frozenset({"br", "hr", "img", "input", "meta", "link", "wbr", "col", "area"})
SKIPPED_TAGS = frozenset({"script", "style", "link", "meta", "canvas", "svg", "noscript"})
_TEXT_INPUTS = frozenset({"text", "password", "email", "number", "search", "tel", "url", ""})


def norm(text: str) -> str:
    """Whitespace collapsed as a browser lays text out (``str.split``'s whitespace is ``\\s``)."""
    return " ".join(text.split())


@dataclass(eq=False)
class Node:
    """An element: its tag, children (elements and text) and the state an agent sees."""

    tag: str
    kids: list[Node | str] = field(default_factory=list)
    attrs: dict[str, str] = field(default_factory=dict)
    value: str = ""
    checked: bool = False
    selected: bool = False
    disabled: bool = False
    hidden: bool = False
    handle: int = -1
    """The browser's handle on the element (its ``data-arena`` number); -1 in the twin."""
    on: dict[str, Any] = field(default_factory=dict)
    """Twin event handlers: event name -> callable."""

    @property
    def type(self) -> str:
        return self.attrs.get("type", "text" if self.tag == "input" else "").lower()

    def append(self, child: Node | str) -> Node | str:
        self.kids.append(child)
        return child

    def html(self, markup: str) -> Node:
        """Replaces the children with parsed ``markup`` (d3's ``.html``/innerHTML)."""
        self.kids = parse_html(markup)
        return self

    def text(self) -> str:
        """Raw textContent of the visible subtree."""
        return "".join(k if isinstance(k, str) else k.text() for k in self.kids if _shown(k))

    def walk(self):
        """This node and every element below it, in document order."""
        stack = [self]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(k for k in reversed(node.kids) if isinstance(k, Node))


def _shown(k: Node | str) -> bool:
    return isinstance(k, str) or not k.hidden


def el(tag: str, *kids: Node | str, **attrs: str) -> Node:
    """``el('button', 'OK', id='subbtn')``; ``class_`` for ``class``."""
    return Node(tag, list(kids), {k.rstrip("_"): v for k, v in attrs.items()})


class _Fragment(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = Node("#fragment")
        self.stack = [self.root]

    def handle_starttag(self, tag, attrs):
        node = Node(tag, attrs={k: v or "" for k, v in attrs})
        if tag == "input":
            node.value = node.attrs.get("value", "")
            node.checked = "checked" in node.attrs
        self.stack[-1].kids.append(node)
        if tag not in VOID:
            self.stack.append(node)

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if tag not in VOID:
            self.stack.pop()

    def handle_endtag(self, tag):
        for i in range(len(self.stack) - 1, 0, -1):
            if self.stack[i].tag == tag:
                del self.stack[i:]
                break

    def handle_data(self, data):
        self.stack[-1].kids.append(data)


def parse_html(markup: str) -> list[Node | str]:
    parser = _Fragment()
    parser.feed(markup)
    parser.close()
    return parser.root.kids


def from_dump(d: dict) -> Node:
    """A :class:`Node` tree from the browser's DOM dump (see ``browser.DUMP_JS``)."""
    kids = [k if isinstance(k, str) else from_dump(k) for k in d.get("kids", ())]
    return Node(
        d["tag"],
        kids,
        dict(d.get("attrs", {})),
        value=d.get("value", ""),
        checked=bool(d.get("checked")),
        selected=bool(d.get("selected")),
        disabled=bool(d.get("disabled")),
        hidden=bool(d.get("hidden")),
        handle=int(d.get("h", -1)),
    )


@dataclass
class Page:
    """What an agent can see of a task page."""

    title: str
    utterance: str
    body: Node
    focused: Node | None = None


_TAG_ROLES = {
    "button": "button",
    "a": "link",
    "textarea": "textbox",
    "select": "combobox",
    "option": "option",
    "label": "LabelText",
    **{f"h{i}": "heading" for i in range(1, 7)},
}


def role(node: Node) -> str | None:
    """The accessibility role an element renders with; None for layout containers."""
    tag = node.tag
    if tag == "input":
        kind = node.type
        if kind in ("checkbox", "radio"):
            return kind
        if kind in ("button", "submit", "reset"):
            return "button"
        if kind == "hidden":
            return "hidden"
        return "textbox" if kind in _TEXT_INPUTS else kind
    return _TAG_ROLES.get(tag)


BARE_PROPERTIES = frozenset({"required", "focused", "atomic"})
"""Properties a line shows by name alone (BrowserGym's ``flatten_axtree_to_str``); any other
shows as ``name=repr(value)``."""

_PROPERTY_TYPES = {
    "checked": "tristate",
    "selected": "booleanOrUndefined",
    "focused": "booleanOrUndefined",
    "disabled": "boolean",
}
"""The Chrome DevTools ``AXValueType`` of each property Arena shows."""
_ROLE_TYPES = dict.fromkeys(("RootWebArea", "StaticText", "LabelText"), "internalRole")
"""Chrome's own roles (``internalRole``); the others are ARIA roles (``role``)."""


@dataclass(slots=True, eq=False)
class AXNode:
    """One node of the accessibility tree: a line of the text, or a layout container
    (``generic``, no line; its children stand at its depth)."""

    role: str
    name: str
    parent: int
    """Index of the parent node in :attr:`Rendered.nodes`; -1 for the root."""
    depth: int
    bid: str | None = None
    value: str | None = None
    props: tuple[tuple[str, bool | str], ...] = ()
    element: Node | None = None
    shown: bool = True

    def line(self) -> str:
        """The node's line, as BrowserGym's ``flatten_axtree_to_str`` prints it."""
        text = "\t" * self.depth + (f"[{self.bid}] " if self.bid else "")
        text += f"{self.role} {self.name!r}"
        if self.value is not None:
            text += f" value={self.value!r}"
        for key, value in self.props:
            text += f", {key}" if key in BARE_PROPERTIES else f", {key}={value!r}"
        return text

    def cdp(self, index: int, kids: list[int]) -> dict[str, Any]:
        """The node as Chrome DevTools' ``Accessibility.getFullAXTree`` gives it, with
        BrowserGym's ``browsergym_id``."""
        d: dict[str, Any] = {
            "nodeId": str(index + 1),
            "ignored": False,
            "role": {"type": _ROLE_TYPES.get(self.role, "role"), "value": self.role},
            "name": {"type": "computedString", "value": self.name},
        }
        if self.value is not None:
            d["value"] = {"type": "string", "value": self.value}
        d["properties"] = [
            {"name": k, "value": {"type": _PROPERTY_TYPES[k], "value": v}} for k, v in self.props
        ]
        d["childIds"] = [str(k + 1) for k in kids]
        if self.parent >= 0:
            d["parentId"] = str(self.parent + 1)
        if self.bid is not None:
            d["browsergym_id"] = self.bid
        return d


class Rendered:
    """A rendered observation: its text, its accessibility tree, the element behind each bid.

    One walk over the page builds the tree (:attr:`nodes`); the text is the goal and the
    tree's lines, each printed as BrowserGym's ``flatten_axtree_to_str`` prints that node, so
    that function on :meth:`axtree` gives back the text's tree lines. As BrowserGym's
    ``remove_redundant_static_text``, a text inside a label that names it has no line (and
    no bid).
    """

    def __init__(self, page: Page, error: str | None = None):
        self.page = page
        self.bids: dict[str, Node] = {}
        self.roles: dict[str, str] = {}
        self.nodes: list[AXNode] = []
        self._focused = page.focused
        self.nodes.append(AXNode("RootWebArea", norm(page.title), -1, 0))
        self._walk(page.body, 1, 0)
        lines = [f"Goal: {page.utterance}", ""]
        lines += [n.line() for n in self.nodes if n.shown]
        if error:
            lines += ["", f"Error from the last action: {error}"]
        self.text = "\n".join(lines)

    @property
    def focused_bid(self) -> str:
        """The bid of the focused element; "" when none or when it has no bid."""
        for bid, node in self.bids.items():
            if node is self._focused:
                return bid
        return ""

    def axtree(self) -> dict[str, list[dict[str, Any]]]:
        """The tree in Chrome DevTools' ``Accessibility.getFullAXTree`` shape (BrowserGym's
        ``axtree_object``)."""
        kids: list[list[int]] = [[] for _ in self.nodes]
        for i, n in enumerate(self.nodes):
            if n.parent >= 0:
                kids[n.parent].append(i)
        return {"nodes": [n.cdp(i, kids[i]) for i, n in enumerate(self.nodes)]}

    def _add(
        self,
        element: Node | None,
        parent: int,
        depth: int,
        role: str,
        name: str,
        value: str | None = None,
        props: tuple = (),
    ) -> int:
        # A text its parent's name holds has no line (BrowserGym's remove_redundant_static_text)
        shown = role != "StaticText" or name not in self.nodes[parent].name
        node = AXNode(role, name, parent, depth, None, value, props, element, shown)
        if element is not None and shown:
            node.bid = bid = str(len(self.bids) + 1)
            self.bids[bid] = element
            self.roles[bid] = role
        self.nodes.append(node)
        return len(self.nodes) - 1

    def _walk(self, node: Node, depth: int, parent: int) -> None:
        if node.hidden or node.tag in SKIPPED_TAGS:
            return
        attrs = node.attrs
        if "image" in attrs:  # an icon: no text, but an agent clicks it
            self._add(node, parent, depth, "image", norm(attrs["image"]))
            return
        kind = role(node) if node.tag == "input" else _TAG_ROLES.get(node.tag)
        if kind is None:  # a container: its text and elements, at its own depth
            shown = [k for k in node.kids if k.__class__ is str or not k.hidden]
            if all(k.__class__ is str for k in shown):
                text = norm("".join(shown))
                if text:
                    self._add(node, parent, depth, "StaticText", text, None, _disabled(node))
                return
            me = len(self.nodes)  # no line, no bid; its texts are not checked against a label
            self.nodes.append(AXNode("generic", "", parent, depth, None, None, (), None, False))
            run = ""  # adjacent text nodes read as one (the DOM may split them anywhere)
            for k in shown:
                if k.__class__ is str:
                    run += k
                    continue
                if run and not run.isspace():
                    self._add(None, me, depth, "StaticText", norm(run))
                run = ""
                self._walk(k, depth, me)
            if run and not run.isspace():
                self._add(None, me, depth, "StaticText", norm(run))
            return
        if kind == "hidden":
            return
        props = _disabled(node)
        if node is self._focused and kind in ("textbox", "combobox", "checkbox", "radio"):
            props += (("focused", True),)
        if kind == "textbox":
            name = norm(attrs.get("placeholder", ""))
            self._add(node, parent, depth, "textbox", name, node.value or None, props)
        elif kind in ("checkbox", "radio"):
            checked = (("checked", "true" if node.checked else "false"),)
            self._add(node, parent, depth, kind, "", None, checked + props)
        elif kind == "combobox":
            options = [k for k in node.walk() if k.tag == "option" and not k.hidden]
            chosen = next((o for o in options if o.selected), options[0] if options else None)
            value = norm(chosen.text()) if chosen is not None else None
            me = self._add(node, parent, depth, "combobox", "", value, props)
            for o in options:
                selected = (("selected", True),) if o is chosen else ()
                self._add(o, me, depth + 1, "option", norm(o.text()), None, selected)
        elif kind == "button" and node.tag == "input":
            self._add(node, parent, depth, "button", norm(node.value), None, props)
        elif kind in ("button", "link", "heading", "option"):
            self._add(node, parent, depth, kind, norm(node.text()), None, props)
        elif kind == "LabelText":
            me = self._add(node, parent, depth, "LabelText", norm(node.text()), None, props)
            for k in node.kids:
                if isinstance(k, Node):
                    self._walk(k, depth + 1, me)
        else:  # an input type we do not name (range, color, date...)
            self._add(node, parent, depth, kind, "", node.value, props)


def _disabled(node: Node) -> tuple[tuple[str, bool], ...]:
    return (("disabled", True),) if node.disabled else ()


def render(page: Page, error: str | None = None) -> Rendered:
    return Rendered(page, error)
