"""Import an optional dependency (plotly, TensorFlow, torch...) or say how to install it.

The reading and analysis path never imports a framework; only the logging helpers and some
formats do, and a missing one gives one line with the install command rather than a bare
``ImportError``. The command names the package itself (``pip install plotly``), which works
however gradcheck was installed (from a clone, a wheel or an index), and the extra it belongs
to: ``gradcheck[html]`` installs only where an index serves gradcheck.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from gradcheck.errors import GradcheckError

EXTRAS: dict[str, str] = {
    "html": "plotly",
    "parquet": "pyarrow",
    "dask": "dask[distributed]",
    "s3": "s3fs",
    "gcs": "gcsfs",
    "azure": "adlfs",
    "keras": "tensorflow-cpu",
    "torch": "torch",
    "hf": "transformers",
    "lightning": "lightning",
}
"""Each extra of ``pyproject.toml`` and the package it installs (a test keeps them equal)."""


class MissingDependencyError(GradcheckError, ImportError):
    """An optional dependency is not installed. Also an ``ImportError`` so that
    ``try: import gradcheck.keras`` / ``except ImportError`` keeps working."""


def install_hint(extra: str) -> str:
    """``pip install plotly (gradcheck's html extra)``: the command that installs ``extra``'s
    package wherever gradcheck came from, and the extra's name for a ``pip install`` of
    gradcheck itself."""
    import shlex  # only for a message: start-up time otherwise

    return f"pip install {shlex.quote(EXTRAS[extra])} (gradcheck's {extra} extra)"


def require(module: str, extra: str, helper: str) -> ModuleType:
    """Import ``module``, or raise :class:`MissingDependencyError` naming what to install."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        message = (
            f"{helper} needs {module.split('.')[0]}, which is not installed: {install_hint(extra)}"
        )
        raise MissingDependencyError(message) from error
