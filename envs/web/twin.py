"""The fast twin: MiniWoB++ tasks modelled in-process, page for page.

Each :class:`TwinTask` ports a task's ``genProblem`` from the ``miniwob`` package's HTML: the
same draws from the same seeded ``Math.random`` stream (:mod:`envs.web.seedrandom`), the same
word lists (read from the package's ``ui_utils.js``), the same elements, the same reward
rule. So ``websim/<task>-v0`` at seed s shows the page ``web/<task>-v1`` shows at seed s, and a
test checks they render to the same text step by step. Browser behaviour the tasks rely on
(focus, checkbox and radio toggling, labels forwarding clicks, event bubbling) is modelled
once in :class:`TwinTask`.
"""

from __future__ import annotations

import ast
import functools
import re

from envs.web.actions import Action
from envs.web.page import Node, Page, el, norm, parse_html, render
from envs.web.seedrandom import JSRandom

FOCUSABLE = frozenset({"input", "textarea", "select", "button", "a"})


@functools.cache
def ui_list(name: str) -> list[str]:
    """A word list of MiniWoB++'s ``common/ui_utils.js`` (``FIFTY_NAMES``, ``lorem_words``...)."""
    from envs.web.browser import html_dir

    source = (html_dir().parent / "common" / "ui_utils.js").read_text()
    m = re.search(rf"^ui_utils\.{name}\s*=\s*(\[.*?\]);", source, re.M | re.S)
    if m is None:
        raise KeyError(f"ui_utils.js has no list {name}")
    return list(ast.literal_eval(m.group(1)))


def capitalize(s: str) -> str:
    return s[:1].upper() + s[1:]


def generate_words(rng: JSRandom, lo: int, hi: int | None = None) -> str:
    """``ui_utils.generateWords``."""
    words = ui_list("lorem_words")
    n = rng.randi(lo, lo if hi is None else hi)
    first, txt = True, ""
    for i in range(n):
        w = words[rng.randi(0, len(words))]
        if first:
            w, first = capitalize(w), False
        if rng.random() < 0.2 and i + 1 < n:
            txt += w + ". "
            first = True
        elif i + 1 == n:
            txt += w.replace(",", "", 1)
        else:
            txt += w + " "
    return txt + "."


ALPHANUMERIC = "qwertyuiopasdfghjklzxcvbnmQWERTYUIOPASDFGHJKLZXCVBNM1234567890"


def generate_string(rng: JSRandom, lo: int, hi: int | None = None) -> str:
    """``ui_utils.generateString``."""
    n = rng.randi(lo, lo if hi is None else hi)
    return "".join(rng.sample(ALPHANUMERIC) for _ in range(n))


def settled_within(ms: float, what: str) -> None:
    """The twin shows a page once its timeouts and animations have run, as the browser
    backend reads it (it waits for those due within ``SETTLE_MS``); a longer one would show
    or not depending on how long the agent took, which no twin can know."""
    from envs.web.browser import SETTLE_MS

    if not 0 <= ms < SETTLE_MS:
        raise ValueError(f"{what} of {ms} ms: the twin models only delays under {SETTLE_MS} ms")


@functools.cache
def page_title(task: str) -> str:
    """The ``<title>`` of the task's HTML page."""
    from envs.web.browser import html_dir

    m = re.search(r"<title>(.*?)</title>", (html_dir() / f"{task}.html").read_text(), re.S)
    return norm(m.group(1)) if m else task


