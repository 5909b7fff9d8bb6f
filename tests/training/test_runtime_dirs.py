"""The embedded Ray's temp folders: private to their owner, and bounded."""

import os
import stat
import time

from training import runtime


def test_the_temp_root_is_owner_only_and_never_someone_elses(tmp_path, monkeypatch):
    monkeypatch.setattr(runtime.tempfile, "gettempdir", lambda: str(tmp_path))
    root = runtime.private_temp_root()
    assert root == str(tmp_path / f"arena-ray-{os.getuid()}")
    assert stat.S_IMODE(os.stat(root).st_mode) == 0o700
    os.chmod(root, 0o777)  # loosened by someone: made private again
    assert runtime.private_temp_root() == root and stat.S_IMODE(os.stat(root).st_mode) == 0o700
    os.rmdir(root)
    os.symlink(tmp_path, root)  # planted: not followed, a fresh folder instead
    other = runtime.private_temp_root()
    assert other != root and os.path.isdir(other) and not os.path.islink(other)
    assert stat.S_IMODE(os.stat(other).st_mode) == 0o700


def test_ended_sessions_are_pruned_but_the_newest_and_live_ones(tmp_path):
    dead = 2**22 + 12345  # beyond pid_max's default: no such process
    names = [f"session_2026-12-0{i}_00-00-00_000000_{dead + i}" for i in range(1, 5)]
    for i, name in enumerate(names):
        (tmp_path / name).mkdir()
        os.utime(tmp_path / name, (time.time() + i, time.time() + i))
    live = tmp_path / f"session_2026-11-01_00-00-00_000000_{os.getpid()}"
    live.mkdir()
    (tmp_path / "session_latest").symlink_to(tmp_path / names[-1])
    runtime.prune_sessions(str(tmp_path), keep=2)
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == sorted([*names[-2:], live.name, "session_latest"])
