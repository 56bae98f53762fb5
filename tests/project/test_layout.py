"""The package's layering, as ``ARCHITECTURE.md`` draws it: reading behind one door
(``engine.read``), ``series/`` reaching C through ``series.kernels`` only, ``compare/`` off the
pipeline, byte ranges in a module only the door uses, no module over 500 lines, at most 16
modules at the package's top, every import path the documentation shows importable; the
tests laid out like the package, sharing through ``tests/support`` and ``conftest.py`` only."""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

import gradcheck.model
from gradcheck._optional import MissingDependencyError
from tests.conftest import TWIN_MODULES
from tests.support.paths import REPO, TESTS

PACKAGE = REPO / "gradcheck"

MAX_LINES = 500
OVER_MAX_LINES: set[str] = set()
"""Modules still over :data:`MAX_LINES`: none since ``verdicts/detect.py`` was split by the
verdict registry (issue 33, step 3). A module growing past the limit fails here."""

MAX_TOP_LEVEL_MODULES = 16
"""Modules (``.py`` files) directly in ``gradcheck/``, ``__init__`` and ``__main__`` included;
a package there (``tags/``, ``cli/``) is not one. Issue 33: at most 16."""


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


def test_at_most_16_modules_at_the_packages_top() -> None:
    top = sorted(path.stem for path in PACKAGE.glob("*.py"))
    assert len(top) <= MAX_TOP_LEVEL_MODULES, top


DOCUMENTS = (
    "README.md",
    "docs/**/*.md",
    "action.yml",
    ".github/**/*.py",
    ".github/**/*.yml",
    "pyproject.toml",
)
"""Where users and installers read gradcheck's import paths (``docs/changelog.md`` includes
``CHANGELOG.md``: its history's names are not promised)."""
DOTTED = re.compile(r"\bgradcheck(?:\.[A-Za-z_]\w*)+")
FROM_IMPORT = re.compile(r"^\s*from (gradcheck(?:\.\w+)*) import ([\w, ]+)$", re.MULTILINE)
FILE_NAMES = re.compile(r"\.(?:toml|html|xml|md|fish|json|jsonl|csv|parquet|ya?ml|txt|png|sh)$")
"""``gradcheck.toml``, ``gradcheck.html``: files the docs name, not import paths."""


def documented_paths() -> list[str]:
    """Every ``gradcheck.x.y`` the documents show, and each ``from gradcheck.x import y`` of
    their examples as ``gradcheck.x.y``."""
    found: set[str] = set()
    for pattern in DOCUMENTS:
        for path in REPO.glob(pattern):
            if path.name == "changelog.md":
                continue
            text = path.read_text()
            found.update(name for name in DOTTED.findall(text) if not FILE_NAMES.search(name))
            for module, names in FROM_IMPORT.findall(text):
                found.update(f"{module}.{name.strip()}" for name in names.split(",") if name)
    return sorted(found)


def resolve(dotted: str) -> object:
    """The object ``dotted`` names: its longest importable module, then attributes. A module
    that is not there fails (``ModuleNotFoundError``), as does a missing attribute."""
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        name = ".".join(parts[:end])
        try:
            found: object = importlib.import_module(name)
        except ModuleNotFoundError as error:
            if error.name is not None and name.startswith(error.name):
                continue  # not a module: an attribute of a shorter one
            raise
        for attribute in parts[end:]:
            found = getattr(found, attribute)
        return found
    raise AssertionError(f"{dotted}: no module")


def test_the_documents_show_the_public_paths() -> None:
    """The scan below finds what the README and docs promise (a change of their wording that
    hides them from it fails here rather than leaving them untested)."""
    paths = documented_paths()
    for expected in (
        "gradcheck.hf.GradientLogger",
        "gradcheck.lightning.GradientLogger",
        "gradcheck.torch.log_gradients",
        "gradcheck.keras.GradientLogger",
        "gradcheck.config.load_config",
        "gradcheck.steps.StepWindow",
        "gradcheck.tags.TagRules.from_patterns",
        "gradcheck.pipeline.analyze",
        "gradcheck.model",
        "gradcheck.read",
        "gradcheck.frame",
        "gradcheck.cli",
        "gradcheck.__version__",
    ):
        assert expected in paths


@pytest.mark.parametrize("dotted", documented_paths())
def test_every_documented_import_path_imports(dotted: str) -> None:
    try:
        found = resolve(dotted)
    except MissingDependencyError as missing:  # a helper whose framework is not installed
        pytest.skip(str(missing))
    assert found is not None
    if isinstance(found, ModuleType):
        assert found.__name__ == dotted


def test_the_console_script_and_python_m_gradcheck_start() -> None:
    """``[project.scripts]``'s entry points name functions, and ``python -m gradcheck`` runs."""
    pyproject = (REPO / "pyproject.toml").read_text()
    scripts = re.search(r"^\[project\.scripts\]\n((?:\w+ = .+\n)+)", pyproject, re.MULTILINE)
    assert scripts is not None
    for line in scripts.group(1).splitlines():
        module, _, function = line.split(" = ")[1].strip('"').partition(":")
        assert callable(getattr(importlib.import_module(module), function))
    result = subprocess.run(
        [sys.executable, "-m", "gradcheck", "--version"],
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO,
    )
    assert (result.returncode, result.stdout) == (
        0,
        f"gradcheck, version {gradcheck.__version__}\n",
    )


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
