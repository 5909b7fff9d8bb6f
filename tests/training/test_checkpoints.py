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
