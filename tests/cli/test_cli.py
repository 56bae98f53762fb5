"""The ``gradcheck`` command through click's CliRunner: every exit status, every format, bad input.

Runs are real event files written with tensorboard's pure-Python record writer (see
``tests/support/eventfiles.py``): a healthy run, and a run whose gradients grow tenfold every
two steps until they are NaN (written the way PyTorch writes a non-finite tensor).
"""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gradcheck import __version__, cli
from gradcheck.cli.status import ExitStatus
from gradcheck.errors import ConfigError
from gradcheck.events.steps import StepWindow
from gradcheck.report.interface import Env
from gradcheck.verdicts.gate import failing_layers, parse_fail_on
from tests.support import eventfiles as ef
from tests.support.cli import assert_one_line_error, invoke
from tests.support.fresh_interpreter import (
    MODULES_LINE,
    frameworks_imported_by,
    modules_imported_by,
)
from tests.support.handmade import clean_report, sample_report
from tests.support.paths import CORPUS_RUNS as CORPUS
from tests.support.paths import REPO, TEST_DATA
from tests.support.synthetic_runs import BLOW_UP, NAN_FROM, PARAMETERS, STEPS

# --- exit statuses on real files --------------------------------------------------------------


def test_healthy_run_exits_0(logs: Path) -> None:
    result = invoke("analyze", str(logs / "healthy"))
    assert result.exit_code == ExitStatus.OK, result.output
    assert str(logs / "healthy") in result.stdout
    assert result.stdout.splitlines()[1:] == [
        "  all healthy: gradients and weights of 3 parameters in 2 layers"
    ]
    assert result.stderr == ""


def test_a_run_with_only_a_global_norm_says_so_not_0_parameters() -> None:
    """The HF Trainer's scalars (a global gradient norm, no per-parameter series): the line says
    what was judged, not "the global gradient norm of 0 parameters" (issue 30)."""
    run = TEST_DATA / "runs15" / "hf_scalars_clipped_healthy"
    result = invoke("analyze", str(run), "--width", "400")  # the header: one line, any path
    assert result.exit_code == ExitStatus.OK, result.output
    assert result.stdout.splitlines()[1] == "  all healthy: the global gradient norm"
    assert "0 parameters" not in result.stdout


def test_exploding_run_exits_1_with_the_nan_first(logs: Path) -> None:
    result = invoke("analyze", str(logs / "exploding"), "--format", "json")
    assert result.exit_code == ExitStatus.FINDINGS
    (run,) = json.loads(result.stdout)["runs"]
    assert {layer["verdict"] for layer in run["layers"]} == {"nan"}
    assert run["steps"] == [0, STEPS - 1]
    first_bad = [layer["first_bad_step"] for layer in run["layers"]]
    assert all(BLOW_UP <= step <= NAN_FROM for step in first_bad), first_bad


@pytest.mark.parametrize(
    ("fail_on", "status"),
    [("none", ExitStatus.OK), ("static,vanishing", ExitStatus.OK), ("any", ExitStatus.FINDINGS)],
)
def test_fail_on_decides_the_exit_status(logs: Path, fail_on: str, status: int) -> None:
    result = invoke("analyze", str(logs), "--fail-on", fail_on, "--format", "csv")
    assert result.exit_code == status
    # The gate decides the status only: the report is the same whatever --fail-on says.
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    verdicts = sorted((Path(row["run"]).name, row["name"], row["verdict"]) for row in rows)
    assert verdicts == sorted(
        (run, name, "nan" if run == "exploding" else "ok")
        for run in ("exploding", "healthy")
        for name in PARAMETERS
    )
    assert result.stderr == ""


def test_step_window_applies_before_the_verdicts(logs: Path) -> None:
    result = invoke("analyze", str(logs / "exploding"), "--steps", f":{BLOW_UP - 1}")
    assert result.exit_code == ExitStatus.OK, result.output
    assert result.stderr == ""  # no numpy RuntimeWarning leaks to the user
    assert f"steps 0–{BLOW_UP - 1}" in result.stdout


