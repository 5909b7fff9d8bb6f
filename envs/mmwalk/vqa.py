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
import zlib
from collections import Counter
from pathlib import Path

import numpy as np

from envs.files import replacing
from envs.mmwalk.navigate import ACTIONS as WALKER_ACTIONS
from envs.mmwalk.scene import COLORS, CORNER_CASES, LANDMARKS, WEATHERS

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
ACTIONS = (*WALKER_ACTIONS, "Stationary")  # what E1 asks about: the walker's moves, or none
LEVELS = ("Low-risk", "Moderate risk", "High-risk")


def frames_to_ask(names: list[str], trajectory: str, seed: int) -> list[str]:
    """mmWalk's sampling: skip the first five frames, then ceil(n / 10) at random."""
    rest = sorted(names)[5:]
    if not rest:
        return []
    rng = np.random.default_rng([seed, zlib.crc32(trajectory.encode())])
    k = max(1, math.ceil(len(rest) / 10))
    return sorted(rng.choice(rest, k, replace=False).tolist())


# --- phrasings: templates with slots whose mixes reproduce mmWalk's released test split
# (envs/mmwalk/mmwalk_vqa_stats.json; tests/envs/test_mmwalk_vqa_stats.py compares them) ---
E1_WEATHER = (
    "What is the weather now?",
    "What is the current weather?",
    "What is the current weather in my surrounding?",
    "What is the current weather condition in my surrounding?",
    "How is the weather right now?",
)
E1_ACTION = (
    "What is the current action?",
    "What is the action being performed?",
    "What is the current action in the trajectory?",
    "What is the action I am currently performing?",
    "What is the action you are performing?",
    "What is the current action in my environment?",
    "What is the action currently being taken?",
)
PLACES = (
    " in my surrounding",
    " in the scene",
    " in my surroundings",
    " in the current environment",
    " in my current environment",
    " visible in my surrounding",
    " nearby",
    " visible",
    " in my environment",
    " around me",
    " near me",
    " in front of me",
    " visible in the scene",
    " ahead",
    " close by",
    " in the area",
    " in this environment",
    " within my reach",
    " on my path",
    " in view",
)
E2_EXIST = ("Is there any {x}", "Is there {a}", "Are there any {xs}", "Can I find {a}")
E2_CASE = (
    "Does the scene contain any corner cases for blind?",
    "Does my surrounding contain any corner cases for blind?",
    "Does the current environment contain any corner cases for blind pedestrians?",
    "Does the scene contain any corner cases for the blind?",
    "Does my surrounding contain any corner cases for the blind?",
    "Is there any corner case in my surrounding?",
    "Are there any corner cases in the current environment?",
    "Does the current environment contain any corner cases?",
    "Is there any corner case for a blind pedestrian here?",
    "Are there any corner cases on my path?",
)
E2_OBJECTS = ("tree", "car", "pedestrian", "building", "fence")
E3_HEADS = (
    "are visible",
    "are there",
    "can be seen",
    "are present",
    "can I see",
    "are in",
    "do I see",
    "are observed",
    "are located",
    "can be counted",
)
E3_TAILS = ("",) + PLACES[:2] + (" in the scene", " around me") + PLACES[2:]
# E3's objects as mmWalk counts them: poles most, then static elements, vehicles, benches, ...
E3_KINDS = (
    ("poles", 0.574, ("poles",)),
    ("landmarks", 0.135, None),
    ("cars", 0.082, ("car",)),
    ("benches", 0.082, ("bench",)),
    ("traffic lights", 0.064, ("traffic lights",)),
    ("trees", 0.021, ("tree",)),
    ("buildings", 0.021, ("building",)),
    ("pedestrians", 0.021, ("pedestrian",)),
)
E4_HEADS = (
    "What is the color of the {x}{w}?",
    "What color is the {x}{w}?",
    "What is the colour of the {x}{w}?",
    "Which color does the {x}{w} have?",
)
E4_ADJ = ("", "nearest ", "closest ", "nearby ", "big ", "small ")
M1_TO_ME = (
    "Where is the {x} according to my position?",
    "Where is the {x} relative to my position?",
    "Where is the {x} in relation to my position?",
    "Where is the {x} located relative to my position?",
    "Where is the {x} located according to my position?",
    "What is the relative position of the {x} to my current location?",
    "What is the relative position of the {x} to me?",
    "What is the relative position of the {x} to my location?",
    "What is the relative position of the {x} to my current position?",
    "Where is the {x} from my position?",
    "What is the location of the {x} relative to me?",
    "Where can I find the {x}?",
    "In which direction is the {x}?",
    "Where is the {x} located from where I stand?",
    "What is the position of the {x} relative to me?",
    "Where exactly is the {x}?",
    "Where is the {x} with respect to me?",
    "At which o'clock is the {x}?",
    "Can you tell me where the {x} is?",
    "Where is the {x} from my current location?",
    "What is the direction and distance of the {x}?",
    "Where is the {x} situated relative to me?",
    "How is the {x} positioned relative to me?",
    "Where should I look for the {x}?",
)
M1_BETWEEN = (
    "What is the relative position of the {x} to the {y}?",
    "Where is the {x} relative to the {y}?",
    "What is the position of the {x} in relation to the {y}?",
    "How is the {x} positioned relative to the {y}?",
    "Where is the {x} compared to the {y}?",
    "What is the spatial relationship between the {x} and the {y}?",
    "Where is the {x} located relative to the {y}?",
    "How far is the {x} from the {y}?",
    "What is the relative location of the {x} and the {y}?",
    "Where is the {x} in relation to the {y}?",
    "Which is closer to me, the {x} or the {y}?",
    "What is the position of the {x} relative to the {y} and me?",
    "How are the {x} and the {y} arranged around me?",
)
M1_FAR = (
    "How far is the {x}?",
    "How far is the {x} from my position?",
    "What is the distance to the {x}?",
    "How far away is the {x}?",
)
M2_HEADS = (
    "Describe",
    "Can you describe",
    "How would you describe",
    "Please describe",
    "Could you describe",
    "Briefly describe",
    "Give a description of",
    "Tell me about",
    "Provide a description of",
    "Summarise",
)
M2_WHAT = (
    "the current environment",
    "my current environment",
    "my surrounding environment",
    "the environment around me",
    "my surrounding",
    "my current surroundings",
    "the surroundings",
    "the scene around me",
    "the current scene",
    "what is around me",
    "my environment",
    "the area around me",
)
M2_SUFFIX = (
    "",
    " based on multiple views",
    " for navigation",
    " in detail",
    " from the walker's perspective",
    " considering all views",
    " right now",
    " for a blind pedestrian",
    " including depth information",
    " using all three views",
)
M3_HEADS = (
    "Which view gives more information about",
    "Which view provides more information about",
    "Which view provides the most information about",
    "Which view provides better information about",
    "Which view provides more details about",
    "Which view provides the best information about",
    "Which view provides the clearest image of",
    "Which view provides the best understanding of",
    "Which view offers the best visibility of",
    "Which view provides the clearest perspective of",
    "Which view shows more detail about",
    "Which view is most useful for understanding",
    "Which view offers more insight into",
    "Which view gives a better overview of",
    "Which view is more informative about",
)
M3_SUFFIX = (
    "",
    " ahead",
    " for navigation",
    " for the walker",
    " in this scene",
    " for a blind pedestrian",
    " present",
    " around me",
)
M3_TOPICS = {  # sub-type: (share in mmWalk's M3, phrasings of the topic)
    "corner case": (
        0.415,
        (
            "the {c}",
            "{c}",
            "the dangerous environment",
            "potential hazards",
            "the {c} conditions",
            "navigating through the {c}",
        ),
    ),
    "obstacles": (
        0.172,
        (
            "potential obstacles",
            "obstacles",
            "the obstacles in the environment",
            "nearby obstacles",
            "obstacles on the way",
        ),
    ),
    "road": (
        0.103,
        (
            "the road conditions",
            "the sidewalk",
            "the path ahead",
            "the walking path",
            "the sidewalk conditions",
        ),
    ),
    "other": (
        0.310,
        (
            "the environment",
            "static elements",
            "the landmarks",
            "the surroundings",
            "the spatial layout",
            "dynamic elements",
            "the overall scene",
        ),
    ),
}
GROUND = (
    "road",
    "sidewalk",
    "crosswalk",
    "side road",
    "uneven slabs",
    "parking lines",
    "parking lot",
    "forecourt",
)
CASE_KINDS = {  # the things that make each corner case (scene.py)
    "narrow path": ("planters",),
    "barriers": ("barrier",),
    "high obstacles": ("overhanging sign",),
    "uneven road": ("uneven slabs",),
    "cross the road": ("crosswalk", "traffic lights", "car"),
    "cross the road in danger": ("crosswalk", "traffic lights", "car"),
    "entrance locating": ("entrance",),
    "dead end": ("fence",),
}
H1_QUESTIONS = (
    "Is the current scenario safe?",
    "How risky is the current scenario?",
    "What is the risk level of the current scenario?",
    "Evaluate the risk level of my current scenario.",
    "Is it currently safe to navigate in this scenario?",
    "Is this current scenario safe?",
    "Is the current environment safe?",
    "Is navigating through the current path safe?",
    "How risky is the current environment?",
    "Is it dangerous to proceed with the current scenario?",
    "What is the risk level of this current scenario?",
    "Is crossing the road safe in this scenario?",
    "Is it safe to walk here?",
    "How safe is the current scenario?",
    "Is the current path safe for a blind pedestrian?",
    "What is the risk of the current scenario?",
    "Is it safe to continue walking?",
    "How dangerous is the current environment?",
    "Is the current situation safe?",
    "Assess the risk of the current scenario.",
    "Is my current surrounding safe?",
    "What risk does the current scenario pose?",
    "Is the scenario ahead safe?",
    "How safe is it to proceed?",
    "Rate the risk of the current environment.",
    "Is this environment safe for walking?",
    "What is the current risk level?",
    "Is there any risk in the current scenario?",
    "Is the road ahead safe?",
)
H2_TOP = "Which landmarks in this scene would be most valuable for a blind pedestrian's navigation, and why?"
H2_WHICH = (
    "Which landmarks in this scene",
    "Which landmarks",
    "Which landmarks in my surrounding",
    "Which landmarks in this environment",
    "Which objects in this scene",
    "Which landmarks around me",
)
H2_VERB = (
    "would be most valuable",
    "are most valuable",
    "are most useful",
    "would help most",
    "would be most useful",
)
H2_FOR = (
    "navigation",
    "a blind pedestrian's navigation",
    "navigation here",
    "orientation",
    "my navigation",
)


def _pick(rng: np.random.Generator, items, s: float = 1.0, top: float | None = None):
    """An item drawn with Zipf weights 1/rank^s, or ``items[0]`` with probability ``top``
    and the rest Zipf-weighted."""
    if top is not None:
        if len(items) == 1 or rng.random() < top:
            return items[0]
        items = items[1:]
    w = 1.0 / np.arange(1, len(items) + 1) ** s
    return items[int(rng.choice(len(items), p=w / w.sum()))]


def _clock(o: dict, rng: np.random.Generator | None = None) -> str:
    hedge = "about" if rng is None else _pick(rng, ("about", "approximately", "around", "roughly"))
    far = "" if rng is None else _pick(rng, (" away", "", " far"))
    return f"{hedge} {o['distance']:.0f} meters{far} at your {o['clock']} o'clock"


def _a(kind: str) -> str:
    return f"an {kind}" if kind[0].lower() in "aeiou" else f"a {kind}"


def _plural(kind: str) -> str:
    if kind.endswith(("s", "stairs")):
        return kind
    return (
        kind[:-1] + "ies"
        if kind.endswith("y")
        else kind + ("es" if kind.endswith(("ch", "x")) else "s")
    )


def _where(o: dict) -> str:
    return (
        " in front of me"
        if o["clock"] in (11, 12, 1)
        else " on my left"
        if o["clock"] in (8, 9, 10)
        else " on my right"
        if o["clock"] in (2, 3, 4)
        else " behind me"
    )


