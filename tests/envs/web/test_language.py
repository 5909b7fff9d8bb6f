"""The action language, the page rendering and the seeded stream the twin shares with pages."""

import pytest

from envs.web.actions import Action, ParseError, parse
from envs.web.page import Page, el, from_dump, render
from envs.web.seedrandom import JSRandom


@pytest.mark.parametrize(
    "text, action",
    [
        ("click('13')", Action("click", ("13",))),
        ("  click(13)  ", Action("click", ("13",))),
        ('fill("7", "hello world")', Action("fill", ("7", "hello world"))),
        ("fill(bid='7', value='x')", Action("fill", ("7", "x"))),
        ("select_option('9', 'blue')", Action("select_option", ("9", "blue"))),
        ("select_option('9', ['blue'])", Action("select_option", ("9", "blue"))),
        ("press('7', 'Enter')", Action("press", ("7", "Enter"))),
        ("press('7', 'a')", Action("press", ("7", "a"))),
        ("scroll(0, 200.5)", Action("scroll", (0, 200.5))),
        ("noop()", Action("noop", ())),
        ("noop(500)", Action("noop", ())),
        ("fill('7', 'x', True)", Action("fill", ("7", "x"))),
        ("fill('7', 'x', enable_autocomplete_menu=False)", Action("fill", ("7", "x"))),
        ("dblclick('1')", Action("dblclick", ("1",))),
        ("hover('1')", Action("hover", ("1",))),
        ("focus('1')", Action("focus", ("1",))),
        ("clear('1')", Action("clear", ("1",))),
        ("send_msg_to_user('done')", Action("send_msg_to_user", ("done",))),
    ],
)
def test_every_action_kind_parses(text, action):
    assert parse(text) == action


@pytest.mark.parametrize(
    "text, words",
    [
        ("", "empty action"),
        ("click('13'", "cannot parse"),
        ("click", "is not a call"),
        ("os.system('ls')", "is not a call"),
        ("__import__('os')", "unknown action"),
        ("type('3', 'x')", "unknown action"),
        ("click()", "missing bid"),
        ("click('1', '2')", "takes 1 argument"),
        ("fill('7')", "missing value"),
        ("fill('7', x)", "must be a literal"),
        ("fill('7', 3)", "value must be a string"),
        ("click('')", "bid must be a string"),
        ("click(True)", "bid must be a string"),
        ("press('7', 'Hyper')", "unknown key"),
        ("scroll('a', 1)", "delta_x must be a number"),
        ("click('1', foo=2)", "unexpected or repeated argument 'foo'"),
        ("click('1'); noop()", "cannot parse"),
        ("fill('7', 'x', 'yes')", "enable_autocomplete_menu must be True or False"),
        ("noop('soon')", "wait_ms must be a number"),
        ("go_back()", "is BrowserGym's but not available here: a MiniWoB\\+\\+ task is one page"),
        ("mouse_click(3, 4)", "by bid, not at coordinates; allowed: noop, click"),
    ],
)
def test_malformed_actions_say_what_is_wrong(text, words):
    with pytest.raises(ParseError, match=words):
        parse(text)


def test_rendering_gives_bids_to_what_an_agent_can_act_on():
    box = el("input", type="checkbox")
    box.checked = True
    field = el("input", type="text", placeholder="Name")
    field.value = "bo"
    select = el("select", el("option", "red"), el("option", "blue"))
    select.kids[1].selected = True
    hidden = el("button", "Hidden")
    hidden.hidden = True
    body = el(
        "body",
        el("div", "Click ", el("span", "here"), " now"),
        el("div", el("label", box, "keep")),
        field,
        select,
        el("p", el("a", "more", href="#")),
        hidden,
        el("div", "  spaced \n  text "),
    )
    view = render(Page("A  Task", "Do it.", body, focused=field), error="boom")
    assert view.text.splitlines() == [
        "Goal: Do it.",
        "",
        "RootWebArea 'A Task'",
        "\tStaticText 'Click'",
        "\t[1] StaticText 'here'",
        "\tStaticText 'now'",
        "\t[2] LabelText 'keep'",
        "\t\t[3] checkbox '', checked='true'",
        "\t[4] textbox 'Name' value='bo', focused",
        "\t[5] combobox '' value='blue'",
        "\t\t[6] option 'red'",
        "\t\t[7] option 'blue', selected=True",
        "\t[8] link 'more'",
        "\t[9] StaticText 'spaced text'",
        "",
        "Error from the last action: boom",
    ]
    assert view.bids["4"] is field and view.roles["5"] == "combobox"


def test_a_browser_dump_reads_as_the_same_tree():
    dump = {
        "tag": "body",
        "h": 0,
        "kids": [
            "\n",
            {"tag": "button", "h": 1, "kids": ["OK"]},
            {"tag": "input", "h": 2, "attrs": {"type": "text"}, "value": "x", "kids": []},
            {"tag": "div", "h": 3, "hidden": True, "kids": []},
        ],
    }
    body = from_dump(dump)
    view = render(Page("T", "g", body))
    assert view.text.endswith("\t[1] button 'OK'\n\t[2] textbox '' value='x'")
    assert view.bids["2"].handle == 2


def test_the_stream_is_the_pages_math_random():
    # Math.random() after Math.seedrandom(s) in Chromium (MiniWoB++'s core.js), measured.
    expected = {
        0: [0.038085370776470735, 0.08624634995353292],
        42: [0.0016341939679719736, 0.9364577392619949],
        123456789: [0.7561153199796736, 0.2752919035678956],
        "abc": [0.7319428070286753, 0.6472995620587413],
    }
    for seed, values in expected.items():
        rng = JSRandom(seed)
        assert [rng.random(), rng.random()] == values
    rng = JSRandom(5)
    draws = [rng.randi(0, 10) for _ in range(2000)]
    assert set(draws) == set(range(10))


def _seedrandom_reference(seed: int, count: int) -> list[float]:
    """seedrandom's ``prng()`` transcribed loop for loop over its RC4 keystream."""
    from Crypto.Cipher import ARC4

    from envs.web.seedrandom import _mix_key

    stream = iter(ARC4.new(bytes(_mix_key(f"{seed}\0")), drop=256).encrypt(bytes(16 * count)))
    out = []
    for _ in range(count):
        n, d, x = float(int.from_bytes(bytes(next(stream) for _ in range(6)), "big")), 2.0**48, 0
        while n < 2.0**52:
            n, d, x = (n + x) * 256, d * 256, next(stream)
        while n >= 2.0**53:
            n, d, x = n / 2, d / 2, x >> 1
        out.append((n + x) / d)
    return out


def test_bulk_and_single_draws_follow_the_stream_byte_for_byte():
    # 6,000 draws a seed hold ~375 eight-byte and ~1.5 nine-byte draws.
    for seed in range(6):
        expected = _seedrandom_reference(seed, 6000)
        bulk = JSRandom(seed)
        got = bulk.draws(31) + bulk.draws(4000) + bulk.draws(1) + bulk.draws(1968)
        assert got == expected
        single = JSRandom(seed)
        assert [single.random() for _ in range(6000)] == expected


def test_the_shuffled_head_is_the_shuffles_head_and_draws_as_much():
    for seed in range(40):
        for n in (1, 2, 9, 50, 4945):
            full, head = JSRandom(seed), JSRandom(seed)
            items = [f"n{i}" for i in range(n)]
            assert head.shuffled_head(items, 9) == full.shuffle(list(items))[:9]
            assert items == [f"n{i}" for i in range(n)]  # not reordered
            assert head.random() == full.random()
