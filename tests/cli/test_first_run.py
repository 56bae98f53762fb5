"""What a new user meets first: bare ``gradcheck``, shell completion, install hints that work,
and the exit statuses at the edges (logs with nothing to judge, damaged files beside good ones,
messages that stay one short line)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner, Result

from gradcheck import cli
from gradcheck._optional import EXTRAS
from gradcheck.cli.status import ExitStatus
from tests.support.paths import REPO

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

MESSAGE_LIMIT = 200
"""A one-line message on stderr stays under this many characters (issue 31)."""


def gradcheck(*args: str, cwd: Path = REPO, **environ: str) -> subprocess.CompletedProcess[str]:
    """The real entry point in a fresh interpreter (``python -m gradcheck``)."""
    return subprocess.run(
        [sys.executable, "-m", "gradcheck", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, **environ},
        timeout=120,
    )


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli.cli, list(args), prog_name="gradcheck", catch_exceptions=False)


# --- bare gradcheck ---------------------------------------------------------------------------


def test_bare_gradcheck_prints_the_whole_help_and_exits_2() -> None:
    """As click does for a group called without a command: the help, on stderr, status 2 (a
    script that lost its arguments fails)."""
    result = gradcheck()
    assert result.returncode == ExitStatus.INPUT_ERROR
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert lines[0] == "Usage: gradcheck [OPTIONS] COMMAND [ARGS]..."
    assert len(lines) > 20 and max(len(line) for line in lines) <= 80
    for heading in ("Commands:", "Exit status:", "  analyze ", "gradcheck analyze LOGDIR"):
        assert any(heading in line for line in lines), heading
    assert "gradcheck: error" not in result.stderr


@pytest.mark.parametrize(
    ("args", "fragment"),
    [(("analyze",), "Missing argument 'PATH...'"), (("bogus",), "No such command 'bogus'")],
)
def test_usage_errors_stay_one_line(args: tuple[str, ...], fragment: str) -> None:
    result = gradcheck(*args)
    assert result.returncode == ExitStatus.INPUT_ERROR
    (line,) = result.stderr.splitlines()
    assert line.startswith("gradcheck: error: ") and fragment in line


# --- shell completion ----------------------------------------------------------------------------


def complete(words: str) -> list[str]:
    """What click's bash completion protocol answers for the command line ``words`` (the last
    word being completed): ``type,value`` lines."""
    parts = words.split(" ")
    result = gradcheck(
        COMP_WORDS=words, COMP_CWORD=str(len(parts) - 1), _GRADCHECK_COMPLETE="bash_complete"
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


@pytest.mark.parametrize(
    "words",
    [
        "gradcheck analyze sample_r",
        "gradcheck analyze sample_runs/torch_clipped sample_s",
        "gradcheck inspect sam",
        "gradcheck watch logs/",
        "gradcheck compare sample_pairs/summed_loss/fit sample_p",
        "gradcheck analyze sample_runs -o repo",
        "gradcheck analyze sample_runs --config pyproj",
    ],
)
def test_paths_are_completed_by_the_shell(words: str) -> None:
    """Where a command takes a path, the answer is click's ``file`` type: the shell's own
    file completion (bash ``compopt -o default``, zsh ``_files``, fish ``__fish_complete_path``)."""
    assert complete(words) == [f"file,{words.split(' ')[-1]}"]


def test_commands_options_and_formats_are_completed() -> None:
    assert complete("gradcheck an") == ["plain,analyze"]
    assert complete("gradcheck analyze --format j") == ["plain,json", "plain,junit"]
    assert complete("gradcheck analyze --report h") == ["plain,html:"]
    assert "plain,--fail-on" in complete("gradcheck analyze --fa")


def test_completion_scripts_are_given_for_each_shell() -> None:
    for shell, marker in (("bash", "complete -o nosort"), ("zsh", "compdef"), ("fish", "complete")):
        result = gradcheck(_GRADCHECK_COMPLETE=f"{shell}_source")
        assert result.returncode == 0 and marker in result.stdout, shell


# --- install hints ----------------------------------------------------------------------------


def test_every_extra_names_the_package_it_installs() -> None:
    """The hints' packages are the extras' own requirements in pyproject.toml."""
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    for extra, package in EXTRAS.items():
        names = [requirement.split(">")[0].split("=")[0] for requirement in extras[extra]]
        assert names == [package], extra
    assert set(EXTRAS) == set(extras) - {"dev", "docs"}


@pytest.mark.parametrize(
    ("module", "args", "expected"),
    [
        (
            "plotly",
            ("analyze", "sample_runs/torch_clipped", "--format", "html"),
            "--format html needs plotly, which is not installed: "
            "pip install plotly (gradcheck's html extra)",
        ),
        (
            "distributed",
            ("analyze", "sample_runs/torch_clipped", "--scheduler", "local:1"),
            "--scheduler needs dask.distributed: "
            "pip install 'dask[distributed]' (gradcheck's dask extra)",
        ),
        (
            "s3fs",
            ("analyze", "s3://bucket/logs"),
            "s3:// needs s3fs: pip install s3fs (gradcheck's s3 extra)",
        ),
        (
            "pyarrow",
            ("export", "sample_runs/torch_clipped", "--format", "parquet"),
            "gradcheck export to parquet needs pyarrow, which is not installed: "
            "pip install pyarrow (gradcheck's parquet extra)",
        ),
    ],
)
def test_a_missing_package_is_named_with_a_command_that_installs_it(
    module: str, args: tuple[str, ...], expected: str, tmp_path: Path
) -> None:
    """``pip install 'gradcheck[html]'`` fails while gradcheck is not on an index: the hint
    names the package itself, then the extra."""
    (tmp_path / f"{module}.py").write_text("raise ImportError('not installed (test)')\n")
    result = gradcheck(*args, PYTHONPATH=f"{tmp_path}{os.pathsep}{REPO}")
    assert result.returncode == ExitStatus.INPUT_ERROR, result.stderr
    (line,) = result.stderr.splitlines()
    assert line == f"gradcheck: error: {expected}"


# --- exit statuses at the edges -----------------------------------------------------------------


def _write_graph_only(path: Path) -> None:
    import torch
    from torch.utils.tensorboard import SummaryWriter

    with SummaryWriter(str(path)) as writer:
        writer.add_graph(torch.nn.Linear(3, 2), torch.zeros(1, 3))


def _write_images_only(path: Path) -> None:
    from tensorboardX import SummaryWriter

    with SummaryWriter(str(path)) as writer:
        for step in range(3):
            writer.add_image("input", np.zeros((3, 8, 8)), step)


def _write_text_only(path: Path) -> None:
    from tensorboardX import SummaryWriter

    with SummaryWriter(str(path)) as writer:
        writer.add_text("notes", "learning rate 0.1", 0)


@pytest.mark.filterwarnings("ignore:`torch.jit.trace:DeprecationWarning")  # add_graph traces
@pytest.mark.parametrize("write", [_write_graph_only, _write_images_only, _write_text_only])
@pytest.mark.parametrize("format_name", ["table", "json", "csv", "github", "junit", "markdown"])
def test_a_readable_log_with_nothing_judgeable_exits_4(
    write: object, format_name: str, tmp_path: Path
) -> None:
    """Graph, images or text only: a valid log whose logging must change (4), as a log of
    scalars only, not unreadable input (2)."""
    run = tmp_path / "run"
    write(run)  # type: ignore[operator]
    result = invoke("analyze", str(run), "--format", format_name)
    assert result.exit_code == ExitStatus.NOTHING_TO_JUDGE, result.output
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"gradcheck: nothing to judge: {run}: no histogram or scalar (")
    assert "graphs, images or text" in line and len(line) - len(str(run)) < MESSAGE_LIMIT


def test_a_damaged_file_beside_a_readable_one_is_a_warning_on_stderr(tmp_path: Path) -> None:
    """The readable run is judged (status 0), the damaged file is said on stderr whatever the
    format, so that a CI log shows it."""
    for name in ("good", "bad"):
        (tmp_path / name).mkdir()
        for source in (REPO / "sample_runs" / "torch_clipped").iterdir():
            (tmp_path / name / source.name).write_bytes(source.read_bytes())
    garbage = np.random.default_rng(0).bytes(5000)
    (tmp_path / "bad" / "events.out.tfevents.1.host").write_bytes(garbage)
    for format_name in ("table", "json", "csv", "markdown", "github", "junit"):
        result = invoke("analyze", str(tmp_path), "--format", format_name)
        assert result.exit_code == ExitStatus.OK, result.output
        (line,) = result.stderr.splitlines()
        assert line.startswith(f"gradcheck: warning: {tmp_path / 'bad'}: events.out.tfevents.1")
        assert "rest of the file lost (5000 bytes)" in line


def test_messages_about_many_runs_name_a_few_and_count_the_rest(tmp_path: Path) -> None:
    from tensorboardX import SummaryWriter

    for index in range(30):
        with SummaryWriter(str(tmp_path / f"a_rather_long_run_name_{index:02}")) as writer:
            for name in ("loss", "accuracy", "val_loss", "val_accuracy", "lr", "epoch", "time"):
                writer.add_scalar(f"{name}_of_a_long_experiment", 1.0, 0)
    nothing = invoke("analyze", str(tmp_path))
    assert nothing.exit_code == ExitStatus.NOTHING_TO_JUDGE
    (line,) = nothing.stderr.splitlines()
    first = tmp_path / "a_rather_long_run_name_00"
    assert "(and 29 more runs)" in line and len(line) - len(str(first)) < MESSAGE_LIMIT, line
    no_run = invoke("analyze", str(tmp_path), "--run", "nothing*")
    (line,) = no_run.stderr.splitlines()
    assert "and 27 more" in line and len(line) - 3 * len(str(first)) < MESSAGE_LIMIT, line
