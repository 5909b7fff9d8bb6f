"""jQuery UI's autocomplete (the 1.12 widget MiniWoB++ ships), modelled once for the twin pages
that have one, and the page behaviour around it.

The widget lives on the page, not in an episode: ``genProblem`` only empties the fields, so an
open menu, the last term searched, the screen-reader messages and the focus carry over into the
next episode as they do in a browser serving episode after episode.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from envs.web.page import Node, el
from envs.web.seedrandom import JSRandom
from envs.web.twin import TwinTask, settled_within


class Autocomplete:
    """A field's autocomplete: its menu of matches and its screen-reader live region.

    ``source(term)`` gives the labels the page's source answers for ``term``. ``delay_ms`` is
    the widget's ``delay`` option (300 by default): it searches that long after the last key.
    The browser backend runs such timeouts before it reads the page (under
    :data:`envs.web.browser.SETTLE_MS`), so the twin searches at once and shows the same page.
    """

    def __init__(
        self,
        page: AutocompletePage,
        field: Node,
        source: Callable[[str], list[str]],
        delay_ms: int = 300,
    ):
        settled_within(delay_ms, "an autocomplete's delay")
        self.page, self.field, self.source = page, field, source
        self.menu = el("ul")
        self.menu.hidden = True
        self.live = el("div")
        self.term = ""

    def search(self) -> None:
        """The search the widget runs once typing pauses (after its delay)."""
        term = self.field.value
        if not term:  # under minLength: the menu closes, nothing is announced
            self.close()
            return
        if term == self.term and not self.menu.hidden:  # the same search: nothing to redo
            return
        self.term = term
        found = self.source(term)
        # Refreshing the menu runs jQuery's ``:not(...)`` selectors, whose nested Sizzle
        # matchers each draw ``Math.random``: two draws per item, from the page's stream.
        self.page.rng.draws(2 * len(found))
        self.menu.kids = [el("li", self._item(a)) for a in found]
        self.menu.hidden = not found
        if found:
            many = " results are" if len(found) > 1 else " result is"
            self.announce(f"{len(found)}{many} available, use up and down arrow keys to navigate.")
        else:
            self.announce("No search results.")

    def _item(self, label: str) -> Node:
        item = el("div", label)
        item.on["click"] = lambda n: self.pick(label)
        return item

    def announce(self, message: str) -> None:
        """Older messages are hidden and the new one appended; only the last one shows."""
        self.live.kids = [el("div", message)]

    def pick(self, label: str) -> None:
        self.page.set_focus(self.field)
        self.field.value = self.term = label
        self.close()

    def close(self) -> None:
        self.menu.hidden = True

    def state(self) -> tuple:
        return self.menu.hidden, [k.kids[0].text() for k in self.menu.kids], self.live.text()

    def restore(self, state: tuple) -> None:
        hidden, labels, message = state
        self.menu.kids = [el("li", self._item(a)) for a in labels]
        self.menu.hidden = hidden
        if message:
            self.announce(message)


def matching(items: list[str], prefix: bool = False) -> Callable[[str], list[str]]:
    """A source: the items containing the term (jQuery UI's default filter), or starting with
    it (use-autocomplete's), ignoring case."""

    def found(term: str) -> list[str]:
        pattern = re.compile(("^" if prefix else "") + re.escape(term), re.I)
        return [a for a in items if pattern.search(a)]

    return found


class AutocompletePage(TwinTask):
    """A page built once, with autocomplete fields in ``self.suggest``, whose episodes each
    run ``generate`` on it. Subclasses set ``self.suggest`` and ``self.body``."""

    suggest: list[Autocomplete]

    def reset(self, seed: int):
        self.carried = self._carry()
        self.seed, self.log = seed, []
        self.done, self.raw, self.reason = False, 0.0, None
        self.generate(JSRandom(seed))
        if self.focused is not None and not any(n is self.focused for n in self.body.walk()):
            self.focused = None  # a removed element loses focus
        return self.observe()

    def named(self) -> dict[str, Node]:
        """The elements that can hold focus between episodes, by name (for pickling)."""
        return {f"field{i}": s.field for i, s in enumerate(self.suggest)}

    # A page pickles as the state it started the episode in, its seed and its actions.
    def _carry(self) -> dict:
        return {
            "focus": next((k for k, n in self.named().items() if n is self.focused), None),
            "menus": [(*s.state(), s.term) for s in self.suggest],
        }

    def _restore(self, carried: dict) -> None:
        self.focused = self.named().get(carried["focus"])
        for s, (*state, term) in zip(self.suggest, carried["menus"], strict=True):
            s.restore(tuple(state))
            s.term = term

    def __getstate__(self):
        return {**super().__getstate__(), "carried": getattr(self, "carried", None)}

    def __setstate__(self, state):
        self.__init__()
        if state.get("carried"):
            self._restore(state["carried"])
        if state["seed"] is not None:
            self.reset(state["seed"])
            self.replay(state["log"])

    # --- browser behaviour -----------------------------------------------------------------
    def set_focus(self, node):
        for s in self.suggest:  # an autocomplete closes its menu on blur
            if self.focused is s.field and node is not s.field:
                s.close()
        super().set_focus(node)

    def covered(self, node: Node, path: list[Node]) -> bool:
        """Whether another layer covers ``node``'s centre: chromedriver then dispatches a bare
        ``click`` event (no mousedown, so no focus change)."""
        # the live regions are 1px boxes clipped away, left of the window
        return any(n is s.live for s in self.suggest for n in path)

    def mousedown(self, node: Node, path: list[Node]) -> None:
        """What a press outside the menus does before the click (nothing by default)."""

    def click(self, node: Node) -> None:
        path = self._path(node)
        if self.covered(node, path):
            self.fire(node, "click")
            return
        self.mousedown(node, path)
        for s in self.suggest:
            if any(n is s.menu for n in path):
                # the menu keeps focus in its field; hovering the item announces it
                if node.tag == "div":
                    s.announce(node.text())
                self.fire(node, "click")
                return
        super().click(node)

    def act(self, action, target):
        error = super().act(action, target)
        for s in self.suggest:  # it searches after typing (a clear types nothing)
            if action.name == "fill" and action.args[1] and target is s.field:
                s.search()
        return error
