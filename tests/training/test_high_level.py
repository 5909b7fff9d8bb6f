"""The learned high level's env (``volleyball/3v3_high-v0``): options over the shipped team's
frozen skills, their masks, and the reward of a point."""

import numpy as np
import pytest

from training.hierarchy.high_level import CHOICES, GOTO_O, PASS_O, SERVE_O, HighLevel3v3


def test_it_is_registered_with_the_options_as_actions():
    import envs

    env = envs.make("volleyball/3v3_high-v0")
    assert env.action_space("near_0").n == len(CHOICES)


@pytest.fixture(scope="module")
def env():
    e = HighLevel3v3(8, seed=0)
    return e


def test_observation_and_masks_at_the_start(env):
    step = env.reset(seed=0)
    assert step.obs["near"].shape == (8, 3, 57 + len(CHOICES))
    mask = step.action_mask["near"]
    serving = env.core.serving == 0
    assert serving.any() and (~serving).any()
    assert (mask[..., GOTO_O] == 1).all()
    np.testing.assert_array_equal(mask[:, 2, SERVE_O], serving)  # only the server, only then
    assert (mask[:, :2, SERVE_O] == 0).all()
    assert (mask[..., PASS_O:] == 0).all()  # nobody may touch the ball yet


def test_a_masked_choice_flies_to_the_drones_point(env):
    env.reset(seed=1)
    env.step({"near": np.full((8, 3), PASS_O)})
    assert (env.option == GOTO_O).all()
    assert (env.team.skill == 0).all()


def test_the_point_ends_with_the_result_and_the_touches_as_reward(env):
    step = env.reset(seed=2)
    rng = np.random.default_rng(0)
    ended = np.zeros(8, bool)
    total = np.zeros(8)
    for _ in range(env.max_steps):
        mask = step.action_mask["near"]
        pick = np.array([[rng.choice(np.flatnonzero(m)) for m in row] for row in mask])
        hits_before = env.core.hits.copy()
        step = env.step({"near": pick})
        assert (step.rewards == step.rewards[:, :1]).all()  # one team reward
        now = (step.terminated | step.truncated) & ~ended
        total += np.where(~ended, step.rewards[:, 0], 0.0)
        if now.any():
            result = step.info["result"][now]
            assert set(result) <= {-1.0, 0.0, 1.0}
            # the reward beyond the touches' 0.1s is the result
            frac = total[now] - result
            np.testing.assert_allclose(frac * 10, np.round(frac * 10), atol=1e-4)
            assert (hits_before >= 0).all()
        ended |= now
        if ended.all():
            break
    assert ended.all()


def test_bad_options_are_refused():
    with pytest.raises(ValueError, match="decision_steps"):
        HighLevel3v3(1, decision_steps=0)
    with pytest.raises(Exception, match="cannot read"):
        HighLevel3v3(1, team="/nonexistent/team.yaml")


def test_a_learned_high_level_run_is_played_with_the_protocol(tmp_path):
    """A run of volleyball/3v3_high-v0 (untrained weights written as a checkpoint) plays
    its points against the shipped team's opponent; every point is counted once."""
    import json

    import torch
    import yaml

    from policies import algorithm
    from policies.inference import save_weights
    from training.config import TrainConfig
    from training.hierarchy.high_level import play_high_level

    cfg = TrainConfig(env="volleyball/3v3_high-v0")
    cfg.set_algo("mappo")
    run = tmp_path / "run"
    ckpt = run / "checkpoints" / "iter_000001"
    run.mkdir()
    (run / "config.yaml").write_text(yaml.safe_dump(cfg.to_dict()))
    specs = algorithm.get("mappo").modules(cfg.env, cfg.settings).rl_module_specs
    torch.manual_seed(0)
    files = save_weights({m: s.build().state_dict() for m, s in specs.items()}, ckpt / "weights")
    (ckpt / "arena.json").write_text(json.dumps({"iteration": 1, "env_steps": 8, "files": files}))
    (run / "checkpoints" / "latest").write_text(ckpt.name)
    report = play_high_level(run, 6, seed=0)
    assert report["wins"] + report["losses"] + report["undecided"] == 6
    assert set(report["option_share"]) == set(CHOICES)
    assert report["option_share"]["serve"] > 0  # a server was due to serve and may


def test_it_joins_the_registry_through_the_entry_point():
    """``envs`` never imports ``training``: the id comes from the installed package's
    ``arena.envs`` entry point."""
    from importlib.metadata import entry_points

    from envs.registry import PLUGINS

    names = {ep.value for ep in entry_points(group=PLUGINS)}
    assert "training.hierarchy.plugin:register" in names
