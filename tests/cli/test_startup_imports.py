"""What each light command imports (issue 36's start-up): a test of the modules in
``sys.modules`` after the CLI's ``main`` ran in a fresh interpreter, never of a time, so that
a top-level import that brings numpy, rich or the model back into ``--help`` fails here
however loaded the machine. ``bench/startup.py`` measures what these imports cost."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support import source_files as sf
from tests.support.fresh_interpreter import MODULES_LINE, modules_imported_by
from tests.support.paths import REPO

TINY_RUN = REPO / "sample_runs" / "torch_clipped"

THIRD_PARTY = (
    "numpy",
    "pandas",
    "rich",
    "tensorboard",
    "google",  # protobuf (google.protobuf), google-re2's re2 is below
    "re2",
    "plotly",
    "fsspec",
    "dask",
    "tomllib",
    "torch",
    "tensorflow",
    "keras",
)
"""Packages none of the light commands needs (tomllib: no configuration file to parse)."""

CORE = (
    "gradcheck.model",
    "gradcheck.pipeline",
    "gradcheck.engine",
    "gradcheck.series",
    "gradcheck.verdicts.detect",
    "gradcheck.tags",
    "gradcheck.report.table",
    "gradcheck.report.json_format",
)
"""gradcheck's own modules that ``--help`` and ``--version`` do not need: the data model (its
dataclasses take longer to create than click takes to import), the reading and judging,
the formatters."""


def imported_by_cli(tmp_path: Path, *args: str, roots: tuple[str, ...]) -> list[str]:
    """The modules under ``roots`` imported by ``gradcheck ARGS`` (the entry point, in a
    fresh interpreter, run from ``tmp_path``: no project's pyproject.toml to read), listed
    as the process ends (``main`` ends it with ``os._exit``); its status must be 0."""
    exit_line = MODULES_LINE.format(roots=roots)
    code = (
        "import os, sys\n"
        f"os.chdir({str(tmp_path)!r})\n"
        "import gradcheck.cli\n"
        "real_exit = os._exit\n"
        "def listed_exit(status):\n"
        f"    {exit_line}\n"
        "    real_exit(3 if status else 0)\n"
        "os._exit = listed_exit\n"
        f"sys.argv = ['gradcheck', *{list(args)!r}]\n"
        "gradcheck.cli.main()\n"
    )
    return modules_imported_by(code, roots)


def _under(modules: list[str], prefixes: tuple[str, ...]) -> list[str]:
    return [m for m in modules if any(m == p or m.startswith(p + ".") for p in prefixes)]


@pytest.mark.parametrize(
    "args", [("--help",), ("--version",), ("analyze", "--help"), ("export", "--help")]
)
def test_help_and_version_import_no_numpy_rich_protobuf_nor_the_model(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    imported = imported_by_cli(tmp_path, *args, roots=(*THIRD_PARTY, "gradcheck"))
    assert _under(imported, THIRD_PARTY) == []
    assert _under(imported, CORE) == []
    assert "gradcheck.cli" in imported  # the listing sees the CLI's own modules


def test_a_json_analysis_imports_numpy_but_not_rich_protobuf_pandas_or_html(
    tmp_path: Path,
) -> None:
    args = ("analyze", str(TINY_RUN), "--format", "json", "--fail-on", "none", "--no-progress")
    imported = imported_by_cli(tmp_path, *args, roots=(*THIRD_PARTY, "gradcheck"))
    assert {m.split(".")[0] for m in _under(imported, THIRD_PARTY)} == {"numpy"}
    assert "gradcheck.report.json_format" in imported
    assert _under(imported, ("gradcheck.report.table", "gradcheck.report.html")) == []


def test_the_table_imports_rich_but_not_the_other_formats(tmp_path: Path) -> None:
    args = ("analyze", str(TINY_RUN), "--fail-on", "none", "--no-progress")
    imported = imported_by_cli(tmp_path, *args, roots=(*THIRD_PARTY, "gradcheck"))
    assert {m.split(".")[0] for m in _under(imported, THIRD_PARTY)} == {"numpy", "rich"}
    others = ("json_format", "html", "html_charts", "markdown", "csv", "github", "junit")
    assert _under(imported, tuple(f"gradcheck.report.{name}" for name in others)) == []


WHEN_FOUND = ("csv", "json", "shlex", "gradcheck.sources.wandb_framing")
"""What only another log format's files need (a Lightning ``metrics.csv``, an HF Trainer's
``trainer_state.json``, a W&B ``.wandb`` file) or an error message (shlex: an install hint):
discovery asks every format about every directory, but a run of event files needs none."""

SWEEP = ("gradcheck.verdicts.sweep", "gradcheck.verdicts.run_names", "gradcheck.report.sweep_view")
"""The sweep's modules: imported for two runs or more (one run is no sweep)."""


