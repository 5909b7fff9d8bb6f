"""book-flight: search a one-way flight (autocomplete airports, a datepicker) and book one.

One model, two pages. ``book-flight`` runs jQuery UI's defaults: the autocomplete searches
300 ms after the last key (``delay``), the datepicker fades in and out (``showAnim:
'fadeIn'``, ``duration: 'fast'``, 200 ms). ``book-flight-nodelay`` sets ``delay: 0`` and
``showAnim: ''``. The browser backend runs the timeouts and finishes the jQuery animations
due within 600 ms of an action before it reads the page, so after every action both pages
show the settled page, and so does the twin: a fill's search has run, a picker that was
closing is gone. The delays matter only inside one action: a double click's second click
meets a closing datepicker that is still fading out (:meth:`BookFlight.under_pointer`).

What the page keeps between episodes (genProblem only empties the fields, results and #query):
focus, the autocomplete menus and their screen-reader messages, the open datepicker and its
month. The twin keeps them too, as a browser serving episode after episode does.

Dates are local time, as the page's ``Date`` is (the machine's time zone, UTC here); the
datepicker opens on "today" clamped to [Oct 1, Dec 31 2016], i.e. December 2016 on any clock
after 2016.
"""

from __future__ import annotations

import ast
import functools
import math
import re
import time

from envs.web.extra.autocomplete import Autocomplete, AutocompletePage, matching
from envs.web.page import Node, el
from envs.web.teachers import View
from envs.web.twin import settled_within

DAY_MS = 86_400_000
MAX_FLIGHTS = 5
MAX_PRICE = 1200
MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]
WEEKDAYS = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]

# Screen y of the form's element centres, and of the layers that can cover them (measured in
# the 500x400 headless window): chromedriver only dispatches a bare ``click`` event to an
# element whose centre lies under another one (no mousedown, so no focus change).
CENTRE_Y = {"heading": 66, "from": 92, "to": 117, "header": 152, "date": 170, "search": 194}
MENU_TOP = {"from": 102.6, "to": 127.6}
PICKER_SPAN = (54.6, 161.2)  # five week rows; October needs six
PICKER_ROW = 14


@functools.cache
def airports() -> list[str]:
    """``DOMESTIC_FLIGHTS`` of the page's ``domestic.js``."""
    from envs.web.browser import html_dir

    source = (html_dir().parent / "common/special/book-flight/domestic.js").read_text()
    return list(ast.literal_eval(re.search(r"=\s*(\[.*?\]);", source, re.S).group(1)))


def split_airport(name: str) -> tuple[str, str]:
    """'Aberdeen, SD (ABR)' -> ('Aberdeen, SD', 'ABR')."""
    parts = re.sub(r"\s\(|\)", "_", name).split("_")
    return parts[0], parts[1]


def local_ms(year: int, month: int, day: int) -> int:
    """``new Date(year, month - 1, day).getTime()``."""
    return int(time.mktime((year, month, day, 0, 0, 0, 0, 0, -1))) * 1000


def random_date(rng, start: int, end: int) -> int:
    """``ui_utils.randomDate``; ``new Date`` truncates to whole milliseconds."""
    return math.trunc(start + rng.random() * (end - start))


