"""The learned VQA baseline (policies/vqa.py) on a tiny generated mmwalk dataset."""

import json

import pytest

from envs.mmwalk import dataset, scoring
from policies import vqa


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    out = tmp_path_factory.mktemp("mmwalk_vqa")
    dataset.generate(dataset.GenerateConfig(trajectories=3, size=(64, 32), max_frames=40), out)
    return out


def test_the_baseline_learns_its_training_split_and_predicts_every_category(tiny, tmp_path):
    run = vqa.train(tiny, tmp_path / "run", vqa.VQASettings(epochs=40, lr=3e-3), log=lambda _: 0)
    assert (run / "model.pt").is_file() and json.loads((run / "vocab.json").read_text())["answers"]
    on_train = vqa.predict(run, tiny, tmp_path / "pred_train", split="train")
    majority = scoring.baseline(tiny, "majority", tmp_path / "majority", split="train")
    learned = scoring.evaluate(on_train, tiny, split="train")["overall"]["standardized_score"]
    chance = scoring.evaluate(majority, tiny, split="train")["overall"]["standardized_score"]
    assert learned > chance  # it reads the pictures and the question, not only the prior
    test = vqa.predict(run, tiny, tmp_path / "pred_test")
    result = scoring.evaluate(test, tiny)
    assert set(result["per_category"]) == {
        f.stem for f in (tiny / "test_data_chat").iterdir() if f.stat().st_size
    }


def test_training_without_a_train_split_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="train_data_chat"):
        vqa.train(tmp_path, tmp_path / "run")
