"""The real MiniWoB++ pages in Chromium: every page loads, the scripted teacher solves them,
the twin agrees with them step by step, and no browser process outlives its owner."""

import copy
import os
import re
import signal
import time
from pathlib import Path

import numpy as np
import pytest
from browsergym.utils.obs import flatten_axtree_to_str

import envs
from envs.web import FLOWS, TASKS, TWIN_TASKS
from envs.web.browser import Browser, BrowserError, chrome_missing
from envs.web.page import render
from envs.web.teachers import ScriptedTeacher
from envs.web.traces import play
from tests.envs.web.test_twin import DoubleClicker

pytestmark = pytest.mark.skipif(bool(chrome_missing()), reason=str(chrome_missing()))


# Browsers started from this process carry this tag in their environment, so the count
# ignores Chromium that other programs on the machine run.
TAG = f"ARENA_BROWSER_TAG=pytest-{os.getpid()}".encode()
os.environ["ARENA_BROWSER_TAG"] = TAG.decode().split("=", 1)[1]


def browser_processes() -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmd = (entry / "cmdline").read_bytes()
                if not cmd.startswith((b"/usr/bin/chromedriver", b"/usr/lib/chromium/")):
                    continue
                if TAG in (entry / "environ").read_bytes().split(b"\0"):
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def wait_until_gone(limit_s: float = 15.0) -> list[int]:
    deadline = time.monotonic() + limit_s
    while browser_processes() and time.monotonic() < deadline:
        time.sleep(0.2)
    return browser_processes()


@pytest.fixture(autouse=True)
def no_browser_left():
    assert wait_until_gone() == [], "browsers left by an earlier test"
    yield
    assert wait_until_gone() == []


def test_every_task_page_loads_and_starts_an_episode():
    b = Browser(TASKS[0])
    failed = []
    try:
        for task in TASKS:
            b.goto(task)
            try:
                page = b.reset(1)
            except BrowserError as e:
                failed.append((task, str(e)[:80]))
                continue
            view = render(page)
            if not view.text.startswith("Goal: "):
                failed.append((task, "no goal"))
            # BrowserGym's own flatten of the page's axtree_object is the text's tree
            if flatten_axtree_to_str(view.axtree()) != view.text.split("\n\n")[1]:
                failed.append((task, "flatten_axtree_to_str differs"))
    finally:
        b.close()
    assert failed == []


@pytest.mark.parametrize("task", ["click-test-2", "click-button", "enter-text", "login-user"])
def test_the_scripted_teacher_solves_real_pages(task):
    env = envs.make(f"web/{task}-v1")
    rows = [play(env, f"web/{task}-v1", s, ScriptedTeacher(task)) for s in range(20)]
    env.close()
    assert sum(r[-1]["success"] for r in rows) / len(rows) >= 0.95


def test_twin_and_browser_agree_step_by_step():
    """Same task, seed and teacher (slipping a quarter of the time): the same observation
    text after every step and the same reward, on every task the twin models."""
    for task in TWIN_TASKS:
        ids = (f"web/{task}-v1", f"websim/{task}-v0")
        real, twin = (envs.make(i) for i in ids)
        try:
            for seed in range(3):
                a, b = (
                    play(env, i, seed, ScriptedTeacher(task, 0.25, seed))
                    for env, i in zip((real, twin), ids, strict=True)
                )
                for key in ("observation", "action", "reward", "done"):
                    assert [r[key] for r in a] == [r[key] for r in b], (task, seed, key)
        finally:
            real.close()


@pytest.mark.parametrize("flow", FLOWS)
def test_a_flow_walks_the_real_pages_as_the_twin_does(flow):
    """One browser opens each page of the flow in turn: the same texts, actions and rewards
    as the twin's flow, step by step (so each real page's goal is the one the errand names)."""
    ids = (f"web/{flow}-v1", f"websim/{flow}-v0")
    real, twin = (envs.make(i) for i in ids)
    try:
        for seed in range(2):
            a, b = (
                play(env, i, seed, ScriptedTeacher(flow))
                for env, i in zip((real, twin), ids, strict=True)
            )
            for key in ("observation", "action", "reward", "done"):
                assert [r[key] for r in a] == [r[key] for r in b], (flow, seed, key)
            assert a[-1]["success"]
            assert real.restarts == 0 and real.page_task == FLOWS[flow][-1]
    finally:
        real.close()


class RandomActions:
    """Clicks on random elements, fills of a random field with an airport or its first
    letters, clears (book-flight's pages)."""

    name = "random"

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)

    def act(self, text, history):
        from envs.web.extra.book_flight import airports
        from envs.web.teachers import Step, View

        view = View.read(text)
        kind = self.rng.choice(["click", "click", "click", "fill", "fill", "clear"])
        boxes = view.all("textbox")
        if kind == "click" or not boxes:
            return Step(f"click('{view.elements[self.rng.integers(len(view.elements))].bid}')")
        box = boxes[self.rng.integers(len(boxes))]
        if kind == "clear":
            return Step(f"clear('{box.bid}')")
        name = airports()[self.rng.integers(len(airports()))]
        name = name if self.rng.random() < 0.5 else name[: self.rng.integers(1, 6)]
        return Step(f"fill('{box.bid}', {name!r})")


