"""Quiet output: a user sees Arena's own progress and results, not the deprecation notes and
hints that Ray, RLlib and torch print (``arena --verbose`` shows them)."""

from __future__ import annotations

import logging
import os
import warnings

# Loggers whose INFO and WARNING lines are Ray's business, not the user's.
NOISY = ("ray", "ray.rllib", "ray.tune", "ray.serve", "ray.data", "ray.train")


def quiet() -> None:
    """Hides library warnings in this process and in the Ray workers it starts (they inherit
    the environment: ``PYTHONWARNINGS``); errors still show."""
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    warnings.simplefilter("ignore")
    for name in NOISY:
        logging.getLogger(name).setLevel(logging.ERROR)
