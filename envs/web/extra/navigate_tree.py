"""navigate-tree: a collapsed file tree (the jQuery treeview plugin); expand folders to find
the file or folder the goal names, and click it.

A folder shows as its expander icon (``image 'hitarea expandable-hitarea'``, the plugin's
classes) before its name; its contents show once it is expanded.
"""

from __future__ import annotations

import re

from envs.web.page import Node, el
from envs.web.teachers import View
from envs.web.twin import TwinTask, ui_list

TASK = "navigate-tree"
MAX_FILES = 8


class Branch:
    """A folder's ``li``: its expander, name and list, open or closed."""

    def __init__(self, name: Node, items: Node):
        self.hitarea, self.name, self.items = el("div"), name, items
        self.li = el("li", self.hitarea, name, items)
        self.last, self.open = False, True

    def toggle(self, node: Node | None = None) -> None:
        self.open = not self.open
        state = "collapsable" if self.open else "expandable"
        last = f" last{state.capitalize()}-hitarea" if self.last else ""
        self.hitarea.attrs["image"] = f"hitarea {state}-hitarea{last}"
        self.items.hidden = not self.open


class NavigateTree(TwinTask):
    def generate(self, rng):
        tree = el("ul", id="tree", class_="filetree treeview")
        spans: list[Node] = []  # in document order, as the page's $tree.find('span')
        branches: list[Branch] = []

        def grow(needed: int, count: int, level: int, into: Node) -> None:
            """The page's ``generateTree``: files and folders (with their draws) into ``into``."""
            files = 0
            while files < needed and count < MAX_FILES and level < 2:
                span = el("span")
                spans.append(span)
                if rng.sample(["file", "folder"]) == "file":
                    into.append(el("li", span)).on["click"] = self._clicked(span, folder=False)
                    count += 1
                else:
                    branch = Branch(span, el("ul"))
                    branches.append(branch)
                    into.append(branch.li).on["click"] = self._clicked(span, folder=True)
                    nested = rng.randi(0, MAX_FILES - files - 1)
                    grow(nested, count + 1, level + 1, branch.items)
                    count += 1 + nested
                files += 1

        grow(MAX_FILES, 0, 0, tree)
        chosen = rng.randi(0, len(spans) - 1)
        for i, span in enumerate(spans):
            span.kids = [rng.sample(ui_list("FIFTY_NAMES"))]
            if i == chosen:
                self.expected = span.kids[0]
        # treeview({collapsed: true}): the last item of a list is marked; every folder closes
        lasts = {id(ul.kids[-1]) for ul in [tree, *(b.items for b in branches)] if ul.kids}
        for b in branches:
            b.last = id(b.li) in lasts
            b.toggle()
            b.hitarea.on["click"] = b.name.on["click"] = b.toggle
        self.set_query(
            "Navigate through the file tree. Find and click on the folder or file named "
            f'"{self.expected}".'
        )
        return el("div", el("div", tree), id="area")

    def _clicked(self, span: Node, folder: bool):
        """An item's click handler: the goal's name wins, another file loses, another folder
        lets the click bubble up to the folder around it."""

        def handler(target: Node) -> None:
            if span.text() == self.expected:
                self.end(1.0)
            elif not folder:
                self.end(-1.0)

        return handler


MODEL = NavigateTree

GOAL = re.compile(r'Find and click on the folder or file named "(.*)"\.')


def expert(view: View, history: list[str]) -> str | None:
    """Click the name if it shows; else open the first closed folder."""
    m = GOAL.search(view.goal)
    if m is None:
        return None
    target = view.find("StaticText", m.group(1))
    if target is not None:
        return f"click('{target.bid}')"
    closed = next((e for e in view.all("image") if "expandable-hitarea" in e.name), None)
    return None if closed is None else f"click('{closed.bid}')"


EXPERT = expert
