"""email-inbox: find a sender's email in an inbox and reply to, forward, delete or star it.

The inbox's icons (search, trash, star, back arrows, send, the reply and forward pictures)
are empty elements drawn by CSS ``content:url(...)``. The browser's dump names such an element
by its class attribute (``image``), so the twin gives each icon the same ``image``: its class,
or '' for the icons known only by id.
"""

from __future__ import annotations

import re

from envs.web.page import Node, el
from envs.web.teachers import Element, View
from envs.web.twin import TwinTask, generate_words, ui_list

TASK = "email-inbox"

MAX_EMAILS = 12
ACTIONS = ["reply", "forward", "delete", "important"]


def summarize(text: str) -> str:
    """The inbox shows the first 15 characters of a field, then '..'."""
    return text if len(text) < 15 else text[:15] + ".."


def highlight(text: str, search: str) -> str:
    """Marks the first occurrence of ``search`` (JavaScript's string ``replace``; its ``$``
    patterns cannot fire: a match needs a '$' in the text, and no name or word has one)."""
    return text.replace(search, f'<span class="highlight">{search}</span>', 1)


def icon(tag: str = "span", cls: str = "", **attrs: str) -> Node:
    """An element drawn by CSS ``content:url(...)``, named by its class as the dump names it."""
    if cls:
        attrs["class_"] = cls
    return el(tag, image=cls, **attrs)


def icons() -> tuple[Node, Node, Node]:
    """The ``.email-actions`` box and its trash and star icons."""
    trash, star = icon(cls="trash"), icon(cls="star")
    return el("div", trash, star, class_="email-actions"), trash, star


