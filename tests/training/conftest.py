"""Fixtures the offline learners' tests share."""

import pytest

from training import record as rec


@pytest.fixture(scope="session")
def marine_sets(ray_session, tmp_path_factory):
    """SMAC's heuristic on 3m and 5m: small datasets of two unit counts."""
    root = tmp_path_factory.mktemp("sets")
    for m in ("3m", "5m"):
        rec.record("heuristic", root / m, env=f"smac/{m}-v0", episodes=12, workers=1, seed=0)
    return [str(root / "3m"), str(root / "5m")]
