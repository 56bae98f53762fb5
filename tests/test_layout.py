"""The package's layering, as ``ARCHITECTURE.md`` draws it: reading behind one door
(``engine.read``), ``series/`` reaching C through ``series.kernels`` only, ``compare/`` off the
pipeline, byte ranges in a module only the door uses, and no module over 500 lines."""

from __future__ import annotations

import ast
from pathlib import Path

import gradcheck.model

PACKAGE = Path(__file__).resolve().parents[1] / "gradcheck"

MAX_LINES = 500
OVER_MAX_LINES = {"tags.py"}
"""Modules still over :data:`MAX_LINES`: ``tags.py`` (525 lines since issue 35's activation
tags) holds three parts that split cleanly (tag roles, scalar roles, pairing). Drop a name here
once its module is short enough; a module growing past the limit fails here."""


def imported(path: Path) -> set[str]:
    """The ``gradcheck`` modules ``path`` imports (``from gradcheck.x import y``: both
    ``gradcheck.x`` and ``gradcheck.x.y``, which may be a module), at any depth."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {name for name in names if name.startswith("gradcheck")}


def importers(of: str, among: str = "") -> list[str]:
    """The modules under ``gradcheck/among`` that import ``of`` or a module inside it."""
    return [
        str(path.relative_to(PACKAGE))
        for path in sorted((PACKAGE / among).rglob("*.py"))
        if any(name == of or name.startswith(of + ".") for name in imported(path))
    ]


def test_series_never_reaches_into_the_reading_engine() -> None:
    """``series/`` takes records and gives ``RunData``; its C kernels come through
    ``series.kernels`` from ``gradcheck.native``, never through ``engine/``."""
    assert importers("gradcheck.engine", "series") == []
    assert importers("gradcheck.pipeline", "series") == []
    assert importers("gradcheck.native", "series") == ["series/kernels.py"]


def test_compare_takes_runs_from_the_door_not_from_the_pipeline() -> None:
    assert importers("gradcheck.pipeline", "compare") == []
    assert importers("gradcheck.engine", "compare") == []


def test_byte_ranges_are_used_by_the_door_alone() -> None:
    """``engine.ranges`` can be deleted by editing ``engine.read`` only (files are then read
    whole): nothing else in the package imports it."""
    assert importers("gradcheck.engine.ranges") == ["engine/read.py"]


def test_the_pipeline_and_the_verdicts_schedule_no_reading() -> None:
    """Outside ``engine/`` nothing drives the C scanner, cuts byte ranges or joins them:
    ``engine.read`` chooses. ``inspect`` alone asks whether the scanner is there, to count
    values with ``engine.census`` or the reference reader's records."""
    outside = {
        module: [path for path in importers(module) if not path.startswith("engine/")]
        for module in (
            "gradcheck.engine.fastpath",
            "gradcheck.engine.ranges",
            "gradcheck.engine.join",
        )
    }
    assert outside == {
        "gradcheck.engine.fastpath": ["inspect.py"],
        "gradcheck.engine.ranges": [],
        "gradcheck.engine.join": [],
    }


def test_no_module_is_over_500_lines() -> None:
    long = {
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if len(path.read_text().splitlines()) > MAX_LINES
    }
    assert long == OVER_MAX_LINES


def test_the_model_lists_every_public_name() -> None:
    """``gradcheck.model`` re-exports the records (``events.records``) and ``RunData``
    (``series.data``): its ``__all__`` names each public name it imports or defines."""
    source = ast.parse((PACKAGE / "model.py").read_text())
    public: set[str] = set()
    for node in source.body:
        if isinstance(node, ast.ImportFrom) and node.module in MODEL_SOURCES:
            public.update(alias.asname or alias.name for alias in node.names)
        elif isinstance(node, ast.ClassDef):
            public.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            public.update(target.id for target in targets if isinstance(target, ast.Name))
    public = {name for name in public if not name.startswith("_")}
    assert sorted(gradcheck.model.__all__) == sorted(public)


MODEL_SOURCES = ("gradcheck.events.records", "gradcheck.series.data", "gradcheck.verdicts.registry")
