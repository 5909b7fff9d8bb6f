"""The `arena` CLI end to end, as a user runs it: subprocesses, real Ray, real files."""

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ENV = {
    **os.environ,
    "OMP_NUM_THREADS": "1",
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_AUTH_MODE": "disabled",
    "COLUMNS": "160",
}
SMALL = [
    "--set",
    "train_batch_size=256",
    "--set",
    "minibatch_size=128",
    "--set",
    "num_epochs=1",
    "--set",
    "num_envs_per_env_runner=8",
    "--set",
    "checkpoint_every=2",
]


def arena(*args, cwd=None, check=True):
    proc = subprocess.run(
        [sys.executable, "-m", "arena", *args],
        capture_output=True,
        text=True,
        env=ENV,
        cwd=cwd,
        timeout=300,
    )
    if check:
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def test_train_eval_resume_eval(tmp_path):
    out = tmp_path / "runs"
    arena(
        "train",
        "mpe/simple_spread-v3",
        "--algo",
        "mappo",
        "--iterations",
        "3",
        "--out",
        str(out),
        "--name",
        "r",
        *SMALL,
    )
    run = out / "mpe/simple_spread-v3/mappo/r"
    assert (run / "config.yaml").exists() and list((run / "tb").iterdir())
    assert (run / "checkpoints/latest").read_text() == "iter_000003"
    rows = list(csv.DictReader((run / "metrics.csv").open()))
    assert [int(r["iteration"]) for r in rows] == [1, 2, 3]
    assert (run / "curve.png").is_file() and (run / "marl_eval.json").is_file()

    gif = run / "episode.gif"
    arena("eval", str(run), "--episodes", "3", "--render", str(gif))
    summary = json.loads((run / "eval.json").read_text())
    assert summary["episodes"] == 3 and summary["checkpoint"] == "iter_000003"
    assert set(summary["per_agent_return_mean"]) == {"agent_0", "agent_1", "agent_2"}
    assert gif.stat().st_size > 1000
    from PIL import Image

    image = Image.open(gif)  # the env's render_fps 10: 100 ms a frame (Pillow merges repeats)
    delays = [(image.seek(i), image.info["duration"])[1] for i in range(image.n_frames)]
    assert delays and all(d > 0 and d % 100 == 0 for d in delays), delays

    arena("train", "--resume", str(run), "--iterations", "5")
    rows = list(csv.DictReader((run / "metrics.csv").open()))
    assert [int(r["iteration"]) for r in rows] == [1, 2, 3, 4, 5]
    assert int(rows[-1]["env_steps"]) > int(rows[2]["env_steps"])
    proc = arena("eval", str(run), "--episodes", "2", "--json")
    assert json.loads(proc.stdout)["checkpoint"] == "iter_000005"

    # A damaged newest checkpoint (and a garbage metrics row) are skipped with a warning.
    assert sorted(p.name for p in (run / "checkpoints").glob("iter_*")) == [
        "iter_000003",
        "iter_000004",
        "iter_000005",
    ]
    weights = run / "checkpoints/iter_000005/weights/shared.pt"
    weights.write_bytes(b"\0" * weights.stat().st_size)
    with (run / "metrics.csv").open("a") as f:
        f.write("garbage,\xff,row\n")
    proc = arena("train", "--resume", str(run), "--iterations", "6")
    assert "iter_000005/weights/shared.pt is missing or damaged" in proc.stdout + proc.stderr
    assert "resuming from iter_000004 instead" in proc.stdout + proc.stderr
    assert "dropped 1 unreadable row" in proc.stderr
    rows = list(csv.DictReader((run / "metrics.csv").open()))
    assert [int(r["iteration"]) for r in rows] == [1, 2, 3, 4, 5, 6]
    # --resume continues a run as configured: what would change it is refused.
    for extra, words in (
        (["--set", "lr=1"], "--set cannot change it"),
        (["--seed", "3"], "--seed cannot change it"),
        (["--checkpoint", "iter_000099"], "has no checkpoint 'iter_000099'"),
    ):
        proc = arena("train", "--resume", str(run), *extra, check=False)
        assert proc.returncode == 2 and words in proc.stderr, proc.stderr


