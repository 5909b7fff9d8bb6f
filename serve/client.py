"""A small Python client of the policy server (standard library only, one kept-alive
connection per client; use one client per thread).

    from serve.client import PolicyClient
    client = PolicyClient("http://127.0.0.1:8000")
    client.policies()                                   # what is deployed, with its spaces
    client.act("mappo-simple_spread-v3", {"agent_0": obs0, "agent_1": obs1})
    client.act(name, {"agent_0": obs_batch}, explore=True)   # [n, obs_dim] -> n actions
    client.act("bc-click-test-2-v0", {"agent_0": page_text})  # a language-model agent
    client.chat("bc-click-test-2-v0", [{"role": "user", "content": page_text}])

Observations may be NumPy arrays. A 4xx answer raises :class:`ServeError` with the server's
message.
"""

from __future__ import annotations

import http.client
import json
from typing import Any
from urllib.parse import urlsplit

import numpy as np


class ServeError(RuntimeError):
    """An error answer of the server: ``status`` and the server's message."""

    def __init__(self, status: int, message: str):
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message


def _plain(x: Any) -> Any:
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    return x


class PolicyClient:
    """Args:
    url: the server, ``http://host:port``.
    timeout: seconds per request.
    """

    def __init__(self, url: str = "http://127.0.0.1:8000", timeout: float = 30.0):
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.timeout = timeout
        self._conn: http.client.HTTPConnection | None = None

    def request(self, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
        """One request on the kept-alive connection (reconnects once if the server closed it)."""
        headers = {"Content-Type": "application/json"} if body is not None else {}
        for attempt in (0, 1):
            if self._conn is None:
                self._conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
            try:
                self._conn.request(method, path, body=body, headers=headers)
                resp = self._conn.getresponse()
                return resp.status, resp.read()
            except (ConnectionError, http.client.HTTPException):
                self.close()
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def _json(self, method: str, path: str, payload: Any = None) -> Any:
        body = None if payload is None else json.dumps(payload).encode()
        status, data = self.request(method, path, body)
        out = json.loads(data) if data else None
        if status >= 400:
            msg = out.get("error", data.decode()) if isinstance(out, dict) else data.decode()
            raise ServeError(status, msg)
        return out

    def health(self) -> dict:
        return self._json("GET", "/healthz")

    def policies(self) -> list[dict]:
        return self._json("GET", "/v1/policies")["policies"]

    def act(self, name: str, observations: dict[str, Any], explore: bool = False) -> dict:
        """Actions per agent for ``observations`` (agent -> one observation or a batch)."""
        payload = {"observations": _plain(observations), "explore": explore}
        return self._json("POST", f"/v1/policies/{name}/act", payload)["actions"]

    def chat(
        self,
        model: str,
        messages: list[dict[str, str]],
        temperature: float | None = None,
        max_tokens: int | None = None,
    ) -> dict:
        """OpenAI's chat completion of a language-model policy ``model``: the whole answer
        (the action is ``["choices"][0]["message"]["content"]``, token counts in ``usage``)."""
        options = {"temperature": temperature, "max_tokens": max_tokens}
        payload = {"model": model, "messages": messages}
        payload.update({k: v for k, v in options.items() if v is not None})
        return self._json("POST", "/v1/chat/completions", payload)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> PolicyClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
