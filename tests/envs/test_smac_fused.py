"""The compiled frames (``envs.smac.fused``, numba) play the same game as the NumPy frames of
``BattleBatch``: from the same state, a step of each gives the same units, the same hits and
deaths and the same positions (up to float32 rounding, which differs in the order sums are
taken), under every enemy model (``enemy_ai``)."""

import copy

import numpy as np
import pytest

from envs.smac import fused
from envs.smac.core import ENEMY_AIS, BattleBatch

pytestmark = pytest.mark.skipif(not fused.AVAILABLE, reason="numba is not installed")

MAPS = [
    "3m", "2s3z", "MMM2", "1c3s5z", "corridor", "2c_vs_64zg", "bane_vs_bane", "6h_vs_8z",
    "2s_vs_1sc", "so_many_baneling", "protoss_5_vs_5", "terran_10_vs_11", "zerg_20_vs_23",
]  # fmt: skip
DISCRETE = ("alive", "kind", "target", "locked", "fired_at", "ready_at", "hit_at", "t")
CONTINUOUS = ("pos", "hp", "sh", "energy")


def close(a, b, atol, name):
    """Equal within ``atol`` but for at most 1% of the entries, none off by more than 0.05
    (or a flipped move-mask bit in the observation)."""
    off = np.abs(a - b) > atol
    assert off.mean() <= 0.01, f"{name}: {off.sum()} of {off.size} differ"
    big = np.abs(a - b)[off]
    assert ((big < 0.05) | np.isclose(big, 1.0)).all(), f"{name}: differences {big}"


@pytest.mark.parametrize("enemy_ai", ENEMY_AIS)
@pytest.mark.parametrize("map_name", MAPS)
def test_a_compiled_step_equals_a_numpy_step_from_the_same_state(map_name, enemy_ai):
    numpy_core = BattleBatch(16, seed=2, map_name=map_name, engine="numpy", enemy_ai=enemy_ai)
    step = numpy_core.reset()
    rng = np.random.default_rng(0)
    checked = 0
    for _ in range(40):
        compiled = copy.deepcopy(numpy_core)
        compiled.fused = True
        mask = step.action_mask["agent"]
        actions = (rng.random(mask.shape) * mask).argmax(-1)
        step = numpy_core.step(actions)
        other = compiled.step(actions)
        for name in DISCRETE:
            np.testing.assert_array_equal(getattr(compiled, name), getattr(numpy_core, name), name)
        for name in CONTINUOUS:
            # Crowds pushing each other amplify float32 rounding within a step, and a unit at
            # a cell's edge may slide one way in one engine and stay in the other.
            close(getattr(compiled, name), getattr(numpy_core, name), 2e-3, name)
        close(other.obs["agent"], step.obs["agent"], 5e-4, "obs")
        np.testing.assert_allclose(other.rewards, step.rewards, atol=1e-4)
        np.testing.assert_array_equal(other.terminated, step.terminated)
        checked += 1
    assert checked == 40


def test_the_engine_is_chosen_and_checked():
    assert BattleBatch(1, map_name="3m").fused  # numba is installed here
    assert not BattleBatch(1, map_name="3m", engine="numpy").fused
    with pytest.raises(ValueError, match="engine must be"):
        BattleBatch(1, map_name="3m", engine="cuda")