def test_envs_lists_every_id_as_json():
    import envs

    rows = json.loads(arena("envs", "--json").stdout)
    assert [r["id"] for r in rows if not r["id"].startswith("test/")] == [
        i for i in envs.ids() if not i.startswith("test/")
    ]
    spread = next(r for r in rows if r["id"] == "mpe/simple_spread-v3")
    assert spread["observation_spaces"]["agent_0"] == "Box(18,)"
    assert spread["action_spaces"]["agent_0"] == "Discrete(5)"
    # an 80-column terminal: every id whole on its line, nothing cut or wider than the screen
    narrow = subprocess.run(
        [sys.executable, "-m", "arena", "envs"],
        capture_output=True,
        text=True,
        env={**ENV, "COLUMNS": "80"},
    ).stdout.splitlines()
    assert all(len(line) <= 80 for line in narrow) and not any("…" in line for line in narrow)
    firsts = {line.split()[0] for line in narrow if line.strip()}
    assert {r["id"] for r in rows} <= firsts
    assert len(narrow) < 2.5 * len(rows)
    # a reader that leaves early (`| head`) is no error
    shell = f"{sys.executable} -m arena envs --json | head -1"
    piped = subprocess.run(shell, shell=True, capture_output=True, text=True, env=ENV)
    assert piped.stdout == "[\n" and "Traceback" not in piped.stderr, piped.stderr


@pytest.mark.parametrize(
    "args, message",
    [
        (["train", "mpe/simple_sprad-v3"], "unknown env id"),
        (["train", "mpe/simple_spread-v3", "--set", "lrr=1"], "unknown config key 'lrr'"),
        (["train", "mpe/simple_spread-v3", "--set", "lr=fast"], "lr must be float"),
        (["train", "mpe/simple_spread-v3", "--set", "env.speed=2"], "takes no argument speed"),
        (["train", "mpe/simple_spread-v3", "--iterations", "0"], "iterations must be a positive"),
        (["eval", "."], "not a run directory"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, message):
    proc = arena(*args, cwd=Path(__file__).parents[2], check=False)
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    "args, message",
    [
        (["train", "mpe/simple_spread-v3", "--config", "/dev/zero"], "more than 1048576 bytes"),
        (["train", "mpe/simple_spread-v3", "--config", "deep.yaml"], "YAML nested too deep"),
        (["train", "mpe/simple_spread-v3", "--set", "lr=1e30"], "lr <= 1"),
        (["train", "mpe/simple_spread-v3", "--set", "env.N=100000"], "integer in 1..100"),
        (["sweep", "seeds", "--samples", "100000000", "--out", "sw"], "at most 1000"),
        (["sweep", "--resume", "--out", "listed"], "sweep.yaml: expected a mapping"),
        (["report", "listed"], "sweep.yaml: expected a mapping"),
        (["mmwalk", "generate", "--out", "mm", "--actors", "5000"], "in 0..1024"),
        (["mmwalk", "generate", "--out", "mm", "--size", "0x0"], "width in 64..8192"),
    ],
)
def test_bad_input_found_in_review_is_one_line_and_writes_nothing(tmp_path, args, message):
    (tmp_path / "deep.yaml").write_text("x: " + "[" * 200_000 + "]" * 200_000)
    (tmp_path / "listed").mkdir()
    (tmp_path / "listed" / "sweep.yaml").write_text("- seeds\n")
    before = sorted(tmp_path.rglob("*"))
    out = ["--out", "runs"] if args[0] == "train" else []
    proc = arena(*args, *out, cwd=tmp_path, check=False)
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0] and len(lines[0]) < 600, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and sorted(tmp_path.rglob("*")) == before


def test_run_without_checkpoint_is_a_clear_error(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("env: mpe/simple_spread-v3\n")
    proc = arena("eval", str(run), check=False)
    assert proc.returncode == 2 and "no checkpoint" in proc.stderr
    proc = arena("train", "--resume", str(run), check=False)
    assert proc.returncode == 2 and "no checkpoint" in proc.stderr
