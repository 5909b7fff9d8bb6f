"""The language-model policy server: a tiny byte-level student cloned from scripted traces
for a few seconds, served in process (validation, batching of mixed requests) and by Ray Serve
over real HTTP (``/act``, OpenAI's chat completions, concurrent clients, the 4xx catalogue)."""

import json

import pytest
from rich.console import Console

import envs
import training
from envs.web.actions import parse
from serve.client import PolicyClient
from serve.lm import MAX_PROMPTS, Prompt
from serve.policy import MAX_CHAT_BYTES, Api, Reply, load, spec_from_run
from serve.server import free_port
from tests.serve.clients import concurrently
from training.config import TrainConfig, apply_overrides

ENV, NAME = "websim/click-test-2-v0", "bc-click-test-2-v0"
# 40 steps at this rate are enough for the tiny student to write click('N') (about 8 s).
TINY = ["model.kind=tiny", "trace_episodes=20", "eval_every=0", "lr=3e-3"]
CHAT = "/v1/chat/completions"
ACT = f"/v1/policies/{NAME}/act"


@pytest.fixture(scope="module")
def lm_run(ray_session, tmp_path_factory):
    out = tmp_path_factory.mktemp("lm-runs")
    cfg = TrainConfig(env=ENV, algo="bc", iterations=40)
    apply_overrides(cfg, TINY)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ARENA_CACHE", str(out / "cache"))  # the scripted teacher's traces
        return training.train(cfg, out=str(out), name="t", console=Console(quiet=True))


@pytest.fixture(scope="module")
def lm_api(lm_run):
    spec = spec_from_run(lm_run)
    return Api({spec.name: load(spec)})


@pytest.fixture(scope="module")
def pages():
    env = envs.make(ENV)
    out = [env.reset(seed=100 + i)[0]["agent_0"] for i in range(4)]
    env.close()
    return out


def chat_body(messages, **options):
    return {"model": NAME, "messages": messages, **options}


def encode(body):
    return body if isinstance(body, bytes) else json.dumps(body).encode()


USER = [{"role": "user", "content": "Goal: Click button ONE."}]

# (route, body, status, words the message must contain)
BAD = [
    (CHAT, b"{not json", 400, "malformed JSON"),
    (CHAT, [1, 2], 400, "'model' string"),
    (CHAT, {"messages": USER}, 400, "'model' string"),
    (CHAT, {"model": "gpt-4o", "messages": USER}, 404, "no chat model 'gpt-4o'"),
    (CHAT, {"model": NAME}, 400, "non-empty list"),
    (CHAT, chat_body([]), 400, "non-empty list"),
    (CHAT, chat_body("hi"), 400, "non-empty list"),
    (CHAT, chat_body([{"role": "robot", "content": "x"}]), 400, "unknown role 'robot'"),
    (CHAT, chat_body([{"role": "user"}]), 400, "'role' and 'content'"),
    (CHAT, chat_body([{"role": "user", "content": 3}]), 400, "'content' must be a string"),
    (CHAT, chat_body([{"role": "user", "content": [{"type": "text"}]}]), 400, "a string"),
    (CHAT, chat_body(USER, temperature=-0.1), 400, "'temperature' must be in [0, 2]"),
    (CHAT, chat_body(USER, temperature=2.5), 400, "'temperature' must be in [0, 2]"),
    (CHAT, chat_body(USER, temperature="hot"), 400, "'temperature' must be a number"),
    (CHAT, chat_body(USER, temperature=True), 400, "'temperature' must be a number"),
    (CHAT, chat_body(USER, temperature=float("nan")), 400, "'temperature' must be a number"),
    (CHAT, chat_body(USER, temperature=10**39), 400, "'temperature' must be in [0, 2]"),
    # past 40 digits the reader refuses it (Python's int() refuses 4,301 with a ValueError)
    (CHAT, chat_body(USER, temperature=10**400), 400, "an integer of 401 digits; at most 40"),
    (CHAT, chat_body(USER, temperature=float("inf")), 400, "'temperature' must be in [0, 2]"),
    (CHAT, chat_body(USER, max_tokens=0), 400, "'max_tokens' must be in 1..32"),
    (CHAT, chat_body(USER, max_tokens=33), 400, "'max_tokens' must be in 1..32"),
    (CHAT, chat_body(USER, max_tokens=1.5), 400, "'max_tokens' must be an integer"),
    (CHAT, chat_body(USER, n=2), 400, "'n' must be in 1..1"),
    (CHAT, chat_body(USER, stream=True), 400, "'stream' must be false"),
    (CHAT, chat_body(USER, top_p=0.9), 400, "unknown key(s) ['top_p']"),
    (CHAT, chat_body([{"role": "user", "content": "x" * 2000}]), 400, "reads at most 1024"),
    (CHAT, chat_body([{"role": "user", "content": "x" * MAX_CHAT_BYTES}]), 413, "bytes"),
    (CHAT, b'{"model": ' + b"[" * 50 + b"]" * 50 + b"}", 400, "nested 51 deep"),
    (ACT, {"observations": {"agent_0": 3}}, 400, "page text (a string)"),
    (ACT, {"observations": {"agent_1": "x"}}, 400, "unknown agent 'agent_1'"),
    (ACT, {"observations": {"agent_0": []}}, 400, "empty list"),
    (ACT, {"observations": {"agent_0": {"obs": "x"}}}, 400, "an observation is page text"),
    (
        ACT,
        {"observations": {"agent_0": {"observation": "x", "history": "click('1')"}}},
        400,
        "'history' must be a list",
    ),
    (ACT, {"observations": {"agent_0": "x" * 65537}}, 400, "over 65536 characters"),
    (ACT, {"observations": {"agent_0": ["x"] * (MAX_PROMPTS + 1)}}, 413, "more than 64"),
    (ACT, {"observations": {"agent_0": "x"}, "explore": "yes"}, 400, "true or false"),
]