class TwinTask:
    """One MiniWoB++ task page, with the browser behaviour its handlers rely on."""

    name = ""

    def __init__(self):
        self.body = el("body")
        self.query = ""
        self.done, self.raw, self.reason = False, 0.0, None
        self.focused: Node | None = None

    # --- what subclasses write -------------------------------------------------------------
    def generate(self, rng: JSRandom) -> Node:
        """Draws the episode (as the page's ``genProblem``) and returns the ``#area`` node."""
        raise NotImplementedError

    def end(self, raw: float, reason: str | None = None) -> None:
        """``core.endEpisode``: only the first call of an episode counts."""
        if not self.done:
            self.done, self.raw, self.reason = True, float(raw), reason

    def set_query(self, markup: str) -> None:
        self.query = norm(
            "".join(k if isinstance(k, str) else k.text() for k in parse_html(markup))
        )

    # --- the page --------------------------------------------------------------------------
    # A page holds closures; it pickles as its seed and the actions applied, and is rebuilt.
    def __getstate__(self):
        return {"seed": getattr(self, "seed", None), "log": getattr(self, "log", [])}

    def __setstate__(self, state):
        self.__init__()
        if state["seed"] is not None:
            self.reset(state["seed"])
            self.replay(state["log"])

    def replay(self, actions: list[Action]) -> None:
        """Applies ``actions``, each to the element its bid names on the page then shown."""
        for action in actions:
            target = render(self.observe()).bids.get(action.bid) if action.bid else None
            self.act(action, target)

    def reset(self, seed: int) -> Page:
        self.seed, self.log = seed, []
        self.done, self.raw, self.reason, self.focused = False, 0.0, None, None
        area = self.generate(JSRandom(seed))
        self.body = el("body", el("div", area, id="wrap"))
        return self.observe()

    def observe(self) -> Page:
        return Page(page_title(self.name), self.query, self.body, self.focused)

    @property
    def status(self) -> tuple[bool, float, str | None]:
        return self.done, self.raw, self.reason

    def _path(self, node: Node) -> list[Node]:
        """``node`` and its ancestors, innermost first (a search that stops at ``node``)."""

        def find(n: Node) -> list[Node] | None:
            if n is node:
                return [n]
            for k in n.kids:
                if isinstance(k, Node):
                    path = find(k)
                    if path is not None:
                        path.append(n)
                        return path
            return None

        return find(self.body) or [node]

    def fire(self, node: Node, event: str, *args) -> None:
        """Dispatches ``event`` on ``node``; it bubbles up to the body."""
        for n in self._path(node):
            handler = n.on.get(event)
            if handler is not None:
                handler(node, *args)

    def set_focus(self, node: Node | None) -> None:
        if node is not self.focused:
            self.focused = node
            if node is not None:
                handler = node.on.get("focus")  # focus does not bubble
                if handler is not None:
                    handler(node)

    def under_pointer(self, node: Node) -> Node:
        """What a second click at ``node``'s place meets after the first changed the page
        (``node`` itself unless a page redraws or hides what was there)."""
        return node

    def click(self, node: Node) -> None:
        if node.tag == "option":  # picks the option, as the browser does
            select = next((n for n in self._path(node) if n.tag == "select"), None)
            if select is not None:
                self.choose(select, node)
                return
        self.set_focus(node if node.tag in FOCUSABLE else None)
        control = None
        if node.tag == "label":  # its input, or the element its ``for`` names
            control = next((n for n in node.walk() if n.tag == "input"), None) or next(
                (n for n in self.body.walk() if n.attrs.get("id") == node.attrs.get("for")), None
            )
        if node.tag == "input" and node.type in ("checkbox", "radio"):
            self._toggle(node)
        self.fire(node, "click")
        if control is not None and control is not node:  # a label clicks its control
            self.set_focus(control)
            self._toggle(control)
            self.fire(control, "click")

    def choose(self, select: Node, option: Node) -> None:
        for o in select.walk():
            if o.tag == "option":
                o.selected = o is option
        self.set_focus(select)
        self.fire(select, "change")

    def _toggle(self, box: Node) -> None:
        if box.type == "checkbox":
            box.checked = not box.checked
            return
        group = box.attrs.get("name")
        for n in self.body.walk():
            if n.tag == "input" and n.type == "radio" and group and n.attrs.get("name") == group:
                n.checked = False
        box.checked = True

    # --- actions ---------------------------------------------------------------------------
    def act(self, action: Action, target: Node | None) -> str | None:
        self.log.append(action)
        name, args = action.name, action.args
        if target is not None and target.disabled:
            return f"{name} on element {args[0]!r} failed: the element is disabled"
        if name == "click":
            self.click(target)
        elif name == "dblclick":
            self.click(target)
            target = self.under_pointer(target)
            self.click(target)
            self.fire(target, "dblclick")
        elif name == "hover":
            self.fire(target, "mouseover")
        elif name == "focus":
            self.set_focus(target)
        elif name in ("fill", "clear"):
            # fill is WebDriver's clear, then its send_keys. Its clear leaves an empty field
            # alone; else it focuses the field, empties it and blurs it (no key events).
            if target.value:
                self.set_focus(target)
                target.value = ""
                self.set_focus(None)
            if name == "clear":
                return None
            self.set_focus(target)
            target.value = args[1]
            if target.value:  # send_keys('') types nothing
                self.fire(target, "input")
                self.fire(target, "keyup", "")
        elif name == "select_option":
            options = [n for n in target.walk() if n.tag == "option"]
            chosen = next((o for o in options if norm(o.text()) == args[1]), None)
            if chosen is None:
                return f"no option {args[1]!r} in element {args[0]!r}"
            self.choose(target, chosen)
        elif name == "press":
            self.set_focus(target)
            self.fire(target, "keydown", args[1])
            self.fire(target, "keyup", args[1])
        return None


