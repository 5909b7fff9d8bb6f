"""``arena record``: the rows are what the env gave, a killed recording goes on without a
duplicate or a gap, the card's numbers are the data's, ODIS's medium-expert mix, bad input."""

import json
import shutil

import numpy as np
import pytest
from rich.console import Console

import envs
from arena.cli import main
from training import record as rec
from training.record import _observation

SMALL = ["train_batch_size=128", "minibatch_size=64", "num_epochs=1", "num_envs_per_env_runner=4"]


def replay(episode: dict, env_id: str, env_args: dict, agents: list[str]):
    """Plays the recorded actions in a fresh env reset with the episode's seed and checks
    every recorded array against what the env gives."""
    env = envs.make(env_id, **env_args)
    obs, _ = env.reset(seed=int(episode["seed"][0]))
    T = len(episode["t"])
    for t in range(T):
        assert env.agents, f"the env ended before recorded step {t}"
        for k, a in enumerate(agents):
            if a in obs:
                flat = np.asarray(_observation(obs[a])).reshape(-1)
                np.testing.assert_array_equal(episode["obs"][t, k, : flat.size], flat)
                if isinstance(obs[a], dict):
                    np.testing.assert_array_equal(
                        episode["action_mask"][t, k], obs[a]["action_mask"]
                    )
        if "state" in episode:
            np.testing.assert_array_equal(episode["state"][t], env.state())
        actions = {a: int(episode["action"][t, k]) for k, a in enumerate(agents) if a in env.agents}
        obs, rew, term, trunc, _ = env.step(actions)
        for k, a in enumerate(agents):
            assert episode["reward"][t, k] == np.float32(rew.get(a, 0.0))
            assert episode["terminated"][t, k] == term.get(a, False)
            assert episode["truncated"][t, k] == trunc.get(a, False)
            if a in obs:
                flat = np.asarray(_observation(obs[a])).reshape(-1)
                np.testing.assert_array_equal(episode["next_obs"][t, k, : flat.size], flat)
    assert not env.agents, "the recorded episode stopped before the env's end"
    assert episode["return"][0] == pytest.approx(float(episode["reward"].astype(float).sum()))


def check_card_numbers(episodes: list[dict], card: dict):
    returns = np.array([float(e["return"][0]) for e in episodes])
    assert card["episodes"] == len(episodes)
    assert card["steps"] == sum(len(e["t"]) for e in episodes)
    assert card["return_mean"] == pytest.approx(returns.mean())
    assert card["return_std"] == pytest.approx(returns.std())
    assert card["return_min"] == pytest.approx(returns.min())
    assert card["return_max"] == pytest.approx(returns.max())
    won = [int(e["won"][0]) for e in episodes if e["won"][0] >= 0]
    assert card["win_rate"] == (pytest.approx(np.mean(won)) if won else None)


@pytest.mark.parametrize(
    "source, env_id, episodes, shard",
    [
        ("random", "matrix/climbing-v0", 7, 3),
        ("random", "mpe/simple_spread-v3:N=4", 4, 2),  # an env argument in --env
        ("random", "smac/3m-v0", 3, 2),
        ("heuristic", "smac/3m-v0", 3, 2),
    ],
)
def test_scripted_episodes_are_what_the_env_gave(
    ray_session, tmp_path, source, env_id, episodes, shard
):
    out = tmp_path / "set"
    card = rec.record(
        source, out, env=env_id, episodes=episodes, workers=2, shard_episodes=shard, seed=5
    )
    got, read_card = rec.load_episodes(out)
    assert read_card == card
    assert [int(e["seed"][0]) for e in got] == [5 + i for i in range(episodes)]
    for e in got:
        replay(e, card["env"], card["env_args"], card["agents"])
    check_card_numbers(got, card)
    assert card["policy"] == {"kind": source} and card["quality"] is None
    assert json.loads((out / "card.json").read_text()) == card
    assert card["env"] in (out / "README.md").read_text()
    if env_id.endswith(":N=4"):
        assert card["env_args"] == {"N": 4} and len(card["agents"]) == 4
    if env_id.startswith("smac"):
        assert card["win_rate"] is not None and card["columns"]["action_mask"]["shape"] == [3, 9]


@pytest.fixture(scope="module")
def tiny_run(ray_session, tmp_path_factory):
    import training
    from training.config import TrainConfig, apply_overrides

    cfg = TrainConfig(env="mpe/simple_spread-v3", algo="mappo", iterations=1)
    apply_overrides(cfg, SMALL)
    out = tmp_path_factory.mktemp("runs")
    return training.train(cfg, out=str(out), name="tiny", console=Console(quiet=True))


def test_a_trained_run_is_recorded_greedily(tiny_run, tmp_path):
    from training.evaluation import load_policy

    out = tmp_path / "set"
    card = rec.record(str(tiny_run), out, episodes=2, quality="poor")
    assert card["policy"]["kind"] == "run" and card["policy"]["checkpoint"].startswith("iter_")
    assert card["policy"]["weights_sha256"] and card["quality"] == "poor"
    got, _ = rec.load_episodes(out)
    policy = load_policy(tiny_run)
    agents = card["agents"]
    for e in got:
        replay(e, "mpe/simple_spread-v3", {}, agents)
        env = envs.make("mpe/simple_spread-v3")
        obs, _ = env.reset(seed=int(e["seed"][0]))
        want = policy.act(obs, env.state())  # greedy: the recorded first actions
        assert [want[a] for a in agents] == list(e["action"][0])
    check_card_numbers(got, card)


