"""The one door to storage: every event file is opened here.

Remote logs (``gs://``, ``s3://`` through fsspec) or a file that is still growing can be added
here later without touching the decoder, which only sees a binary stream.
"""

from __future__ import annotations

import os
import stat
from typing import BinaryIO


def open_binary(path: str) -> BinaryIO:
    """Open ``path`` for binary reading."""
    return open(path, "rb", buffering=1 << 20)  # noqa: SIM115 - the caller closes it


def file_size(path: str) -> int:
    """Size of ``path`` in bytes."""
    return os.path.getsize(path)


def file_kind(mode: int) -> str:
    """What a file of ``st_mode`` ``mode`` is, in words: ``a FIFO (named pipe)``, ..."""
    kinds = (
        (stat.S_ISREG, "a regular file"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    )
    return next((name for test, name in kinds if test(mode)), "a special file")
