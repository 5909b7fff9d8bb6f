"""Shared fixtures: one small Ray session for the whole test run, and a tiny masked env."""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")

import pytest  # noqa: E402

import envs  # noqa: E402
from tests.masked_env import ImageGrid, MaskedGrid, Recall  # noqa: E402

envs.register("test/masked_grid-v0", MaskedGrid, description="test env with action masks")
envs.register("test/image_grid-v0", ImageGrid, description="test env with uint8 image observations")
envs.register(
    "test/recall-v0", Recall, description="test env that needs memory (recurrent modules)"
)


def pytest_addoption(parser):
    parser.addoption(
        "--cpu-burn",
        type=int,
        default=0,
        metavar="N",
        help="run the whole session beside N busy-looping processes (a loaded machine): "
        "tests must not rely on a quiet one",
    )


# Spins until its parent (pytest) is gone, so no burner outlives a killed run.
BURN = "import os\nparent = os.getppid()\nwhile os.getppid() == parent:\n    pass\n"


@pytest.fixture(scope="session", autouse=True)
def cpu_burn(request):
    """``--cpu-burn N``: N processes keep N cores busy from before the first fixture to the
    end of the session, e.g. ``pytest --cpu-burn 4 tests/cluster/test_autoscaling.py``."""
    import subprocess
    import sys

    burners = [
        subprocess.Popen([sys.executable, "-c", BURN])
        for _ in range(request.config.getoption("--cpu-burn"))
    ]
    yield len(burners)
    for p in burners:
        p.kill()
        p.wait()


@pytest.fixture(scope="module")
def busy_machine():
    """One busy-looping process beside a module's tests: the tests that once assumed a quiet
    machine (the autoscaler's scale-down timing, the job agent's port) always run on a loaded
    one."""
    import subprocess
    import sys

    burner = subprocess.Popen([sys.executable, "-c", BURN])
    yield burner
    burner.kill()
    burner.wait()


@pytest.fixture(scope="session")
def ray_session(tmp_path_factory):
    import ray

    from training import runtime

    runtime.connect(num_cpus=2, dashboard=False, temp_dir=str(tmp_path_factory.mktemp("ray")))
    yield ray
    ray.shutdown()
