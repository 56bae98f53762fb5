"""Run a snippet in a fresh Python process and report which ML frameworks it imported.

Reading and analysing event files must never import TensorFlow, PyTorch or Keras (slow to
import, and absent where only gradcheck is installed): each entry point checks that with
``frameworks_imported_by``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.support.paths import REPO as REPOSITORY

FRAMEWORKS = ("tensorflow", "torch", "keras", "transformers", "lightning", "wandb", "mlflow")


def frameworks_imported_by(code: str) -> list[str]:
    """The modules of ``FRAMEWORKS`` (or their submodules) in ``sys.modules`` after ``code``.

    The test fails, with the child's stderr, if ``code`` raises.
    """
    return modules_imported_by(code, FRAMEWORKS)


def modules_imported_by(code: str, roots: tuple[str, ...]) -> list[str]:
    """The modules under any of the top-level packages ``roots`` in ``sys.modules`` after
    ``code`` ran in a fresh interpreter (the test fails, with its stderr, if ``code`` raises;
    ``code`` that ends the process itself must print the same line, see ``MODULES_LINE``)."""
    script = f"{code}\n{MODULES_LINE.format(roots=roots)}\n"
    env = {**os.environ, "PYTHONPATH": str(REPOSITORY)}
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False, env=env
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.splitlines()[-1])


MODULES_LINE = (
    "import sys; listed = sorted(m for m in sys.modules if m.split('.')[0] in {roots!r}); "
    "import json; print(json.dumps(listed), flush=True)"
)
"""The line that prints the imported modules of ``roots`` (``.format(roots=...)``), listed
before it imports ``json`` itself (a test may ask whether the command did)."""