def test_book_flight_with_its_delays_agrees_with_its_twin():
    """book-flight's autocomplete searches 300 ms after the last key and its datepicker fades
    in and out (200 ms): the browser finishes both before it reads the page (a fade is a jQuery
    animation, not a timeout), so the expert's episodes, which open and close the picker, and
    random clicks, fills and clears agree with the twin step by step. (docs/web.md: over 20
    seeds; the rest differ where the twin does not track the pointer.)"""
    ids = ("web/book-flight-v1", "websim/book-flight-v0")
    real, twin = (envs.make(i, max_steps=15) for i in ids)
    try:
        plays = [(seed, ScriptedTeacher("book-flight")) for seed in range(3)]
        plays += [(seed, RandomActions(seed)) for seed in range(3)]
        for seed, teacher in plays:
            teacher_b = copy.deepcopy(teacher)
            a = play(real, ids[0], seed, teacher)
            b = play(twin, ids[1], seed, teacher_b)
            for key in ("observation", "action", "reward", "done"):
                assert [r[key] for r in a] == [r[key] for r in b], (seed, key)
            assert a[-1]["success"] == (teacher.name == "scripted")
    finally:
        real.close()


def test_a_double_click_on_submit_ends_the_episode_with_the_first_outcome():
    """MiniWoB++ shows its START cover when an episode ends; the second click of a double
    click on Submit must not start a new problem on it (it did, and the outcome was lost)."""
    for task in ("click-test-2", "click-button", "click-checkboxes", "login-user"):
        ids = (f"web/{task}-v1", f"websim/{task}-v0")
        real, twin = (envs.make(i) for i in ids)
        try:
            for seed in range(3):
                a, b = (
                    play(env, i, seed, DoubleClicker(task))
                    for env, i in zip((real, twin), ids, strict=True)
                )
                assert a[-1]["action"].startswith("dblclick(")
                assert a[-1]["success"] and a[-1]["reward"] == 1.0, (task, seed, a[-1])
                for key in ("observation", "action", "reward", "done"):
                    assert [r[key] for r in a] == [r[key] for r in b], (task, seed, key)
            # a wrong first submit ends the episode too, with its outcome (click-test-2: TWO)
            if task == "click-test-2":
                obs, _ = real.reset(options={"task_seed": 0})
                two = re.search(r"\[(\w+)\] button 'TWO'", obs["agent_0"]).group(1)
                _, rew, term, _, info = real.step({"agent_0": f"dblclick('{two}')"})
                assert term["agent_0"] and rew["agent_0"] == 0.0
                assert info["agent_0"]["raw_reward"] == -1.0
        finally:
            real.close()


def test_a_hung_page_is_killed_and_the_browser_restarted():
    env = envs.make("web/click-test-2-v1", timeout_s=3.0)
    env.reset(seed=0)
    first = env.page_backend.pid
    with pytest.raises(BrowserError, match="hung for 3 s"):
        env.page_backend._script("while (true) {}")
    env.reset(seed=1)  # a dead browser is restarted on reset
    assert env.restarts == 1 and env.page_backend.pid != first
    obs, rew, *_ = env.step({"agent_0": "click('1')"})
    assert rew["agent_0"] == 1.0
    env.close()


def test_no_browser_outlives_a_killed_owner(tmp_path):
    import subprocess
    import sys

    script = (
        "import envs, time\n"
        "env = envs.make('web/click-test-v1'); env.reset(seed=0)\n"
        "print(env.page_backend.pid, flush=True); time.sleep(120)\n"
    )
    root = Path(__file__).resolve().parents[3]
    proc = subprocess.Popen(
        [sys.executable, "-c", script], cwd=root, stdout=subprocess.PIPE, text=True
    )
    try:
        driver = int(proc.stdout.readline())
        assert driver in browser_processes() and len(browser_processes()) > 2
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert wait_until_gone() == []


@pytest.mark.parametrize("ending", ["sys.exit(0)", "raise SystemExit('bye')", "del env"])
def test_a_script_that_exits_with_a_browser_open_ends_and_takes_it(ending):
    """No close(): the interpreter still exits promptly (it hung for ever, in the browser's
    __del__ during finalisation) and no browser process is left."""
    import subprocess
    import sys

    script = (
        "import sys, envs\n"
        "env = envs.make('web/click-test-v1'); env.reset(seed=0)\n"
        "keep = env.page_backend\n"  # the browser outlives the env: only the exit closes it
        f"{ending}\n"
    )
    root = Path(__file__).resolve().parents[3]
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=root)
    try:
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            pytest.fail("the script did not exit in 60 s")
    assert wait_until_gone() == []


def test_a_pool_of_actors_plays_real_pages_and_a_killed_actor_takes_its_browsers(ray_session):
    from envs.web.pool import EpisodePool
    from envs.web.traces import TeacherSpec

    ray = ray_session
    pool = EpisodePool(2)
    try:
        jobs = [(f"web/{t}-v1", s) for t in ("click-test-2", "enter-text") for s in range(4)]
        episodes = list(pool.play(jobs, TeacherSpec()))
        assert sorted((e[0]["env"], e[0]["seed"]) for e in episodes) == sorted(jobs)
        assert all(e[-1]["success"] for e in episodes)
        drivers = ray.get(pool.workers[0].browser_pids.remote())
        assert drivers and set(drivers) <= set(browser_processes())
        ray.kill(pool.workers[0], no_restart=True)
        deadline = time.monotonic() + 15
        while set(drivers) & set(browser_processes()) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not set(drivers) & set(browser_processes())
    finally:
        pool.close()