def test_a_run_checkpoint_must_be_one_of_its_own(tiny_run, tmp_path, capsys):
    argv = ["record", str(tiny_run), "--out", str(tmp_path / "s"), "--checkpoint", "../../x"]
    assert "a checkpoint of the run is iter_N" in one_line_error(capsys, argv)
    argv = ["record", str(tiny_run), "--env", "smac/3m-v0", "--out", str(tmp_path / "s")]
    assert "was trained on mpe/simple_spread-v3, not --env smac/3m-v0" in one_line_error(
        capsys, argv
    )


def test_a_killed_recording_goes_on_without_duplicate_or_gap(ray_session, tmp_path):
    kw = dict(env="mpe/simple_spread-v3", episodes=7, shard_episodes=2, seed=3)
    rec.record("random", tmp_path / "whole", **kw)
    whole, _ = rec.load_episodes(tmp_path / "whole")

    class Killed(Exception):
        pass

    def kill_after_two(done, total):
        if done == 2:
            raise Killed

    out = tmp_path / "set"
    with pytest.raises(Killed):
        rec.record("random", out, progress=kill_after_two, **kw)
    manifest = json.loads((out / "manifest.json").read_text())
    assert len(manifest["shards"]) == 2 and not (out / "card.json").exists()
    with pytest.raises(rec.RecordError, match="incomplete"):
        rec.load_episodes(out)
    # a shard renamed into place but killed before the manifest listed it, and a half write
    todo = next(k for k in range(4) if str(k) not in manifest["shards"])
    shutil.copytree(
        out / "data" / f"shard-{int(next(iter(manifest['shards']))):05d}",
        out / "data" / f"shard-{todo:05d}",
    )
    (out / ".partial" / "shard-00003").mkdir(parents=True)
    (out / ".partial" / "shard-00003" / "x.parquet").write_bytes(b"half")
    card = rec.record("random", out, **kw)
    got, _ = rec.load_episodes(out)
    assert [int(e["episode"][0]) for e in got] == list(range(7))
    assert len(got) == len(whole) and card["steps"] == sum(len(e["t"]) for e in whole)
    for a, b in zip(got, whole, strict=True):
        for k in a:
            np.testing.assert_array_equal(a[k], b[k])
    assert not (out / ".partial").exists() or not any((out / ".partial").iterdir())
    check_card_numbers(got, card)


def test_medium_expert_is_odis_equal_parts_mix(ray_session, tmp_path):
    kw = dict(env="matrix/climbing-v0", shard_episodes=4)
    rec.record("random", tmp_path / "medium", episodes=6, seed=0, quality="medium", **kw)
    rec.record("random", tmp_path / "expert", episodes=8, seed=100, quality="expert", **kw)
    card = rec.mix([tmp_path / "medium", tmp_path / "expert"], tmp_path / "me")
    assert card["quality"] == "medium-expert" and card["episodes"] == 6  # 3 of each
    got, _ = rec.load_episodes(tmp_path / "me")
    # the last 3 of each source (ODIS's offline_buffer.py with offline_data_shuffle False)
    assert [(int(e["source"][0]), int(e["source_episode"][0])) for e in got] == [
        (0, 3),
        (0, 4),
        (0, 5),
        (1, 5),
        (1, 6),
        (1, 7),
    ]
    assert [int(e["seed"][0]) for e in got] == [3, 4, 5, 105, 106, 107]
    check_card_numbers(got, card)
    assert [m["quality"] for m in card["mix"]] == ["medium", "expert"]


def one_line_error(capsys, argv) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("arena: error:") and "\n" not in err
    return err


def test_bad_input_is_refused_with_one_line(ray_session, tmp_path, capsys):
    out = str(tmp_path / "set")
    base = ["record", "random", "--out", out]
    assert "unknown env id 'mpe/nope-v0'" in one_line_error(capsys, base + ["--env", "mpe/nope-v0"])
    assert "--episodes must be at least 1, got 0" in one_line_error(
        capsys, base + ["--env", "matrix/climbing-v0", "--episodes", "0"]
    )
    assert "--quality 'great'" in one_line_error(
        capsys, base + ["--env", "matrix/climbing-v0", "--quality", "great"]
    )
    assert "needs --env" in one_line_error(capsys, base)
    err = one_line_error(capsys, base + ["--env", "mpe/simple_spread-v3:N"])
    assert "--env 'mpe/simple_spread-v3:N': after the env id come arguments as :KEY=VALUE" in err
    assert "takes no argument bogus" in one_line_error(
        capsys, base + ["--env", "mpe/simple_spread-v3:bogus=1"]
    )
    assert "SMAC's scripted policy: --env smac/*, not mpe/simple_spread-v3" in one_line_error(
        capsys, ["record", "heuristic", "--env", "mpe/simple_spread-v3", "--out", out]
    )
    assert "neither 'random', 'heuristic' nor a run" in one_line_error(
        capsys, ["record", str(tmp_path / "nothing"), "--out", out]
    )
    assert main(base + ["--env", "matrix/climbing-v0", "--episodes", "2"]) == 0
    capsys.readouterr()
    err = one_line_error(capsys, base + ["--env", "mpe/simple_spread-v3", "--episodes", "2"])
    assert "holds another dataset (env matrix/climbing-v0" in err
    err = one_line_error(capsys, base + ["--env", "matrix/climbing-v0", "--episodes", "3"])
    assert "holds another dataset" in err
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    err = one_line_error(
        capsys,
        ["record", "random", "--env", "matrix/climbing-v0", "--out", str(tmp_path / "other")],
    )
    assert "holds files but no dataset" in err
    assert "at least two" in one_line_error(
        capsys, ["record", "--mix", out, "--out", str(tmp_path / "m")]
    )
