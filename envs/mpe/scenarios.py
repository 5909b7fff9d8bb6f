"""mpe2's ``parallel_env`` of each scenario, as attributes ``<scenario>_v<N>``, imported on
first access (mpe2 imports pygame and friends; listing the ids should not)."""

import functools
import importlib
import inspect


@functools.cache
def __getattr__(name: str):
    if name.startswith("__"):
        raise AttributeError(name)
    module = importlib.import_module(f"mpe2.{name}")
    make = module.parallel_env
    # mpe2's parallel_env takes **kwargs; its raw_env's signature says which are allowed.
    make.__signature__ = inspect.signature(module.raw_env)
    return make
