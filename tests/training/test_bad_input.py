"""The bad-input catalogue: bad values, config files and damaged runs, each through the
``arena`` CLI in this process. Every case ends in one line on stderr and exit 2 (never a
traceback, never silent damage), and nothing in these cases gets as far as training."""

import json
import shutil
from pathlib import Path

import pytest
from rich.console import Console

import training
from arena import cli
from training.config import TrainConfig, apply_overrides

SPREAD = "mpe/simple_spread-v3"
SMALL = ["train_batch_size=128", "minibatch_size=64", "num_epochs=1", "num_envs_per_env_runner=4"]

# (--set or flags, words the one line must hold)
TRAIN_CASES = [
    (["--set", "lrr=1"], "unknown config key 'lrr'"),
    (["--set", "lr=fast"], "lr must be float"),
    (["--set", "lr=.inf"], "not finite"),
    (["--set", "lr=-1"], "lr=-1.0"),
    (["--set", "gamma=1.5"], "gamma=1.5"),
    (["--set", "gae_lambda=2"], "gae_lambda=2.0"),
    (["--set", "grad_clip=-1"], "grad_clip=-1.0"),
    (["--set", "vf_clip_param=-1"], "vf_clip_param=-1.0"),
    (["--set", "kl_coeff=-1"], "kl_coeff=-1.0"),
    (["--set", "entropy_coeff=-0.1"], "entropy_coeff=-0.1"),
    (["--set", "num_epochs=0"], "num_epochs=0"),
    (["--set", "num_epochs=2.5"], "num_epochs must be int"),
    (["--set", "minibatch_size=0"], "minibatch_size=0"),
    (["--set", "minibatch_size=100000"], "minibatch_size=100000"),
    (["--set", "train_batch_size=-4"], "train_batch_size=-4"),
    (["--set", "num_envs_per_env_runner=10000000"], "num_envs_per_env_runner=10000000"),
    (["--set", "train_batch_size=10000000000"], "GiB of rollout buffers"),
    (["--set", "model.hidden=64"], "model.hidden must be a list of int"),
    (["--set", "model.hidden=[0]"], "layer sizes in 1.."),
    (["--set", "model.hidden=[1000000000]"], "layer sizes in 1.."),
    (["--set", "model.hidden=[16000,16000,16000]"], "weights"),
    (["--set", "model.activation=sigmoid"], "tanh or relu"),
    (["--set", "model.recurrent=3"], "model.recurrent must be true or false"),
    (["--set", "model.max_seq_len=0"], "model.max_seq_len=0"),
    (["--set", "model=1"], "model is a group of settings"),
    (["--set", "env.speed=2"], "takes no argument speed"),
    (["--set", "env.max_cycles=-5"], "max_cycles must be an integer >= 1"),
    (["--set", "env.N=0"], "N must be an integer >= 1"),
    (["--set", "seed=-1"], "seed must be in"),
    (["--seed", "99999999999"], "seed must be in"),
    (["--set", "policies=mine"], "policies must be one of"),
    (["--set", "frozen=[nobody]"], "cannot freeze ['nobody']"),
    (["--set", "frozen=[shared]"], "every module is frozen"),
    (["--set", "checkpoint_every=0"], "checkpoint_every and keep_checkpoints"),
    (["--set", "novalue"], "key=value"),
    (["--set", "ippo.lr=1"], "unknown config key 'ippo.lr'"),
    (["--iterations", "0"], "iterations must be a positive"),
    (["--timesteps", "-5"], "timesteps must be a positive"),
    (["--env-runners", "8"], "need 8 CPUs"),
    (["--learners", "5"], "need 5 CPUs"),
    (["--learners", "1", "--gpus-per-learner", "1"], "GPUs"),
    (["--env-runners", "-1"], "env_runners must be >= 0"),
    (["--checkpoint", "iter_000001"], "--checkpoint picks the checkpoint of --resume"),
    (["--name", "../../../../x"], "one folder name"),
    (["--name", "a/b"], "one folder name"),
]