class EmailInbox(TwinTask):
    def fire(self, node: Node, event: str, *args) -> None:
        """Bubbles as the base class does, but a handler returning False stops it there
        (jQuery's ``return false``)."""
        for n in self._path(node):
            handler = n.on.get(event)
            if handler is not None and handler(node, *args) is False:
                return

    def generate(self, rng):
        people = ui_list("PEOPLE_NAMES")
        self.emails = [
            (rng.sample(people), generate_words(rng, 1, 3), generate_words(rng, 5, 15))
            for _ in range(rng.randi(4, MAX_EMAILS))
        ]
        self.area = el("div", id="area")
        self.build_main()
        self.build_search()
        self.expected = self.emails[rng.randi(0, len(self.emails))]
        self.action = rng.sample(ACTIONS)
        who = f'Find the email by <span class="bold">{self.expected[0]}</span> and '
        if self.action == "reply":
            self.reply_text = generate_words(rng, 1, 5)
            self.set_query(
                who + f'reply to them with the text "<span class="bold">{self.reply_text}</span>".'
            )
        elif self.action == "forward":
            self.forward_to = rng.sample(people)
            self.set_query(
                who + f'forward that email to <span class="bold">{self.forward_to}</span>.'
            )
        elif self.action == "delete":
            self.set_query(who + "click the trash icon to delete it.")
        else:
            self.set_query(who + "click the star icon to mark it as important.")
        return self.area

    # --- the inbox and the search pane -----------------------------------------------------
    def thread(self, index: int, sender: Node, subject: Node, body: Node) -> tuple[Node, ...]:
        """One ``.email-thread`` summary; opening it shows email ``index``."""
        actions, trash, star = icons()
        row = el(
            "div",
            el("div", sender, subject, body, class_="email-left"),
            el("div", el("div", class_="email-time"), actions, class_="email-right"),
            class_="email-thread",
        )
        row.on["click"] = lambda n: self.open_email(index)
        return row, trash, star

    def build_main(self) -> None:
        search_icon = icon(id="open-search")
        search_icon.on["click"] = lambda n: self.open_search()
        self.main = self.area.append(
            el("div", el("div", el("h2", "Primary"), search_icon, id="main-header"), id="main")
        )
        for i, (name, subject, body) in enumerate(self.emails):
            row, trash, star = self.thread(
                i,
                el("div", name, class_="email-sender"),
                el("div", summarize(subject), class_="email-subject"),
                el("div", summarize(body), class_="email-body"),
            )
            trash.on["click"] = lambda n, name=name: self.trash(name)
            star.on["click"] = lambda n, name=name: self.star(n, name)
            self.main.append(row)

    def build_search(self) -> None:
        cancel = icon(id="search-cancel")
        cancel.on["click"] = lambda n: self.cancel_search()
        self.search_input = el("input", type="text", id="search-input", placeholder="Search")
        self.search_input.on["keyup"] = lambda n, *key: self.show_results(n.value)
        self.results = el("div", id="search-results")
        self.search = self.area.append(
            el(
                "div",
                el("div", el("div", cancel, el("span", self.search_input), id="search-header")),
                el("div", el("h4", "Results"), id="results-header"),
                self.results,
                id="search",
            )
        )
        self.search.hidden = True

    def open_search(self) -> None:
        self.search.hidden, self.main.hidden = False, True
        self.set_focus(self.search_input)

    def cancel_search(self) -> None:
        self.search.hidden, self.main.hidden = True, False
        self.search_input.value = ""

    def show_results(self, text: str) -> None:
        self.results.kids = []
        if not re.sub(r"\s", "", text):
            return
        for i, (name, subject, body) in enumerate(self.emails):
            if text not in name and text not in subject and text not in body:
                continue
            # result rows open their email; their icons have no handlers of their own
            row, _, _ = self.thread(
                i,
                el("div", class_="email-sender").html(highlight(name, text)),
                el("div", class_="email-subject").html(highlight(subject, text)),
                el("div", class_="email-body").html(highlight(summarize(body), text)),
            )
            self.results.append(row)

    # --- the icons' rewards ----------------------------------------------------------------
    def star(self, node: Node, name: str) -> bool:
        # the star's image toggles (its ``clicked`` class), and with it the name the dump gives
        cls = "star" if "clicked" in node.attrs["class"] else "star clicked"
        node.attrs["class"] = node.attrs["image"] = cls
        if self.action == "important":
            self.end(1.0 if name == self.expected[0] else -1.0)
        return False

    def trash(self, name: str) -> bool:
        if self.action == "delete":
            self.end(1.0 if name == self.expected[0] else -1.0)
        return False

    # --- an open email, and replying to or forwarding it -----------------------------------
    def open_email(self, index: int) -> None:
        name, subject, body = self.emails[index]
        back = icon(id="close-email")
        actions, trash, star = icons()
        reply = el("span", icon("div", "icon"), el("div", "Reply"), class_="email-reply")
        forward = el("span", icon("div", "icon"), el("div", "Forward"), class_="email-forward")
        email = el(
            "div",
            el("div", back, actions, id="email-bar"),
            el(
                "div",
                el("div", subject, class_="email-subject"),
                el(
                    "span",
                    el("div", name, class_="email-sender"),
                    el("div", "to me"),
                    class_="email-left",
                ),
                el("span", el("div", class_="email-time"), class_="email-right"),
                class_="email-header",
            ),
            el("div", body, class_="email-body"),
            el("div", reply, forward, class_="email-send"),
            id="email",
        )
        self.main.hidden = self.search.hidden = True
        self.area.append(email)
        back.on["click"] = lambda n: self.close_email(email)
        trash.on["click"] = lambda n: self.trash(name)
        star.on["click"] = lambda n: self.star(n, name)
        reply.on["click"] = lambda n: self.open_reply(email, index)
        forward.on["click"] = lambda n: self.open_forward(email, index)

    def close_email(self, email: Node) -> None:
        self.area.kids.remove(email)
        self.main.hidden = False

    def compose(self, email: Node, pane: Node, back: Node) -> None:
        """Shows a reply or forward ``pane`` in place of ``email``; ``back`` closes it."""
        email.hidden = True
        self.area.append(pane)

        def close(n):
            self.area.kids.remove(pane)
            email.hidden = False

        back.on["click"] = close

    def open_reply(self, email: Node, index: int) -> None:
        name, subject, _ = self.emails[index]
        back, send = icon(id="close-reply"), icon(id="send-reply")
        text = el("textarea", id="reply-text")
        pane = el(
            "div",
            el("div", back, send, id="reply-bar"),
            el(
                "div",
                el(
                    "div",
                    el("label", "to: ", class_="reply-to"),
                    el("span", name, class_="reply-sender"),
                    class_="reply-info",
                ),
                el(
                    "div",
                    el("label", "subject: ", class_="reply-subj"),
                    "Re: " + subject,
                    class_="reply-subject",
                ),
                class_="reply-header",
            ),
            el("div", text, class_="reply-body"),
            id="reply",
        )
        self.compose(email, pane, back)
        ok = lambda: (  # noqa: E731
            self.action == "reply" and name == self.expected[0] and text.value == self.reply_text
        )
        send.on["click"] = lambda n: self.end(1.0 if ok() else -1.0)

    def open_forward(self, email: Node, index: int) -> None:
        _, subject, body = self.emails[index]
        back, send = icon(id="close-forward"), icon(id="send-forward")
        to = el("input", type="text", class_="forward-sender")
        text = el("textarea", id="forward-text")
        text.value = body
        pane = el(
            "div",
            el("div", back, send, id="forward-bar"),
            el(
                "div",
                el("div", el("label", "to: "), to, class_="forward-info"),
                el("div", el("label", "subject: "), subject, class_="forward-subject"),
                class_="forward-header",
            ),
            el("div", text, class_="forward-body"),
            id="forward",
        )
        self.compose(email, pane, back)
        ok = lambda: (  # noqa: E731
            self.action == "forward"
            and to.value == self.forward_to
            and text.value == self.expected[2]
        )
        send.on["click"] = lambda n: self.end(1.0 if ok() else -1.0)


