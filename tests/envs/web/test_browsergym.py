"""BrowserGym's interface (envs/web/browsergym.py), checked against BrowserGym's own code
(browsergym-core 0.14.3, installed by the Makefile): its flatten_axtree_to_str gives back
Arena's text, its DOM reader reads the DOM snapshot, its action set's actions parse or are
refused with a reason, and an AgentLab-style agent that reads only the observation dict plays
the twin and the real pages unchanged."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlparse

import gymnasium as gym
import numpy as np
import pytest
from browsergym.core.action.highlevel import ACTION_SUBSETS, HighLevelActionSet
from browsergym.core.action.parsers import NamedArgument, highlevel_action_parser
from browsergym.core.observation import extract_dom_extra_properties
from browsergym.utils.obs import flatten_axtree_to_str, flatten_dom_to_str

from envs.web import TWIN_TASKS
from envs.web.actions import NOT_HERE, SIGNATURES, ParseError, parse
from envs.web.browser import chrome_missing
from envs.web.browsergym import BrowserGymEnv, browsergym_env
from envs.web.page import Page, el, render
from envs.web.teachers import ScriptedTeacher, View, experts

needs_chrome = pytest.mark.skipif(bool(chrome_missing()), reason=str(chrome_missing()))


def tree_lines(text: str) -> str:
    """The tree of a WebEnv text observation: the lines after the goal, up to an error."""
    return text.split("\n\n")[1]


class ExpertAgent:
    """An AgentLab-style agent (``get_action(obs) -> (action, agent_info)``) that reads only
    BrowserGym's observation dict: the tree flattened by BrowserGym's function, the goal
    from ``goal_object``, the task from ``url``, the last error; it acts as Arena's scripted
    expert for the task would on that text."""

    def __init__(self):
        self.history: list[str] = []
        self.errors: list[str] = []

    def get_action(self, obs: dict) -> tuple[str, dict]:
        if obs["last_action_error"]:
            self.errors.append(obs["last_action_error"])
        task = Path(urlparse(obs["url"]).path).stem
        goal = " ".join(m["text"] for m in obs["goal_object"] if m["type"] == "text")
        text = f"Goal: {goal}\n\n" + flatten_axtree_to_str(obs["axtree_object"])
        action = experts()[task](View.read(text), self.history) or "noop()"
        self.history.append(action)
        return f"  {action}\n", {"think": f"{task}: {action}"}  # an LLM's stray whitespace


def play_agent(env: BrowserGymEnv, seed: int) -> tuple[float, ExpertAgent]:
    agent, done = ExpertAgent(), False
    obs, _ = env.reset(seed=seed, options={"task_seed": seed})
    reward = 0.0
    while not done:
        action, _ = agent.get_action(obs)
        obs, reward, terminated, truncated, _ = env.step(action)
        done = terminated or truncated
    return reward, agent


def check_observation(env: BrowserGymEnv, obs: dict) -> None:
    """What must hold of every observation: BrowserGym's functions read it as Arena shows it."""
    assert flatten_axtree_to_str(obs["axtree_object"]) == tree_lines(env.render())
    assert extract_dom_extra_properties(obs["dom_object"], 1.0) == obs["extra_element_properties"]
    assert sorted(obs["extra_element_properties"], key=int) == list(env.web.view.bids)
    focused = [e.bid for e in View.read(env.render()).elements if "focused" in e.props]
    if focused:
        assert obs["focused_element_bid"] == focused[0]
    assert env.observation_space.contains(obs)


def test_every_kind_of_line_flattens_back_to_itself():
    """Each branch of the walk, with the details where BrowserGym's printing is particular:
    repr quoting, a label's redundant text, bare and valued properties, unnamed elements."""
    box, field, slider = el("input", type="checkbox"), el("input", type="text"), el("input")
    box.checked, field.value, slider.attrs["type"], slider.value = True, "it's", "range", "5"
    off = el("button", 'say "hi"')
    off.disabled = True
    select = el("select", el("option", "a"), el("option", "b"))
    select.kids[1].selected = True
    body = el(
        "body",
        el("div", "Click ", el("span", "Bob's"), " now"),
        el("label", box, el("span", "keep"), " it"),
        field,
        select,
        slider,
        off,
        el("h2", "Title"),
        el("span", image="trash"),
    )
    view = render(Page("A Task", "Do it.", body, focused=box), error="boom")
    assert tree_lines(view.text).splitlines() == [
        "RootWebArea 'A Task'",
        "\tStaticText 'Click'",
        '\t[1] StaticText "Bob\'s"',
        "\tStaticText 'now'",
        "\t[2] LabelText 'keep it'",
        "\t\t[3] checkbox '', checked='true', focused",  # no line for 'keep': its label's
        "\t[4] textbox '' value=\"it's\"",
        "\t[5] combobox '' value='b'",
        "\t\t[6] option 'a'",
        "\t\t[7] option 'b', selected=True",
        "\t[8] range '' value='5'",
        "\t[9] button 'say \"hi\"', disabled=True",
        "\t[10] heading 'Title'",
        "\t[11] image 'trash'",
    ]
    assert flatten_axtree_to_str(view.axtree()) == tree_lines(view.text)
    nodes = view.axtree()["nodes"]
    assert nodes[0]["role"] == {"type": "internalRole", "value": "RootWebArea"}
    by_id = {n["nodeId"]: n for n in nodes}
    assert all(n["nodeId"] in by_id[n["parentId"]]["childIds"] for n in nodes[1:])
    label = next(n for n in nodes if n.get("browsergym_id") == "2")
    assert [nodes[int(k) - 1]["name"]["value"] for k in label["childIds"]] == ["", "keep"]


