"""The ``gradcheck`` command: parse options, call the core, format, map the outcome to a status.

The only package that imports click. One module per command (``analyze``, ``inspect``,
``compare``, ``watch``, ``export``: each a ``click.Command`` added to :data:`cli` here); the
options they share in ``options``; what they write (stdout, files, stderr, the progress bar)
in ``output`` (a file written whole or not at all: ``files``); every outcome mapped to an exit
status (``status.ExitStatus``) in one place, ``outcome.GradcheckGroup.main``. A new command is
a module beside these, added to :data:`cli` below.
"""

from __future__ import annotations

import gc
import os
import sys
from contextlib import suppress

import click

from gradcheck import __version__
from gradcheck.cli import analyze, compare, export, inspect, watch
from gradcheck.cli.options import (
    COMPARE_FORMAT_CHOICES,
    FORMAT_CHOICES,
    INSPECT_FORMAT_CHOICES,
    debug_option,
)
from gradcheck.cli.outcome import GradcheckGroup, say
from gradcheck.cli.output import write_whole
from gradcheck.cli.status import ExitStatus

__all__ = [
    "COMPARE_FORMAT_CHOICES",
    "FORMAT_CHOICES",
    "GC_YOUNG_LIMIT",
    "INSPECT_FORMAT_CHOICES",
    "cli",
    "collect_less_often",
    "main",
    "write_whole",
]


@click.group(
    cls=GradcheckGroup,
    # A fixed help width: the docs' command reference is this --help (docs/reference/cli.md).
    context_settings={"help_option_names": ["-h", "--help"], "terminal_width": 80},
    epilog=analyze.EXIT_STATUS_HELP,
)
@click.version_option(__version__, "-V", "--version", prog_name="gradcheck")
@debug_option
def cli() -> None:
    """Find vanishing, exploding, NaN and static gradients and weights in TensorBoard logs.

    Start with: gradcheck analyze LOGDIR (the directory your SummaryWriter or Keras
    TensorBoard callback writes to).
    """


for command in (analyze.analyze, inspect.inspect, compare.compare, watch.watch, export.export):
    cli.add_command(command)


GC_YOUNG_LIMIT = 100_000
"""Container allocations between two collections of the youngest generation (CPython: 700)."""


def collect_less_often() -> None:
    """The cyclic collector's youngest generation collected every ``GC_YOUNG_LIMIT`` container
    allocations, the older ones as they were (the entry point's setting, not the module's).

    At CPython's 700, with every tenth of those collections walking the middle generation, the
    collector took a large share of a big sweep's report (``bench/README.md``): it builds
    millions of dicts, lists and records, none of them cyclic. The few cycles gradcheck makes
    (tracebacks, frames) are collected all the same, less often."""
    gc.set_threshold(GC_YOUNG_LIMIT, *gc.get_threshold()[1:])


def main() -> None:
    """Entry point of the ``gradcheck`` script and ``python -m gradcheck``.

    Once the command is done (its report written, its files closed, any child process joined)
    and stdout and stderr are flushed, the process ends with ``os._exit``: the interpreter's
    teardown (freeing every module and array one by one) is time spent for nothing a user sees
    (``bench/README.md``).
    """
    # numpy is imported later, by the command: its OpenBLAS would start one thread per CPU,
    # which spin CPU time at start-up (bench/README.md) for matrix products gradcheck never
    # makes; a choice the user made in the environment stands. (Set here, not at import: a
    # program that imports this module keeps its environment.)
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    collect_less_often()
    try:
        cli.main(prog_name="gradcheck")
    except SystemExit as done:
        status = _status_of(done)
    else:  # pragma: no cover - GradcheckGroup.main always exits
        status = ExitStatus.OK
    os._exit(_flushed(status))


def _status_of(done: SystemExit) -> int:
    """The exit status ``sys.exit`` would give; a text message is printed, as Python does."""
    if done.code is None or isinstance(done.code, int):
        return done.code or 0
    with suppress(OSError):
        print(done.code, file=sys.stderr)
    return 1


def _flushed(status: int) -> int:
    """Flush stdout and stderr; the exit status then. A reader that went away (``| head``) is
    not an error; a report that cannot be written (a full disk) is an output error (2)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BrokenPipeError:
            pass
        except OSError as error:
            if stream is sys.stdout:
                with suppress(OSError):
                    say(f"error: cannot write the report: {error.strerror or error}")
                    sys.stderr.flush()
                status = ExitStatus.INPUT_ERROR
    return status
