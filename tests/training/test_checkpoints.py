"""Checkpoint writing: what is kept, and a checkpoint is never pruned by its own save."""

from pathlib import Path
from types import SimpleNamespace

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
    import pytest

    from training.checkpoints import RunError, run_dir_for
    from training.config import TrainConfig

    cfg = TrainConfig(env="mpe/simple_spread-v3")
    assert run_dir_for(cfg, str(tmp_path), "ok-1.2_x").parents[3] == tmp_path
    for bad in ("../../../../x", "a/b", ".hidden", "", "x" * 200, "-x"):
        with pytest.raises(RunError, match="one folder name"):
            run_dir_for(cfg, str(tmp_path), bad or "/")
