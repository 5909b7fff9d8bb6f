"""BrowserGym's action language, parsed without evaluating anything.

An action is one Python-style call on element ids (bids), e.g. ``click('13')``,
``fill('7', 'text')``, ``select_option('9', 'blue')``, ``press('7', 'Enter')``,
``scroll(0, 200)``, ``noop()``. :func:`parse` reads the call with ``ast`` (literals only), so a
model's output can never run code; anything else is a :class:`ParseError` naming what was
wrong and what is allowed.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

SIGNATURES: dict[str, tuple[str, ...]] = {
    "noop": (),
    "click": ("bid",),
    "dblclick": ("bid",),
    "hover": ("bid",),
    "focus": ("bid",),
    "clear": ("bid",),
    "fill": ("bid", "value"),
    "select_option": ("bid", "options"),
    "press": ("bid", "key_comb"),
    "scroll": ("delta_x", "delta_y"),
    "send_msg_to_user": ("text",),
}
"""Action name -> its parameters, in BrowserGym's order."""

OPTIONAL = {"noop": ("wait_ms",), "fill": ("enable_autocomplete_menu",)}
"""Parameters an action may take beyond its signature, checked and ignored: steps are
synchronous (``wait_ms``), and ``fill`` types key by key, so a page's autocomplete menu opens
whatever ``enable_autocomplete_menu`` says."""

NOT_HERE = {
    **dict.fromkeys(
        ("mouse_move", "mouse_up", "mouse_down", "mouse_click", "mouse_dblclick", "scroll_at",
         "mouse_drag_and_drop", "mouse_upload_file"),
        "actions act on elements by bid, not at coordinates",
    ),
    **dict.fromkeys(
        ("keyboard_down", "keyboard_up", "keyboard_press", "keyboard_type",
         "keyboard_insert_text"),
        "keys go to an element by bid: press(bid, key) or fill(bid, text)",
    ),
    **dict.fromkeys(
        ("go_back", "go_forward", "goto"), "a MiniWoB++ task is one page, with no history or other URL"
    ),
    **dict.fromkeys(("new_tab", "tab_close", "tab_focus"), "a MiniWoB++ task is one tab"),
    "drag_and_drop": "actions act on one element each",
    "upload_file": "no MiniWoB++ page has a file input",
    "report_infeasible": "every MiniWoB++ task can be done",
}  # fmt: skip
"""BrowserGym's actions (``browsergym/core/action/highlevel.py``) this language leaves out,
and why; :func:`parse` says so."""

KEYS = (
    "Enter",
    "Tab",
    "Escape",
    "Backspace",
    "Delete",
    "Space",
    "ArrowUp",
    "ArrowDown",
    "ArrowLeft",
    "ArrowRight",
    "Home",
    "End",
    "PageUp",
    "PageDown",
)
"""Keys ``press`` knows (a single printable character is allowed too)."""


class ParseError(ValueError):
    """The text is not one action of the language; the message says why."""


@dataclass(frozen=True)
class Action:
    name: str
    args: tuple

    @property
    def bid(self) -> str | None:
        return self.args[0] if SIGNATURES[self.name][:1] == ("bid",) else None

    def __str__(self) -> str:
        return f"{self.name}({', '.join(repr(a) for a in self.args)})"


def _literal(node: ast.expr, action: str, param: str):
    try:
        value = ast.literal_eval(node)
    except ValueError:
        raise ParseError(
            f"{action}(): argument {param!r} must be a literal, got {ast.unparse(node)!r}"
        ) from None
    if param == "bid":
        if isinstance(value, int) and not isinstance(value, bool):
            value = str(value)
        if not isinstance(value, str) or not value.strip():
            raise ParseError(f"{action}(): bid must be a string like '13', got {value!r}")
    elif param == "enable_autocomplete_menu":
        if not isinstance(value, bool):
            raise ParseError(
                f"fill(): enable_autocomplete_menu must be True or False, got {value!r}"
            )
    elif param in ("delta_x", "delta_y", "wait_ms"):
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise ParseError(f"{action}(): {param} must be a number, got {value!r}")
    elif param == "options":
        if isinstance(value, list | tuple) and len(value) == 1:
            value = value[0]
        if not isinstance(value, str):
            raise ParseError(f"select_option(): options must be one option's text, got {value!r}")
    elif param == "key_comb":
        if not isinstance(value, str) or not (value in KEYS or len(value) == 1):
            raise ParseError(
                f"press(): unknown key {value!r}; allowed: {', '.join(KEYS)} or one character"
            )
    elif not isinstance(value, str):
        raise ParseError(f"{action}(): {param} must be a string, got {value!r}")
    return value


def parse(text: str) -> Action:
    """The :class:`Action` ``text`` spells, or a :class:`ParseError`."""
    if not isinstance(text, str):
        raise ParseError(f"an action is a string, got {type(text).__name__}")
    source = text.strip()
    if not source:
        raise ParseError("empty action; write one call such as click('13') or noop()")
    try:
        tree = ast.parse(source, mode="eval").body
    except SyntaxError:
        raise ParseError(
            f"cannot parse {source[:80]!r}: write one call such as click('13')"
        ) from None
    if not (isinstance(tree, ast.Call) and isinstance(tree.func, ast.Name)):
        raise ParseError(f"{source[:80]!r} is not a call such as click('13')")
    name = tree.func.id
    if name in NOT_HERE:
        raise ParseError(
            f"{name}() is BrowserGym's but not available here: {NOT_HERE[name]}; "
            f"allowed: {', '.join(SIGNATURES)}"
        )
    if name not in SIGNATURES:
        raise ParseError(f"unknown action {name!r}; allowed: {', '.join(SIGNATURES)}")
    params = SIGNATURES[name]
    allowed = params + OPTIONAL.get(name, ())
    if len(tree.args) > len(allowed):
        raise ParseError(f"{name}() takes {len(params)} argument(s): {', '.join(params) or '-'}")
    given = dict(zip(allowed, tree.args, strict=False))
    for kw in tree.keywords:
        if kw.arg not in allowed or kw.arg in given:
            raise ParseError(
                f"{name}() got an unexpected or repeated argument {kw.arg!r}; "
                f"its arguments: {', '.join(allowed) or '-'}"
            )
        given[kw.arg] = kw.value
    missing = [p for p in params if p not in given]
    if missing:
        raise ParseError(f"{name}() is missing {', '.join(missing)}")
    for p in OPTIONAL.get(name, ()):
        if p in given:
            _literal(given[p], name, p)  # checked, then ignored
    return Action(name, tuple(_literal(given[p], name, p) for p in params))
