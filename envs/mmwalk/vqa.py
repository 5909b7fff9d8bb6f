"""Questions and answers in mmWalkVQA's nine categories, derived from the simulator's ground
truth (the per-frame Json) instead of written by a language model, so every answer is exact
and reproducible.

As mmWalk's generator: frames after the first five, about one in ten drawn at random per
trajectory; each QA record is mmWalk's chat format (``conversation``: the user turn with the
walker, drone and dog RGB and the walker depth panorama, then the question; the assistant
turn with the answer; ``difficulty``; ``category``), one JSONL file per category and split.
Extra keys (``answer_type``, ``answer_value``, ``trajectory``, ``frame``, ``scenario``) let
:mod:`envs.mmwalk.scoring` match numbers, directions and classes exactly; mmWalk's readers
ignore them.
"""

from __future__ import annotations

import json
import math
import os
import zlib
from collections import Counter
from pathlib import Path

import numpy as np

from envs.mmwalk.scene import CORNER_CASES, LANDMARKS, WEATHERS

CATEGORIES = ("E1", "E2", "E3", "E4", "M1", "M2", "M3", "H1", "H2")
DIFFICULTY = {"E": "Easy", "M": "Middle", "H": "Hard"}
PREAMBLE = (
    "The input includes RGB images from three views (walker, drone, dog), and one depth image "
    "from the walker's depth camera.\n"
)
INSTRUCTIONS = {  # mmWalk's test-set instructions per category
    "E1": "The Weather is one of 'Sunny, Rainy, Cloudy, Foggy, Night'. The Action is one of "
    "'Moving Forward, Turning Left, Turning Right, Forward Turning Left, Forward Turning Right'. "
    "Answer must be only one of the weather or one of the actions and at most 3 Words.",
    "E2": "Answer should be only in 'Yes' or 'No'",
    "E3": "Answer should be one value. Find answer according to rgb image.",
    "E4": "Answer should be at most 10 words. Find answer according to rgb image. ",
    "M1": "Find answer according to images, use clockwise description while describing direction.",
    "M2": "Describe the surrounding environment based on current rgb image.",
    "M3": "Compare different views depend on the question's demand.",
    "H1": "Risk value in answer should be one of 'Low-risk, Moderate risk, High-risk', give 1-2 "
    "Sentences for the reason.",
    "H2": "Find useful concrete visible objects, instance in scene for navigation.",
}
COUNTABLE = {
    "car": "cars",
    "pedestrian": "pedestrians",
    "tree": "trees",
    "traffic lights": "traffic lights",
    "bench": "benches",
    "building": "buildings",
    "garbage bin": "garbage bins",
    "poles": "poles",
}
WHY = {
    "traffic lights": "its signal tells when crossing is safe and it marks the crossing",
    "bus stop": "a fixed shelter on the sidewalk that confirms where you are on the route",
    "entrance/exit": "it is where you can enter or leave the building",
    "stairs": "a change of level to take with care, and a fixed point at the entrance",
    "square": "an open area that is easy to cross and to recognise",
    "pedestrian crossing": "the safe place to cross the road",
    "garbage bin": "a fixed object along the sidewalk edge that you can touch with a cane",
    "big dumpster": "a large fixed object, easy to find",
    "gate": "it marks the way into the area",
    "bench": "a fixed place to rest and to orient by",
    "motorcycle/bicycle": "parked near the path: it tells where the path is narrow",
    "poles": "regular fixed points along the curb",
    "postbox": "a small fixed object on the sidewalk, easy to recognise by touch",
    "map board": "it shows the surroundings to a companion and is a fixed point",
    "high-voltage box": "a fixed box beside the path to keep clear of",
    "manhole cover": "a change in the ground surface underfoot",
    "roadside stall": "a place with people and sounds that is easy to locate",
    "ATM": "a fixed point on the building's face",
}
VIEWS = ("walker", "drone", "dog")