def date_string(ms: int) -> str:
    """``ui_utils.toDateString``: MM/DD/YYYY."""
    t = time.localtime(ms // 1000)
    return f"{t.tm_mon:02d}/{t.tm_mday:02d}/{t.tm_year}"


def parse_date(text: str) -> int:
    """``Date.parse('MM/DD/YYYY')``: local midnight."""
    month, day, year = (int(p) for p in text.split("/"))
    return local_ms(year, month, day)


def js_int(x: float) -> int:
    """``parseInt`` of a positive number, which reads its string (1.5e-7 -> 1)."""
    return int(f"{x:e}"[0]) if 0 < x < 1e-6 else int(x)


def generate_flights(rng, depart_city: str, arrive_city: str, day: str) -> list[dict]:
    start = parse_date(day)
    flights = []
    for _ in range(rng.randi(3, MAX_FLIGHTS)):
        depart = random_date(rng, start, start + DAY_MS)
        arrive = random_date(rng, depart, start + DAY_MS * 1.5)
        duration = arrive - depart
        flights.append(
            {
                "depart": (depart, depart_city),
                "arrive": (arrive, arrive_city),
                "shown": f"{js_int(duration / 3_600_000 % 60)}h {js_int(duration / 60_000 % 60)}m",
                "duration": duration,
                "price": rng.randi(50, MAX_PRICE),
            }
        )
    return flights


def when(ms: int) -> tuple[str, str]:
    """(``toLocaleTimeString`` without seconds, ``toDateString``) in en-US."""
    t = time.localtime(ms // 1000)
    clock = f"{(t.tm_hour - 1) % 12 + 1}:{t.tm_min:02d} {'AM' if t.tm_hour < 12 else 'PM'}"
    day = f"{WEEKDAYS[t.tm_wday]} {MONTHS[t.tm_mon - 1][:3]} {t.tm_mday:02d} {t.tm_year}"
    return clock, day


class Suggest(Autocomplete):
    """An airport field's autocomplete; its menu opens below the field and covers what it
    spans."""

    def __init__(self, page: BookFlight, field: Node, key: str):
        super().__init__(page, field, matching(airports()), page.delay_ms)
        self.key = key

    def covers(self, what: str) -> bool:
        if self.menu.hidden:
            return False
        n = len(self.menu.kids)
        bottom = MENU_TOP[self.key] + min(19 + 18.67 * (n - 1), 82)
        return MENU_TOP[self.key] < CENTRE_Y[what] < bottom


class BookFlight(AutocompletePage):
    """``book-flight-nodelay``; :class:`BookFlightDelayed` is the page with its delays."""

    name = "book-flight-nodelay"
    delay_ms = 0  # the autocomplete's delay
    fade_ms = 0  # the datepicker's fade in and out

    def __init__(self):
        super().__init__()
        settled_within(self.fade_ms, "a datepicker fade")
        self.origin = el("input", type="text", placeholder="From:")
        self.dest = el("input", type="text", placeholder="To:")
        self.date = el("input", type="text")
        self.search = el("button", "Search")
        self.heading = el("h2", "Book Your One-Way Flight")
        self.date_header = el("div", "Departure Date")
        self.form = el(
            "div",
            self.heading,
            el("div", self.origin),
            el("div", self.dest),
            el("div", self.date_header, el("div", self.date)),
            el("div", self.search),
        )
        self.results = el("div")
        self.area = el("div", self.form, self.results, id="area")
        self.suggest = [Suggest(self, self.origin, "from"), Suggest(self, self.dest, "to")]
        self.picker = el("div")
        self.picker.hidden = True
        self.month = 12
        self.date.on["focus"] = lambda n: self.show_picker()
        self.search.on["click"] = lambda n: self.run_search()
        self.body = el(
            "body",
            el("div", self.area, id="wrap"),
            *[node for s in self.suggest for node in (s.menu, s.live)],
            self.picker,
        )
        self.spots = {
            id(self.heading): "heading",
            id(self.origin): "from",
            id(self.dest): "to",
            id(self.date_header): "header",
            id(self.date): "date",
            id(self.search): "search",
        }

    # --- the episode -----------------------------------------------------------------------
    def generate(self, rng):
        self.rng = rng
        for field in (self.origin, self.dest, self.date):
            field.value = ""
        self.form.hidden, self.results.hidden, self.results.kids = False, True, []
        origin = rng.sample(airports())
        user_origin = rng.sample(list(split_airport(origin)))
        destination = rng.sample(airports())
        user_dest = rng.sample(list(split_airport(destination)))
        self.user_date = date_string(
            random_date(rng, local_ms(2016, 10, 1), local_ms(2016, 12, 31))
        )
        self.action = rng.sample(["cheapest", "shortest"])
        self.user_origin, self.user_dest = user_origin, user_dest
        self.set_query(
            f'Book the <span class="bold">{self.action}</span> one-way flight from: '
            f'<span class="bold">{user_origin}</span> to: <span class="bold">{user_dest}'
            f'</span> on <span class="bold">{self.user_date}</span>.'
        )
        self.flights = generate_flights(rng, origin, user_dest, self.user_date)
        return self.area

    # What carries over between episodes besides the menus and focus: the open datepicker.
    def named(self) -> dict[str, Node]:
        return {"from": self.origin, "to": self.dest, "date": self.date, "search": self.search}

    def _carry(self) -> dict:
        return {**super()._carry(), "picker": (self.picker.hidden, self.month)}

    def _restore(self, carried: dict) -> None:
        super()._restore(carried)
        hidden, self.month = carried["picker"]
        if not hidden:
            self.draw_picker()

    # --- the search and the results -------------------------------------------------------
    def run_search(self) -> None:
        self.results.kids = []
        origin, dest, day = self.origin.value, self.dest.value, self.date.value
        if origin not in airports() or dest not in airports() or not day:
            return
        self.results.hidden, self.form.hidden = False, True
        back = el("button", "Back")
        back.on["click"] = lambda n: self.go_back()
        self.results.append(
            el(
                "div",
                el("span", back),
                el(
                    "div",
                    el("span", f"{split_airport(origin)[1]} to {split_airport(dest)[1]}"),
                    el("span", " | "),
                    el("span", day),
                ),
            )
        )
        right = self.user_origin in origin and self.user_dest in dest and day == self.user_date
        # Wrong details get made-up flights, none of which can win.
        flights = self.flights if right else generate_flights(self.rng, origin, dest, day)
        best_price = min([MAX_PRICE] + [f["price"] for f in flights if right])
        best_time = min([2 * DAY_MS] + [f["duration"] for f in flights if right])
        for f in flights:
            self.results.append(self._flight(f, best_price, best_time))

    def _flight(self, f: dict, best_price: int, best_time: int) -> Node:
        book = el("button", f"Book flight for ${f['price']}")
        wins = (self.action == "shortest" and f["duration"] == best_time) or (
            self.action == "cheapest" and f["price"] == best_price
        )
        book.on["click"] = lambda n: self.end(1.0 if wins else -1.0)

        def part(label: str, *texts: str) -> Node:
            return el(
                "div",
                el("div", el("label", label)),
                el("div", *[el("div", t) for t in texts]),
            )

        (dt, dcity), (at, acity) = f["depart"], f["arrive"]
        return el(
            "div",
            part("Depart:", *when(dt), dcity),
            part("Arrives:", *when(at), acity),
            part("Duration:", f["shown"]),
            el("div", book),
        )

    def go_back(self) -> None:
        self.results.hidden, self.form.hidden = True, False

    # --- the datepicker --------------------------------------------------------------------
    def show_picker(self) -> None:
        if not self.picker.hidden:  # already showing for this field
            return
        self.month = int(self.date.value[:2]) if self.date.value else 12
        self.draw_picker()

    def draw_picker(self) -> None:
        self.picker.hidden = False
        prev, nxt = el("a", el("span", "Prev")), el("a", el("span", "Next"))
        if self.month > 10:
            prev.on["click"] = lambda n: self.turn(-1)
        if self.month < 12:
            nxt.on["click"] = lambda n: self.turn(1)
        first = local_ms(2016, self.month, 1)
        lead = (time.localtime(first // 1000).tm_wday + 1) % 7  # weeks start on Sunday
        days = (local_ms(2016 + self.month // 12, self.month % 12 + 1, 1) - first) // DAY_MS
        cells = [el("td", "\xa0") for _ in range(lead)] + [
            el("td", self._day(d)) for d in range(1, days + 1)
        ]
        cells += [el("td", "\xa0") for _ in range(-len(cells) % 7)]
        names = ["Su", "Mo", "Tu", "We", "Th", "Fr", "Sa"]
        self.nav = {"Prev": prev, "Next": nxt}
        self.picker.kids = [
            el(
                "div",
                prev,
                nxt,
                el(
                    "div",
                    el("span", MONTHS[self.month - 1]),
                    "\xa0",
                    el("span", "2016"),
                ),
            ),
            el(
                "table",
                el("thead", el("tr", *[el("th", el("span", d)) for d in names])),
                el("tbody", *[el("tr", *cells[i : i + 7]) for i in range(0, len(cells), 7)]),
            ),
        ]

    def _day(self, day: int) -> Node:
        link = el("a", str(day))

        def pick(n):
            self.date.value = f"{self.month:02d}/{day:02d}/2016"
            self.picker.hidden = True

        link.on["click"] = pick
        return link

    def turn(self, step: int) -> None:
        self.month += step
        self.draw_picker()
        if not self.form.hidden:  # the redraw puts focus back in its field
            self.set_focus(self.date)

    def picker_covers(self, what: str) -> bool:
        top, bottom = PICKER_SPAN
        if self.month == 10:
            bottom += PICKER_ROW
        return not self.picker.hidden and top < CENTRE_Y[what] < bottom

    # --- browser behaviour -----------------------------------------------------------------
    def under_pointer(self, node: Node) -> Node:
        if node.tag == "a" and not self.picker.hidden:  # Prev or Next redrew the picker
            word = node.text()
            if word in self.nav and self.nav[word] is not node:
                return self.nav[word]
        # A day's click closed the picker: fading out, it still takes the second click (the
        # same day again, which changes nothing). Without the fade the click would meet the
        # form under the day; the twin does not model that (docs/web.md).
        return node

    def covered(self, node: Node, path: list[Node]) -> bool:
        if super().covered(node, path):
            return True
        what = self.spots.get(id(node))
        if what is None or self.form.hidden:
            return False
        return any(s.covers(what) for s in self.suggest) or self.picker_covers(what)

    def mousedown(self, node: Node, path: list[Node]) -> None:
        # the datepicker closes on a press outside it and its field
        if node is not self.date and not any(n is self.picker for n in path):
            self.picker.hidden = True

    def act(self, action, target):
        if action.name in ("fill", "clear") and target is self.date:
            self.log.append(action)
            return f"{action.name} on element {action.args[0]!r} failed: invalid element state"
        return super().act(action, target)


class BookFlightDelayed(BookFlight):
    """``book-flight``: jQuery UI's default delays, which settle before the page is read."""

    name = "book-flight"
    delay_ms = 300
    fade_ms = 200  # duration 'fast'


# --- the expert ------------------------------------------------------------------------------
GOAL = re.compile(r"Book the (\w+) one-way flight from: (.*) to: (.*) on (\d\d)/(\d\d)/(\d{4})\.")


@functools.cache
def airport_names() -> dict[str, str]:
    """City or code -> the first airport of that name."""
    names: dict[str, str] = {}
    for a in airports():
        for term in split_airport(a):
            names.setdefault(term, a)
    return names


def _results(view: View, action: str, origin: str, dest: str, day: str) -> str | None:
    back = view.find("button", "Back")
    i = view.elements.index(back)
    codes = f"{split_airport(origin)[1]} to {split_airport(dest)[1]}"
    summary = [e.name for e in view.elements[i + 1 : i + 4]]
    if summary[:1] != [codes] or day not in summary:
        return f"click('{back.bid}')"
    best, shown = None, ""
    for e in view.elements:
        if re.fullmatch(r"\d+h \d+m", e.name):
            shown = e.name
        elif e.role == "button" and e.name.startswith("Book flight for $"):
            price = int(e.name.rsplit("$", 1)[1])
            hours, minutes = (int(x) for x in re.findall(r"\d+", shown))
            key = price if action == "cheapest" else hours * 60 + minutes
            if best is None or key < best[0]:
                best = (key, e)
    return None if best is None else f"click('{best[1].bid}')"


def expert(view: View, history: list[str]) -> str | None:
    m = GOAL.match(view.goal)
    if m is None:
        return None
    action, month, day = m.group(1), int(m.group(4)), int(m.group(5))
    origin, dest = airport_names().get(m.group(2)), airport_names().get(m.group(3))
    if origin is None or dest is None:
        return None
    want = f"{m.group(4)}/{m.group(5)}/{m.group(6)}"
    if view.find("button", "Back") is not None:
        return _results(view, action, origin, dest, want)
    boxes = view.all("textbox")
    if len(boxes) < 3:
        return None
    for box, text in ((boxes[0], origin), (boxes[1], dest)):
        if box.value != text:
            return f"fill('{box.bid}', {text!r})"
    date = boxes[2]
    if date.value != want:
        nxt = view.find("link", "Next")
        if nxt is None:
            # a focused field does not open the picker again: blur it first
            target = view.find("heading") if "focused" in date.props else date
            return f"click('{target.bid}')"
        shown = MONTHS.index(view.after(nxt, "StaticText").name) + 1
        if shown != month:
            return f"click('{(view.find('link', 'Prev') if shown > month else nxt).bid}')"
        return f"click('{view.find('link', str(day)).bid}')"
    return f"click('{view.find('button', 'Search').bid}')"


MODELS = {"book-flight-nodelay": BookFlight, "book-flight": BookFlightDelayed}
EXPERTS = dict.fromkeys(MODELS, expert)  # the delays settle before the expert reads the page