def _button(text: str, **attrs) -> Node:
    return el("button", text, **attrs)


# --- the tasks, one per MiniWoB++ page (its genProblem, draw for draw) ----------------------


class ClickTest(TwinTask):
    def generate(self, rng):
        w = rng.randi(35, 100)
        rng.randi(0, 160 - w - 2)
        rng.randi(0, 160 - w - 2)
        self.query = "Click the button."
        btn = _button("Click Me!")
        btn.on["click"] = lambda n: self.end(1.0)
        return el("div", btn, id="area")


class ClickTest2(TwinTask):
    def generate(self, rng):
        for _ in range(4):  # the two buttons' positions
            rng.randi(0, 118)
        self.query = "Click button ONE."
        one, two = _button("ONE"), _button("TWO")
        one.on["click"] = lambda n: self.end(1.0)
        two.on["click"] = lambda n: self.end(-1.0)
        return el("div", one, two, id="area")


class ClickButton(TwinTask):
    BUTTONS = ["submit", "okay", "ok", "yes", "no", "cancel", "next", "previous"]

    def generate(self, rng):
        lorem = ui_list("lorem_words")
        area, buttons, num = el("div", id="area"), [], 6
        for i in range(num):
            u = rng.randf(0, 1)
            must = i == num - 1 and not buttons
            if u < 0.33 and not must:
                area.append(el("div").html("".join(" " + rng.sample(lorem) for _ in range(3))))
            elif u < 0.66 and not must:
                if rng.randf(0, 1) < 0.5:
                    txt = "".join(" " + rng.sample(lorem) for _ in range(3)) + ": "
                    area.append(el("span").html(txt))
                rng.randi(40, 150)  # the field's width
                area.append(el("input", type="text"))
                area.append(el("br"))
            else:
                text = rng.sample(self.BUTTONS)
                if rng.randf(0, 1) < 0.5:
                    text = capitalize(text)
                btn = area.append(el("button").html(text))
                if rng.randf(0, 1) < 0.5:
                    area.append(el("br"))
                buttons.append((btn, text))
        correct = rng.sample(buttons)[1]
        for btn, text in buttons:
            btn.on["click"] = (
                (lambda n: self.end(1.0)) if text == correct else (lambda n: self.end(-1.0))
            )
        self.set_query(f'Click on the "{correct}" button.')
        return area


class ClickButtonSequence(TwinTask):
    def generate(self, rng):
        for _ in range(4):
            rng.randi(0, 118)
        self.query = "Click button ONE, then click button TWO."
        pushed: list[str] = []

        def clicked(which):
            pushed.append(which)
            if len(pushed) == 2:
                self.end(1.0 if pushed == ["ONE", "TWO"] else -1.0)

        one, two = _button("ONE"), _button("TWO")
        one.on["click"] = lambda n: clicked("ONE")
        two.on["click"] = lambda n: clicked("TWO")
        return el("div", one, two, id="area")


class ClickLink(TwinTask):
    def generate(self, rng):
        made = False
        while not made:
            words = re.split(r"\s", generate_words(rng, 20))
            for j, w in enumerate(words):
                if rng.random() < 0.2:
                    words[j] = f'<span class="alink">{w}</span>'
                    made = True
        area = el("div", id="area").html(" ".join(words))
        links = [k for k in area.kids if isinstance(k, Node)]
        correct = links[rng.randi(0, len(links))].text()
        for link in links:
            link.on["click"] = (
                (lambda n: self.end(1.0)) if link.text() == correct else (lambda n: self.end(-1.0))
            )
        self.set_query(f'Click on the link "{correct}".')
        return area


class _Choices(TwinTask):
    """click-checkboxes and click-option: labelled boxes, then Submit."""

    KIND = "checkbox"

    def boxes(self, rng, div: Node, count: int) -> list[tuple[Node, str]]:
        made = []
        for i in range(count):
            name = generate_string(rng, 2, 8)
            attrs = {"type": self.KIND, "id": f"ch{i}"}
            if self.KIND == "radio":
                attrs["name"] = "radio"
            box = Node("input", attrs=attrs)
            div.append(el("label", box, name))
            div.append(el("br"))
            made.append((box, name))
            if self.KIND == "checkbox":
                self.toclick.append(rng.randf(0, 1) < 0.5)
        return made

    def area(self, div: Node, submit) -> Node:
        btn = _button("Submit", class_="secondary-action")
        btn.on["click"] = lambda n: submit()
        return el("div", div, el("br"), btn, id="area")