def _choice(value: str, options) -> dict:
    return {"value": value, "options": list(options)}


def questions(meta: dict, rng: np.random.Generator) -> list[dict]:
    """The QA pairs of one frame, one per category where the frame allows it: ``{category,
    question, answer, answer_type, answer_value}``. Phrasings and sub-type mixes are drawn to
    match mmWalk's released test split."""
    walker = meta["objects"]["walker"]
    cases = meta["corner_cases"]
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

    # E1: weather 85%, action 15% (mmWalk's split)
    options = [w.capitalize() for w in WEATHERS] + list(ACTIONS)
    if rng.random() < 0.855:
        q, v = _pick(rng, E1_WEATHER, top=0.98), meta["weather"]
    else:
        q, v = _pick(rng, E1_ACTION, top=0.85), meta["action"]
    ask("E1", q, f"{v}.", "choice", _choice(v, options))
    # E2: a corner case 19.5%, a landmark 78%, another object 2.5%; 30% of the things asked
    # about absent where the walker sees one (39% of mmWalk's answers are No)
    r = rng.random()
    if r < 0.195:
        yes = bool(cases)
        ans = (
            f"Yes, the scene contains {_a(cases[0])}"
            + (f" and {', '.join(cases[1:])}." if cases[1:] else ".")
            if yes
            else "No."
        )
        ask("E2", _pick(rng, E2_CASE, top=0.5), ans, "yesno", "Yes" if yes else "No")
    else:
        pool = LANDMARKS if r < 0.974 else E2_OBJECTS
        attr = "landmark" if pool is LANDMARKS else "kind"
        seen = sorted({o[attr] for o in walker if o[attr] in pool})
        absent = [k for k in pool if k not in seen]
        yes = bool(seen) and (rng.random() > 0.3 or not absent)
        kind = str(rng.choice(seen if yes else absent))
        head = _pick(rng, E2_EXIST, s=2.0)
        q = head.format(x=kind, a=_a(kind), xs=_plural(kind)) + _pick(rng, PLACES, s=1.3) + "?"
        if yes:
            ans = _pick(
                rng,
                (
                    f"Yes, there is {_a(kind)}.",
                    f"Yes, there is {_a(kind)} in the scene.",
                    "Yes.",
                    f"Yes, there is {_a(kind)} present.",
                    f"Yes, there is {_a(kind)} visible.",
                ),
            )
        else:
            ans = "No." if rng.random() < 0.82 else f"No, there is no {kind} in my surrounding."
        ask("E2", q, ans, "yesno", "Yes" if yes else "No")
    # E3: counting in the walker view
    w = np.array([k[1] for k in E3_KINDS])
    name, _, kinds = E3_KINDS[int(rng.choice(len(E3_KINDS), p=w / w.sum()))]
    n = sum(1 for o in walker if (o["landmark"] if kinds is None else o["kind"] in kinds))
    q = f"How many {name} {_pick(rng, E3_HEADS, s=1.2)}{_pick(rng, E3_TAILS, s=1.0)}?".replace(
        " are in?", " are there?"
    )
    one = name[:-1] if name != "benches" else "bench"
    if rng.random() < 0.333:
        ans = str(n)
    else:
        ans = f"There {'is' if n == 1 else 'are'} {n} {one if n == 1 else name}{_pick(rng, ('', ' visible', ' in my surrounding'))}."
    ask("E3", q, ans, "number", n)
    # E4: the colour of an object the walker sees
    coloured = [o for o in walker if o["color"] and o["kind"] not in GROUND]
    if coloured:
        o = coloured[int(rng.integers(min(len(coloured), 5)))]
        w_ = _pick(
            rng,
            (
                "",
                f" at my {o['clock']} o'clock",
                _where(o),
                " nearby",
                " in my surrounding",
                " in the scene",
                " closest to me",
                " next to me",
                " along the path",
            ),
            s=0.8,
        )
        q = _pick(rng, E4_HEADS, s=1.0).format(x=_pick(rng, E4_ADJ, s=1.2) + o["kind"], w=w_)
        ans = (
            f"{o['color'].capitalize()}."
            if rng.random() < 0.209
            else f"The {o['kind']} is {o['color']}."
        )
        ask("E4", q, ans, "choice", _choice(o["color"], COLORS))
    # M1: to me 60%, between two objects 35%, how far 5.5%
    if walker:
        o = walker[int(rng.integers(min(len(walker), 6)))]
        adj = _pick(rng, ("", "nearest ", "closest ", "nearby "), s=1.0)
        r = rng.random()
        others = [p for p in walker if p["kind"] != o["kind"]]
        if r < 0.346 and others:
            y = others[int(rng.integers(min(len(others), 4)))]
            q = _pick(rng, M1_BETWEEN, s=1.6).format(x=o["kind"], y=y["kind"])
            ans = f"The {o['kind']} is {_clock(o, rng)}, and the {y['kind']} is {_clock(y, rng)}."
        elif r < 0.401:
            q = _pick(rng, M1_FAR).format(x=adj + o["kind"])
            ans = f"The {o['kind']} is {_clock(o, rng)}."
        else:
            q = _pick(rng, M1_TO_ME, s=0.8).format(x=adj + o["kind"])
            ans = f"The {o['kind']} is {_clock(o, rng)}."
        ask("M1", q, ans, "direction", {"distance": o["distance"], "clock": o["clock"]})
    # M2: a description
    q = f"{_pick(rng, M2_HEADS, s=0.9)} {_pick(rng, M2_WHAT, s=0.9)}{_pick(rng, M2_SUFFIX, s=1.2)}"
    ask(
        "M2",
        q
        + (
            "."
            if q.split()[0]
            in ("Describe", "Please", "Briefly", "Give", "Tell", "Provide", "Summarise")
            else "?"
        ),
        _describe(meta),
        "text",
        None,
    )
    # M3: which view shows the topic best (the most of its things); the answer names it
    # first, so a view's name elsewhere in an answer does not count
    sub = _pick_weighted(rng, {k: v[0] for k, v in M3_TOPICS.items()})
    case = str(rng.choice(cases)) if cases else ""
    phrasings = M3_TOPICS[sub][1]
    if sub == "corner case" and not case:  # mmWalk asks about danger in general then
        phrasings = [t for t in phrasings if "{c}" not in t]
    topic = _pick(rng, phrasings, s=1.0).format(c=case)
    best, seen = _best_view(meta, sub if case or sub != "corner case" else "obstacles", case)
    second = max((v for v in VIEWS if v != best), key=lambda v: seen[v])
    q = f"{_pick(rng, M3_HEADS, s=0.7)} {topic}{_pick(rng, M3_SUFFIX, s=1.2)}?"
    ans = f"The {best} view gives the most information about {topic}: it shows the most of it" + (
        f", more than the {second} view." if seen[best] > seen[second] else "."
    )
    ask("M3", q, ans, "view", best)
    # H1: the risk level with its reasons
    r = meta["risk"]
    reasons = [f"the {meta['weather'].lower()} weather (+{WEATHERS[meta['weather'].lower()]})"]
    reasons += [f"{c} (+{CORNER_CASES[c]})" for c in cases]
    level = r["level"].lower()
    ans = f"The current scenario is considered {level} (risk {r['score']}) due to {' and '.join(reasons)}."
    ask("H1", _pick(rng, H1_QUESTIONS, s=0.3, top=0.96), ans, "choice", _choice(r["level"], LEVELS))
    # H2: landmarks and navigation
    marks = [o for o in walker if o["landmark"]][:3]
    if marks:
        if rng.random() < 0.646:
            q = H2_TOP
        else:
            why = rng.random() < 0.52  # 83% of mmWalk's H2 questions ask why
            q = f"{_pick(rng, H2_WHICH)} {_pick(rng, H2_VERB)} for {_pick(rng, H2_FOR)}{', and why' if why else ''}?"
        text = "; ".join(f"the {o['landmark']} {_clock(o)}: {WHY[o['landmark']]}" for o in marks)
        ask("H2", q, text[0].upper() + text[1:] + ".", "text", [o["landmark"] for o in marks])
    return out


def _pick_weighted(rng: np.random.Generator, weights: dict[str, float]) -> str:
    keys = list(weights)
    w = np.array([weights[k] for k in keys])
    return keys[int(rng.choice(len(keys), p=w / w.sum()))]


def _best_view(meta: dict, sub: str, case: str) -> tuple[str, dict[str, int]]:
    """The view showing the most of the topic's things (ties: the walker's eye level, then
    the dog's, then the drone's) and how many each view shows."""

    def counts(o: dict) -> bool:
        if sub == "corner case":
            return o["kind"] in CASE_KINDS[case]
        if sub == "obstacles":
            return o["kind"] not in GROUND + ("building",) and o["distance"] < 8
        if sub == "road":
            return o["kind"] in GROUND
        return True

    seen = {v: sum(1 for o in meta["objects"][v] if counts(o)) for v in VIEWS}
    return max(("walker", "dog", "drone"), key=lambda v: seen[v]), seen


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
            with replacing(d / f"{cat}.jsonl") as tmp, tmp.open("w") as fh:
                for r in lines:
                    fh.write(json.dumps(r) + "\n")
            counts.setdefault(split, {})[cat] = len(lines)
    return counts
