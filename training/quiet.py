"""Quiet output: a user sees Arena's own progress and results, not the deprecation notes and
hints that Ray, RLlib and torch log or warn (``arena --verbose`` shows them). Arena's own
lines are printed, never logged, so they are unaffected."""

from __future__ import annotations

import logging
import os
import warnings

FLAG = "ARENA_QUIET"


def quiet() -> None:
    """Hides library warnings and log lines below ERROR in this process (``logging.disable``:
    importing Ray resets its loggers' levels, but not this) and, through the environment,
    Python warnings in the Ray workers it starts; :func:`training.runtime.connect` keeps the
    workers' lines from the driver's terminal."""
    os.environ[FLAG] = "1"
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    warnings.simplefilter("ignore")
    logging.disable(logging.WARNING)


def enabled() -> bool:
    return os.environ.get(FLAG) == "1"
