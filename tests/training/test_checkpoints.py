"""Checkpoint writing: what is kept, and a checkpoint is never pruned by its own save; which
checkpoint is loaded when the `latest` pointer or an old-format checkpoint is damaged."""

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from training.checkpoints import checkpoint_meta, save_checkpoint


class FakeAlgo:
    """What save_checkpoint reads of an RLlib Algorithm: a save and the learners' weights."""

    learner_group = SimpleNamespace(get_weights=lambda: {"shared": {"w": [1.0, 2.0]}})

    def save_to_path(self, path: str) -> None:
        Path(path).mkdir(parents=True, exist_ok=True)
        (Path(path) / "algorithm_state.pkl").write_bytes(b"state")


def names(run: Path) -> list[str]:
    return sorted(p.name for p in (run / "checkpoints").glob("iter_*"))


def test_keeps_the_newest_and_verifies(tmp_path):
    for it in range(1, 6):
        save_checkpoint(FakeAlgo(), tmp_path, it, it * 100, keep=3)
    assert names(tmp_path) == ["iter_000003", "iter_000004", "iter_000005"]
    assert (tmp_path / "checkpoints" / "latest").read_text() == "iter_000005"
    meta = checkpoint_meta(tmp_path / "checkpoints" / "iter_000005")
    assert meta["iteration"] == 5 and "weights/shared.pt" in meta["files"]


def test_a_run_going_on_from_an_older_checkpoint_keeps_what_it_writes(tmp_path):
    # A resumed (or restarted) run writes iteration 2 while iterations 3-5 of an abandoned
    # attempt are still there: its own checkpoint must survive the pruning.
    for it in range(1, 6):
        save_checkpoint(FakeAlgo(), tmp_path, it, it * 100, keep=3)
    path = save_checkpoint(FakeAlgo(), tmp_path, 2, 200, keep=1)
    assert path.is_dir() and (tmp_path / "checkpoints" / "latest").read_text() == "iter_000002"
    assert "iter_000002" in names(tmp_path)


def test_weights_that_are_not_finite_are_never_checkpointed(tmp_path):
    save_checkpoint(FakeAlgo(), tmp_path, 1, 100, keep=3)
    broken = FakeAlgo()
    broken.learner_group = SimpleNamespace(
        get_weights=lambda: {"shared": {"w": [1.0, float("nan")]}}
    )
    assert save_checkpoint(broken, tmp_path, 2, 200, keep=3) is None
    assert names(tmp_path) == ["iter_000001"]
    assert (tmp_path / "checkpoints" / "latest").read_text() == "iter_000001"


def test_a_run_name_is_one_folder_inside_out(tmp_path):
    from training.checkpoints import RunError, run_dir_for
    from training.config import TrainConfig

    cfg = TrainConfig(env="mpe/simple_spread-v3")
    assert run_dir_for(cfg, str(tmp_path), "ok-1.2_x").parents[3] == tmp_path
    for bad in ("../../../../x", "a/b", ".hidden", "", "x" * 200, "-x"):
        with pytest.raises(RunError, match="one folder name"):
            run_dir_for(cfg, str(tmp_path), bad or "/")


def fake_run(tmp_path: Path, iterations=(1, 2)) -> Path:
    """A run directory with checkpoints of :class:`FakeAlgo` (and its RLModule folder)."""
    (tmp_path / "config.yaml").write_text("env: mpe/simple_spread-v3\n")
    for it in iterations:
        ckpt = save_checkpoint(FakeAlgo(), tmp_path, it, it * 100, keep=10)
        (ckpt / "learner_group" / "learner" / "rl_module" / "shared").mkdir(parents=True)
    return tmp_path


def one_warning(capsys) -> str:
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("arena: warning:"), lines
    return lines[0]


# (damage to the `latest` pointer or the checkpoint it names, words of the warning, the
# checkpoint used instead)
POINTER_DAMAGE = [
    (lambda ck: (ck / "latest").write_text("iter_999999"), "iter_999999 (named by", 2),
    (lambda ck: (ck / "latest").write_text(""), "is damaged", 2),
    (lambda ck: (ck / "latest").write_bytes(b"\xff\x00garbage"), "is damaged", 2),
    (lambda ck: (ck / "latest").unlink(), "latest is missing", 2),
    (lambda ck: (ck / "iter_000002" / "arena.json").unlink(), "missing or incomplete", 1),
]