@pytest.mark.parametrize(("flags", "words"), TRAIN_CASES, ids=[" ".join(c[0]) for c in TRAIN_CASES])
def test_bad_train_values(capsys, tmp_path, flags, words):
    out = tmp_path / "runs"
    assert_one_line(capsys, ["train", SPREAD, "--algo", "mappo", "--out", str(out), *flags], words)
    assert not out.exists()  # refused before a run directory appears


def test_bad_env_and_algorithm_pairings(capsys, tmp_path):
    out = ["--out", str(tmp_path)]
    assert_one_line(capsys, ["train", "mpe/simple_sprad-v3", *out], "unknown env id")
    assert_one_line(
        capsys, ["train", "mpe/simple_tag-v3", "--policies", "shared", *out], "shared needs one"
    )
    # capabilities are checked for every algorithm, before anything is built
    text = ["train", "websim/click-button-v0", "--algo", "mappo", *out]
    assert_one_line(capsys, text, "mappo cannot train websim/click-button-v0: text actions")
    continuous = ["train", "mpe/simple_spread_continuous-v3", "--algo", "qmix", *out]
    assert_one_line(capsys, continuous, "qmix cannot train mpe/simple_spread_continuous-v3")
    groups = ["train", "mpe/simple_speaker_listener-v4", "--algo", "vdn", *out]
    assert_one_line(capsys, groups, "2 agent groups")
    nested = ["train", "mpe/dispersion-v0", "--algo", "hypermarl-ippo", *out]
    assert_one_line(capsys, [*nested, "--set", "hyper.embedding_dim=0"], "hyper.embedding_dim")
    assert_one_line(capsys, [*nested, "--set", "hyper.nope=1"], "unknown config key 'hyper.nope'")


CONFIG_FILES = [
    (b"a: &x [1, 2]\nb: [*x, *x, *x]\n", "YAML aliases are not allowed"),
    (b"\xff\xfe\x00\x01", "not UTF-8"),
    (b"- 1\n- 2\n", "expected a mapping of config keys, got list"),
    (b"env: [\n", "not valid YAML"),
    (b"env: mpe/simple_spread-v3\nppo: 5\n", "'mappo' must be a mapping"),
    (b"env: mpe/simple_spread-v3\nmappo: {lr: inf}\n", "not finite"),
    (b"env: mpe/simple_spread-v3\nalgo: dqn\n", "unknown algorithm 'dqn'"),
    (b"#" * (1024 * 1024 + 10), "a config is at most"),
]


@pytest.mark.parametrize(("content", "words"), CONFIG_FILES)
def test_bad_config_files(capsys, tmp_path, content, words):
    path = tmp_path / "c.yaml"
    path.write_bytes(content)
    assert_one_line(capsys, ["train", SPREAD, "--config", str(path), "--out", str(tmp_path)], words)


def test_missing_config_file(capsys, tmp_path):
    assert_one_line(capsys, ["train", SPREAD, "--config", str(tmp_path / "no.yaml")], "cannot read")


@pytest.fixture(scope="module")
def good_run(ray_session, tmp_path_factory):
    cfg = TrainConfig(env=SPREAD, algo="mappo", iterations=1)
    apply_overrides(cfg, SMALL)
    out = tmp_path_factory.mktemp("runs")
    return training.train(cfg, out=str(out), name="good", console=Console(quiet=True))


def ckpt_of(run: Path) -> Path:
    return run / "checkpoints" / (run / "checkpoints" / "latest").read_text().strip()


