"""Shared fixtures: one small Ray session for the whole test run, and a tiny masked env."""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")

import pytest  # noqa: E402

import envs  # noqa: E402
from tests.masked_env import CLIMBING, PENALTY, ImageGrid, MaskedGrid, MatrixGame, Recall  # noqa: E402

envs.register("test/masked_grid-v0", MaskedGrid, description="test env with action masks")
envs.register("test/image_grid-v0", ImageGrid, description="test env with uint8 image observations")
envs.register(
    "test/recall-v0", Recall, description="test env that needs memory (recurrent modules)"
)
envs.register(
    "test/climbing-v0",
    MatrixGame,
    payoff=CLIMBING,
    description="Claus & Boutilier's climbing game (one step, two agents)",
)
envs.register(
    "test/penalty-v0",
    MatrixGame,
    payoff=PENALTY,
    description="Claus & Boutilier's penalty game, k = -100 (one step, two agents)",
)


@pytest.fixture(scope="session")
def ray_session(tmp_path_factory):
    import ray

    from training import runtime

    runtime.connect(num_cpus=2, dashboard=False, temp_dir=str(tmp_path_factory.mktemp("ray")))
    yield ray
    ray.shutdown()
