"""A process reward model behind ``POST /v1/reward`` (serve.prm): a tiny judge trained for a
few steps, answered in process (the rewards the PRM itself gives; bad input is a 4xx that
says why) and by Ray Serve over real HTTP."""

import json

import pytest

from envs.web.prm import build, teacher_policy
from policies.lm.student import LoRASettings, StudentSettings
from serve.client import PolicyClient
from serve.policy import Api, load, spec_from_run
from serve.server import free_port
from training import prm

REWARD = "/v1/reward"


@pytest.fixture(scope="module")
def row(tmp_path_factory):
    out = tmp_path_factory.mktemp("prm-data")
    build([("websim/login-user-v0", 0, teacher_policy("login-user", 0.0, 0))], out)
    return next(r for r in prm.read_pairs(out) if r["action_history"])


@pytest.fixture(scope="module")
def prm_run(row, tmp_path_factory):
    data = tmp_path_factory.mktemp("prm-rows")
    (data / "pairs.jsonl").write_text(json.dumps(row) + "\n")
    out = tmp_path_factory.mktemp("prm-run") / "judge"
    model = StudentSettings(kind="tiny", max_prompt_tokens=4096, lora=LoRASettings(rank=4))
    prm.train(data, out, prm.PRMConfig(model=model, steps=2, batch=2))
    return out


@pytest.fixture(scope="module")
def api(prm_run):
    spec = spec_from_run(prm_run)
    return Api({spec.name: load(spec)})


def _body(row, **over):
    body = {k: row[k] for k in ("intent", "gt_checklist", "text_observation", "current_url")}
    body |= {k: row[k] for k in ("thought_history", "action_history")}
    body["responses"] = [
        {"thought": c["thought"], "action": c["action"]} for c in row["chosen"] + row["rejected"]
    ]
    return json.dumps(body | over).encode()


def test_rewards_are_the_prms_own(api, row, prm_run):
    out = api.answer("POST", REWARD, _body(row))
    assert out.status == 200, out.payload
    want = prm.load_prm(prm_run).scores(row, row["chosen"] + row["rejected"])
    assert out.payload["rewards"] == pytest.approx(want)
    judged = out.payload["judgements"]
    assert len(judged) == len(want) and len(judged[0]) == 2  # login-user: two items
    assert set(judged[0][0]) == {"Yes", "In Progress", "No"}
    assert out.payload["model"] == "prm-judge" and out.payload["version"] == "judge/step2"
    named = api.answer("POST", REWARD, _body(row, model="prm-judge"))
    assert named.payload["rewards"] == out.payload["rewards"]
    act = api.answer("POST", "/v1/policies/prm-judge/act", _body(row))
    assert act.payload["rewards"] == out.payload["rewards"]


@pytest.mark.parametrize(
    "over, status, words",
    [
        ({"model": "other"}, 404, "no reward model 'other'"),
        ({"responses": []}, 400, "'responses' must be a list"),
        ({"responses": [{"act": "click('1')"}]}, 400, "each response is"),
        ({"responses": [{"action": "x"}] * 17}, 413, "at most 16"),
        ({"gt_checklist": "do it"}, 400, "no 'Checklist 1: ...' line"),
        ({"intent": 3}, 400, "'intent' must be a non-empty string"),
        ({"action_history": ["click('1')", "click('2')"]}, 400, "must be as long"),
        ({"extra": 1}, 400, "unknown key(s) ['extra']"),
    ],
)
def test_bad_input_is_a_4xx_that_says_why(api, row, over, status, words):
    out = api.answer("POST", REWARD, _body(row, **over))
    assert out.status == status and words in out.payload["error"], out.payload
    assert api.answer("GET", REWARD, b"").status == 405


def test_served_over_http(ray_session, prm_run, row):
    from ray import serve

    from serve.app import APP_NAME, ServeArgs, build_app

    port = free_port()
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    try:
        args = ServeArgs(runs=[str(prm_run), "tiny"], replica_cpus=0.5)
        serve.run(build_app(args.model_dump()), name=APP_NAME, route_prefix="/")
        with PolicyClient(f"http://127.0.0.1:{port}") as c:
            status, body = c.request("POST", REWARD, _body(row))
            assert status == 200, body
            rewards = json.loads(body)["rewards"]
            assert len(rewards) == len(row["chosen"]) + len(row["rejected"])
            assert all(0 <= r <= 1 for r in rewards)
            status, body = c.request("POST", REWARD, _body(row, responses=[]))
            assert status == 400 and b"'responses' must be a list" in body
        # the untuned base model as an LM judge, through the OpenAI-compatible chat route
        judge = prm.ChatJudge(f"http://127.0.0.1:{port}/v1", "tiny", max_tokens=24)
        candidates = row["chosen"] + row["rejected"]
        scores = judge.scores(row, candidates)
        assert len(scores) == len(candidates) and all(0 <= s <= 1 for s in scores)
        assert judge.items == 2 * len(candidates) and judge.tokens > 0
        with pytest.raises(prm.PRMError, match="answered 404"):
            prm.ChatJudge(f"http://127.0.0.1:{port}/v1", "nobody").scores(row, candidates)
    finally:
        serve.shutdown()