def test_internal_error_exits_3_with_one_line(logs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr("gradcheck.pipeline.analyze", broken)
    result = invoke("analyze", str(logs))
    assert result.exit_code == ExitStatus.INTERNAL_ERROR
    (line,) = result.stderr.splitlines()
    assert line.startswith("gradcheck: internal error: ZeroDivisionError: division by zero")
    assert "--debug" in line
    debug = invoke("analyze", str(logs), "--debug")
    assert debug.exit_code == ExitStatus.INTERNAL_ERROR
    assert "Traceback (most recent call last)" in debug.stderr


# --- formats ----------------------------------------------------------------------------------


def test_every_format_from_the_command_line(logs: Path) -> None:
    outputs = {
        name: invoke("analyze", str(logs), "--format", name, "--fail-on", "none")
        for name in cli.FORMAT_CHOICES
    }
    assert all(result.exit_code == 0 for result in outputs.values())
    document = json.loads(outputs["json"].stdout)
    assert document["schema"] == 1 and document["gradcheck"] == __version__
    assert [run["run"] for run in document["runs"]] == [
        str(logs / "exploding"),
        str(logs / "healthy"),
    ]
    assert all(len(run["layers"]) == len(PARAMETERS) for run in document["runs"])
    rows = list(csv.DictReader(io.StringIO(outputs["csv"].stdout)))
    assert len(rows) == 2 * len(PARAMETERS)
    assert outputs["markdown"].stdout.startswith(f"## gradcheck {__version__}: 2 runs, 3 findings")
    assert "all healthy: gradients and weights of 3 parameters" in outputs["table"].stdout


def test_output_file_leaves_stdout_empty(logs: Path, tmp_path: Path) -> None:
    target = tmp_path / "report.json"
    result = invoke("analyze", str(logs), "--format", "json", "--output", str(target))
    assert result.exit_code == ExitStatus.FINDINGS
    assert result.stdout == ""
    assert json.loads(target.read_text())["schema"] == 1
    assert result.stderr.splitlines() == [
        f"gradcheck: wrote json report to {target}",
        f"gradcheck: {logs / 'exploding'}: 3 parameters failing --fail-on (3 nan): "
        "fc1.weight, fc1.bias, fc2.weight",
    ]


def test_table_is_coloured_only_on_a_terminal_without_no_color(logs: Path) -> None:
    terminal = Env(stdout_isatty=True, width=80)
    assert "\x1b[" in invoke("analyze", str(logs), env=terminal).stdout
    assert "\x1b[" not in invoke("analyze", str(logs)).stdout
    no_color = invoke("analyze", str(logs), NO_COLOR="1")
    assert "\x1b[" not in no_color.stdout
    assert Env.from_system(sys.stdout, sys.stderr, {"NO_COLOR": "1"}).no_color


def test_table_fits_80_columns(logs: Path) -> None:
    result = invoke("analyze", str(logs), "--all", env=Env(width=80))
    assert result.exit_code == ExitStatus.FINDINGS, result.output
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    headings = [i for i, line in enumerate(lines) if line.startswith("  verdict   parameter")]
    layer_rows = [line.split()[:2] for i in headings for line in lines[i + 1 : i + 4]]
    assert sorted(layer_rows) == sorted(
        [verdict, name] for verdict in ("ok", "nan") for name in PARAMETERS
    )  # every layer of both runs is in the table, not cut away to fit


def test_layer_and_run_globs_filter(logs: Path) -> None:
    result = invoke(
        "analyze", str(logs), "--format", "json", "--layer", "fc2*", "--run", "*exploding"
    )
    (run,) = json.loads(result.stdout)["runs"]
    assert run["run"].endswith("exploding")
    assert [layer["name"] for layer in run["layers"]] == ["fc2.weight"]
    assert run["counts"]["nan"] == 1


# --- bad input: exit 2, one line, never a traceback -------------------------------------------


def test_missing_path(tmp_path: Path) -> None:
    assert_one_line_error(invoke("analyze", str(tmp_path / "nope")), "nope", "does not exist")


def test_empty_directory(tmp_path: Path) -> None:
    assert_one_line_error(invoke("analyze", str(tmp_path)), "no event file found")


@pytest.mark.parametrize(
    ("contents", "why"),
    [
        (np.random.default_rng(3).bytes(5000), "no valid TFRecord in 1 event file"),
        (b"", "1 event file, empty (0 bytes)"),
    ],
    ids=["random-bytes-named-like-an-event-file", "zero-byte-event-file"],
)
def test_unreadable_event_file(tmp_path: Path, contents: bytes, why: str) -> None:
    (tmp_path / "events.out.tfevents.1700000000.host").write_bytes(contents)
    assert_one_line_error(
        invoke("analyze", str(tmp_path)),
        "no TensorBoard records could be read from",
        f"read from {tmp_path}: {why}",
    )


def test_only_non_summary_events_are_nothing_to_judge(tmp_path: Path) -> None:
    """A readable log of a graph only is a log with nothing to judge (4), as one of scalars
    only is, not an input error (2): the file is fine, the logging is what to change."""
    ef.write_events(tmp_path / "events.out.tfevents.1", [ef.file_version(), ef.graph()])
    result = invoke("analyze", str(tmp_path))
    assert result.exit_code == ExitStatus.NOTHING_TO_JUDGE, result.output
    assert "nothing to judge: no histogram or scalar (2 events: graphs" in result.stdout
    (line,) = result.stderr.splitlines()
    assert line.startswith("gradcheck: nothing to judge: ") and "gradcheck.torch" in line
    compared = invoke("compare", str(tmp_path), str(tmp_path))  # nothing to compare: an error
    assert_one_line_error(compared, "no TensorBoard records", "no histogram or scalar")


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (("--format", "xml"), ("--format", "xml")),
        (("--fail-on", "exploding,lava"), ("--fail-on", "lava")),
        (("--steps", "ten:20"), ("--steps", "ten")),
        (("--steps", "20:10"), ("--steps",)),
        (("--top", "0"), ("--top",)),
        (("--grad-pattern", "(unclosed"), ("(unclosed",)),
        (("--run", "nothing*"), ("nothing*",)),
        (("--layer", "nothing*"), ("nothing*",)),
        (("--bogus",), ("--bogus",)),
    ],
)
def test_bad_options(logs: Path, args: tuple[str, ...], fragments: tuple[str, ...]) -> None:
    assert_one_line_error(invoke("analyze", str(logs), *args), *fragments)


