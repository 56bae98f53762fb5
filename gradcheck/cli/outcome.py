"""Every outcome of a command as an exit status, in one place (:meth:`GradcheckGroup.main`).

A ``GradcheckError`` or a usage error is one line on stderr and status 2, anything else is a
bug (status 3, traceback with ``--debug``); Ctrl-C and SIGTERM end a command as 130 and 143.
"""

from __future__ import annotations

import signal
import sys
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, NoReturn

import click
from click.exceptions import NoArgsIsHelpError

from gradcheck.cli.status import ExitStatus
from gradcheck.errors import GradcheckError
from gradcheck.report.escape import terminal


class GradcheckGroup(click.Group):
    """A click group whose ``main`` maps every outcome to an :class:`ExitStatus`."""

    def main(  # type: ignore[override]
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> NoReturn:
        argv = list(sys.argv[1:] if args is None else args)
        debug = _wants_debug(argv)
        try:
            with warnings.catch_warnings(), _sigterm_as_interrupt():
                if not debug:  # numpy's "All-NaN slice" and the like are noise to a user
                    warnings.simplefilter("ignore", RuntimeWarning)
                result = super().main(
                    argv, prog_name or "gradcheck", complete_var, standalone_mode=False, **extra
                )
            status = int(result) if isinstance(result, int) else ExitStatus.OK
        except Terminated:
            click.echo("gradcheck: terminated", err=True)
            status = ExitStatus.TERMINATED
        except (KeyboardInterrupt, click.Abort):
            click.echo("gradcheck: interrupted", err=True)
            status = ExitStatus.INTERRUPTED
        except Exception as error:  # noqa: BLE001 - the one place every error is mapped
            status = report_error(error, debug)
        sys.exit(status)


class Terminated(BaseException):
    """SIGTERM, raised where the process is, as Ctrl-C raises ``KeyboardInterrupt``: what
    undoes an interrupted step (``except BaseException``: forked readers killed and reaped, a
    half-written report removed) undoes a terminated one too. Not a ``KeyboardInterrupt``,
    which click would turn into ``Abort`` after printing an empty line."""


def _raise_terminated(signum: int, frame: object) -> NoReturn:
    raise Terminated


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM raises :class:`Terminated` while the command runs (main thread only: a
    signal handler cannot be set elsewhere); the previous handler afterwards."""
    try:
        previous = signal.signal(signal.SIGTERM, _raise_terminated)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _wants_debug(argv: Sequence[str]) -> bool:
    """``--debug`` anywhere before ``--``: known even when option parsing itself fails."""
    options = argv[: argv.index("--")] if "--" in argv else argv
    return "--debug" in options


def report_error(error: Exception, debug: bool) -> ExitStatus:
    """Print one line (and with ``debug`` the traceback) for ``error``; its exit status."""
    if debug:
        import traceback  # only here: start-up time otherwise

        traceback.print_exception(type(error), error, error.__traceback__, file=sys.stderr)
    if isinstance(error, NoArgsIsHelpError):  # bare `gradcheck`: the help, as click gives it
        click.echo(error.ctx.get_help(), err=True)
        return ExitStatus.INPUT_ERROR
    if isinstance(error, click.UsageError) and error.ctx is not None:
        hint = f" (see '{error.ctx.command_path} --help')"
        say(f"error: {one_line(error.format_message())}{hint}")
        return ExitStatus.INPUT_ERROR
    if isinstance(error, click.ClickException):
        say(f"error: {one_line(error.format_message())}")
        return ExitStatus.INPUT_ERROR
    if isinstance(error, GradcheckError):
        say(f"error: {one_line(str(error))}")
        return ExitStatus.INPUT_ERROR
    say(
        f"internal error: {type(error).__name__}: {one_line(str(error))} "
        "(this is a bug in gradcheck; rerun with --debug for the traceback and report it)"
    )
    return ExitStatus.INTERNAL_ERROR


def say(message: str) -> None:
    """``gradcheck: message`` on stderr, its names from the logs and the command line shown
    through :func:`~gradcheck.report.escape.terminal` (no escape sequence reaches it)."""
    click.echo(f"gradcheck: {terminal(message)}", err=True)


def one_line(text: str) -> str:
    """``text`` with its lines joined, so that an error is always one line on stderr."""
    return " ".join(part.strip() for part in text.splitlines() if part.strip())