MODEL = EmailInbox

GOAL = re.compile(
    r"Find the email by (.+?) and (?:reply to them with the text \"(.*)\"\."
    r"|forward that email to (.+)\.|click the (trash|star) icon)"
)


def _icon(view: View, name: str, after: Element | None = None) -> Element | None:
    """The first icon whose class starts with ``name`` (a star may be "star clicked"; ''
    matches any icon), after ``after`` when given."""
    start = 0 if after is None else view.elements.index(after) + 1
    return next(
        (e for e in view.elements[start:] if e.role == "image" and e.name.startswith(name)), None
    )


def _click(e: Element | None) -> str | None:
    return None if e is None else f"click('{e.bid}')"


def EXPERT(view: View, history: list[str]) -> str | None:
    """Acts on the sender's email from whichever pane is open. Trash and star are clicked in
    the inbox row; a reply or forward opens the email, then its pane, fills it and sends.
    A pane left by a slip (search, another email, the wrong compose pane) is closed by its
    back arrow, the pane's first icon. The page itself leaves two losses: with two emails by
    the sender, a forward must send the one the page drew; and a forward pane shows no sender,
    so one that slips opened on another email is sent."""
    m = GOAL.match(view.goal)
    if m is None:
        return None
    sender, reply, forward, icon_name = m.groups()
    back = _icon(view, "")
    if view.find("heading", "Results") is not None:  # the search pane
        return _click(back)
    if view.find("heading", "Primary") is not None:  # the inbox
        row = view.find("StaticText", sender)
        if row is None or icon_name is None:
            return _click(row)
        return _click(_icon(view, icon_name, row))
    to_me = view.find("StaticText", "to me")
    if to_me is not None:  # an open email: its sender comes just before "to me"
        if view.elements[view.elements.index(to_me) - 1].name != sender:
            return _click(back)
        if icon_name is not None:
            return _click(_icon(view, icon_name))
        return _click(view.find("StaticText", "Reply" if reply is not None else "Forward"))
    to = view.find("LabelText", "to:")
    if to is None:
        return None
    boxes = view.all("textbox")
    send = _icon(view, "", back)
    if len(boxes) == 1:  # the reply pane: the recipient is text
        if reply is None or view.after(to, "StaticText").name != sender:
            return _click(back)
        return f"fill('{boxes[0].bid}', {reply!r})" if boxes[0].value != reply else _click(send)
    if forward is None:  # the forward pane: the recipient is a field
        return _click(back)
    return f"fill('{boxes[0].bid}', {forward!r})" if boxes[0].value != forward else _click(send)