def truncate(path: Path):
    path.write_bytes(path.read_bytes()[: max(1, path.stat().st_size // 2)])


def zero(path: Path):
    path.write_bytes(b"\0" * path.stat().st_size)


# (damage done to a copy of a good run, words)
DAMAGE = [
    (lambda r: truncate(ckpt_of(r) / "weights" / "shared.pt"), "shared.pt is missing or damaged"),
    (lambda r: zero(ckpt_of(r) / "weights" / "shared.pt"), "shared.pt is missing or damaged"),
    (lambda r: (ckpt_of(r) / "weights" / "shared.pt").unlink(), "missing or damaged"),
    (
        lambda r: shutil.rmtree(ckpt_of(r) / "learner_group/learner/rl_module/shared"),
        "rl_module/shared/",
    ),
    (lambda r: truncate(ckpt_of(r) / "algorithm_state.pkl"), "algorithm_state.pkl is missing"),
    (
        lambda r: (ckpt_of(r) / "arena.json").write_text("{not json"),
        "arena.json is missing or damaged",
    ),
    (lambda r: (ckpt_of(r) / "arena.json").write_text("[]"), "lacks a valid iteration"),
    (
        lambda r: (ckpt_of(r) / "arena.json").write_text('{"iteration": "x", "env_steps": 1}'),
        "lacks a valid",
    ),
    (lambda r: (ckpt_of(r) / "arena.json").unlink(), "incomplete"),
    (lambda r: (r / "config.yaml").write_bytes(b"\xff\xfe garbage"), "not UTF-8"),
    (lambda r: (r / "config.yaml").write_text("- a\n- b\n"), "expected a mapping"),
    (lambda r: (r / "config.yaml").write_text("env: [\n"), "not valid YAML"),
    (lambda r: (r / "config.yaml").write_text("algo: mappo\n"), "config has no 'env'"),
    (lambda r: (r / "config.yaml").write_text(f"env: {SPREAD}\nmappo: 5\n"), "must be a mapping"),
    (lambda r: (r / "config.yaml").write_text(f"env: {SPREAD}\nmappo: {{lr: -1}}\n"), "lr=-1.0"),
    (lambda r: (r / "config.yaml").unlink(), "not a run directory"),
    (lambda r: (r / "checkpoints" / "latest").unlink(), "no checkpoint yet"),
    (lambda r: (r / "checkpoints" / "latest").write_text("iter_999999"), "incomplete"),
]


@pytest.fixture
def damaged(good_run, tmp_path, request):
    copy = tmp_path / "run"
    shutil.copytree(good_run, copy)
    request.param[0](copy)
    return copy, request.param[1]


@pytest.mark.parametrize(
    "damaged", DAMAGE, indirect=True, ids=[f"damage{i}" for i in range(len(DAMAGE))]
)
@pytest.mark.parametrize("command", ["eval", "serve", "resume"])
def test_damaged_runs(capsys, monkeypatch, damaged, command):
    from training import runtime

    def no_ray(*args, **kwargs):  # every damaged run must be refused before Ray is touched
        raise AssertionError("a damaged run got as far as connecting to Ray")

    monkeypatch.setattr(runtime, "connect", no_ray)
    run, words = damaged
    if command == "resume":  # the run's only checkpoint: nothing older to fall back to
        argv = ["train", "--resume", str(run), "--iterations", "2"]
    else:
        argv = [command, str(run)] + (["--episodes", "1"] if command == "eval" else [])
    assert_one_line(capsys, argv, words)


def test_eval_arguments(capsys, good_run):
    assert_one_line(
        capsys, ["eval", str(good_run), "--episodes", "0"], "--episodes must be positive"
    )
    assert_one_line(capsys, ["eval", str(good_run), "--random", "nobody"], "--random ['nobody']")


def test_resume_refuses_changes(capsys, good_run):
    for flags, words in (
        (["--set", "lr=1"], "--set cannot change it"),
        (["--algo", "ippo"], "--algo cannot change it"),
        (["--config", "x.yaml"], "--config cannot change it"),
        (["--policies", "per_agent"], "--policies cannot change it"),
        (["--checkpoint", "iter_000099"], "has no checkpoint 'iter_000099'"),
    ):
        assert_one_line(capsys, ["train", "--resume", str(good_run), *flags], words)


def test_the_good_run_is_still_good(good_run):
    summary = training.evaluate(good_run, episodes=1)
    assert summary["checkpoint"] == "iter_000001"
    assert json.loads((ckpt_of(good_run) / "arena.json").read_text())["files"]


def assert_one_line(capsys, argv, words):
    code = cli.main(argv)
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip() and "WARNING" not in line]
    assert code == 2, (argv, err[-2000:])
    assert len(lines) == 1 and lines[0].startswith("arena: error:"), (argv, err[-2000:])
    assert words in lines[0], (argv, lines[0])
    assert "Traceback" not in err and len(lines[0]) < 600