class ClickCheckboxes(_Choices):
    def generate(self, rng):
        self.toclick: list[bool] = []
        div = el("div", id="boxes")
        boxes = self.boxes(rng, div, rng.randi(2, 7))
        names = [name for (_, name), want in zip(boxes, self.toclick, strict=True) if want]
        self.set_query(f"Select {', '.join(names) or 'nothing'} and click Submit.")

        def submit():
            r = sum(
                1.0 if b.checked == want else -1.0
                for (b, _), want in zip(boxes, self.toclick, strict=True)
            )
            self.end(r / len(boxes))

        return self.area(div, submit)


class ClickOption(_Choices):
    KIND = "radio"

    def generate(self, rng):
        div = el("div", id="boxes")
        boxes = self.boxes(rng, div, rng.randi(2, 7))
        ix = rng.randi(0, len(boxes))
        self.set_query(f"Select {boxes[ix][1]} and click Submit.")
        return self.area(div, lambda: self.end(1.0 if boxes[ix][0].checked else -1.0))


class _Form(TwinTask):
    """Pages whose fields are fixed in the HTML and emptied each episode."""

    def submit_button(self, text: str, check) -> Node:
        btn = _button(text, id="subbtn", class_="secondary-action")
        btn.on["click"] = lambda n: self.end(1.0 if check() else -1.0)
        return btn

    @staticmethod
    def margins(rng: JSRandom) -> None:
        for _ in range(3):  # the form's and the button's margins
            rng.randi(0, 20)

    def labelled_form(self, rows: list[tuple[Node, Node]], button: str, ok) -> Node:
        """``#area`` with a form of (label, field) paragraphs and its submit button."""
        paragraphs = [el("p", label, field) for label, field in rows]
        form = el("div", *paragraphs, self.submit_button(button, ok), id="form")
        return el("div", form, id="area")

    def one_field(self, expected: str) -> Node:
        """``#area`` with the page's text field and Submit, won by typing ``expected``."""
        box = el("input", type="text", id="tt")
        submit = self.submit_button("Submit", lambda: box.value == expected)
        return el("div", el("div", box, submit, id="form"), id="area")


class EnterText(_Form):
    def generate(self, rng):
        self.margins(rng)
        q = rng.sample(ui_list("FIFTY_NAMES"))
        self.set_query(
            f'Enter "<span class="bold">{q}</span>" into the text field and press Submit.'
        )
        return self.one_field(q)


class EnterText2(_Form):
    def generate(self, rng):
        self.margins(rng)
        q = rng.sample(ui_list("FIFTY_NAMES"))
        if int(rng.random() * 2) == 1:
            expected, q, how = q.upper(), q.lower(), "all upper case letters"
        else:
            expected, q, how = q.lower(), q.upper(), "all lower case letters"
        self.set_query(
            f'Type "<span class="bold">{q}</span>" in {how} in the text input and press Submit.'
        )
        return self.one_field(expected)


class EnterPassword(_Form):
    def generate(self, rng):
        password = generate_string(rng, 2, 6)
        self.set_query(
            f'Enter the password "<span class="bold">{password}</span>" into both '
            "text fields and press submit."
        )
        first = el("input", type="password", id="password")
        second = el("input", type="password", id="verify")
        ok = lambda: first.value == password and second.value == password  # noqa: E731
        rows = [(el("label", "Password"), first), (el("label", "Verify password"), second)]
        return self.labelled_form(rows, "Submit", ok)


class LoginUser(_Form):
    def generate(self, rng):
        user = rng.sample(ui_list("FIFTY_NAMES")).lower()
        password = generate_string(rng, 2, 6)
        self.set_query(
            f'Enter the <span class="bold">username</span> "{user}" and the '
            f'<span class="bold">password</span> "{password}" into the text fields and press '
            "login."
        )
        name = el("input", type="text", id="username")
        secret = el("input", type="password", id="password")
        ok = lambda: name.value == user and secret.value == password  # noqa: E731
        rows = [
            (el("label", "Username", class_="bold"), name),
            (el("label", "Password", class_="bold"), secret),
        ]
        return self.labelled_form(rows, "Login", ok)


class FocusText(TwinTask):
    def generate(self, rng):
        rng.randi(0, 20)
        rng.randi(0, 140)
        self.query = "Focus into the textbox."
        box = el("input", type="text", id="tt")

        def focused(n):
            self.focused = None  # the page blurs the field at once
            self.end(1.0)

        box.on["focus"] = focused
        return el("div", box, id="area")


