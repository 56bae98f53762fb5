"""The logs the real libraries write (``tests/library_logs.py``), started once per session in
three processes side by side (HF; Lightning with its CSV and MLflow loggers; W&B), and where
each run of each format lies in them. The ``library_logs`` fixture is in ``conftest.py``."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gradcheck.events.discover import discover
from gradcheck.model import Run
from tests.library_logs import LIBRARIES

REPO = Path(__file__).resolve().parents[1]
NEEDED = {
    "hf": ("transformers", "accelerate"),
    "lightning": ("lightning", "mlflow"),
    "wandb": ("wandb",),
}


def _missing(library: str) -> str | None:
    absent = [name for name in NEEDED[library] if importlib.util.find_spec(name) is None]
    return ", ".join(absent) or None


class LibraryLogs:
    """The three writers, started together; :meth:`root` waits for one."""

    def __init__(self, root: Path) -> None:
        environment = {**os.environ, "PYTHONPATH": str(REPO)}
        self.roots = {library: root / library for library in LIBRARIES}
        self.processes = {
            library: subprocess.Popen(
                [sys.executable, str(REPO / "tests" / "library_logs.py"), library, str(path)],
                cwd=root,
                env=environment,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
            )  # fmt: skip
            for library, path in self.roots.items()
            if _missing(library) is None
        }

    def root(self, library: str) -> Path:
        if (absent := _missing(library)) is not None:
            pytest.skip(f"{absent} not installed")
        process = self.processes[library]
        output, _ = process.communicate(timeout=600)
        assert process.returncode == 0, output.decode(errors="replace")[-3000:]
        return self.roots[library]


FORMATS = ("hf-trainer", "lightning-csv", "mlflow-files", "mlflow-sqlite", "wandb")


def run_path(logs: LibraryLogs, source: str, kind: str) -> Path:
    """The directory (or database) holding one run of ``source``."""
    if source == "hf-trainer":
        return logs.root("hf") / kind
    if source == "lightning-csv":
        return logs.root("lightning") / "csv" / kind
    if source == "mlflow-files":
        return logs.root("lightning") / "mlflow" / "files"
    if source == "mlflow-sqlite":
        return logs.root("lightning") / "mlflow" / "sqlite"
    return logs.root("wandb") / kind


def the_run(logs: LibraryLogs, source: str, kind: str) -> Run:
    runs = discover([str(run_path(logs, source, kind))])
    if source.startswith("mlflow"):  # one store holds the four runs, named by their kinds
        runs = [run for run in runs if run.path.endswith(os.sep + kind)]
    (run,) = runs
    assert run.format == source
    return run
