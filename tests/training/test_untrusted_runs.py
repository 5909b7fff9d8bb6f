"""``arena eval`` and ``arena serve`` never unpickle a run: they rebuild the modules from
config.yaml and the env's spaces and load plain weights; damaged weights are one clear error."""

import os
import pickle

import pytest
from rich.console import Console

import training
from serve.policy import load, spec_from_run
from training import RunError
from training.config import TrainConfig, apply_overrides

SMALL = ["train_batch_size=128", "minibatch_size=64", "num_epochs=1", "num_envs_per_env_runner=4"]


class Planted:
    """A pickle that creates ``path`` when loaded, as a crafted run could."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


@pytest.fixture(scope="module")
def run(ray_session, tmp_path_factory):
    cfg = TrainConfig(env="mpe/simple_tag-v3", algo="ippo", iterations=1)
    apply_overrides(cfg, SMALL)
    out = tmp_path_factory.mktemp("runs")
    return training.train(cfg, out=str(out), name="t", console=Console(quiet=True))


def test_eval_and_serve_do_not_run_a_crafted_pickle(run, tmp_path):
    import json
    import shutil

    run = shutil.copytree(run, tmp_path / "crafted")
    marker = tmp_path / "ran"
    planted = pickle.dumps(Planted(marker))
    ckpt = training.latest_checkpoint(run)
    pickles = list(ckpt.rglob("*.pkl"))
    assert any("rl_module" in str(p) for p in pickles)
    for path in pickles:
        path.write_bytes(planted)
    # A crafter rewrites arena.json's hashes too: they catch damage, not intent.
    meta = json.loads((ckpt / "arena.json").read_text())
    meta["files"] = training.file_digests(ckpt)
    (ckpt / "arena.json").write_text(json.dumps(meta))
    summary = training.evaluate(run, episodes=2)
    assert set(summary["modules"]) == {"adversary", "agent"}
    served = load(spec_from_run(run))
    reply = served.act([served.parse({"observations": {"agent_0": [0.0] * 14}})])
    assert reply[0]["actions"]["agent_0"] in range(5)
    assert not marker.exists()
    pickle.loads(planted)  # the planted file does run code when unpickled: the test can fail
    assert marker.exists()


def test_damaged_or_missing_weights_are_one_clear_error(run, tmp_path):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(run, copy)
    weights = training.latest_checkpoint(copy) / "weights" / "adversary.pt"
    weights.write_bytes(weights.read_bytes()[:100])
    with pytest.raises(RunError, match="adversary.pt is missing or damaged"):
        training.evaluate(copy, episodes=1)
    weights.unlink()
    with pytest.raises(RunError, match="adversary.pt is missing or damaged"):
        training.load_policy(copy)
    meta = training.latest_checkpoint(copy) / "arena.json"
    meta.write_text('{"iteration": 1, "env_steps": 128}')  # as before sizes were recorded
    with pytest.raises(RunError, match="no weights for module 'adversary'.*do not load"):
        training.load_policy(copy)