def test_missing_config_file(logs: Path, tmp_path: Path) -> None:
    result = invoke("analyze", str(logs), "--config", str(tmp_path / "missing.toml"))
    assert_one_line_error(result, "missing.toml")


def test_unwritable_output(logs: Path, tmp_path: Path) -> None:
    result = invoke("analyze", str(logs), "--output", str(tmp_path / "no" / "such" / "dir.txt"))
    assert_one_line_error(result, "cannot write")


def test_no_path_is_a_usage_error() -> None:
    assert_one_line_error(invoke("analyze"), "PATH")


def test_damaged_file_is_a_warning_not_a_failure(logs: Path, tmp_path: Path) -> None:
    source = logs / "healthy" / "events.out.tfevents.1700000000.host.1.0"
    damaged = tmp_path / "run" / source.name
    damaged.parent.mkdir()
    damaged.write_bytes(source.read_bytes()[:-100])  # training still writing the last record
    result = invoke("analyze", str(damaged.parent), "--format", "json")
    assert result.exit_code == ExitStatus.OK, result.output
    (run,) = json.loads(result.stdout)["runs"]
    assert len(run["layers"]) == len(PARAMETERS)
    assert any("byte" in warning for warning in run["warnings"]), run["warnings"]
    (in_json,) = run["warnings"]
    assert in_json.startswith(f"{source.name}: incomplete final record, at byte ")
    assert {layer["verdict"] for layer in run["layers"]} == {"ok"}
    assert run["steps"] == [0, STEPS - 2]  # the cut record is the last step's
    as_csv = invoke("analyze", str(damaged.parent), "--format", "csv")
    assert as_csv.exit_code == ExitStatus.OK
    (warning,) = as_csv.stderr.splitlines()  # CSV has no room for warnings: stderr has them
    assert warning.startswith("gradcheck: warning: ") and "byte" in warning
    assert warning == f"gradcheck: warning: {damaged.parent}: {in_json}"  # JSON's words
    for format_name in ("json", "table", "markdown", "github", "junit"):
        result = invoke("analyze", str(damaged.parent), "--format", format_name)
        assert result.stderr.splitlines() == [warning], format_name  # stderr in every format


