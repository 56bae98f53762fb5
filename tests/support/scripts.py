"""The repository's ``scripts/`` as modules, for tests that train real runs with them."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

from tests.support.paths import REPO

SCRIPTS = REPO / "scripts"


def load_script(name: str) -> ModuleType:
    """``scripts/<name>.py`` imported as module ``name`` (registered in ``sys.modules``, so
    that its dataclasses and pickles resolve)."""
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
