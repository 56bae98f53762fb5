"""gradcheck: which layers of a training run have vanishing, exploding, NaN or static gradients.

Public API:

- ``gradcheck.read(path)``: every typed record (histograms, scalars, damage, notices) in the
  event files under ``path``.
- ``gradcheck.frame(path)``: the same as a long-format pandas DataFrame.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

__all__ = ["__version__", "frame", "read"]


def __getattr__(name: str) -> Any:
    # Imported lazily so that ``gradcheck --version`` and the logging helpers stay light.
    if name in ("read", "frame"):
        from gradcheck import api

        return getattr(api, name)
    raise AttributeError(f"module 'gradcheck' has no attribute {name!r}")
