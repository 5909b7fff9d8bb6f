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
    (["--set", "env.max_cycles=-5"], "max_cycles must be an integer in 1.."),
    (["--set", "env.N=0"], "N must be an integer in 1..100"),
    # sizes and rates are bounded where they are parsed, and the message names the bound
    (["--set", "lr=1e30"], ("lr=1e+30", "lr <= 1")),
    (["--set", "entropy_coeff=1e4"], ("entropy_coeff=10000.0", "coefficients in [0, 1000]")),
    (["--set", "vf_loss_coeff=1e39"], "vf_loss_coeff=1e+39"),
    (["--set", "kl_coeff=5000"], "kl_coeff=5000.0"),
    (["--algo", "qmix", "--set", "loss_scale=1e5"], ("loss_scale=100000.0", "(0, 1e3]")),
    (["--algo", "qmix", "--set", "optim_eps=2"], "optim_eps=2.0"),
    (["--set", "model.max_seq_len=1000000000"], ("max_seq_len=1000000000", "in 1..1024")),
    (["--set", f"model.hidden=[{','.join(['1'] * 1000)}]"], "(1..64 layers)"),
    (["--set", "model.conv_channels=[8,8,8,8,8,8,8,8,8]"], "(1..8 layers)"),
    (["--set", "env.N=100000"], "N must be an integer in 1..100, got 100000"),
    (["--set", "env.num_agent_neighbors=1000"], "num_agent_neighbors must be an integer in 1.."),
    (["--set", "env.max_cycles=1000000000000000"], "at most 2147483647"),
    (["--set", "seed=" + "9" * 5000], "cannot read value"),
    (["--set", "hidden=" + "[" * 100_000 + "]" * 100_000], "cannot read value"),
    (["--set", "x" * 10_000 + "=1"], "unknown config key 'xxx"),
    (["--set", "seed=-1"], "seed must be in"),
    (["--seed", "99999999999"], "seed must be in"),
    (["--set", "policies=mine"], "policies must be one of"),
    (["--set", "frozen=[nobody]"], "cannot freeze ['nobody']"),
    (["--set", "frozen=[shared]"], "every module is frozen"),
    (["--set", "checkpoint_every=-1"], "checkpoint_every must be >= 0 (0: only at the end)"),
    (["--set", "keep_checkpoints=0"], "keep_checkpoints positive, got 10 and 0"),
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


@pytest.mark.parametrize(
    ("flags", "words"), TRAIN_CASES, ids=[" ".join(c[0])[:60] for c in TRAIN_CASES]
)
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
    (b"#" * (1024 * 1024 + 10), "a config is at most 1048576"),
    (b"x: " + b"[" * 200_000 + b"]" * 200_000, "YAML nested too deep"),
    (b"env: mpe/simple_spread-v3\nseed: " + b"9" * 5000, "4300 digits"),
    (
        b"env: mpe/simple_spread-v3\nmappo: {model: {hidden: ["
        + b",".join([b"1"] * 300_000)
        + b"]}}",
        "(1..64 layers)",
    ),
    (b"env: mpe/simple_spread-v3\nmappo: {lr: 1e30}\n", "lr <= 1"),
    (b"env: mpe/simple_spread-v3\nenv_args: {N: 100000}\n", "N must be an integer in 1..100"),
]


@pytest.mark.parametrize(("content", "words"), CONFIG_FILES)
def test_bad_config_files(capsys, tmp_path, content, words):
    path = tmp_path / "c.yaml"
    path.write_bytes(content)
    assert_one_line(capsys, ["train", SPREAD, "--config", str(path), "--out", str(tmp_path)], words)


def test_missing_config_file(capsys, tmp_path):
    assert_one_line(capsys, ["train", SPREAD, "--config", str(tmp_path / "no.yaml")], "cannot read")


def test_an_endless_config_file_is_read_only_to_its_limit(capsys, tmp_path):
    argv = ["train", SPREAD, "--config", "/dev/zero", "--out", str(tmp_path / "runs")]
    assert_one_line(capsys, argv, "/dev/zero: more than 1048576 bytes")


