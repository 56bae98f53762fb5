"""Write a file whole or not at all: what the reports and the export write through.

A document written straight into its file leaves it truncated when the disk fills up, the
command is interrupted or a part of it cannot be made; written to a temporary file beside it,
flushed to disk and renamed over it, the file holds either what it held before or the whole
new document.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import BinaryIO


@contextmanager
def replacing(path: str) -> Iterator[BinaryIO]:
    """A binary stream whose bytes replace ``path`` when the block ends without an
    exception (atomic rename from a temporary file in the same folder, with ``path``'s
    permissions, or a new file's); an exception leaves ``path`` as it was. Through a symlink,
    what it points at is replaced. A device or a FIFO (``/dev/stdout``) is written directly:
    it has no file to leave half-written."""
    target = os.path.realpath(path)
    try:
        mode: int | None = os.stat(target).st_mode
    except FileNotFoundError:
        mode = None
    if mode is not None and not stat.S_ISREG(mode):
        with open(target, "wb") as stream:
            yield stream
        return
    folder, name = os.path.split(target)
    temporary = os.path.join(folder, f".{name}.{os.getpid()}-{os.urandom(4).hex()}.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with open(descriptor, "wb") as stream:
            yield stream
            stream.flush()
            os.fsync(descriptor)  # a delayed write error (full disk) shows here, not later
        os.chmod(temporary, stat.S_IMODE(mode) if mode is not None else new_file_mode())
        os.replace(temporary, target)
    except BaseException:
        with suppress(OSError):
            os.unlink(temporary)
        raise


def new_file_mode() -> int:
    """The permissions ``open(path, "w")`` gives a new file: 0o666 less the umask."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask
