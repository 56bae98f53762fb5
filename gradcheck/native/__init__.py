"""The optional C extension ``_scan`` (``_scan.c``; its types in ``_scan.pyi``), and the one
door to it: :func:`extension`.

Each C function has a numpy or Python twin that gives the same results and defines them (the
tests compare the two). The extension is used when it was built, unless ``GRADCHECK_NO_EXT=1``
asks for the twins (to test them, or to rule the extension out). The reading engine
(``gradcheck.engine``) and the series kernels (``gradcheck.series.kernels``) reach C only
through :func:`extension`.
"""

from __future__ import annotations

import os
from types import ModuleType

try:
    from gradcheck.native import _scan
except ImportError:  # pragma: no cover - the extension was not built
    _scan = None  # type: ignore[assignment]


def extension() -> ModuleType | None:
    """The C extension, or None when it was not built or ``GRADCHECK_NO_EXT=1`` is set."""
    if _scan is None or os.environ.get("GRADCHECK_NO_EXT", "") not in ("", "0"):
        return None
    return _scan


def built() -> bool:
    """Whether the C extension was built and imports, whatever ``GRADCHECK_NO_EXT`` says."""
    return _scan is not None
