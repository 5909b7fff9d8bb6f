"""Scoring VQA answers as mmWalk reports them: every answer gets a 1-5 score, averaged per
category, per scenario and over all, and standardised as (mean - 1) / 4 x 100.

mmWalk's ``eval_gpt.py`` (KediYing/mmWalk@c91f473: eval_gpt.py:44-89) sends every answer, in
all nine categories, to gpt-4o-mini at temperature 0 with its judge prompt
(:data:`JUDGE_SYSTEM`, :data:`JUDGE_USER`), takes the first digit 1-5 of the reply (1 if
none) and scores 1 when the call fails. ``mode="judge"`` does exactly that with any judge.
``mode="exact"`` (the default) uses that Arena knows the answer: a number, a clock direction,
a choice among named options or a yes/no is matched exactly (:func:`match`); only the free
text (M2, H2) goes to the judge. Judges: ``overlap`` (token F1, 1 + 4 F1; no model),
``openai`` (mmWalk's prompt to any OpenAI-compatible ``/v1/chat/completions``), or any
``module:function`` taking ``(question, truth, prediction)`` and returning 1-5.

Predictions are mmWalk's: files line-aligned with the ground-truth split files, the answer in
``conversation[1].content[0].text``; a directory of ``<category>.jsonl`` (or
``<category>_*.jsonl``, as mmWalk's scorer looks for), or one JSONL file holding all
categories in the ground truth's order.
"""

from __future__ import annotations

import importlib
import json
import re
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path

import numpy as np

from envs.mmwalk.vqa import CATEGORIES

Judge = Callable[[str, str, str], float]
MODES = ("exact", "judge")
# mmWalk's judge messages, verbatim (KediYing/mmWalk@c91f473: eval_gpt.py:46-69).
JUDGE_SYSTEM = (
    "You are an intelligent evaluator designed to evaluate the correctness and similarity of "
    "generative outputs for question-answer pairs. Your task is to compare the model prediction "
    "answer with the correct answer and determine if they match in meaning. Here's the scoring "
    "criteria:\n\n"
    "### Scoring Criteria:\n"
    "5 = Perfect match or Correct in meaning\n"
    "4 = Key information correct, minor flaws\n"
    "3 = Partially correct\n"
    "2 = Mostly wrong answer for key query, but some relevance\n"
    "1 = Completely wrong or nonsense sentences\n\n"
    "Your response must ONLY be the integer score (e.g., 4). DO NOT include any text or "
    "explanation."
)
JUDGE_USER = (
    "Question: {question}\n"
    "Correct Answer: {truth}\n"
    "Predicted Answer: {prediction}\n\n"
    "Please provide a score from 1 to 5 based on how well the predicted answer matches the "
    "correct answer."
)


def judge_messages(question: str, truth: str, prediction: str) -> list[dict]:
    """mmWalk's two judge messages for one answer."""
    user = JUDGE_USER.format(question=question, truth=truth, prediction=prediction)
    return [{"role": "system", "content": JUDGE_SYSTEM}, {"role": "user", "content": user}]


def judge_score(reply: str) -> float:
    """mmWalk's reading of a judge reply: its first digit 1-5, else 1."""
    found = re.search(r"[1-5]", reply)
    return float(found.group()) if found else 1.0


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9']+", text.lower())


def overlap_judge(question: str, truth: str, prediction: str) -> float:
    """1 + 4 x the token F1 of the prediction against the truth."""
    t, p = Counter(_words(truth)), Counter(_words(prediction))
    common = sum((t & p).values())
    if not common:
        return 1.0
    precision, recall = common / sum(p.values()), common / sum(t.values())
    return 1.0 + 4.0 * (2 * precision * recall / (precision + recall))


