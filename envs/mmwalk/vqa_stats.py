"""Statistics of a VQA split, computed the same way on mmWalk's released test files and on
Arena's generated ones, so the generator's phrasings and mixes can be compared with
mmWalk's (``envs/mmwalk/mmwalk_vqa_stats.json`` holds mmWalk's, written by this module).

Per category:

- ``n``: questions;
- ``phrasings_per_500``: distinct phrasings in 500 questions (the mean over 20 draws without
  replacement, so split sizes do not matter; all of them when there are fewer), after the scene-specific parts are normalised:
  object words become ``X``, numbers ``N``;
- ``top_phrasing_share``: the share of the most common phrasing;
- ``subtypes``: the shares of the category's sub-types, read off the question (E1 weather or
  action, E2 a corner case, a landmark or another object, ...);
- ``answers``: the shares of the answer's form or value (E2 yes/no, E3 a bare number, M3 the
  view named first, H1 the risk level, ...);
- ``answer_words``: the median answer length in words.

    python -m envs.mmwalk.vqa_stats DIR [--source TEXT] [--out FILE]

reads ``DIR/{E1..H2}.jsonl``.
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter
from pathlib import Path

import numpy as np

CATEGORIES = ("E1", "E2", "E3", "E4", "M1", "M2", "M3", "H1", "H2")
STATS_FILE = Path(__file__).with_name("mmwalk_vqa_stats.json")
SAMPLE, DRAWS = 500, 20

# Object words of mmWalk's and Arena's questions (CARLA's classes, mmWalk's 18 landmarks, the
# things GPT-4o named); longest first so "traffic lights" wins over "lights".
_OBJECTS = sorted(
    """traffic lights|traffic light|trafficlights|bus stops|bus stop|entrances|entrance|exits|exit
    |stairs|stairway|steps|squares|square|pedestrian crossings|pedestrian crossing|crosswalks
    |crosswalk|crossings|crossing|garbage bins|garbage bin|trash bins|trash bin|bins|bin
    |big dumpsters|big dumpster|dumpsters|dumpster|gates|gate|benches|bench|motorcycles
    |motorcycle|bicycles|bicycle|bikes|bike|poles|pole|postboxes|postbox|mailbox|map boards
    |map board|high-voltage boxes|high-voltage box|high voltage box|manhole covers|manhole cover
    |roadside stalls|roadside stall|stalls|stall|atms|atm|buildings|building|cars|car|vehicles
    |vehicle|trucks|truck|vans|van|buses|bus|pedestrians|pedestrian|people|persons|person|trees
    |tree|sidewalks|sidewalk|roads|road|fences|fence|walls|wall|barriers|barrier|planters
    |planter|signs|sign|fountains|fountain|lamp posts|lamp post|shop|kiosk|booth|umbrellas
    |umbrella|gas station|fuel pumps|fuel pump|pump|canopy|parking lot|parking|playground
    |static elements|static element|dynamic elements|dynamic element|objects|object|landmarks
    |landmark|obstacles|obstacle|narrow paths|narrow path|uneven road|high obstacles
    |corner cases|corner case|intersection|street|path""".replace("\n", "").split("|"),
    key=len,
    reverse=True,
)
_OBJECT_RE = re.compile(r"\b(" + "|".join(re.escape(w.strip()) for w in _OBJECTS) + r")\b")
_LANDMARK_RE = re.compile(
    r"traffic light|bus stop|entrance|exit|stairs|square|pedestrian cross|crosswalk|garbage bin"
    r"|trash bin|dumpster|gate|bench|motorcycle|bicycle|pole|postbox|map board|voltage|manhole"
    r"|stall|atm"
)
_CASE_RE = re.compile(
    r"corner case|narrow path|barrier|high obstacle|uneven road|dead end|entrance locating"
    r"|cross the road"
)


def normalise(question: str) -> str:
    """The phrasing of a question: lower case, object words ``X``, numbers ``N``."""
    q = question.lower().replace("\u2019", "'").strip().rstrip("?.! ")
    q = re.sub(r"\d+(\.\d+)?", "N", q)
    q = _OBJECT_RE.sub("X", q)
    q = re.sub(r"X(\s*(,|and|or)?\s*X)+", "X", q)
    return re.sub(r"\s+", " ", q)


def subtype(category: str, question: str) -> str:
    q = question.lower()
    if category == "E1":
        return "weather" if "weather" in q else "action" if "action" in q else "other"
    if category == "E2":
        return (
            "corner case"
            if _CASE_RE.search(q)
            else "landmark"
            if _LANDMARK_RE.search(q)
            else "object"
        )
    if category == "E3":
        return _first_match(
            q,
            (
                ("poles", r"pole"),
                ("traffic lights", r"traffic ?light"),
                ("benches", r"bench"),
                ("vehicles", r"\bcars?\b|vehicle|truck|bicycle|motorcycle|bus\b|buses"),
                ("elements", r"element|landmark|object"),
            ),
            "other",
        )
    if category == "E4":
        for name in ("color", "size", "shape", "texture"):
            if name in q or (name == "color" and "colour" in q):
                return name
        return "size" if re.search(r"how (large|big|tall|high|wide)", q) else "other"
    if category == "M1":
        if re.search(r"how far|distance", q):
            return "distance"
        if re.search(r"\b(me|my|i|you|your)\b", q):
            return "to me"
        return "between objects"
    if category == "M2":
        return (
            "environment" if re.search(r"environment|surrounding|scene|around me", q) else "focus"
        )
    if category == "M3":
        return _first_match(
            q,
            (
                ("corner case", _CASE_RE.pattern + r"|danger|hazard|risk"),
                ("obstacles", r"obstacle"),
                ("road", r"road|path|crossing|sidewalk|terrain"),
            ),
            "other",
        )
    if category == "H1":
        return "safe" if "safe" in q else "risk" if re.search(r"risk|danger", q) else "other"
    if category == "H2":
        return "why" if "why" in q else "which"
    raise ValueError(f"unknown category {category!r}: one of {', '.join(CATEGORIES)}")


def answer_form(category: str, answer: str) -> str:
    a = answer.lower().strip()
    if category == "E2":
        return "yes" if a.startswith("yes") else "no" if a.startswith("no") else "other"
    if category == "E3":
        return "number" if re.fullmatch(r"\d+\.?", a) else "sentence"
    if category in ("E1", "E4"):
        return "word" if len(a.split()) <= 3 else "sentence"
    if category == "M1":
        return "clock" if "o'clock" in a else "other"
    if category == "M3":
        found = re.search(r"\b(dog|walker|drone)\b", a)
        return found.group(1) if found else "none"
    if category == "H1":
        return _first_match(
            a,
            (
                ("high", r"high[- ]risk|highly risky|high risk"),
                ("moderate", r"moderate"),
                ("high", r"\bunsafe\b|\bnot (very |entirely )?safe\b"),  # before "safe" below
                ("low", r"low[- ]risk|relatively low|\bsafe\b"),
            ),
            "none",
        )
    return "text"


def _first_match(text: str, table, default: str) -> str:
    """The name of the first (name, pattern) of ``table`` whose pattern occurs in ``text``."""
    return next((name for name, pat in table if re.search(pat, text)), default)


def _shares(values: list[str]) -> dict[str, float]:
    counts = Counter(values)
    return {k: round(v / len(values), 3) for k, v in sorted(counts.items())}


def _question(record: dict) -> str:
    found = re.search(r"Question:\s*(.*)", record["conversation"][0]["content"][-1]["text"])
    return found.group(1).strip() if found else ""


def category_stats(category: str, pairs: list[tuple[str, str]], seed: int = 0) -> dict:
    """The statistics of one category's ``(question, answer)`` pairs."""
    phrasings = [normalise(q) for q, _ in pairs]
    rng = np.random.default_rng(seed)
    k = min(SAMPLE, len(phrasings))
    distinct = [
        len(set(np.asarray(phrasings)[rng.choice(len(phrasings), k, replace=False)]))
        for _ in range(DRAWS)
    ]
    return {
        "n": len(pairs),
        "phrasings_per_500": round(float(np.mean(distinct)), 1),
        "top_phrasing_share": round(Counter(phrasings).most_common(1)[0][1] / len(pairs), 3),
        "subtypes": _shares([subtype(category, q) for q, _ in pairs]),
        "answers": _shares([answer_form(category, a) for _, a in pairs]),
        "answer_words": float(np.median([len(a.split()) for _, a in pairs])),
    }


def stats(folder: str | Path) -> dict:
    """The statistics of ``folder/{category}.jsonl`` (mmWalk's chat records)."""
    out = {}
    for cat in CATEGORIES:
        path = Path(folder) / f"{cat}.jsonl"
        if not path.is_file():
            continue
        records = [json.loads(line) for line in path.open() if line.strip()]
        pairs = [
            (_question(r), r["conversation"][1]["content"][0]["text"].strip()) for r in records
        ]
        if pairs:
            out[cat] = category_stats(cat, pairs)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dir", help="a folder of {E1..H2}.jsonl")
    p.add_argument("--source", default="", help="where the files came from (kept in the JSON)")
    p.add_argument("--out", default=None, help="write the JSON here (default: print it)")
    a = p.parse_args(argv)
    result = {
        "source": a.source,
        "script": "python -m envs.mmwalk.vqa_stats",
        "stats": stats(a.dir),
    }
    text = json.dumps(result, indent=1) + "\n"
    if a.out:
        Path(a.out).write_text(text)
    else:
        print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
