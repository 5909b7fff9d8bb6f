"""Many HTTP clients at once, for the serve tests."""

from __future__ import annotations

import threading

from serve.client import PolicyClient, ServeError


def concurrently(url: str, clients: int, calls: int, call) -> tuple[dict[int, list], list]:
    """``clients`` threads, each with its own :class:`PolicyClient` on ``url``, make
    ``calls`` calls ``call(client, i)``; returns each client's results and the errors."""
    results: dict[int, list] = {}
    errors: list = []

    def run(i):
        try:
            with PolicyClient(url) as c:
                results[i] = [call(c, i) for _ in range(calls)]
        except (OSError, ServeError) as e:
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results, errors
