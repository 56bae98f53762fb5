"""Golden files: a formatter's output compared with ``tests/golden/<name>``."""

from __future__ import annotations

import os

from tests.support.paths import GOLDEN


def check_golden(name: str, text: str) -> None:
    """Compare ``text`` with ``tests/golden/<name>`` (rewrite it when asked to)."""
    path = GOLDEN / name
    if os.environ.get("GRADCHECK_UPDATE_GOLDEN"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8"), (
        f"{path} differs; if the new output is intended, rewrite it with "
        "GRADCHECK_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/report/test_formats.py"
    )
