"""search-engine: search a name, page through the results and click the n-th one."""

from __future__ import annotations

import re

from envs.web.page import Node, el
from envs.web.teachers import View
from envs.web.twin import TwinTask, generate_words, ui_list

TASK = "search-engine"

PER_PAGE, PAGES = 3, 3
DOMAINS = [
    "com", "net", "org", "ca", "us", "gov", "pizza", "gg", "tv",
    "co.uk", "it", "eu", "hk", "mx", "se", "jp", "io", "rocks",
]  # fmt: skip
SUFFIX = ["st", "nd", "rd"]


def generate_search(rng) -> list[dict[str, str]]:
    """The page's ``generateSearch``: nine results titled with shuffled names."""
    names = rng.shuffle(list(ui_list("FIFTY_NAMES")))
    results = []
    for _ in range(PER_PAGE * PAGES):
        subdomain = rng.sample(ui_list("lorem_words")).replace(",", "", 1)
        domain = rng.sample(ui_list("lorem_words")).replace(",", "", 1)
        title = rng.sample(names)
        www = rng.sample(["www.", ""])
        sub = rng.sample(["", subdomain])
        url = f"https://{www}{sub}{domain}.{rng.sample(DOMAINS)}"
        desc = generate_words(rng, rng.randi(2, 4))
        results.append({"title": title, "url": url, "desc": desc})
    return results


class SearchEngine(TwinTask):
    def generate(self, rng):
        self.rng = rng  # a search the page does not expect draws fake results later
        self.results = generate_search(rng)
        self.expected = rng.sample(rng.shuffle(list(ui_list("FIFTY_NAMES"))))
        self.index = rng.randi(0, PER_PAGE * PAGES)
        self.results[self.index]["title"] = self.expected
        n = self.index + 1
        pos = f"{n}{SUFFIX[self.index]}" if self.index < 3 else f"{n}th"
        self.set_query(
            f'Use the textbox to enter "<span class="bold">{self.expected}</span>" and press '
            f'"Search", then find and click the <span class="bold">{pos}</span> search result.'
        )
        self.box = el("input", type="text", id="search-text")
        search = el("button", "Search", id="search")
        search.on["click"] = lambda n: self._show(1)
        self.content = el("div", id="page-content")
        self.pagination = el("ul", id="pagination")
        bar = el("div", self.box, search, id="search-bar")
        return el("div", bar, self.content, self.pagination, id="area")

    def _show(self, page: int) -> None:
        """The pagination widget at ``page`` (Search rebuilds it at page 1), then its
        ``onPageClick``."""
        items = [
            ("first", 1, "First", True),  # first and last are hidden by the page's CSS
            ("prev", max(page - 1, 1), "<", page == 1),
            *((str(p), p, str(p), False) for p in range(1, PAGES + 1)),
            ("next", min(page + 1, PAGES), ">", page == PAGES),
            ("last", PAGES, "Last", True),
        ]
        self.pagination.kids = []
        for kind, target, text, disabled in items:
            li = self.pagination.append(el("li", el("a", text, href="#")))
            li.hidden = disabled
            if kind != str(page):  # the active page's item does nothing
                li.on["click"] = lambda n, target=target: self._show(target)
        self._fill_page(page)

    def _fill_page(self, page: int) -> None:
        search = self.box.value
        if search.lower() != self.expected.lower():
            shown = [(r, -1) for r in generate_search(self.rng)[:PER_PAGE]]
        else:
            start = (page - 1) * PER_PAGE
            shown = [(self.results[start + i], start + i) for i in range(PER_PAGE)]
        self.content.kids = [self._result(r, i, search) for r, i in shown]

    def _result(self, result: dict[str, str], index: int, search: str) -> Node:
        link = el("a", result["title"], href="#", class_="search-title")
        # the link judges the search as it was when the page was shown
        won = search.lower() == self.expected.lower() and index == self.index
        link.on["click"] = lambda n: self.end(1.0 if won else -1.0)
        return el(
            "div",
            link,
            el("div", result["url"], class_="search-url"),
            el("div", result["desc"], class_="search-desc"),
        )


MODEL = SearchEngine

_GOAL = re.compile(r'enter "(.*)" and press "Search", then find and click the (\d)\w\w search')


def EXPERT(view: View, history: list[str]) -> str | None:  # noqa: N802
    m = _GOAL.search(view.goal)
    box, search = view.find("textbox"), view.find("button", "Search")
    if m is None or box is None or search is None:
        return None
    text, n = m.group(1), int(m.group(2)) - 1
    if box.value != text:
        return f"fill('{box.bid}', {text!r})"
    fills = [i for i, a in enumerate(history) if a.startswith("fill(")]
    searches = [i for i, a in enumerate(history) if a == f"click('{search.bid}')"]
    if not searches or searches[-1] < fills[-1]:  # the results shown are not this search's
        return f"click('{search.bid}')"
    links = view.all("link")
    names = [e.name for e in links]
    # the arrows tell the page shown: no "<" on the first, no ">" on the last
    page = 1 if "<" not in names else PAGES if ">" not in names else 2
    want = n // PER_PAGE + 1
    if page != want:
        return f"click('{view.find('link', str(want)).bid}')"
    return f"click('{links[n % PER_PAGE].bid}')"
