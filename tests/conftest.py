"""Fixtures shared by the tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.library_runs import CALLBACK_NEEDED, LibraryLogs, WriterProcesses
from tests.synthetic_runs import write_run


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``logs/healthy`` and ``logs/exploding``."""
    root = tmp_path_factory.mktemp("logs")
    write_run(root / "healthy", exploding=False)
    write_run(root / "exploding", exploding=True, seed=1)
    return root


@pytest.fixture(scope="session")
def library_logs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LibraryLogs]:
    """The real libraries' logs (tests/library_runs.py), written once per session."""
    logs = LibraryLogs(tmp_path_factory.mktemp("library_logs"))
    yield logs
    logs.stop()


@pytest.fixture(scope="session")
def callback_logs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WriterProcesses]:
    """Trainings with gradcheck.hf's and gradcheck.lightning's callbacks and every logger
    (tests/callback_logs.py), written once per session."""
    logs = WriterProcesses("callback_logs.py", CALLBACK_NEEDED, tmp_path_factory.mktemp("cb"))
    yield logs
    logs.stop()