def frames_to_ask(names: list[str], trajectory: str, seed: int) -> list[str]:
    """mmWalk's sampling: skip the first five frames, then ceil(n / 10) at random."""
    rest = sorted(names)[5:]
    if not rest:
        return []
    rng = np.random.default_rng([seed, zlib.crc32(trajectory.encode())])
    k = max(1, math.ceil(len(rest) / 10))
    return sorted(rng.choice(rest, k, replace=False).tolist())


def _clock(o: dict) -> str:
    return f"about {o['distance']:.0f} m at your {o['clock']} o'clock"


def _a(kind: str) -> str:
    return f"an {kind}" if kind[0].lower() in "aeiou" else f"a {kind}"


def questions(meta: dict, rng: np.random.Generator) -> list[dict]:
    """The QA pairs of one frame: ``{category, question, answer, answer_type,
    answer_value}``; one or more per category."""
    walker = meta["objects"]["walker"]
    out = []

    def ask(cat, q, a, kind, value):
        out.append(
            {
                "category": cat,
                "question": q,
                "answer": a,
                "answer_type": kind,
                "answer_value": value,
            }
        )

    # E1 general
    ask("E1", "What is the weather now?", f"{meta['weather']}.", "class", meta["weather"])
    ask("E1", "What is the current action?", f"{meta['action']}.", "class", meta["action"])
    # E2 existence: about a quarter of the asked landmarks are absent
    seen = sorted({o["landmark"] for o in walker if o["landmark"]})
    absent = [k for k in LANDMARKS if k not in seen]
    if seen and (rng.random() > 0.25 or not absent):
        kind, yes = str(rng.choice(seen)), True
    else:
        kind, yes = str(rng.choice(absent)), False
    ask(
        "E2",
        f"Is there {_a(kind)} in the scene?",
        "Yes." if yes else "No.",
        "yesno",
        "Yes" if yes else "No",
    )
    cases = meta["corner_cases"]
    ask(
        "E2",
        "Is there any corner case for a blind pedestrian here?",
        f"Yes, {', '.join(cases)}." if cases else "No.",
        "yesno",
        "Yes" if cases else "No",
    )
    # E3 counting (walker view)
    counts = Counter(o["kind"] for o in walker)
    kind = str(rng.choice(sorted(COUNTABLE)))
    ask(
        "E3",
        f"How many {COUNTABLE[kind]} can be seen?",
        str(counts.get(kind, 0)),
        "number",
        counts.get(kind, 0),
    )
    # E4 attribute: the colour of the nearest coloured object of a kind
    coloured = [o for o in walker if o["color"] and o["kind"] not in ("road", "sidewalk")]
    if coloured:
        o = coloured[int(rng.integers(min(len(coloured), 5)))]
        ask(
            "E4",
            f"What color is the nearest {o['kind']}?",
            f"{o['color'].capitalize()}.",
            "class",
            o["color"],
        )
    # M1 spatial
    if walker:
        o = walker[int(rng.integers(min(len(walker), 6)))]
        ask(
            "M1",
            f"Where is the nearest {o['kind']} relative to you?",
            f"The {o['kind']} is {_clock(o)}.",
            "direction",
            {"distance": o["distance"], "clock": o["clock"]},
        )
    # M2 description
    ask("M2", "Describe the surrounding environment.", _describe(meta), "text", None)
    # M3 view comparison: which view shows the most of what is around
    shown = {v: len(meta["objects"][v]) for v in VIEWS}
    best = max(VIEWS, key=lambda v: (shown[v], v == "drone"))
    ask(
        "M3",
        "Which view shows the most objects around you?",
        f"The {best} view: it shows {shown[best]} objects (walker {shown['walker']}, drone "
        f"{shown['drone']}, dog {shown['dog']}).",
        "class",
        best,
    )
    near = [o for o in meta["objects"]["dog"] if o["distance"] < 6]
    ground_best = "dog" if len(near) >= 1 else best
    ask(
        "M3",
        "Which view tells more about obstacles near your feet?",
        f"The {ground_best} view"
        + (f": it shows {len(near)} objects within 6 m at ground level." if near else "."),
        "class",
        ground_best,
    )
    # H1 risk
    r = meta["risk"]
    reasons = [f"{meta['weather'].lower()} weather (+{WEATHERS[meta['weather'].lower()]})"]
    reasons += [f"{c} (+{CORNER_CASES[c]})" for c in cases]
    ask(
        "H1",
        "Is the current scenario safe?",
        f"{r['level']}: risk {r['score']} from {', '.join(reasons)}.",
        "class",
        r["level"],
    )
    # H2 landmarks and navigation
    marks = [o for o in walker if o["landmark"]][:3]
    if marks:
        text = "; ".join(f"the {o['landmark']} {_clock(o)}: {WHY[o['landmark']]}" for o in marks)
        ask(
            "H2",
            "Which landmarks in this scene would be most valuable for a blind pedestrian's "
            "navigation, and why?",
            text[0].upper() + text[1:] + ".",
            "text",
            [o["landmark"] for o in marks],
        )
    return out


