"""use-autocomplete: type into a field whose autocomplete lists the countries starting with the
text, and submit a country that starts (and maybe ends) as the goal says.

The page's autocomplete searches 300 ms after typing stops; the browser backend lets such
timers run before it reads the page, so both backends show the menu the typing opened.
"""

from __future__ import annotations

import re

from envs.web.extra.autocomplete import Autocomplete, AutocompletePage, matching
from envs.web.page import el
from envs.web.teachers import View
from envs.web.twin import ui_list

TASK = "use-autocomplete"


class UseAutocomplete(AutocompletePage):
    name = TASK

    def __init__(self):
        super().__init__()
        self.field = el("input", id="tags")
        self.submit = el("button", "Submit", id="subbtn", class_="secondary-action")
        self.submit.on["click"] = lambda n: self.check()
        area = el("div", el("label", "Tags: ", for_="tags"), self.field, self.submit, id="area")
        self.suggest = [Autocomplete(self, self.field, matching(ui_list("COUNTRIES"), True))]
        menu = self.suggest[0]
        self.body = el("body", el("div", area, id="wrap"), menu.menu, menu.live)

    def generate(self, rng):
        self.rng = rng
        self.field.value = ""  # set directly: no events, an open menu stays open
        items = ui_list("COUNTRIES")
        item = items[rng.randi(0, len(items))]
        self.prefix = item[: rng.randi(2, 5)]
        self.suffix = item[len(item) - rng.randi(2, 5) :]
        self.match_end = rng.randf(0, 1) < 0.75
        goal = f'Enter an item that starts with "<span class="bold">{self.prefix}</span>"'
        if self.match_end:
            goal += f' and ends with "<span class="bold">{self.suffix}</span>"'
        self.set_query(goal + ".")

    def check(self) -> None:
        entered = self.field.value
        right = entered.startswith(self.prefix) and (
            entered.endswith(self.suffix) or not self.match_end
        )
        self.end(1.0 if right else -1.0)

    def covered(self, node, path):
        # an open menu (from y=92) covers the Submit button's centre (y=112.5), whatever its
        # length (measured in the 500x400 headless window)
        if node is self.submit and not self.suggest[0].menu.hidden:
            return True
        return super().covered(node, path)

    def named(self):
        return {"field": self.field, "submit": self.submit}


MODEL = UseAutocomplete

GOAL = re.compile(r'Enter an item that starts with "(.*?)"(?: and ends with "(.*?)")?\.')


def expert(view: View, history: list[str]) -> str | None:
    """Type the first country that fits, pick it from the menu, submit."""
    m = GOAL.match(view.goal)
    box = view.find("textbox")
    if m is None or box is None:
        return None
    start, end = m.group(1), m.group(2) or ""
    answer = next(
        (c for c in ui_list("COUNTRIES") if c.startswith(start) and c.endswith(end)), None
    )
    if answer is None:
        return None
    if box.value != answer:
        return f"fill('{box.bid}', {answer!r})"
    # the menu lists its items after the Submit button; the last StaticText is the live region
    submit = view.find("button", "Submit")
    later = view.elements[view.elements.index(submit) + 1 :]
    item = next((e for e in later[:-1] if e.role == "StaticText" and e.name == answer), None)
    return f"click('{(item or submit).bid}')"


EXPERT = expert