class FocusText2(TwinTask):
    POS = ["1st", "2nd", "3rd"]

    def generate(self, rng):
        for _ in range(3):
            rng.randi(5, 20)
            rng.randi(5, 30)
        correct = rng.randi(0, 3)
        self.set_query(f"Focus into the {self.POS[correct]} input textbox.")
        boxes = [el("input", type="text", id=f"tt{i + 1}") for i in range(3)]
        for i, box in enumerate(boxes):

            def focused(n, i=i):
                self.focused = None
                self.end(1.0 if i == correct else -1.0)

            box.on["focus"] = focused
        return el("div", *boxes, id="area")


class ChooseList(TwinTask):
    def generate(self, rng):
        items = ui_list("PEOPLE_NAMES") if rng.randf(0, 1) < 0.5 else ui_list("COUNTRIES")
        items = rng.shuffled_head(items, 9)  # the page shows the first 3 to 9
        n = rng.randi(3, 10)
        select = el("select", id="options")
        for i in range(n):
            select.append(el("option").html(items[i]))
        truth = items[rng.randi(0, n)]
        self.set_query(f"Select {truth} from the list and click Submit.")
        btn = _button("Submit", class_="secondary-action")

        def submit(node):
            options = [o for o in select.kids if isinstance(o, Node)]
            chosen = next((o for o in options if o.selected), options[0])
            self.end(1.0 if chosen.text() == truth else -1.0)

        btn.on["click"] = submit
        return el("div", select, btn, id="area")


class ClickTab2(TwinTask):
    """jQuery UI tabs: three panels of words, some words links; the goal's may be hidden."""

    def generate(self, rng):
        made = False
        while not made:
            links = [el("a", f"Tab #{i + 1}", href=f"#tabs-{i + 1}") for i in range(3)]
            panels = []
            for i in range(3):
                words = re.split(r"\s", generate_words(rng, 20))
                for j, w in enumerate(words):
                    if rng.random() < 0.2:
                        words[j] = f'<span class="alink">{w}</span>'
                        made = True
                panels.append(el("div", el("p").html(" ".join(words)), id=f"tabs-{i + 1}"))
        for i, (link, panel) in enumerate(zip(links, panels, strict=True)):
            panel.hidden = i > 0
            link.on["click"] = lambda n, i=i: self._show(panels, i)
        spans = [n for p in panels for n in p.walk() if n.attrs.get("class") == "alink"]
        correct = spans[rng.randi(0, len(spans))].text()
        for span in spans:
            span.on["click"] = (
                (lambda n: self.end(1.0)) if span.text() == correct else (lambda n: self.end(-1.0))
            )
        self.set_query(f'Switch between the tabs to find and click on the link "{correct}".')
        return el("div", el("ul", *(el("li", a) for a in links)), *panels, id="area")

    @staticmethod
    def _show(panels: list[Node], index: int) -> None:
        for i, panel in enumerate(panels):
            panel.hidden = i != index


class ClickDialog(TwinTask):
    """A jQuery UI dialog (appended to the body, outside #area) closed by its "x"."""

    def generate(self, rng):
        words = generate_words(rng, 4, 8)
        for lo, hi in ((-10, 20), (5, 25), (90, 120), (70, 100)):  # margins and size
            rng.randi(lo, hi)
        self.query = 'Close the dialog box by clicking the "x".'
        close = el("button", el("span"), el("span", " "), "Close", type="button")
        self.dialog = el(
            "div", el("div", el("span", "\xa0"), close), el("div", el("p", words), id="dialog")
        )

        def closed(n):
            self.dialog.hidden = True
            self.end(1.0)

        close.on["click"] = closed
        return el("div", id="area")

    def reset(self, seed):
        page = super().reset(seed)
        self.body.append(self.dialog)
        return page


def _name(cls: type[TwinTask]) -> str:
    return re.sub(r"(?<=[a-z])(?=[A-Z0-9])", "-", cls.__name__).lower()


TASKS: dict[str, type[TwinTask]] = {
    _name(c): c
    for c in (
        ClickTest,
        ClickTest2,
        ClickButton,
        ClickButtonSequence,
        ClickLink,
        ClickCheckboxes,
        ClickOption,
        EnterText,
        EnterText2,
        EnterPassword,
        LoginUser,
        FocusText,
        FocusText2,
        ChooseList,
        ClickTab2,
        ClickDialog,
    )
}
"""The small pages' twins; :func:`task_models` adds the larger ones."""

for _task, _cls in TASKS.items():
    _cls.name = _task


def task_models() -> dict[str, type[TwinTask]]:
    """Every twin task: the small pages above and each :mod:`envs.web.extra` module's."""
    from envs.web import extra  # its modules build on this one

    models = {**TASKS, **extra.models()}
    for name, cls in models.items():
        cls.name = name
    return models