# --- the command itself -----------------------------------------------------------------------


def test_version_and_help() -> None:
    assert invoke("--version").stdout == f"gradcheck, version {__version__}\n"
    help_text = invoke("analyze", "--help").stdout
    for option in ("--format", "--fail-on", "--top", "--all", "--steps", "--no-progress"):
        assert option in help_text
    assert "Exit status:" in help_text and "3  internal error" in help_text
    assert "inspect" in invoke("--help").stdout


def test_python_dash_m_gradcheck() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "gradcheck", "--version"],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert result.returncode == 0 and result.stdout.strip() == f"gradcheck, version {__version__}"


# --- the small cores behind the options -------------------------------------------------------


def test_parse_fail_on() -> None:
    assert parse_fail_on("nan,exploding") == {"nan", "exploding"}
    assert parse_fail_on(" NaN , static ") == {"nan", "static"}
    assert parse_fail_on("any") == {
        "nan", "exploding", "diverging", "vanishing", "dead", "saturated", "static", "slow",
        "overflow",
    }  # fmt: skip
    assert parse_fail_on("none") == frozenset()
    for bad in ("ok", "", "any,nan", "explode"):
        with pytest.raises(ConfigError):
            parse_fail_on(bad)


def test_failing_layers_uses_every_flag() -> None:
    report = sample_report()
    assert [layer.name for layer in failing_layers(report, frozenset({"exploding"}))] == [
        "fc1.weight",  # verdict nan, also flagged exploding
        "fc2.weight",
    ]
    assert failing_layers(clean_report(), parse_fail_on("any")) == []


def test_step_window() -> None:
    assert StepWindow.parse("100:500") == StepWindow(100, 500)
    assert StepWindow.parse(":5") == StepWindow(None, 5) and StepWindow.parse("5:").first == 5
    assert str(StepWindow(None, 5)) == ":5"
    window = StepWindow.parse("10:20")
    assert [window.contains(step) for step in (9, 10, 20, 21)] == [False, True, True, False]
    for bad in ("10", "a:b", "5:1", "1:2:3"):
        with pytest.raises(ConfigError):
            StepWindow.parse(bad)


# --- gradcheck inspect ------------------------------------------------------------------------


def test_inspect_lists_tags_and_damage(logs: Path, tmp_path: Path) -> None:
    source = logs / "healthy" / "events.out.tfevents.1700000000.host.1.0"
    damaged = tmp_path / "run" / source.name
    damaged.parent.mkdir()
    damaged.write_bytes(source.read_bytes()[:-100])
    result = invoke("inspect", str(damaged.parent))
    assert result.exit_code == ExitStatus.OK, result.output
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    rows = {line.split()[1]: line.split() for line in lines if line.startswith("    ")}
    assert rows["gradients/fc1.weight"][:4] == [
        "gradient",
        "gradients/fc1.weight",
        "histo",
        f"0–{STEPS - 2}",
    ]
    assert rows["weights/fc2.weight"][-1] == "640"  # elements per histogram (10 x 64)
    assert rows["loss"][0] == "scalar"
    assert any(line.strip().startswith("! incomplete final record") for line in lines)


def test_inspect_json(logs: Path) -> None:
    result = invoke("inspect", str(logs), "--format", "json")
    assert result.exit_code == ExitStatus.OK
    document = json.loads(result.stdout)
    assert document["schema"] == 1 and len(document["runs"]) == 2
    (file,) = document["runs"][0]["files"]
    tags = {tag["name"]: tag for tag in file["tags"]}
    assert len(tags) == 2 * len(PARAMETERS) + 1
    assert tags["gradients/fc1.bias"]["count"] == STEPS
    assert tags["gradients/fc1.bias"]["element_counts"] == [64]
    assert file["damages"] == [] and file["records"] == STEPS + 1


def test_inspect_bad_input(tmp_path: Path) -> None:
    assert_one_line_error(invoke("inspect", str(tmp_path / "nope")), "does not exist")
    assert_one_line_error(invoke("inspect", str(tmp_path), "--format", "csv"), "--format")


