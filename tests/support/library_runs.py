"""The logs the real libraries write (``tests/support/library_logs.py``), started once per
session in three processes side by side (HF; Lightning with its CSV and MLflow loggers; W&B),
and where each run of each format lies in them; the trainings with gradcheck's callbacks
(``tests/support/callback_logs.py``), two processes. The fixtures are in ``conftest.py``."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gradcheck.events.discover import discover
from gradcheck.model import Run
from tests.support.library_logs import LIBRARIES
from tests.support.paths import REPO

NEEDED = {
    "hf": ("transformers", "accelerate"),
    "lightning": ("lightning", "mlflow"),
    "wandb": ("wandb",),
}
CALLBACK_NEEDED = {
    "hf": ("transformers", "accelerate", "mlflow", "wandb"),
    "lightning": ("lightning", "mlflow", "wandb"),
}
"""What ``tests/support/callback_logs.py`` needs for each trainer (it reports to every logger)."""


class WriterProcesses:
    """``python tests/SCRIPT NAME ROOT/NAME`` for each name whose libraries are installed,
    started together; :meth:`root` waits for one and gives its directory."""

    def __init__(self, script: str, needed: dict[str, tuple[str, ...]], root: Path) -> None:
        environment = {**os.environ, "PYTHONPATH": str(REPO)}
        self.needed = needed
        self.roots = {name: root / name for name in needed}
        self.processes = {
            name: subprocess.Popen(
                [sys.executable, str(REPO / "tests" / "support" / script), name, str(path)],
                cwd=root,
                env=environment,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
            )  # fmt: skip
            for name, path in self.roots.items()
            if self.missing(name) is None
        }

    def missing(self, name: str) -> str | None:
        absent = [m for m in self.needed[name] if importlib.util.find_spec(m) is None]
        return ", ".join(absent) or None

    def root(self, name: str) -> Path:
        if (absent := self.missing(name)) is not None:
            pytest.skip(f"{absent} not installed")
        process = self.processes[name]
        output, _ = process.communicate(timeout=600)
        assert process.returncode == 0, output.decode(errors="replace")[-3000:]
        return self.roots[name]

    def stop(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.kill()


class LibraryLogs(WriterProcesses):
    """The three writers of ``tests/support/library_logs.py`` (HF, Lightning, W&B)."""

    def __init__(self, root: Path) -> None:
        assert set(NEEDED) == set(LIBRARIES)
        super().__init__("library_logs.py", NEEDED, root)


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
