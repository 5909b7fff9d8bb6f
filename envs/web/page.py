"""One page model and one text rendering for both web backends.

The browser backend dumps the live DOM into :class:`Node` trees; the twin builds the same
trees from its task logic. :func:`render` turns a page into the observation: the goal
utterance and a BrowserGym-style accessibility tree in which every element an agent can act
on carries an id (bid)::

    Goal: Click on the "Okay" button.

    RootWebArea 'Click Button Task'
    \t[1] StaticText 'lorem ipsum dolor'
    \t[2] button 'Okay'
    \t[3] textbox, value='abc', focused

Bids are numbered in document order each time a page is rendered, so an action always
refers to the observation the agent just read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any

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


def _quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


class Rendered:
    """A rendered observation: its text and the element behind each bid."""

    def __init__(self, page: Page, error: str | None = None):
        self.bids: dict[str, Node] = {}
        self.roles: dict[str, str] = {}
        self._focused = page.focused
        lines = [f"Goal: {page.utterance}", "", f"RootWebArea {_quote(norm(page.title))}"]
        self._lines = lines
        self._walk(page.body, 1)
        if error:
            lines += ["", f"Error from the last action: {error}"]
        self.text = "\n".join(lines)

    def _emit(self, node: Node | None, depth: int, what: str, props: list[str]) -> None:
        head = "\t" * depth
        if node is not None:
            bid = str(len(self.bids) + 1)
            self.bids[bid] = node
            self.roles[bid] = what.split(" ", 1)[0]
            head += f"[{bid}] "
        self._lines.append(head + ", ".join([what, *props]))

    def _walk(self, node: Node, depth: int) -> None:
        if node.hidden or node.tag in SKIPPED_TAGS:
            return
        attrs = node.attrs
        if "image" in attrs:  # an icon: no text, but an agent clicks it
            self._emit(node, depth, f"image {_quote(norm(attrs['image']))}", [])
            return
        kind = role(node) if node.tag == "input" else _TAG_ROLES.get(node.tag)
        if kind is None:  # a container: its text and elements, at its own depth
            shown = [k for k in node.kids if k.__class__ is str or not k.hidden]
            if all(k.__class__ is str for k in shown):
                text = norm("".join(shown))
                if text:
                    self._emit(node, depth, f"StaticText {_quote(text)}", _disabled(node))
                return
            run = ""  # adjacent text nodes read as one (the DOM may split them anywhere)
            for k in shown:
                if k.__class__ is str:
                    run += k
                    continue
                if run and not run.isspace():
                    self._emit(None, depth, f"StaticText {_quote(norm(run))}", [])
                run = ""
                self._walk(k, depth)
            if run and not run.isspace():
                self._emit(None, depth, f"StaticText {_quote(norm(run))}", [])
            return
        if kind == "hidden":
            return
        props = _disabled(node)
        if node is self._focused and kind in ("textbox", "combobox", "checkbox", "radio"):
            props.append("focused")
        if kind == "textbox":
            placeholder = attrs.get("placeholder", "")
            name = f" {_quote(norm(placeholder))}" if placeholder else ""
            if node.value:
                props.insert(0, f"value={_quote(node.value)}")
            self._emit(node, depth, f"textbox{name}", props)
        elif kind in ("checkbox", "radio"):
            props.insert(0, f"checked={'true' if node.checked else 'false'}")
            self._emit(node, depth, kind, props)
        elif kind == "combobox":
            options = [k for k in node.walk() if k.tag == "option" and not k.hidden]
            chosen = next((o for o in options if o.selected), options[0] if options else None)
            if chosen is not None:
                props.insert(0, f"value={_quote(norm(chosen.text()))}")
            self._emit(node, depth, "combobox", props)
            for o in options:
                self._emit(
                    o,
                    depth + 1,
                    f"option {_quote(norm(o.text()))}",
                    ["selected"] if o is chosen else [],
                )
        elif kind == "button" and node.tag == "input":
            self._emit(node, depth, f"button {_quote(norm(node.value))}", props)
        elif kind in ("button", "link", "heading", "option"):
            self._emit(node, depth, f"{kind} {_quote(norm(node.text()))}", props)
        elif kind == "LabelText":
            self._emit(node, depth, f"LabelText {_quote(norm(node.text()))}", props)
            for k in node.kids:
                if isinstance(k, Node):
                    self._walk(k, depth + 1)
        else:  # an input type we do not name (range, color, date...)
            self._emit(node, depth, kind, [f"value={_quote(node.value)}", *props])


def _disabled(node: Node) -> list[str]:
    return ["disabled"] if node.disabled else []


def render(page: Page, error: str | None = None) -> Rendered:
    return Rendered(page, error)
