"""A value-based run as a user has it: `arena train --algo qmix`, resumed with its replay,
evaluated, served over the stateless HTTP API with the client carrying the recurrent state,
learned in a remote Learner, and IQL with a frozen module."""

import csv
import json

import numpy as np
import torch
from rich.console import Console

import envs
import training
from policies import algorithm
from training.config import TrainConfig, apply_overrides

GRID = "test/masked_grid-v0"
SMALL = [
    "batch_size=8",
    "buffer_size=64",
    "env_steps_per_iteration=200",
    "test_interval=200",
    "test_nepisode=4",
    "epsilon_anneal_time=400",
]


def rows(run):
    with (run / "metrics.csv").open() as f:
        return list(csv.DictReader(f))


def test_a_qmix_run_resumes_with_its_replay_evaluates_and_serves(ray_session, tmp_path):
    cfg = TrainConfig(env=GRID, algo="qmix", iterations=2, checkpoint_every=1)
    apply_overrides(cfg, SMALL)
    quiet = Console(quiet=True)
    run = training.train(cfg, out=str(tmp_path), name="q", console=quiet)
    before = rows(run)
    assert set(before[0]) >= {"shared/td_loss", "test_return_mean", "epsilon", "updates"}
    assert not any(k.startswith("mixer/") for k in before[0])  # the mixer never acts
    training.train(None, resume=str(run), more={"iterations": 3}, console=quiet)
    after = rows(run)
    assert [int(r["iteration"]) for r in after] == [1, 2, 3]
    # the replay and the loop's counters came back: nothing restarts from empty
    assert float(after[2]["replay_episodes"]) == min(
        64.0, float(before[1]["replay_episodes"]) + 20.0
    )
    assert float(after[2]["updates"]) > float(before[1]["updates"])
    assert float(after[2]["epsilon"]) < float(before[1]["epsilon"])

    summary = training.evaluate(run, episodes=4)
    assert summary["modules"] == {"shared": ["a0", "a1"]} and np.isfinite(summary["return_mean"])
    assert json.loads((run / "eval.json").read_text())["episodes"] == 4

    from serve.policy import Api, load, spec_from_run

    spec = spec_from_run(run, name="q")
    api = Api({"q": load(spec)})
    env = envs.make(GRID)
    obs, _ = env.reset(seed=3)
    body = {
        "observations": {
            a: {k: np.asarray(v).tolist() for k, v in o.items()} for a, o in obs.items()
        }
    }
    first = api.answer("POST", "/v1/policies/q/act", json.dumps(body).encode())
    assert first.status == 200 and set(first.payload["state"]["a0"]) == {"h", "last_action"}
    assert first.payload["state"]["a0"]["last_action"][first.payload["actions"]["a0"]] == 1.0
    # the same observation from the carried state acts as the policy does in eval
    body["state"] = first.payload["state"]
    second = api.answer("POST", "/v1/policies/q/act", json.dumps(body).encode())
    policy = training.load_policy(run)
    policy.reset()
    policy.act(obs)
    assert second.payload["actions"] == policy.act(obs)
    body["state"] = {"a0": {"h": [0.0]}}
    bad = api.answer("POST", "/v1/policies/q/act", json.dumps(body).encode())
    assert bad.status == 400 and "keys ['h', 'last_action']" in bad.payload["error"]


def test_q_learns_in_a_remote_learner_and_iql_freezes_a_module(ray_session):
    info = algorithm.get("qmix")
    s = info.settings(batch_size=8, buffer_size=64, env_steps_per_iteration=200, test_interval=0)
    algo = info.build(GRID, s, seed=0, learners=1).build_algo()
    try:
        result = algo.train()
        assert np.isfinite(result["learners"]["shared"]["td_loss"])
    finally:
        algo.stop()
    iql = algorithm.get("iql")
    s = iql.settings(batch_size=8, buffer_size=64, env_steps_per_iteration=200, test_interval=0)
    algo = iql.build(GRID, s, seed=0, sharing="per_agent", frozen=("a1",)).build_algo()
    try:
        frozen = {k: v.clone() for k, v in algo.get_module("a1").state_dict().items()}
        trained = {k: v.clone() for k, v in algo.get_module("a0").state_dict().items()}
        result = algo.train()
        assert "td_loss" in result["learners"]["a0"]
        assert "td_loss" not in result["learners"].get("a1", {})
        assert all(torch.equal(v, algo.get_module("a1").state_dict()[k]) for k, v in frozen.items())
        assert any(
            not torch.equal(v, algo.get_module("a0").state_dict()[k]) for k, v in trained.items()
        )
    finally:
        algo.stop()
