"""Fixtures shared by the CLI tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.synthetic_runs import write_run


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``logs/healthy`` and ``logs/exploding``."""
    root = tmp_path_factory.mktemp("logs")
    write_run(root / "healthy", exploding=False)
    write_run(root / "exploding", exploding=True, seed=1)
    return root
