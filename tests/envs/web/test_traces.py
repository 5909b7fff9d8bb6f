"""Teacher traces: written whole, resumed after a kill, and an OpenAI-compatible teacher
tested against a local chat-completions server."""

import contextlib
import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from arena.cli import main
from envs.web.teachers import OpenAITeacher, ScriptedTeacher, TeacherError
from envs.web.traces import TeacherSpec, done_episodes, write_traces


def test_traces_resume_and_a_torn_line_is_dropped(tmp_path, capsys):
    args = [
        "web",
        "traces",
        "--tasks",
        "click-button",
        "enter-text",
        "--episodes",
        "5",
        "--error-rate",
        "0.3",
        "--out",
        str(tmp_path),
    ]
    assert main(args) == 0
    path = tmp_path / "traces.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert {(r["env"], r["seed"]) for r in rows if r["done"]} == {
        (f"websim/{t}-v0", s) for t in ("click-button", "enter-text") for s in range(5)
    }
    assert set(rows[0]) >= {
        "task",
        "seed",
        "goal",
        "observation",
        "action",
        "reward",
        "teacher",
        "compute",
    }
    with path.open("a") as f:
        f.write('{"env": "websim/click-button-v0", "se')  # a kill mid-write
    assert main([*args[:-4], "--episodes", "7", "--out", str(tmp_path)]) == 0
    assert "4 episodes written (10 already there)" in capsys.readouterr().out
    assert len(done_episodes(path)) == 14
    assert all(json.loads(line) for line in path.read_text().splitlines())


def test_bad_trace_requests_are_refused(tmp_path, capsys):
    assert main(["web", "traces", "--tasks", "click-pie", "--out", str(tmp_path)]) == 2
    assert "unknown env id 'websim/click-pie-v0'" in capsys.readouterr().err
    assert main(["web", "traces", "--tasks", "web/click-pie-v1", "--out", str(tmp_path)]) == 2
    assert "no scripted expert for web/click-pie-v1" in capsys.readouterr().err
    with pytest.raises(ValueError, match="needs --url and --model"):
        TeacherSpec("openai").build("click-test", 0)
    base = ["web", "traces", "--tasks", "click-test-2", "--episodes", "1", "--out", str(tmp_path)]
    assert main([*base, "--workers", "-1"]) == 2
    assert "--workers must be in 0..64" in capsys.readouterr().err
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    for url, words in (
        (f"http://127.0.0.1:{closed}/v1", "cannot reach"),
        ("nowhere", "must be an http"),
    ):
        openai = ["--teacher", "openai", "--url", url, "--model", "m"]
        assert main([*base, *openai]) == 2
        err = capsys.readouterr().err
        lines = [line for line in err.splitlines() if line.strip()]
        assert lines[-1].startswith("arena: error:") and words in lines[-1], err
        assert "Traceback" not in err


class _Chat(BaseHTTPRequestHandler):
    """Answers as a chat model would, by asking the scripted expert (and chatting a bit)."""

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _Chat.seen.append(body)
        observation = body["messages"][-1]["content"]
        action = ScriptedTeacher("login-user").act(observation, []).action
        reply = {
            "choices": [{"message": {"content": f"Sure.\n```python\n{action}\n```"}}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 10},
        }
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@contextlib.contextmanager
def chat_teacher():
    """A local OpenAI-compatible teacher answering as :class:`_Chat` does; yields its base URL
    (the requests it got are in ``_Chat.seen``) and shuts it down after."""
    _Chat.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Chat)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/v1"
    finally:
        server.shutdown()
        server.server_close()


def test_openai_teacher_against_a_local_server(tmp_path):
    with chat_teacher() as url:
        spec = TeacherSpec("openai", url=url, model="tiny", temperature=0.5, params=1e6)
        result = write_traces(["websim/login-user-v0"], 3, tmp_path, spec)
    assert result["successes"] == 3
    rows = [json.loads(line) for line in (tmp_path / "traces.jsonl").read_text().splitlines()]
    assert rows[0]["teacher"] == "openai:tiny"
    assert rows[0]["compute"] == {
        "prompt_tokens": 100,
        "completion_tokens": 10,
        "flops": 2.0 * 1e6 * 110,
    }
    assert _Chat.seen[0]["model"] == "tiny" and _Chat.seen[0]["temperature"] == 0.5
    with pytest.raises(TeacherError, match="cannot reach the teacher"):
        OpenAITeacher(url, "tiny", timeout_s=2).act("Goal: x", [])
