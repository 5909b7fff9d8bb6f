"""social-media: a feed of posts; click one action (a control or a "more" menu item) of a user."""

from __future__ import annotations

import re

from envs.web.page import Node, el
from envs.web.teachers import Element, View
from envs.web.twin import TwinTask, generate_words, ui_list

TASK = "social-media"

MENU = {
    "share": "Share via DM",
    "copy": "Copy link to Tweet",
    "embed": "Embed Tweet",
    "menu-user": "Mute",
    "block-user": "Block",
    "report": "Report",
}
ACTIONS = {**MENU, "reply": "Reply", "retweet": "Retweet", "like": "Like"}
"""The class of each clickable element -> the name the goal gives it, in the page's order."""


class SocialMedia(TwinTask):
    def generate(self, rng):
        count = rng.randi(5, 10)
        posts = self._posts(rng, count)
        self.menus: list[Node] = []
        area = el("div", *(self._post(p) for p in posts), id="area")
        expected = rng.sample(list(ACTIONS))
        user = posts[rng.randi(0, count)]["username"]
        self.expected = (user, expected)
        self.set_query(
            f'For the user <span class="bold">{user}</span>, click on the '
            f'"<span class="bold">{ACTIONS[expected]}</span>" button.'
        )
        return area

    @staticmethod
    def _posts(rng, count: int) -> list[dict[str, str]]:
        rng.shuffle(list(ui_list("FIFTY_NAMES")))  # an unused shuffle the page still draws
        posts = []
        for _ in range(count):
            normal = rng.sample(ui_list("FIFTY_NAMES"))
            lorem = rng.sample(ui_list("lorem_words")).replace(",", "", 1)
            name = rng.sample(
                [rng.sample(ui_list("PEOPLE_NAMES")), rng.sample(ui_list("LAST_NAMES"))]
            )
            username = "@" + rng.sample([normal, lorem]).lower()
            time = f"{rng.randi(1, 20)}h ago"
            body = generate_words(rng, rng.randi(2, 6))
            posts.append({"name": name, "username": username, "time": time, "body": body})
        return posts

    def _post(self, post: dict[str, str]) -> Node:
        user = post["username"]
        items = []
        for cls, text in MENU.items():
            # the mute and block items name the user
            label = f"{text} {user}" if cls in ("menu-user", "block-user") else text
            items.append(self._clickable(el("li", label, class_=cls), user))
        menu = el("ul", *items, class_="hide")
        menu.hidden = True
        self.menus.append(menu)
        # The icons are CSS images (``content: url(...)``); the browser's dump names each by
        # its class (``image``), and so does the twin.
        more = el("span", class_="more", image="more")
        more.on["click"] = lambda n: self._toggle(menu)
        controls = el(
            "div",
            *(
                self._clickable(el("span", class_=c, image=c), user)
                for c in ("reply", "retweet", "like")
            ),
            el("span", more, menu),
            class_="controls",
        )
        details = el(
            "div",
            el("span", post["name"], class_="name"),
            el("span", user, class_="username"),
            el("span", class_="spacer"),
            el("span", post["time"], class_="time"),
            class_="details",
        )
        return el("div", details, el("div", post["body"], class_="body"), controls, class_="media")

    def _clickable(self, node: Node, user: str) -> Node:
        """A control or menu item: it ends the episode, won when it is the goal's."""
        node.on["click"] = lambda n: self.end(
            1.0 if (user, node.attrs["class"]) == self.expected else -1.0
        )
        return node

    def _toggle(self, menu: Node) -> None:
        """The "more" icon opens its menu, closing any other, or closes it when open."""
        if menu.hidden:
            for other in self.menus:
                other.hidden = True
            menu.hidden = False
        else:
            menu.hidden = True


MODEL = SocialMedia

_GOAL = re.compile(r'For the user (\S+), click on the "(.*)" button\.')
_CLASS = {name: cls for cls, name in ACTIONS.items()}
"""The name the goal gives an action -> the class of its element."""


def _post_of(view: View, user: str) -> list[Element]:
    """The elements of the first post by ``user`` after its username, up to the next post."""
    names = [i for i, e in enumerate(view.elements) if e.name.startswith("@")]
    for k, i in enumerate(names):
        if view.elements[i].name == user:
            end = names[k + 1] - 1 if k + 1 < len(names) else len(view.elements)
            return view.elements[i + 1 : end]
    return []


def EXPERT(view: View, history: list[str]) -> str | None:
    """Clicks the user's icon (reply, retweet, like) or "more" menu item, first opening that
    post's menu (its "more" icon) when the item is not shown."""
    m = _GOAL.match(view.goal)
    if m is None:
        return None
    user, action = m.groups()
    cls = _CLASS.get(action)
    post = _post_of(view, user)
    if cls not in MENU:  # an icon, named by its class
        target = next((e for e in post if e.role == "image" and e.name == cls), None)
    else:
        # the mute and block items name the user
        item = f"{action} {user}" if cls in ("menu-user", "block-user") else action
        target = next((e for e in post if e.role == "StaticText" and e.name == item), None)
        if target is None:
            target = next((e for e in post if e.role == "image" and e.name == "more"), None)
    return None if target is None else f"click('{target.bid}')"
