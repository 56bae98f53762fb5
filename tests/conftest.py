"""Fixtures shared by the tests, and the check that CI's C extension was built."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.library_runs import CALLBACK_NEEDED, LibraryLogs, WriterProcesses
from tests.support.synthetic_runs import write_run


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``logs/healthy`` and ``logs/exploding``."""
    root = tmp_path_factory.mktemp("logs")
    write_run(root / "healthy", exploding=False)
    write_run(root / "exploding", exploding=True, seed=1)
    return root


@pytest.fixture(scope="session")
def library_logs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LibraryLogs]:
    """The real libraries' logs (tests/support/library_runs.py), written once per session."""
    logs = LibraryLogs(tmp_path_factory.mktemp("library_logs"))
    yield logs
    logs.stop()


@pytest.fixture(scope="session")
def callback_logs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WriterProcesses]:
    """Trainings with gradcheck.hf's and gradcheck.lightning's callbacks and every logger
    (tests/support/callback_logs.py), written once per session."""
    logs = WriterProcesses("callback_logs.py", CALLBACK_NEEDED, tmp_path_factory.mktemp("cb"))
    yield logs
    logs.stop()


def pytest_sessionstart(session: pytest.Session) -> None:
    """With ``GRADCHECK_REQUIRE_EXT=1`` (CI, ``make dist``) a missing C extension stops the
    run: its twin tests would otherwise skip and the run stay green."""
    from gradcheck import native

    if os.environ.get("GRADCHECK_REQUIRE_EXT") == "1" and not native.built():
        raise pytest.UsageError(
            "GRADCHECK_REQUIRE_EXT=1 but the C extension gradcheck.native._scan did not build"
            " (python setup.py build_ext --inplace shows why)"
        )


TWIN_MODULES = frozenset(
    {
        "test_corpus",
        "test_every_signal",
        "test_inspect",
        "test_pipeline",
        "test_reader",
        "test_runs15_verdicts",
        "test_sample_runs",
        "test_series",
        "test_stats",
        "test_sweep",
        "test_tbparse_agreement",
        "test_thinning",
        "test_watch",
        "test_writer_fixtures",
    }
)
"""Test modules that read logs through the engine, which takes C or its numpy/Python twins:
marked ``twins``, and run again by CI with ``GRADCHECK_NO_EXT=1`` (``pytest -m twins``)."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.stem in TWIN_MODULES:
            item.add_marker(pytest.mark.twins)