@pytest.mark.parametrize(("path", "body", "status", "words"), BAD)
def test_bad_input_is_a_4xx_that_says_why(lm_api, path, body, status, words):
    out = lm_api.answer("POST", path, encode(body))
    assert isinstance(out, Reply) and out.status == status, out
    assert words in out.payload["error"], out.payload


def test_routes_media_type_and_models(lm_api):
    body = encode(chat_body(USER))
    reply = lm_api.route("POST", CHAT, body, "text/plain")
    assert reply.status == 415 and "application/json" in reply.payload["error"]
    assert lm_api.answer("GET", CHAT, b"").status == 405
    models = lm_api.answer("GET", "/v1/models", b"").payload
    assert [m["id"] for m in models["data"]] == [NAME]
    spaces = lm_api.answer("GET", f"/v1/policies/{NAME}", b"").payload["observation_spaces"]
    assert spaces == {"agent_0": {"type": "Text", "max_length": 65536}}


def test_one_batch_mixes_temperatures_and_lengths(lm_api, pages):
    # Greedy and sampled prompts, short and full-length, in one call: each answer as if alone.
    policy = lm_api.policies[NAME]
    ids = policy.student.prompt(pages[0], [])
    alone = policy.generate([Prompt(ids, 0.0, 32)])[0]
    mixed = policy.generate(
        [Prompt(ids, 1.0, 32), Prompt(ids, 0.0, 32), Prompt(ids, 0.0, 2), Prompt(ids, 1.5, 5)]
    )
    assert mixed[1].text == alone.text and not alone.truncated
    assert mixed[2].tokens == alone.tokens[:2] and mixed[2].truncated
    assert len(mixed[3].tokens) <= 5


# ---------------------------------------------------------------- Ray Serve, in this session
@pytest.fixture(scope="module")
def lm_served(lm_run):
    from ray import serve

    from serve.app import APP_NAME, ServeArgs, build_app

    port = free_port()
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    args = ServeArgs(runs=[str(lm_run)], replica_cpus=0.5)
    serve.run(build_app(args.model_dump()), name=APP_NAME, route_prefix="/")
    yield f"http://127.0.0.1:{port}"
    serve.shutdown()


def test_chat_completion_answers_an_action_with_usage(lm_served, lm_api, pages):
    student = lm_api.policies[NAME].student
    messages = [
        {"role": "system", "content": student.system},
        {"role": "user", "content": pages[0]},
    ]
    with PolicyClient(lm_served) as c:
        out = c.chat(NAME, messages, temperature=0)
        act = c.act(NAME, {"agent_0": pages[0]})["agent_0"]
        cut = c.chat(NAME, messages, temperature=0, max_tokens=3)
    assert out["object"] == "chat.completion" and out["model"] == NAME
    assert out["id"].startswith("chatcmpl-") and isinstance(out["created"], int)
    (choice,) = out["choices"]
    assert choice["index"] == 0 and choice["finish_reason"] == "stop"
    assert choice["message"]["role"] == "assistant"
    action = choice["message"]["content"]
    assert parse(action).name == "click", action
    # The chat with the agent's own system message is the prompt /act builds: same action.
    assert action == act
    usage = out["usage"]
    assert usage["prompt_tokens"] == len(student.prompt(pages[0], []))
    assert usage["completion_tokens"] == len(action.encode()) + 1  # bytes and the end marker
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert cut["choices"][0]["finish_reason"] == "length"
    assert cut["usage"]["completion_tokens"] == 3
    assert cut["choices"][0]["message"]["content"] == action[:3]


def test_act_on_page_text_mirrors_the_request(lm_served, pages):
    one = {"observation": pages[1], "history": ["click('9')"]}
    with PolicyClient(lm_served) as c:
        single = c.act(NAME, {"agent_0": pages[0]})["agent_0"]
        batch = c.act(NAME, {"agent_0": [pages[0], one]}, explore=True)["agent_0"]
        policy = c.policies()[0]
    assert isinstance(single, str) and parse(single).name == "click"
    assert isinstance(batch, list) and len(batch) == 2 and all(isinstance(a, str) for a in batch)
    assert policy["name"] == NAME and policy["algo"] == "bc"


def test_concurrent_chats_are_batched_and_each_answered(lm_served, lm_api, pages):
    # 16 clients at once, 4 pages: each greedy answer must be its page's own.
    policy = lm_api.policies[NAME]
    expected = [policy.act([policy.parse({"observations": {"agent_0": p}})])[0] for p in pages]
    expected = [e["actions"]["agent_0"] for e in expected]
    system = {"role": "system", "content": policy.student.system}

    def ask(c, i):
        messages = [system, {"role": "user", "content": pages[i % 4]}]
        return c.chat(NAME, messages, temperature=0)["choices"][0]["message"]["content"]

    results, errors = concurrently(lm_served, clients=16, calls=3, call=ask)
    assert not errors
    for i, answers in results.items():
        assert answers == [expected[i % 4]] * 3


def test_every_bad_input_is_the_same_4xx_over_http(lm_served):
    with PolicyClient(lm_served) as c:
        for path, body, status, words in BAD:
            got, data = c.request("POST", path, encode(body))
            assert got == status and words in json.loads(data)["error"], (path, body, data)
        assert c.request("GET", CHAT)[0] == 405
        assert c.chat(NAME, USER, max_tokens=1)["usage"]["completion_tokens"] == 1  # still up