@pytest.mark.parametrize("task", TWIN_TASKS)
def test_flatten_axtree_to_str_gives_the_twins_text_at_every_step(task):
    env = browsergym_env(task, "twin")
    try:
        for seed in range(3):
            obs, _ = env.reset(seed=seed, options={"task_seed": seed})
            teacher, history = ScriptedTeacher(task, 0.3, seed), []
            check_observation(env, obs)
            while env.web.agents:
                action = teacher.act(env.render(), history).action
                history.append(action)
                obs, *_ = env.step(action)
                check_observation(env, obs)
    finally:
        env.close()


def test_the_twin_observation_dict():
    env = browsergym_env("login-user", "twin")
    obs, info = env.reset(seed=0, options={"task_seed": 3})
    goal = (
        'Enter the username "keneth" and the password "91YP" into the text fields and press login.'
    )
    assert obs["goal"] == goal and obs["goal_object"] == ({"type": "text", "text": goal},)
    assert [(m["role"], m["message"]) for m in obs["chat_messages"]][1] == ("user", goal)
    assert obs["url"].endswith("/miniwob/login-user.html") and obs["open_pages_urls"] == (
        obs["url"],
    )
    assert obs["open_pages_titles"] == ("Login User Task",) and obs["active_page_index"][0] == 0
    assert obs["screenshot"].shape == (0, 0, 3)  # the twin draws nothing
    assert obs["last_action"] == obs["last_action_error"] == obs["focused_element_bid"] == ""
    assert set(obs["extra_element_properties"]["2"].items()) == {
        ("visibility", 1.0),
        ("bbox", None),
        ("clickable", True),
        ("set_of_marks", False),
    }
    assert info["seed"] == 3
    obs, reward, terminated, truncated, info = env.step("fill('2', 'keneth')")
    assert (reward, terminated, truncated, info["error"]) == (0.0, False, False, None)
    assert obs["focused_element_bid"] == "2" and obs["last_action"] == "fill('2', 'keneth')"
    dom = flatten_dom_to_str(obs["dom_object"])  # BrowserGym's default_obs_preprocessor's
    assert '<input bid="2" id="username" type="text" value="keneth"/>' in dom
    obs, *_ = env.step("send_msg_to_user('typing')")
    assert obs["chat_messages"][-1]["role"] == "assistant"
    assert obs["chat_messages"][-1]["message"] == "typing"
    obs, reward, terminated, _, info = env.step("click the login button")
    assert "cannot parse" in obs["last_action_error"] and not terminated
    obs, reward, terminated, _, _ = env.step("go_back()")
    assert "not available here: a MiniWoB++ task is one page" in obs["last_action_error"]
    obs, reward, terminated, _, info = env.step("click('99')")
    assert terminated and reward == -1.0 and "no element with bid '99'" in obs["last_action_error"]
    with pytest.raises(RuntimeError, match="call reset"):
        env.step("noop()")
    env.close()


def test_bad_arguments_say_what_is_allowed():
    with pytest.raises(ValueError, match="unknown task 'click-pie' for backend 'twin'"):
        browsergym_env("click-pie", "twin")
    with pytest.raises(ValueError, match="did you mean click-test"):
        browsergym_env("click-tset", "browser")
    with pytest.raises(ValueError, match="backend must be 'twin' or 'browser', got 'chrome'"):
        browsergym_env("click-test", "chrome")
    with pytest.raises(ValueError, match="max_steps must be an integer >= 1"):
        browsergym_env("click-test", "twin", max_steps=0)


