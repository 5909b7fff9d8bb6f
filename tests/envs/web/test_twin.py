"""The twin's tasks, solved by their teachers, and the study's reward rules."""

import dataclasses
import pickle
import re

import pytest

import envs
from envs.web import TASKS, TWIN_TASKS
from envs.web.browser import html_dir
from envs.web.env import AGENT
from envs.web.teachers import ScriptedTeacher, experts
from envs.web.traces import play
from envs.web.twin import task_models


def test_the_task_list_is_the_packages_and_every_twin_task_has_an_expert():
    assert sorted(TASKS) == sorted(p.stem for p in html_dir().glob("*.html"))
    assert list(TWIN_TASKS) == list(task_models())
    assert set(TWIN_TASKS) <= set(experts())
    ids = envs.ids()
    assert "web/click-test-2-v1" in ids and "websim/login-user-v0" in ids
    pages = [i for i in envs.ids("web") if not i.startswith("web/flow-")]
    assert len(pages) == len(TASKS) == 130


@pytest.mark.parametrize("task", TWIN_TASKS)
def test_each_twin_task_is_solved_by_its_teacher(task):
    env = envs.make(f"websim/{task}-v0")
    rows = [play(env, f"websim/{task}-v0", s, ScriptedTeacher(task)) for s in range(40)]
    assert all(r[-1]["success"] and r[-1]["reward"] == 1.0 for r in rows)
    # a teacher that slips fails some episodes: traces hold failures
    slips = [play(env, f"websim/{task}-v0", s, ScriptedTeacher(task, 0.5, s)) for s in range(40)]
    if task not in ("click-test", "focus-text", "click-dialog"):  # a slip cannot fail these
        assert not all(r[-1]["success"] for r in slips)


class DoubleClicker:
    """The scripted teacher, double-clicking every button it would click."""

    name = "dblclick"

    def __init__(self, task: str):
        self.inner = ScriptedTeacher(task)

    def act(self, text, history):
        step = self.inner.act(text, history)
        m = re.fullmatch(r"click\('(\w+)'\)", step.action)
        if m and re.search(rf"^\s*\[{m.group(1)}\] button\b", text, re.M):
            step = dataclasses.replace(step, action=f"dblclick('{m.group(1)}')")
        return step


@pytest.mark.parametrize("task", ["click-test-2", "click-button", "click-checkboxes", "login-user"])
def test_a_double_click_on_submit_ends_the_episode_with_the_first_outcome(task):
    """The page's endEpisode keeps only an episode's first outcome: the second click of a
    double click on Submit changes nothing (tests/envs/web/test_browser.py: the same on the
    real page)."""
    env = envs.make(f"websim/{task}-v0")
    for seed in range(20):
        rows = play(env, f"websim/{task}-v0", seed, DoubleClicker(task))
        assert rows[-1]["action"].startswith("dblclick(") and rows[-1]["reward"] == 1.0
    if task == "click-test-2":  # a wrong first answer stays wrong
        obs, _ = env.reset(options={"task_seed": 0})
        two = re.search(r"\[(\w+)\] button 'TWO'", obs[AGENT]).group(1)
        _, rew, term, _, info = step(env, f"dblclick('{two}')")
        assert term and rew == 0.0 and info["raw_reward"] == -1.0


def step(env, text):
    obs, rew, term, trunc, info = env.step({AGENT: text})
    return obs[AGENT], rew[AGENT], term[AGENT], trunc[AGENT], info[AGENT]


def test_a_parse_error_costs_a_factor_and_shows_in_the_next_observation():
    env = envs.make("websim/click-test-2-v0")
    env.reset(seed=0)
    obs, rew, term, trunc, info = step(env, "click the ONE button")
    assert not term and rew == 0.0 and "cannot parse" in info["error"]
    assert "Error from the last action: cannot parse" in obs
    step(env, "clik('1')")
    obs, rew, term, _, info = step(env, "click('1')")
    assert term and rew == pytest.approx(0.99**2) and info["parse_errors"] == 2


