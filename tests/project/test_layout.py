"""The package's layering, as ``ARCHITECTURE.md`` draws it: reading behind one door
(``engine.read``), ``series/`` reaching C through ``series.kernels`` only, ``compare/`` off the
pipeline, byte ranges in a module only the door uses, and no module over 500 lines; the tests
laid out like the package, sharing through ``tests/support`` and ``conftest.py`` only."""

from __future__ import annotations

import ast
from pathlib import Path

import gradcheck.model
from tests.conftest import TWIN_MODULES
from tests.support.paths import REPO, TESTS

PACKAGE = REPO / "gradcheck"

MAX_LINES = 500
OVER_MAX_LINES = {"verdicts/detect.py", "tags.py"}
"""Modules still over :data:`MAX_LINES`: ``verdicts/detect.py`` is split by the verdict
registry (issue 33, step 3); ``tags.py`` (525 lines since issue 35's activation tags) holds
three parts that split cleanly (tag roles, scalar roles, pairing). Drop a name here once its
module is short enough; a module growing past the limit fails here."""


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


MODEL_SOURCES = ("gradcheck.events.records", "gradcheck.series.data")


# --- the tests' own layout ---------------------------------------------------------------------

TEST_FOLDERS = {
    "events", "series", "verdicts", "verdicts/real", "engine", "sources", "export", "compare",
    "report", "cli", "helpers", "project",
}  # fmt: skip
"""Where test files go: a folder per stage of the package (``verdicts/real``: verdicts on runs
trained here), ``helpers`` for the trainers' callbacks, ``project`` for the docs, this layout,
the bench guard, the Action and start-up. What tests share lives in ``tests/support``."""


def every_test_file() -> list[Path]:
    return sorted(TESTS.rglob("test_*.py"))


def test_no_test_file_imports_another_test_file() -> None:
    """Tests share through ``tests/support`` (and ``conftest.py`` fixtures): a test module
    imported by another runs its module-level code twice and ties the two files' layouts."""
    offenders = []
    for path in [
        *every_test_file(),
        *TESTS.glob("support/*.py"),
        REPO / "scripts" / "fuzz_reader.py",
    ]:
        for node in ast.walk(ast.parse(path.read_text())):
            modules = []
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                modules = [node.module or ""] + [alias.name for alias in node.names]
            if any(part.startswith("test_") for name in modules for part in name.split(".")):
                offenders.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert offenders == []


def test_every_test_file_sits_in_its_folder() -> None:
    """No test file at the top of ``tests/``; each folder is a package (test files may then
    share a name across folders), and no folder outside :data:`TEST_FOLDERS` holds tests."""
    folders = {str(path.parent.relative_to(TESTS)) for path in every_test_file()}
    assert folders == TEST_FOLDERS
    packages = {TESTS, *(TESTS / folder for folder in TEST_FOLDERS), TESTS / "support"}
    assert [p for p in sorted(packages) if not (p / "__init__.py").is_file()] == []


def test_every_twin_module_is_a_test_file() -> None:
    """``conftest.TWIN_MODULES`` names test files by their name: a file renamed or gone would
    drop out of CI's ``GRADCHECK_NO_EXT=1`` run silently."""
    missing = TWIN_MODULES - {path.stem for path in every_test_file()}
    assert missing == set()
