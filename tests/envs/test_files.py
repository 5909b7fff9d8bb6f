"""envs.files: atomic writes land whole, and a failed write leaves the old file and no
temporary file."""

import os

import numpy as np
import pytest

from envs.files import replacing, write_atomic, write_atomic_bytes


def test_text_and_bytes_land_replacing_the_old_file(tmp_path):
    path = tmp_path / "a.json"
    path.write_text("old")
    write_atomic(path, '{"new": 1}\n')
    assert path.read_text() == '{"new": 1}\n'
    write_atomic_bytes(str(path), b"\x00\x01")  # a str path too
    assert path.read_bytes() == b"\x00\x01"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json"]


def test_the_temporary_file_is_hidden_beside_the_target_until_the_end(tmp_path):
    path = tmp_path / "out.txt"
    with replacing(path) as tmp:
        assert tmp.parent == tmp_path and tmp.name.startswith(".") and tmp.name.endswith(".tmp")
        assert str(os.getpid()) in tmp.name
        tmp.write_text("x")
        assert not path.exists()  # nothing at the target while it is written
    assert path.read_text() == "x" and not tmp.exists()


def test_an_exception_leaves_the_old_file_and_no_temporary_file(tmp_path):
    path = tmp_path / "state.json"
    path.write_text("old")
    with pytest.raises(RuntimeError, match="boom"), replacing(path) as tmp:
        tmp.write_text("half of the ne")
        raise RuntimeError("boom")
    assert path.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]


def test_an_exception_before_anything_is_written_leaves_no_file(tmp_path):
    path = tmp_path / "never.txt"
    with pytest.raises(KeyError), replacing(path):
        raise KeyError("x")
    assert not any(tmp_path.iterdir())


def test_np_savez_through_a_handle_keeps_the_name(tmp_path):
    path = tmp_path / "demos.npz"
    with replacing(path) as tmp, tmp.open("wb") as f:
        np.savez(f, obs=np.arange(3))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demos.npz"]
    with np.load(path) as data:
        assert data["obs"].tolist() == [0, 1, 2]
