"""Twin tasks with larger pages, one module each: ``TASK`` (the MiniWoB++ name), ``MODEL``
(its :class:`envs.web.twin.TwinTask`) and ``EXPERT`` (its scripted teacher policy)."""

import importlib

MODULES = (
    "email_inbox",
    "social_media",
    "search_engine",
    "book_flight",
    "use_autocomplete",
    "navigate_tree",
)


def modules() -> list:
    return [importlib.import_module(f"envs.web.extra.{name}") for name in MODULES]
