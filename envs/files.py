"""Atomic file writes: the whole file is written under a temporary name beside it and then
renamed over the target, so a reader never sees a half-written file and a crash (or an
exception while writing) leaves the old file, or none, in place.

The temporary name is hidden and unique to the process (``.{name}.{pid}.tmp``), so two
processes writing the same file never write into each other's temporary file. Only a kill
(SIGKILL, power loss) can leave one behind; a folder that is resumed after a kill should
sweep its ``.*.tmp`` files.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def replacing(path: str | os.PathLike) -> Iterator[Path]:
    """Yields a temporary path in ``path``'s folder to write the new file to; on a clean exit
    it is renamed onto ``path`` (``os.replace``, atomic on one filesystem). On an exception
    the temporary file is removed and the exception goes on: ``path`` is never left
    half-written. A writer that insists on a file suffix (``np.savez`` adds ``.npz``) should
    write to an open handle of the temporary path instead."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_atomic(path: str | os.PathLike, text: str) -> None:
    """Writes ``text`` to ``path`` atomically (see :func:`replacing`)."""
    with replacing(path) as tmp:
        tmp.write_text(text)


def write_atomic_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Writes ``data`` to ``path`` atomically (see :func:`replacing`)."""
    with replacing(path) as tmp:
        tmp.write_bytes(data)