@pytest.mark.parametrize("fmt", ["table", "json"])
def test_one_run_of_event_files_imports_no_other_formats_parser_nor_the_sweep(
    tmp_path: Path, fmt: str
) -> None:
    args = ("analyze", str(TINY_RUN), "--format", fmt, "--fail-on", "none", "--no-progress")
    imported = imported_by_cli(tmp_path, *args, roots=("csv", "json", "shlex", "gradcheck"))
    unneeded = WHEN_FOUND if fmt == "table" else tuple(m for m in WHEN_FOUND if m != "json")
    assert _under(imported, (*unneeded, *SWEEP)) == []
    assert "gradcheck.sources.lightning_csv" in imported  # asked, as every format is


def test_a_lightning_metrics_csv_brings_the_csv_module(tmp_path: Path) -> None:
    """The other side of the test above: found, a format's parser is imported as it reads."""
    logs = tmp_path / "lightning_logs" / "version_0"
    columns = ["step", "grad_2.0_norm/fc.weight", "train_loss"]
    sf.metrics_csv(logs / "metrics.csv", columns, [[0, 0.5, 2.0], [1, 0.4, 1.9]])
    args = ("analyze", str(tmp_path), "--format", "json", "--fail-on", "none", "--no-progress")
    imported = imported_by_cli(tmp_path, *args, roots=("csv", "gradcheck"))
    assert "csv" in imported and "gradcheck.verdicts.sweep" not in imported


def test_inspect_json_imports_no_rich(tmp_path: Path) -> None:
    imported = imported_by_cli(
        tmp_path, "inspect", str(TINY_RUN), "--format", "json", roots=("rich", "gradcheck")
    )
    assert _under(imported, ("rich", "gradcheck.report.table", "gradcheck.verdicts.detect")) == []
    assert "gradcheck.report.inspect_view" in imported


MEDIANS_TAKEN = (
    ("gradcheck.verdicts.rules.diverging", "row_medians"),  # the loss's running medians
    ("gradcheck.verdicts.onset", "row_medians"),  # the level before each step of a departure
    ("gradcheck.verdicts.spikes", "_above_noise"),  # the robust z-score of a loss spike
)
"""Where analysis takes the medians ``np.median`` used to: each must run on ``RUNS15`` for the
test below to guard it."""
RUNS15 = REPO / "tests" / "data" / "runs15"


def test_judging_runs_that_diverge_explode_and_spike_never_imports_numpy_ma(
    tmp_path: Path,
) -> None:
    """``np.median`` imports ``numpy.ma`` on its first call (~10 ms); the verdicts take their
    medians with ``verdicts.numeric`` instead."""
    args = ("analyze", str(RUNS15), "--format", "json", "--fail-on", "none", "--no-progress")
    imported = imported_by_cli(tmp_path, *args, "--jobs", "1", roots=("numpy", "gradcheck"))
    assert "numpy" in imported
    assert _under(imported, ("numpy.ma",)) == []


def test_the_committed_runs_take_each_of_those_medians(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib

    from gradcheck.pipeline import analyze

    calls = dict.fromkeys(MEDIANS_TAKEN, 0)

    def counting(place: tuple[str, str], real: Callable[..., object]) -> Callable[..., object]:
        def counted(*args: object, **kwargs: object) -> object:
            calls[place] += 1
            return real(*args, **kwargs)

        return counted

    for place in MEDIANS_TAKEN:
        module = importlib.import_module(place[0])
        monkeypatch.setattr(module, place[1], counting(place, getattr(module, place[1])))
    analyze([str(RUNS15)], jobs=1, charts=False)
    assert all(calls.values()), calls
