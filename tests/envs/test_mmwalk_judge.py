"""mmWalk's judge request (eval_gpt.py's messages at temperature 0 to an OpenAI-compatible
``/v1/chat/completions``) against a fake server that records it; the real judge, SmolLM2
served by Arena, runs in bench/mmwalk_judge.py."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from envs.mmwalk import scoring


@pytest.fixture
def fake():
    seen = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append((self.path, body))
            if body["messages"][1]["content"].startswith("Question: fail"):
                self.send_response(500)
                self.end_headers()
                return
            out = json.dumps({"choices": [{"message": {"content": " Score: 4, not 2."}}]})
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(out.encode())

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1", seen
    server.shutdown()


def test_the_judge_sends_mmwalks_messages_and_reads_the_first_digit(fake):
    url, seen = fake
    replies = []
    judge = scoring.openai_judge(url, "judge-model", timeout=60, on_reply=replies.append)
    assert judge("What is the weather now?", "Night.", "Sunny.") == 4.0
    ((path, body),) = seen
    assert path == "/v1/chat/completions"
    assert body["model"] == "judge-model" and body["temperature"] == 0
    assert "max_tokens" not in body  # mmWalk sets no cap
    system, user = body["messages"]
    assert system["role"] == "system" and system["content"].startswith(
        "You are an intelligent evaluator designed to evaluate the correctness and similarity"
    )
    assert "5 = Perfect match or Correct in meaning\n" in system["content"]
    assert user == {
        "role": "user",
        "content": "Question: What is the weather now?\nCorrect Answer: Night.\n"
        "Predicted Answer: Sunny.\n\nPlease provide a score from 1 to 5 based on how well the "
        "predicted answer matches the correct answer.",
    }
    assert replies == ["Score: 4, not 2."]
    assert judge("fail", "a", "b") == 1.0  # a failed call scores 1, as eval_gpt.py's
    assert [scoring.judge_score(r) for r in ("5", "The answer is 4.", "none", "7 or 3")] == [
        5.0,
        4.0,
        1.0,
        3.0,
    ]