@pytest.mark.parametrize(
    "action, words",
    [("click('99')", "no element with bid '99'"), ("fill('1', 'x')", "needs a textbox")],
)
def test_an_impossible_action_ends_the_episode_with_minus_one(action, words):
    env = envs.make("websim/click-test-2-v0")
    env.reset(seed=0)
    obs, rew, term, _, info = step(env, action)
    assert term and rew == -1.0 and words in info["error"] and words in obs


def test_a_wrong_answer_scores_zero_and_the_step_limit_truncates():
    env = envs.make("websim/click-test-2-v0")
    env.reset(seed=0)
    _, rew, term, _, info = step(env, "click('2')")  # button TWO
    assert term and rew == 0.0 and info["raw_reward"] == -1.0 and not info["success"]
    env = envs.make("websim/click-test-2-v0", max_steps=3)
    env.reset(seed=0)
    results = [step(env, "noop()") for _ in range(3)]
    assert [r[3] for r in results] == [False, False, True] and not env.agents
    with pytest.raises(envs.EnvError, match="max_steps must be an integer >= 1"):
        envs.make("websim/click-test-2-v0", max_steps=0)


@pytest.mark.parametrize("task", TWIN_TASKS)
def test_a_pickled_twin_resumes_at_every_step(task):
    env = envs.make(f"websim/{task}-v0")
    for seed in range(3):  # later episodes start on the page earlier ones left
        env.reset(seed=0, options={"task_seed": seed})
        teacher, history = ScriptedTeacher(task, 0.3, seed), []
        while env.agents:
            clone = pickle.loads(pickle.dumps(env))
            assert clone.render() == env.render()
            action = teacher.act(env.render(), history).action
            history.append(action)
            assert step(clone, action) == step(env, action)


def bid(text: str, line: str) -> str:
    return re.search(rf"\[(\w+)\] {line}", text).group(1)


def test_webdrivers_clear_blurs_the_field_it_empties_and_leaves_an_empty_one_alone():
    """chromedriver's clear: an empty field is left as it is; else it is focused, emptied and
    blurred (tests/envs/web/test_browser.py: the real page agrees on such sequences)."""
    env = envs.make("websim/book-flight-v0")
    obs, _ = env.reset(seed=0)
    origin = bid(obs[AGENT], "textbox 'From:'")
    obs, *_ = step(env, f"click('{origin}')")
    assert "textbox 'From:', focused" in obs
    obs, *_ = step(env, f"clear('{origin}')")  # empty: focus stays
    assert "textbox 'From:', focused" in obs
    obs, *_ = step(env, f"fill('{origin}', 'Aber')")
    assert "textbox 'From:' value='Aber', focused" in obs and "1 result is available" in obs
    obs, *_ = step(env, f"clear('{origin}')")  # the blur closes the menu
    assert "textbox 'From:'\n" in obs and "Aberdeen, SD" not in obs


def test_book_flights_delays_are_parameters_of_one_model_and_must_settle():
    from envs.web.extra.book_flight import BookFlight, BookFlightDelayed

    assert issubclass(BookFlightDelayed, BookFlight)
    assert (BookFlight.delay_ms, BookFlight.fade_ms) == (0, 0)
    assert (BookFlightDelayed.delay_ms, BookFlightDelayed.fade_ms) == (300, 200)
    slow = type("Slow", (BookFlight,), {"fade_ms": 600})
    with pytest.raises(ValueError, match="only delays under 600 ms"):
        slow()


def test_a_double_click_on_prev_meets_the_redrawn_link():
    """The second click lands on the Prev the first click drew: disabled in October."""
    env = envs.make("websim/book-flight-v0")
    obs, _ = env.reset(seed=0)
    date = bid(obs[AGENT], "textbox ''")
    obs, *_ = step(env, f"click('{date}')")  # the picker opens on December
    obs, *_ = step(env, "dblclick('" + bid(obs, "link 'Prev'") + "')")
    assert "StaticText 'October'" in obs
    obs, *_ = step(env, "dblclick('" + bid(obs, "link 'Prev'") + "')")
    assert "StaticText 'October'" in obs and "link '31'" in obs
