"""Arena's VQA phrasings and mixes against mmWalk's released test split: the statistics of
``envs/mmwalk/vqa_stats.py`` on Arena's generated questions beside mmWalk's
(``envs/mmwalk/mmwalk_vqa_stats.json``, from KediYing/mmWalk@c91f473 test_data_chat)."""

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from envs.mmwalk import dataset, vqa, vqa_stats

MIRROR = Path("/work/.mirror/KediYing+mmWalk/repo")
# The answer forms the generator chooses (the others follow the scene: H1's level, M3's view).
CHOSEN_FORMS = ("E1", "E3", "E4", "M1")


def _tv(a: dict, b: dict) -> float:
    return 0.5 * sum(abs(a.get(k, 0.0) - b.get(k, 0.0)) for k in set(a) | set(b))


def test_normalising_and_sub_types_by_hand():
    n = vqa_stats.normalise
    assert n("How many traffic lights are visible in my surrounding?") == (
        "how many X are visible in my surrounding"
    )
    assert n("What is the color of the building at my 3 o'clock?") == (
        "what is the color of the X at my N o'clock"
    )
    assert n("What is the relative position of the bus stop to the sidewalk?") == (
        "what is the relative position of the X to the X"
    )
    assert vqa_stats.subtype("E1", "What is the current action?") == "action"
    assert vqa_stats.subtype("E2", "Does the scene contain any corner cases for blind?") == (
        "corner case"
    )
    assert vqa_stats.answer_form("M3", "The dog view shows more than the walker view.") == "dog"
    assert vqa_stats.answer_form("H1", "The scenario is considered moderate risk.") == "moderate"
    assert vqa_stats.answer_form("H1", "It is safe to walk on.") == "low"
    for unsafe in ("Crossing here is unsafe.", "The road is not safe now."):
        assert vqa_stats.answer_form("H1", unsafe) == "high", unsafe  # not "safe"'s low
    pairs = [("What is the weather now?", "Sunny.")] * 3 + [("What is the current action?", "x")]
    s = vqa_stats.category_stats("E1", pairs)
    assert s["phrasings_per_500"] == 2.0 and s["top_phrasing_share"] == 0.75
    assert s["subtypes"] == {"action": 0.25, "weather": 0.75}


@pytest.mark.skipif(not MIRROR.is_dir(), reason="no KediYing/mmWalk mirror on this machine")
def test_the_committed_statistics_are_mmwalks(tmp_path):
    saved = json.loads(vqa_stats.STATS_FILE.read_text())
    commit = saved["source"].split("@")[1].split()[0]
    for cat in vqa.CATEGORIES:
        text = subprocess.run(
            ["git", "-C", str(MIRROR), "show", f"{commit}:test_data_chat/{cat}.jsonl"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        (tmp_path / f"{cat}.jsonl").write_text(text)
    assert vqa_stats.stats(tmp_path) == saved["stats"]


@pytest.fixture(scope="module")
def metas(tmp_path_factory):
    out = tmp_path_factory.mktemp("mmwalk_stats")
    cfg = dataset.GenerateConfig(trajectories=7, size=(64, 32), max_frames=24, actors=0)
    dataset.generate(cfg, out)
    return [json.loads(p.read_text()) for p in sorted(out.glob("QAFrames/*/Json/*.json"))]


def test_generated_phrasings_and_mixes_match_mmwalks(metas):
    ref = json.loads(vqa_stats.STATS_FILE.read_text())["stats"]
    pairs = {c: [] for c in vqa.CATEGORIES}
    for i in range(900):  # more than 500 questions per category
        for qa in vqa.questions(metas[i % len(metas)], np.random.default_rng([0, i])):
            pairs[qa["category"]].append((qa["question"], qa["answer"]))
    for cat in vqa.CATEGORIES:
        ours, theirs = vqa_stats.category_stats(cat, pairs[cat]), ref[cat]
        ratio = ours["phrasings_per_500"] / theirs["phrasings_per_500"]
        assert 0.6 <= ratio <= 1.6, (cat, ours["phrasings_per_500"], theirs["phrasings_per_500"])
        assert abs(ours["top_phrasing_share"] - theirs["top_phrasing_share"]) <= 0.12, cat
        assert _tv(ours["subtypes"], theirs["subtypes"]) <= 0.1, (cat, ours["subtypes"])
        if cat in CHOSEN_FORMS:
            assert _tv(ours["answers"], theirs["answers"]) <= 0.1, (cat, ours["answers"])
    e2 = vqa_stats.category_stats("E2", pairs["E2"])["answers"]
    assert abs(e2["yes"] - ref["E2"]["answers"]["yes"]) <= 0.2  # the scenes decide some