def test_gymnasium_ids_make_the_face_and_pass_gymnasiums_checker():
    env = gym.make("browsergym/arena-twin.click-test-2")  # the passive env checker is on
    obs, _ = env.reset(seed=1)
    one = View.read("Goal:\n\n" + flatten_axtree_to_str(obs["axtree_object"])).find("button", "ONE")
    _, reward, terminated, _, _ = env.step(f"click('{one.bid}')")
    assert terminated and reward == 1.0
    env.close()
    real = gym.make("browsergym/miniwob.book-flight")  # no browser until reset
    assert real.unwrapped.backend == "browser" and real.unwrapped.task == "book-flight"
    real.close()


def test_every_browsergym_action_parses_or_is_refused_with_a_reason():
    """Each example of each action of BrowserGym's action subsets: Arena reads it as
    BrowserGym's own parser does, or refuses it naming what is allowed."""
    bid_set = HighLevelActionSet(subsets=["bid"], multiaction=False, strict=True)
    assert set(bid_set.action_set) - set(SIGNATURES) == {"drag_and_drop", "upload_file"}
    every = {f.__name__ for subset in ACTION_SUBSETS.values() for f in subset}
    assert every <= set(SIGNATURES) | set(NOT_HERE), every - set(SIGNATURES) - set(NOT_HERE)
    accepted, refused = set(), set()
    full = HighLevelActionSet(subsets=list(ACTION_SUBSETS), strict=True)
    for name, action in full.action_set.items():
        for example in action.examples:
            ((bg_name, bg_args),) = highlevel_action_parser.parse_string(example).as_list()
            try:
                ours = parse(example)
            except ParseError as e:
                refused.add(example)
                named = ("allowed:", "its arguments:", "argument(s):", "must be")
                assert any(words in str(e) for words in named), (example, str(e))
                continue
            accepted.add(example)
            positional = [a for a in bg_args if not isinstance(a, NamedArgument)]
            named = {a.name: a.value for a in bg_args if isinstance(a, NamedArgument)}
            params = SIGNATURES[name]
            theirs = [*positional, *[named[p] for p in params[len(positional) :]]]
            theirs = theirs[: len(params)]
            if name == "select_option" and isinstance(theirs[1], list):
                theirs[1] = theirs[1][0]
            theirs = [str(a) if p == "bid" else a for p, a in zip(params, theirs, strict=True)]
            assert (ours.name, list(ours.args)) == (bg_name, theirs), example
            if name in bid_set.action_set:  # and BrowserGym's own action set takes it
                assert f"{bg_name}(" in bid_set.to_python_code(example)
    assert {"click('a51')", "fill('b534', 'Montre', True)", "noop(500)"} <= accepted
    assert {"click('b22', button='right')", "press('a26', 'ControlOrMeta+a')"} <= refused
    assert "select_option('c48', ['red', 'green', 'blue'])" in refused
    with pytest.raises(ParseError, match="by bid, not at coordinates; allowed: noop, click"):
        parse("mouse_click(887.2, 68)")
    with pytest.raises(ParseError, match="drag_and_drop\\(\\) is BrowserGym's but not"):
        parse("drag_and_drop('56', '498')")


@pytest.mark.parametrize("task", TWIN_TASKS)
def test_an_agentlab_style_agent_solves_the_twin(task):
    env = browsergym_env(task, "twin")
    for seed in range(2):
        reward, agent = play_agent(env, seed)
        assert reward == 1.0 and not agent.errors, (task, seed, agent.history, agent.errors)
    env.close()


@needs_chrome
@pytest.mark.parametrize("task", ["click-checkboxes", "choose-list", "login-user"])
def test_the_real_page_reads_as_the_twin_and_the_agent_solves_it(task):
    """On the real page too, BrowserGym's flatten gives Arena's text at every step, and its
    DOM reader reads Chrome's snapshot with Arena's bids; the same agent solves it."""
    env = browsergym_env(task, "browser")
    try:
        obs, _ = env.reset(seed=0, options={"task_seed": 0})
        check_observation(env, obs)
        shot = obs["screenshot"]
        assert shot.dtype == np.uint8 and shot.ndim == 3 and min(shot.shape[:2]) > 100
        assert shot.reshape(-1, 3).std(axis=0).max() > 0  # not a blank image
        props = obs["extra_element_properties"]
        boxed = [b for b, role in env.web.view.roles.items() if role != "option"]  # no box
        assert all(props[b]["bbox"] is not None and props[b]["visibility"] > 0 for b in boxed)
        assert any(p["set_of_marks"] for p in props.values())
        dom = flatten_dom_to_str(obs["dom_object"])
        assert 'bid="1"' in dom and "data-arena" not in dom
        teacher, history = ScriptedTeacher(task, 0.0, 0), []
        while env.web.agents:
            action = teacher.act(env.render(), history).action
            history.append(action)
            obs, *_ = env.step(action)
            check_observation(env, obs)
        reward, agent = play_agent(env, 1)
        assert reward == 1.0 and not agent.errors, (agent.history, agent.errors)
    finally:
        env.close()
