"""``arena envs``'s rows: read from each env once, then from a cache keyed by the code."""

import json

import envs
from envs import summary


def test_rows_come_from_the_cache_once_written(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    built = []
    real = summary.describe
    monkeypatch.setattr(summary, "describe", lambda i: built.append(i) or real(i))
    (tmp_path / "arena").mkdir()
    (tmp_path / "arena" / "envs-old.json").write_text("[]")  # a cache of older code
    rows = summary.summaries()
    assert [r["id"] for r in rows] == envs.ids() and len(built) == len(rows)
    spread = next(r for r in rows if r["id"] == "mpe/simple_spread-v3")
    assert spread["action_spaces"]["agent_0"] == "Discrete(5)" and spread["vectorised_core"]
    assert [p.name for p in (tmp_path / "arena").iterdir()] == [summary.cache_path().name]
    built.clear()
    assert summary.summaries() == rows and built == []  # nothing built the second time
    summary.cache_path().write_text("{not json")  # a damaged cache is rebuilt
    assert summary.summaries() == rows and len(built) == len(rows)
    assert json.loads(summary.cache_path().read_text()) == rows
