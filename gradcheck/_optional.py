"""Import an optional framework (TensorFlow, torch) or say how to install it.

The reading and analysis path never imports a framework; only the logging helpers do, and a
missing one should give one line with the install command rather than a bare ``ImportError``.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from gradcheck.errors import GradcheckError


class MissingDependencyError(GradcheckError, ImportError):
    """An optional framework is not installed. Also an ``ImportError`` so that
    ``try: import gradcheck.keras`` / ``except ImportError`` keeps working."""


def require(module: str, extra: str, helper: str) -> ModuleType:
    """Import ``module``, or raise :class:`MissingDependencyError` naming the pip extra."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        message = (
            f"{helper} needs {module.split('.')[0]}, which is not installed: "
            f"pip install 'gradcheck[{extra}]'"
        )
        raise MissingDependencyError(message) from error