def openai_judge(
    url: str,
    model: str,
    timeout: float = 60.0,
    max_tokens: int = 0,
    on_reply: Callable[[str], None] | None = None,
) -> Judge:
    """mmWalk's judge: its messages to ``url`` (an OpenAI-compatible ``.../v1``) at
    temperature 0, scored by :func:`judge_score`; a failed call scores 1, as mmWalk's
    (eval_gpt.py:79-81). ``max_tokens`` > 0 caps the reply (mmWalk sets none);
    ``on_reply`` sees each reply's text."""
    import urllib.error
    import urllib.request

    def judge(question: str, truth: str, prediction: str) -> float:
        body = {
            "model": model,
            "temperature": 0,
            "messages": judge_messages(question, truth, prediction),
        }
        if max_tokens > 0:
            body["max_tokens"] = max_tokens
        req = urllib.request.Request(
            url.rstrip("/") + "/chat/completions",
            json.dumps(body).encode(),
            {"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                reply = (json.load(r)["choices"][0]["message"]["content"] or "").strip()
        except (urllib.error.URLError, OSError, KeyError, IndexError, ValueError) as e:
            print(f"[!] judge error: {e}")
            return 1.0
        if on_reply is not None:
            on_reply(reply)
        return judge_score(reply)

    return judge


def load_judge(spec: str, url: str = "", model: str = "", max_tokens: int = 0) -> Judge:
    """``overlap``, ``openai`` (needs ``url`` and ``model``) or ``module:function``."""
    if spec == "overlap":
        return overlap_judge
    if spec == "openai":
        if not (url and model):
            raise ValueError("--judge openai needs --judge-url and --judge-model")
        return openai_judge(url, model, max_tokens=max_tokens)
    module, _, name = spec.partition(":")
    if not name:
        raise ValueError(f"--judge {spec!r}: overlap, openai, or module:function")
    return getattr(importlib.import_module(module), name)


def _number(text: str) -> float | None:
    words = {
        "zero": 0,
        "no": 0,
        "none": 0,
        "one": 1,
        "two": 2,
        "three": 3,
        "four": 4,
        "five": 5,
        "six": 6,
        "seven": 7,
        "eight": 8,
        "nine": 9,
        "ten": 10,
    }
    found = re.search(r"-?\d+(\.\d+)?", text)
    if found:
        return float(found.group())
    for w in _words(text):
        if w in words:
            return float(words[w])
    return None


def _norm(text: str) -> str:
    return " ".join(_words(text.replace("-", " ")))


def match(kind: str, value, truth: str, prediction: str) -> float | None:
    """The 1-5 score of ``prediction`` for a ground truth of ``kind`` (None: free text,
    for the judge).

    - yesno: 5 when the prediction starts with it;
    - choice (``{value, options}``: a weather or action, a colour, a risk level): 5 when the
      option the prediction names first is the value (the longest at the same place);
    - view (M3): 5 when the first view the prediction names is the value, so an answer that
      names every view is not right for all three;
    - class (datasets written before choice): 5 when the prediction names the class;
    - number: 5 exact, 3 off by one, 1 else;
    - direction (distance and clock): 1 + 2 for the clock (1 off: 1) + 2 for the distance
      (within 25%: 2, within 50%: 1).
    """
    pred = _norm(prediction)
    if kind == "yesno":
        return 5.0 if pred.split()[:1] == [str(value).lower()] else 1.0
    if kind == "choice":
        return 5.0 if _first(pred, value["options"]) == _norm(value["value"]) else 1.0
    if kind == "view":
        return 5.0 if _first(pred, ("walker", "drone", "dog")) == value else 1.0
    if kind == "class":
        return 5.0 if _norm(str(value)) in pred else 1.0
    if kind == "number":
        got = _number(prediction)
        if got is None:
            return 1.0
        return 5.0 if got == value else 3.0 if abs(got - value) == 1 else 1.0
    if kind == "direction":
        score = 1.0
        hour = re.search(r"(\d{1,2})\s*o\s*'?\s*clock", prediction.lower())
        if hour:
            diff = abs(int(hour.group(1)) - value["clock"]) % 12
            diff = min(diff, 12 - diff)
            score += 2.0 if diff == 0 else 1.0 if diff == 1 else 0.0
        metres = re.search(r"(\d+(\.\d+)?)\s*(m\b|meters|metres)", prediction.lower())
        if metres:
            error = abs(float(metres.group(1)) - value["distance"]) / max(value["distance"], 1.0)
            score += 2.0 if error <= 0.25 else 1.0 if error <= 0.5 else 0.0
        return score
    return None


def _first(pred: str, options) -> str | None:
    """The option named first in the normalised ``pred`` (the longest where two start at the
    same word), normalised; None if it names none."""
    found = []
    for o in options:
        m = re.search(rf"\b{re.escape(_norm(o))}\b", pred)
        if m:
            found.append((m.start(), -len(m.group()), m.group()))
    return min(found)[2] if found else None


def _answer(record: dict) -> str:
    return record["conversation"][1]["content"][0]["text"].strip()


def _question(record: dict) -> str:
    text = record["conversation"][0]["content"][-1]["text"]
    found = re.search(r"Question:\s*(.*)", text)
    return found.group(1).strip() if found else "[MISSING QUESTION]"


def _prediction_file(pred: Path, category: str) -> Path | None:
    for name in (f"{category}.jsonl", *sorted(p.name for p in pred.glob(f"{category}_*.jsonl"))):
        if (pred / name).is_file():
            return pred / name
    return None


def load_predictions(pred: Path, truth: dict[str, list[dict]]) -> dict[str, list[dict]]:
    """Predictions per category, line-aligned with ``truth``."""
    out = {}
    if pred.is_dir():
        for cat in truth:
            path = _prediction_file(pred, cat)
            if path is None:
                raise FileNotFoundError(f"{pred}: no {cat}.jsonl (or {cat}_*.jsonl)")
            out[cat] = [json.loads(line) for line in path.open()]
    else:
        lines = [json.loads(line) for line in pred.open()]
        for cat, rows in truth.items():
            out[cat], lines = lines[: len(rows)], lines[len(rows) :]
    for cat, rows in truth.items():
        if len(out[cat]) != len(rows):
            raise ValueError(
                f"{pred}: {len(out[cat])} {cat} predictions for {len(rows)} questions "
                "(predictions are line-aligned with the ground truth)"
            )
    return out


def load_truth(dataset: Path, split: str) -> dict[str, list[dict]]:
    d = dataset / f"{split}_data_chat"
    if not d.is_dir():
        raise FileNotFoundError(f"{dataset}: no {split}_data_chat/ (run arena mmwalk generate)")
    return {
        cat: [json.loads(line) for line in (d / f"{cat}.jsonl").open()]
        for cat in CATEGORIES
        if (d / f"{cat}.jsonl").exists()
    }


def evaluate(
    predictions: str | Path,
    dataset: str | Path,
    split: str = "test",
    judge: Judge = overlap_judge,
    mode: str = "exact",
) -> dict:
    """Scores ``predictions`` against ``dataset``'s ``split``: per category, per scenario
    and overall, raw (1-5) and standardised ((mean - 1) / 4 x 100); plus ``samples``.
    ``mode``: ``exact`` (exact answers matched, free text judged) or ``judge`` (every answer
    judged, as mmWalk's eval_gpt.py)."""
    if mode not in MODES:
        raise ValueError(f"scoring mode {mode!r}: one of {', '.join(MODES)}")
    truth = load_truth(Path(dataset), split)
    preds = load_predictions(Path(predictions), truth)
    samples = []
    for cat, rows in truth.items():
        for gt, pr in zip(rows, preds[cat], strict=True):
            question, answer, guess = _question(gt), _answer(gt), _answer(pr)
            score = None
            if mode == "exact":
                score = match(gt.get("answer_type", "text"), gt.get("answer_value"), answer, guess)
            if score is None:
                score = float(judge(question, answer, guess))
            samples.append(
                {
                    "category": cat,
                    "scenario": gt.get("scenario", ""),
                    "question": question,
                    "gt_answer": answer,
                    "pred_answer": guess,
                    "score": score,
                }
            )
    return summarise(samples)


def summarise(samples: list[dict]) -> dict:
    def row(scores):
        mean = float(np.mean(scores))
        return {
            "n": len(scores),
            "avg_score": round(mean, 3),
            "standardized_score": round((mean - 1) / 4 * 100, 2),
        }

    by_cat, by_scn = defaultdict(list), defaultdict(list)
    for s in samples:
        by_cat[s["category"]].append(s["score"])
        by_scn[s["scenario"]].append(s["score"])
    every = [s["score"] for s in samples]
    return {
        "per_category": {c: row(by_cat[c]) for c in CATEGORIES if c in by_cat},
        "per_scenario": {k: row(v) for k, v in sorted(by_scn.items())},
        "overall": row(every) if every else None,
        "samples": samples,
    }


def baseline(
    dataset: str | Path, kind: str, out: str | Path, split: str = "test", seed: int = 0
) -> Path:
    """Writes predictions for ``split`` from the train split's answers alone: ``majority``
    (each question's most common train answer) or ``random`` (a train answer to the same
    question drawn at random); a question never asked in train gets the category's."""
    if kind not in ("majority", "random"):
        raise ValueError(f"unknown baseline {kind!r}: majority or random")
    train = load_truth(Path(dataset), "train")
    truth = load_truth(Path(dataset), split)
    rng = np.random.default_rng(seed)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for cat, rows in truth.items():
        by_q: dict[str, Counter] = defaultdict(Counter)
        for r in train.get(cat, []):
            by_q[_question(r)][_answer(r)] += 1
        anyq = sum(by_q.values(), Counter())
        lines = []
        for r in rows:
            answers = by_q.get(_question(r)) or anyq or Counter({"": 1})
            if kind == "majority":
                guess = answers.most_common(1)[0][0]
            else:
                keys = list(answers)
                guess = keys[int(rng.integers(len(keys)))]
            pred = json.loads(json.dumps(r))
            pred["conversation"][1]["content"][0]["text"] = guess
            lines.append(json.dumps(pred))
        (out / f"{cat}.jsonl").write_text("".join(line + "\n" for line in lines))
    return out
