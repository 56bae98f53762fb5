"""What every output format implements, and the environment a formatter may consult.

A formatter turns a finished :class:`~gradcheck.model.Report` into text. It never prints, never
exits and never reads the terminal itself: the CLI measures the terminal once into an
:class:`Env` and hands it over, so tests can fake a TTY, a pipe, a width or ``NO_COLOR``.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TextIO

from gradcheck.verdicts.gate import DEFAULT_FAIL_ON, parse_fail_on

if TYPE_CHECKING:  # annotations only: `gradcheck --help` imports this module, not the model
    from gradcheck.model import Comparison, Report, Verdict

DEFAULT_WIDTH = 80
"""Width used when stdout is not a terminal and ``COLUMNS`` is not set: output written to a
file or a pipe is stable."""
MIN_WIDTH = 40
"""The narrowest layout the table formats keep (a verdict, a step, a name and its parameters)."""


@dataclass(frozen=True, eq=False)
class Env:
    """The facts about the terminal that change how output looks."""

    stdout_isatty: bool = False
    stderr_isatty: bool = False
    no_color: bool = False
    width: int = DEFAULT_WIDTH

    @property
    def color(self) -> bool:
        """Colour only on a terminal, and never when ``NO_COLOR`` is set (https://no-color.org)."""
        return self.stdout_isatty and not self.no_color

    @classmethod
    def from_system(
        cls,
        stdout: TextIO,
        stderr: TextIO,
        environ: Mapping[str, str] = os.environ,
        width: int | None = None,
    ) -> Env:
        """Measure the real streams: TTY or not, ``NO_COLOR``, and the width: ``width`` when
        given (``--width``), else the terminal's, else ``COLUMNS``, else 80."""
        stdout_isatty = _isatty(stdout)
        return cls(
            stdout_isatty=stdout_isatty,
            stderr_isatty=_isatty(stderr),
            no_color=bool(environ.get("NO_COLOR")),
            width=max(width if width is not None else _width(stdout_isatty, environ), MIN_WIDTH),
        )


def _width(stdout_isatty: bool, environ: Mapping[str, str]) -> int:
    """The terminal's columns (``COLUMNS`` first, as :func:`shutil.get_terminal_size` reads
    it), else ``COLUMNS`` for a pipe (also below 80), else :data:`DEFAULT_WIDTH`."""
    if stdout_isatty:
        import shutil  # only for a terminal: start-up time otherwise

        return shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns
    columns = environ.get("COLUMNS", "").strip()
    return int(columns) if columns.isdigit() and int(columns) > 0 else DEFAULT_WIDTH


def _isatty(stream: TextIO) -> bool:
    """``stream.isatty()``, False for streams that lack it or are closed."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


@dataclass(frozen=True, eq=False)
class FormatOptions:
    """Choices that shape the formats.

    ``top`` caps the findings listed per run (the table: layer rows; the rest are counted,
    never silently dropped); ``show_all`` lists every parameter one per row, healthy ones too.
    ``explain`` (the table) adds the evidence of every finding, the whole hints and the run's
    context (writers, update sizes, the clipping rule); ``clip`` shows the global gradient norm
    and clipping advice of every run that has them, not only where they apply (a run that blew
    up or went NaN, or a clip worth a word). Machine formats (JSON, CSV) ignore them all: they
    always carry everything. ``fail_on`` is the CI gate's ``--fail-on``: the CI formats
    (github, junit) make its findings errors and failures, the others warnings; Markdown and
    HTML put the runs that fail it first. ``step_summary``: the full Markdown report goes to
    GitHub's job summary (``$GITHUB_STEP_SUMMARY``), which the github format points to.
    """

    env: Env = field(default_factory=Env)
    top: int | None = None
    show_all: bool = False
    fail_on: frozenset[Verdict] = field(default_factory=lambda: parse_fail_on(DEFAULT_FAIL_ON))
    explain: bool = False
    clip: bool = False
    step_summary: bool = False


class Formatter(ABC):
    """Turns a report into the text of one output format."""

    def __init__(self, options: FormatOptions | None = None) -> None:
        self.options = options if options is not None else FormatOptions()

    @abstractmethod
    def format(self, report: Report) -> str:
        """The whole document, ending with a newline."""

    def chunks(self, report: Report) -> Iterator[str]:
        """The document in parts, made as they are written (their concatenation is
        :meth:`format`'s text): a format whose document grows with the runs makes one run's
        part at a time, so that a sweep's whole document is never held at once."""
        yield self.format(report)


class ComparisonFormatter(ABC):
    """Turns a comparison of two runs (``gradcheck compare``) into the text of one format."""

    def __init__(self, options: FormatOptions | None = None) -> None:
        self.options = options if options is not None else FormatOptions()

    @abstractmethod
    def format(self, comparison: Comparison) -> str:
        """The whole document, ending with a newline."""
