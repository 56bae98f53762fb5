"""The ``gradcheck`` command run in-process (click's CliRunner), and its one-line errors."""

from __future__ import annotations

from click.testing import CliRunner, Result

from gradcheck import cli
from gradcheck.cli.status import ExitStatus
from gradcheck.report.interface import Env


def invoke(*args: str, env: Env | None = None, **environ: str) -> Result:
    """Run ``gradcheck args...`` in-process, stdout and stderr kept apart."""
    return CliRunner().invoke(
        cli.cli,
        list(args),
        prog_name="gradcheck",
        obj=env,
        env=environ or None,
        catch_exceptions=False,
    )


def assert_one_line_error(result: Result, *fragments: str) -> None:
    """Exit status 2, nothing on stdout, one ``gradcheck: error:`` line naming ``fragments``."""
    assert result.exit_code == ExitStatus.INPUT_ERROR, result.output
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("gradcheck: error: ")
    for fragment in fragments:
        assert fragment in lines[0]