def _describe(meta: dict) -> str:
    walker = meta["objects"]["walker"]
    parts = [f"{meta['weather']} weather, {meta['scenario'].lower()} scene"]
    static = [o for o in walker if o["kind"] not in ("car", "pedestrian")][:4]
    if static:
        parts.append("nearby: " + ", ".join(f"{_a(o['kind'])} {_clock(o)}" for o in static))
    moving = Counter(o["kind"] for o in walker if o["kind"] in ("car", "pedestrian"))
    if moving:
        parts.append(
            "moving: " + ", ".join(f"{n} {k}{'s' if n > 1 else ''}" for k, n in moving.items())
        )
    if meta["corner_cases"]:
        parts.append("watch for " + ", ".join(meta["corner_cases"]))
    text = "; ".join(parts)
    return text[0].upper() + text[1:] + "."


def record(meta: dict, qa: dict) -> dict:
    """One mmWalk chat record (images relative to the split's folder, as mmWalk's)."""
    t, f = meta["trajectory"], meta["frame"]
    images = [f"../QAFrames/{t}/{v}/rgb/{f}.png" for v in VIEWS]
    images.append(f"../QAFrames/{t}/walker/depth/{f}.png")
    text = PREAMBLE + INSTRUCTIONS[qa["category"]] + "\nQuestion: " + qa["question"]
    return {
        "conversation": [
            {
                "role": "user",
                "content": [{"type": "image", "image": p} for p in images]
                + [{"type": "text", "text": text}],
            },
            {"role": "assistant", "content": [{"type": "text", "text": qa["answer"]}]},
        ],
        "difficulty": DIFFICULTY[qa["category"][0]],
        "category": qa["category"],
        "answer_type": qa["answer_type"],
        "answer_value": qa["answer_value"],
        "trajectory": t,
        "frame": f,
        "scenario": meta["scenario"],
    }


def write(root: Path, splits: dict[str, str], seed: int = 0) -> dict:
    """Writes ``root/{split}_data_chat/{category}.jsonl`` for the trajectories in ``splits``
    (rewritten whole each time: they are derived); returns the counts."""
    rows: dict[tuple[str, str], list[dict]] = {}
    for name in sorted(splits):
        meta_dir = root / "QAFrames" / name / "Json"
        names = [p.stem for p in meta_dir.glob("*.json")]
        for frame in frames_to_ask(names, name, seed):
            meta = json.loads((meta_dir / f"{frame}.json").read_text())
            rng = np.random.default_rng([seed, zlib.crc32(f"{name}/{frame}".encode())])
            for qa in questions(meta, rng):
                rows.setdefault((splits[name], qa["category"]), []).append(record(meta, qa))
    counts: dict[str, dict[str, int]] = {}
    for split in sorted(set(splits.values())):
        d = root / f"{split}_data_chat"
        d.mkdir(parents=True, exist_ok=True)
        for cat in CATEGORIES:
            lines = rows.get((split, cat), [])
            tmp = d / f".{cat}.jsonl.tmp"
            with tmp.open("w") as fh:
                for r in lines:
                    fh.write(json.dumps(r) + "\n")
            os.replace(tmp, d / f"{cat}.jsonl")
            counts.setdefault(split, {})[cat] = len(lines)
    return counts