def write_sweep(tmp_path, text: bytes):
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    (sweep / "sweep.yaml").write_bytes(text)
    return str(sweep)


# (argv with {tmp} for the test's folder, words): other commands' bad input
COMMAND_CASES = [
    (["sweep", "seeds", "--samples", "100000000", "--out", "{tmp}/sw"], "samples=100000000 (at"),
    (["sweep", "sensitivity", "--set", "samples=100000000", "--out", "{tmp}/sw"], "at most 1000"),
    (["sweep", "seeds", "--samples", "-1", "--out", "{tmp}/sw"], "samples=-1"),
    (["sweep", "seeds", "--max-concurrent", "-1", "--out", "{tmp}/sw"], "in 0..4096"),
    (["sweep", "seeds", "--max-concurrent", "100000", "--out", "{tmp}/sw"], "in 0..4096"),
    (
        ["sweep", "compute_allocation", "--set", "seeds=100", "--set", "samples=100"],
        "60000 GRPO trials (at most 10000)",
    ),
    (
        ["mmwalk", "generate", "--out", "{tmp}/mm", "--actors", "5000"],
        "--actors must be in 0..1024",
    ),
    (["mmwalk", "generate", "--out", "{tmp}/mm", "--actors", "1000"], "this machine has"),
    (["mmwalk", "generate", "--out", "{tmp}/mm", "--actors", "-1"], "--actors must be in 0.."),
    (["mmwalk", "generate", "--out", "{tmp}/mm", "--trajectories", "0"], "in 1..10000, got 0"),
    (["mmwalk", "generate", "--out", "{tmp}/mm", "--trajectories", "-5"], "got -5"),
    (["mmwalk", "generate", "--out", "{tmp}/mm", "--size", "0x0"], "width in 64..8192"),
    (["mmwalk", "generate", "--out", "{tmp}/mm", "--size", "99999x900"], "width in 64..8192"),
    (["mmwalk", "generate", "--out", "{tmp}/mm", "--size", "wide"], "WIDTHxHEIGHT"),
    (["mmwalk", "generate", "--out", "{tmp}/mm", "--max-frames", "0"], "in 1..100000, got 0"),
    (["mmwalk", "generate", "--out", "{tmp}/mm", "--max-frames", "-2"], "got -2"),
]


@pytest.mark.parametrize(
    ("argv", "words"), COMMAND_CASES, ids=[" ".join(c[0][:4]) for c in COMMAND_CASES]
)
def test_bad_command_values(capsys, tmp_path, monkeypatch, argv, words):
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    assert_one_line(capsys, [a.replace("{tmp}", str(tmp_path)) for a in argv], words)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cwd"] and not any(cwd.iterdir())


# (sweep.yaml, words): arena sweep --resume, arena report and arena sweep --watch read it
SWEEP_FILES = [
    (b"\xff\xfe\x00\x01", "sweep.yaml: not UTF-8"),
    (b"- 1\n- 2\n", "sweep.yaml: expected a mapping"),
    (b"name: [\n", "sweep.yaml: not valid YAML"),
    (b"x: " + b"[" * 200_000 + b"]" * 200_000, "sweep.yaml: YAML nested too deep"),
    (b"name: nope\nvalues: {}\n", "needs 'name' (one of seeds"),
    (b"name: seeds\nvalues: 5\n", "'values' (a mapping)"),
    (b"name: seeds\nvalues: {}\nmax_concurrent: -1\n", "max_concurrent must be in 0..4096"),
    (b"name: seeds\nvalues: {samples: 100000000}\n", "samples=100000000 (at most 1000)"),
]


