"""Twin tasks with larger pages, one module each: ``TASK`` (the MiniWoB++ name), ``MODEL``
(its :class:`envs.web.twin.TwinTask`) and ``EXPERT`` (its scripted teacher policy); a module
modelling several pages (a page and its ``-nodelay`` variant) has ``MODELS`` and ``EXPERTS``
instead, task -> model and task -> expert."""

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


def _each(module, many: str, one: str) -> dict:
    if hasattr(module, many):
        return getattr(module, many)
    return {module.TASK: getattr(module, one)}


def models() -> dict:
    """Task -> twin model, over every module."""
    return {k: v for m in modules() for k, v in _each(m, "MODELS", "MODEL").items()}


def experts() -> dict:
    """Task -> scripted expert, over every module."""
    return {k: v for m in modules() for k, v in _each(m, "EXPERTS", "EXPERT").items()}