def test_progress_bar_goes_to_stderr_only_when_it_is_a_terminal(logs: Path) -> None:
    piped = invoke("analyze", str(logs), "--format", "json")
    assert piped.stderr == ""
    terminal = invoke("analyze", str(logs), "--format", "json", env=Env(stderr_isatty=True))
    assert json.loads(terminal.stdout) == json.loads(piped.stdout)  # stdout stays the report
    quiet = invoke(
        "analyze", str(logs), "--no-progress", "--format", "json", env=Env(stderr_isatty=True)
    )
    assert quiet.stderr == ""


def test_analysis_never_imports_tensorflow_or_torch(logs: Path) -> None:
    code = (
        "from click.testing import CliRunner\n"
        "from gradcheck import cli\n"
        f"result = CliRunner().invoke(cli.cli, ['analyze', {str(logs)!r}, '--fail-on', 'none'])\n"
        "assert result.exit_code == 0, result.output\n"
        "assert '3 nan' in result.output and 'all healthy' in result.output, result.output\n"
    )
    assert frameworks_imported_by(code) == []


@pytest.mark.skipif(not CORPUS.is_dir(), reason="../shared/corpus is not on this machine")
@pytest.mark.parametrize("command", ["analyze", "inspect"])
def test_every_corpus_file_gives_a_report_not_a_traceback(command: str) -> None:
    options = ("--fail-on", "none") if command == "analyze" else ()
    result = invoke(command, str(CORPUS), "--format", "json", *options)
    assert result.exit_code == ExitStatus.OK, result.stderr
    runs = json.loads(result.stdout)["runs"]
    assert len(runs) >= 19  # 30 files from 19 projects, some in the same run directory
    if command == "analyze":
        timegan = [run for run in runs if "TimeGAN" in run["run"]]
        assert any(layer["verdict"] == "nan" for run in timegan for layer in run["layers"])


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts threads in /proc")
@pytest.mark.parametrize(("given", "threads"), [(None, 1), ("2", 2)])
def test_the_command_keeps_numpys_blas_to_one_thread_unless_told(
    given: str | None, threads: int
) -> None:
    """OpenBLAS starts a thread per CPU at numpy's import, which spin ~0.1 s of CPU at
    start-up for matrix products gradcheck never makes; the user's own setting stands."""
    if threads > (os.cpu_count() or 1):
        pytest.skip("OpenBLAS starts at most one thread per CPU")
    env = {key: value for key, value in os.environ.items() if key != "OPENBLAS_NUM_THREADS"}
    if given is not None:
        env["OPENBLAS_NUM_THREADS"] = given
    # The entry point itself runs; at its final os._exit numpy is imported and threads counted.
    code = (
        "import os, sys\n"
        "import gradcheck.cli\n"
        "assert os.environ.get('OPENBLAS_NUM_THREADS') == "
        + repr(given)
        + "  # import: no change\n"
        "real_exit = os._exit\n"
        "def counted_exit(status):\n"
        "    import numpy\n"
        "    print(len(os.listdir('/proc/self/task')), flush=True)\n"
        "    real_exit(status)\n"
        "os._exit = counted_exit\n"
        "sys.argv = ['gradcheck', '--version']\n"
        "gradcheck.cli.main()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    assert int(done.stdout.splitlines()[-1]) == threads


def test_the_command_collects_its_youngest_generation_less_often() -> None:
    """A report of many runs allocates millions of containers, none cyclic: the command runs
    with a larger youngest generation than CPython's 700 (a program importing the module
    keeps its own setting)."""
    code = (
        "import gc, os, sys\n"
        "default = gc.get_threshold()\n"
        "import gradcheck.cli\n"
        "assert gc.get_threshold() == default  # import: no change\n"
        "real_exit = os._exit\n"
        "def counted_exit(status):\n"
        "    print(*gc.get_threshold(), *default, flush=True)\n"
        "    real_exit(status)\n"
        "os._exit = counted_exit\n"
        "sys.argv = ['gradcheck', '--version']\n"
        "gradcheck.cli.main()\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    young, middle, old, default_young, default_middle, default_old = map(
        int, done.stdout.split()[-6:]
    )
    assert young == cli.GC_YOUNG_LIMIT >= 100 * default_young
    assert (middle, old) == (default_middle, default_old)


def test_a_small_analysis_imports_no_process_pool() -> None:
    """Logs read and judged in one process (all below ``SPLIT_SIZE``) start no pool: the
    command does not import ``concurrent.futures`` (nor the ``logging`` it brings, ~3 ms of
    start-up together)."""
    roots = ("concurrent", "logging", "multiprocessing")
    exit_line = MODULES_LINE.format(roots=roots)
    code = (
        "import os, sys\n"
        "import gradcheck.cli\n"
        "real_exit = os._exit\n"
        "def listed_exit(status):\n"
        f"    {exit_line}\n"
        "    real_exit(0 if status == 1 else 3)  # the sample runs have findings on purpose\n"
        "os._exit = listed_exit\n"
        f"sys.argv = ['gradcheck', 'analyze', {str(REPO / 'sample_runs')!r}, '--format', 'json']\n"
        "gradcheck.cli.main()\n"
    )
    assert modules_imported_by(code, roots) == []


def _gradcheck_process(*args: str, stdout: int | object = subprocess.PIPE) -> subprocess.Popen:  # type: ignore[type-arg]
    """``python -m gradcheck ARGS`` as a user runs it (the entry point that ends the process
    with ``os._exit`` once its streams are flushed)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, "-m", "gradcheck", *args], stdout=stdout, stderr=subprocess.PIPE, env=env
    )


def test_the_whole_report_reaches_a_pipe_and_the_status_is_kept() -> None:
    process = _gradcheck_process("analyze", str(REPO / "sample_runs"), "--format", "json")
    out, err = process.communicate(timeout=120)
    assert process.returncode == ExitStatus.FINDINGS, err
    report = json.loads(out)
    assert len(report["runs"]) == 7 and err == b""


def test_a_reader_that_goes_away_early_is_no_error() -> None:
    """``gradcheck analyze ... | head``: a report bigger than the pipe's buffer, read 10 bytes."""
    args = ("analyze", str(REPO / "sample_runs"), "--format", "json", "--all", "--fail-on", "none")
    process = _gradcheck_process(*args)
    assert process.stdout is not None and len(process.stdout.read(10)) == 10
    process.stdout.close()  # the pipe breaks: the rest of the report cannot be written
    _, err = process.communicate(timeout=120)
    assert process.returncode == ExitStatus.OK and err == b""


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_report_that_cannot_be_written_is_one_line_and_status_2() -> None:
    with open("/dev/full", "wb") as full:
        process = _gradcheck_process("analyze", str(REPO / "sample_runs"), stdout=full)
        _, err = process.communicate(timeout=120)
    assert process.returncode == ExitStatus.INPUT_ERROR
    assert err.decode().splitlines() == [
        "gradcheck: error: cannot write the report: No space left on device"
    ]


def test_inspect_help_documents_its_own_exit_statuses() -> None:
    text = invoke("inspect", "--help").stdout
    assert "Exit status:" in text and "--fail-on" not in text and "  1  " not in text
    assert "--fail-on" in invoke("analyze", "--help").stdout


def test_shell_completion_offers_the_format_choices() -> None:
    """The README's completion set-up: click answers through ``_GRADCHECK_COMPLETE``."""
    environ = {
        **os.environ,
        "COMP_WORDS": "gradcheck analyze --format ",
        "COMP_CWORD": "3",
        "_GRADCHECK_COMPLETE": "bash_complete",
    }
    done = subprocess.run(
        [sys.executable, "-m", "gradcheck"], env=environ, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [f"plain,{name}" for name in cli.FORMAT_CHOICES]
    environ["_GRADCHECK_COMPLETE"] = "bash_source"
    source = subprocess.run(
        [sys.executable, "-m", "gradcheck"], env=environ, capture_output=True, text=True
    )
    assert "_gradcheck_completion()" in source.stdout


def test_only_the_cli_package_imports_click() -> None:
    """Thin CLI, pure core: below ``gradcheck/cli/`` nothing parses options or exits."""
    package = REPO / "gradcheck"
    importers = [
        str(path.relative_to(package))
        for path in sorted(package.rglob("*.py"))
        if path.parent != package / "cli"
        and any(
            line.startswith(("import click", "from click"))
            for line in (text.strip() for text in path.read_text().splitlines())
        )
    ]
    assert importers == []
    assert any("import click" in path.read_text() for path in (package / "cli").glob("*.py"))