@pytest.mark.parametrize(("text", "words"), SWEEP_FILES)
@pytest.mark.parametrize("command", ["resume", "report", "watch"])
def test_damaged_sweep_files(capsys, tmp_path, text, words, command):
    sweep = write_sweep(tmp_path, text)
    argv = {
        "resume": ["sweep", "--resume", "--out", sweep],
        "report": ["report", sweep],
        "watch": ["sweep", "--watch", sweep],
    }[command]
    if command == "watch" and b"samples" in text:
        return  # --watch shows the trial folders; it builds no trials
    assert_one_line(capsys, argv, words)
    assert sorted(p.name for p in (tmp_path / "sweep").iterdir()) == ["sweep.yaml"]


def test_a_resumed_sweep_keeps_its_max_concurrent(capsys, tmp_path):
    from tune.runner import prepare
    from tune.sweeps import make_sweep, sweep_values

    out = tmp_path / "sweep"
    values = {"env": SPREAD, "algo": "mappo", "iterations": 1, "samples": 2}
    _, slots = prepare("seeds", values, out, resume=False, max_concurrent=1)
    assert slots == 1
    assert prepare(None, {}, out, resume=True)[1] == 1  # not the machine's CPUs
    assert prepare(None, {}, out, resume=True, max_concurrent=1)[1] == 1
    argv = ["sweep", "--resume", "--out", str(out), "--max-concurrent", "4"]
    assert_one_line(capsys, argv, "(--max-concurrent 1); drop --max-concurrent")
    # a sweep.yaml from before max_concurrent was kept: one trial per CPU, as it ran
    saved = {"name": "seeds", "values": sweep_values(make_sweep("seeds", values))}
    (out / "sweep.yaml").write_text(json.dumps(saved))
    assert prepare(None, {}, out, resume=True)[1] == 0


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
    (lambda r: shutil.rmtree(r / "checkpoints"), "no checkpoint yet"),
    # a damaged `latest` falls back to the newest complete checkpoint (tests/training/
    # test_checkpoints.py); here there is none, and a path outside the run is never followed
    (lambda r: point_at_nothing(r, "iter_999999"), "incomplete"),
    (lambda r: point_at_nothing(r, ""), "is damaged"),
    (lambda r: (r / "checkpoints" / "latest").write_text("/etc"), "not a checkpoint of this run"),
    (
        lambda r: (r / "checkpoints" / "latest").write_text("../../x/checkpoints/iter_000001"),
        "not a checkpoint of this run",
    ),
]


def point_at_nothing(run: Path, name: str):
    (ckpt_of(run) / "arena.json").unlink()
    (run / "checkpoints" / "latest").write_text(name)


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


def test_config_errors_name_the_file_once(capsys, good_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(good_run, run)
    (run / "config.yaml").write_bytes(b"\xff\xfe garbage")
    for argv in (["eval", str(run)], ["train", "--resume", str(run)]):
        assert_one_line(capsys, argv, "config.yaml: not UTF-8 text", once="config.yaml")


def test_an_old_format_checkpoint_without_its_module_is_refused(capsys, good_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(good_run, run)
    meta = json.loads((ckpt_of(run) / "arena.json").read_text())
    del meta["files"]  # as runs wrote it before every file was recorded
    (ckpt_of(run) / "arena.json").write_text(json.dumps(meta))
    shutil.rmtree(ckpt_of(run) / "learner_group/learner/rl_module/shared")
    argv = ["train", "--resume", str(run), "--iterations", "2"]
    assert_one_line(capsys, argv, "lacks shared; resume another with --checkpoint iter_N")


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


def assert_one_line(capsys, argv, words, once: str = ""):
    """``arena argv`` ends in exit 2 and one line ``arena: error: ...`` under 600 characters
    that holds ``words`` (a string or a tuple of them), and ``once`` at most once."""
    code = cli.main(argv)
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip() and "WARNING" not in line]
    assert code == 2, (argv[:6], err[-2000:])
    assert len(lines) == 1 and lines[0].startswith("arena: error:"), (argv[:6], err[-2000:])
    for word in (words,) if isinstance(words, str) else words:
        assert word in lines[0], (argv[:6], lines[0])
    assert "Traceback" not in err and len(lines[0]) < 600, lines[0][:1000]
    assert not once or lines[0].count(once) == 1, lines[0]