@pytest.mark.parametrize(("damage", "words", "used"), POINTER_DAMAGE)
def test_a_damaged_latest_pointer_falls_back_to_the_newest_complete_checkpoint(
    tmp_path, capsys, damage, words, used
):
    from training.checkpoints import latest_checkpoint, resume_checkpoint

    run = fake_run(tmp_path)
    damage(run / "checkpoints")
    name = f"iter_{used:06d}"
    assert latest_checkpoint(run).name == name
    line = one_warning(capsys)
    assert words in line and f"using {name} instead" in line
    ckpt, meta = resume_checkpoint(run, None)
    assert ckpt.name == name and meta["iteration"] == used
    line = one_warning(capsys)
    assert words in line and f"resuming from {name} instead" in line
    assert "checkpoint checkpoints" not in line


@pytest.mark.parametrize("pointer", ["/etc", "../../../../other/checkpoints/iter_000001", ".."])
def test_a_latest_pointer_outside_the_run_is_refused(tmp_path, pointer):
    from training.checkpoints import RunError, latest_checkpoint, resume_checkpoint

    run = fake_run(tmp_path)
    (run / "checkpoints" / "latest").write_text(pointer)
    for load in (latest_checkpoint, lambda r: resume_checkpoint(r, None)):
        with pytest.raises(RunError, match="not a checkpoint of this run.*--checkpoint iter_N"):
            load(run)


def test_without_a_complete_checkpoint_the_pointer_problem_is_the_error(tmp_path):
    from training.checkpoints import RunError, latest_checkpoint

    run = fake_run(tmp_path, iterations=(1,))
    (run / "checkpoints" / "iter_000001" / "arena.json").unlink()
    with pytest.raises(RunError, match="iter_000001 .*incomplete, and no other checkpoint"):
        latest_checkpoint(run)


def strip_files(ckpt: Path) -> None:
    """``arena.json`` as runs wrote it before it recorded every file."""
    meta = json.loads((ckpt / "arena.json").read_text())
    del meta["files"]
    (ckpt / "arena.json").write_text(json.dumps(meta))


def test_an_old_format_checkpoint_without_its_module_is_never_resumed(tmp_path, capsys):
    import shutil

    from training.checkpoints import RunError, resume_checkpoint

    run = fake_run(tmp_path)
    ckdir = run / "checkpoints"
    for name in ("iter_000001", "iter_000002"):
        strip_files(ckdir / name)
    assert resume_checkpoint(run, None)[0].name == "iter_000002"  # its folders are there
    shutil.rmtree(ckdir / "iter_000002" / "learner_group" / "learner" / "rl_module" / "shared")
    ckpt, _ = resume_checkpoint(run, None)  # RLlib would start 'shared' from fresh weights
    assert ckpt.name == "iter_000001"
    line = one_warning(capsys)
    assert "old-format checkpoint" in line and "lacks shared" in line
    with pytest.raises(RunError, match="lacks shared; resume another with --checkpoint iter_N"):
        resume_checkpoint(run, "iter_000002")
    shutil.rmtree(ckdir / "iter_000001" / "learner_group")
    with pytest.raises(RunError, match="old-format checkpoint .*--checkpoint"):
        resume_checkpoint(run, None)


def test_a_run_saved_before_the_ppo_loss_choices_keeps_rllibs_loss():
    """The shipped volleyball skills learned with RLlib's value clamp at 10: resuming or
    evaluating them must not switch to the new default loss; a run that names its loss keeps
    it."""
    from training.checkpoints import load_config
    from training.config import TrainConfig

    old = load_config(Path("envs/volleyball/assets/team/serve")).settings
    assert (old.value_clip, old.advantage_norm, old.adam_eps, old.vf_clip_param) == (
        "loss",
        "batch",
        1e-8,
        10.0,
    )
    new = TrainConfig(env="mpe/simple_spread-v3").settings
    assert (new.value_clip, new.advantage_norm, new.adam_eps) == ("change", "minibatch", 1e-5)
