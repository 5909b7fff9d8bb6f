"""Multi-page flows (envs/web/flow.py) on the twin: experts, page order, seeds, rewards."""

import pickle
import re

import pytest

import envs
from envs.web import FLOWS
from envs.web.browsergym import browsergym_env
from envs.web.env import AGENT
from envs.web.flow import page_seed
from envs.web.teachers import ScriptedTeacher, View
from envs.web.traces import play


def run(env, flow, seed, teacher=None):
    """One episode of ``teacher`` (the flow's expert); the observations and infos."""
    teacher = teacher or ScriptedTeacher(flow)
    obs, info = env.reset(seed=seed, options={"task_seed": seed})
    texts, infos, rewards, history = [obs[AGENT]], [info[AGENT]], [], []
    while env.agents:
        step = teacher.act(texts[-1], history)
        history.append(step.action)
        obs, rew, _, _, info = env.step({AGENT: step.action})
        texts.append(obs[AGENT])
        infos.append(info[AGENT])
        rewards.append(rew[AGENT])
    return texts, infos, rewards


@pytest.mark.parametrize("flow", FLOWS)
def test_the_expert_solves_every_flow_on_the_twin_page_after_page(flow):
    env, pages = envs.make(f"websim/{flow}-v0"), FLOWS[flow]
    assert env.max_steps == 10 * len(pages)
    for seed in range(20):
        texts, infos, rewards = run(env, flow, seed)
        assert rewards[-1] == 1.0 and infos[-1]["success"], (flow, seed)
        assert infos[-1]["pages_solved"] == len(pages) and rewards[:-1] == [0.0] * (
            len(rewards) - 1
        )
        # the pages in order, each with its own seed, each reached once
        shown = [(i["page"], i["page_task"], i["page_seed"]) for i in infos]
        assert sorted(set(shown)) == [(k + 1, t, page_seed(seed, k)) for k, t in enumerate(pages)]
        assert [p for p, _, _ in shown] == sorted(p for p, _, _ in shown)
        assert [i["pages_solved"] for i in infos] == [i["page"] - 1 for i in infos[:-1]] + [
            len(pages)
        ]


def test_each_page_is_a_fresh_single_task_page_of_its_seed_and_the_goal_names_every_page():
    """Page k is ``websim/<task>-v0`` at page k's seed, as newly opened (nothing carries over
    from an earlier episode: book-flight's autocomplete widget would)."""
    env, pages = envs.make("websim/flow-flight-v0"), FLOWS["flow-flight"]
    for seed in range(3):
        texts, infos, _ = run(env, "flow-flight", seed)
        goals = []
        for k, task in enumerate(pages):
            first = next(i for i, info in enumerate(infos) if info["page"] == k + 1)
            single = envs.make(f"websim/{task}-v0")
            obs, _ = single.reset(options={"task_seed": page_seed(seed, k)})
            goal, tree = obs[AGENT].split("\n\n", 1)
            goals.append(goal.removeprefix("Goal: "))
            assert texts[first].split("\n\n", 1)[1] == tree  # the same page, bids and all
            errand, here = View.read(texts[first]).goal.split("\n")
            opened = infos[first]["step"] + 1
            assert here == f"Page {k + 1} of 3 (from step {opened}): {goals[k]}"
        assert errand == "3 tasks, one page each, in order: " + " ".join(
            f"({k}) {g}" for k, g in enumerate(goals, 1)
        )


def test_episodes_are_deterministic_by_seed_and_pickle_mid_flow():
    env = envs.make("websim/flow-flight-v0")
    a, b = run(env, "flow-flight", 3), run(envs.make("websim/flow-flight-v0"), "flow-flight", 3)
    assert a == b
    assert run(env, "flow-flight", 4)[0][0] != a[0][0]
    # pickled on page 2, the clone goes on as the original
    teacher, history = ScriptedTeacher("flow-flight"), []
    obs, _ = env.reset(options={"task_seed": 3})
    while env._info(None, 0.0)["page"] < 2:
        history.append(teacher.act(obs[AGENT], history).action)
        obs = env.step({AGENT: history[-1]})[0]
    clone = pickle.loads(pickle.dumps(env))
    assert clone.render() == env.render() and clone.page_task == "book-flight-nodelay"
    action = teacher.act(obs[AGENT], history).action
    assert clone.step({AGENT: action})[0] == env.step({AGENT: action})[0]


def test_a_wrong_page_ends_the_flow_and_parse_errors_cost_over_the_whole_flow():
    env = envs.make("websim/flow-email-v0")
    env.reset(seed=0)
    # an action that cannot be carried out: -1 on page 1
    _, rew, term, _, info = env.step({AGENT: "click('99')"})
    assert (rew[AGENT], term[AGENT], info[AGENT]["pages_solved"]) == (-1.0, True, 0)
    # a page answered wrong (login pressed with empty fields): 0, the flow ends there
    obs, _ = env.reset(seed=0)
    login = View.read(obs[AGENT]).find("button", "Login")
    _, rew, term, _, info = env.step({AGENT: f"click('{login.bid}')"})
    assert (rew[AGENT], term[AGENT], info[AGENT]["success"]) == (0.0, True, False)
    # a parse error on each page: 0.99 squared at the end, the step count per page moves on

    class Sloppy:
        name, inner, pages = "sloppy", ScriptedTeacher("flow-email"), set()

        def act(self, text, history):
            page = re.search(r"^Page (\d)", text, re.M).group(1)
            if page not in self.pages:
                self.pages.add(page)
                return type(self.inner.act(text, history))("click(")
            return self.inner.act(text, history)

    texts, infos, rewards = run(env, "flow-email", 1, Sloppy())
    assert rewards[-1] == pytest.approx(0.99**2) and infos[-1]["parse_errors"] == 2
    assert infos[-1]["success"]
    # max_steps covers the whole flow: noops run out at 20 (10 a page) with 0
    env.reset(seed=0)
    for n in range(1, 21):
        _, rew, term, trunc, _ = env.step({AGENT: "noop()"})
        assert (rew[AGENT], term[AGENT], trunc[AGENT]) == (0.0, False, n == 20)
    assert envs.make("websim/flow-email-v0", max_steps=5).max_steps == 5


def test_traces_of_a_flow_and_browsergyms_face(tmp_path):
    env = envs.make("websim/flow-search-v0")
    rows = play(env, "websim/flow-search-v0", 2, ScriptedTeacher("flow-search"))
    assert rows[-1]["success"] and rows[0]["task"] == "flow-search"
    assert rows[0]["goal"].startswith("3 tasks, one page each, in order: (1) Enter the username")
    face = browsergym_env("flow-search", backend="twin")
    obs, _ = face.reset(options={"task_seed": 2})
    urls = [obs["url"]]
    for row in rows:
        assert obs["goal"] == row["observation"].split("\n\n")[0].removeprefix("Goal: ")
        obs, reward, *_ = face.step(row["action"])
        urls.append(obs["url"])
        assert obs["open_pages_urls"] == (obs["url"],) and obs["active_page_index"] == [0]
    assert reward == 1.0
    assert [u.rsplit("/", 1)[1] for u in dict.fromkeys(urls)] == [
        f"{t}.html" for t in FLOWS["flow-search"]
    ]
    with pytest.raises(ValueError, match="flow-search"):
        browsergym_env("flow-serch", backend="twin")
