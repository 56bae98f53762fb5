"""The options the commands share, declared once: each a decorator, with its completion,
and the settings they give (thresholds and tag rules, storage options, a cluster's workers).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import click
from click.shell_completion import CompletionItem

from gradcheck.report.interface import MIN_WIDTH
from gradcheck.verdicts.gate import DEFAULT_FAIL_ON

if TYPE_CHECKING:
    from gradcheck.engine.pool import Workers
    from gradcheck.tags import TagRules
    from gradcheck.verdicts.config import Config

FORMAT_CHOICES = ("table", "json", "markdown", "csv", "github", "junit", "html")
INSPECT_FORMAT_CHOICES = ("table", "json")
COMPARE_FORMAT_CHOICES = ("table", "json", "markdown", "html")
EXPORT_FORMAT_CHOICES = ("parquet", "csv", "jsonl")
DEFAULT_TOP = 20


def complete_paths(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
    """Shell completion of a path: the shell completes files and directories itself."""
    return [CompletionItem(incomplete, type="file")]


def complete_report(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
    """Shell completion of ``--report FORMAT:FILE``: the formats, each with its colon."""
    return [CompletionItem(f"{name}:") for name in FORMAT_CHOICES if name.startswith(incomplete)]


def debug_option(function: Callable[..., Any]) -> Callable[..., Any]:
    """``--debug``: read by :meth:`GradcheckGroup.main` before parsing; declared for --help."""
    return click.option(
        "--debug", is_flag=True, expose_value=False, help="Show the traceback of an error."
    )(function)


def format_options(
    choices: Sequence[str], document: str
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``--format`` among ``choices`` (default table) and ``--output FILE`` for ``document``."""
    names = ", ".join(choices[:-1]) + f" or {choices[-1]}"

    def decorate(function: Callable[..., Any]) -> Callable[..., Any]:
        function = click.option(
            "--output",
            "-o",
            metavar="FILE",
            shell_complete=complete_paths,
            help=f"Write the {document} to FILE, not stdout.",
        )(function)
        return click.option(
            "--format",
            "format_name",
            type=click.Choice(choices),
            default="table",
            show_default=True,
            metavar="FORMAT",
            help=f"Output format: {names}.",
        )(function)

    return decorate


def width_option(function: Callable[..., Any]) -> Callable[..., Any]:
    """``--width N``: the table's columns (else the terminal's, ``COLUMNS``, or 80)."""
    return click.option(
        "--width",
        type=click.IntRange(min=MIN_WIDTH),
        metavar="N",
        help=f"Lines at most N columns wide (default: the terminal's, else $COLUMNS, else 80;"
        f" at least {MIN_WIDTH}).",
    )(function)


def explain_option(function: Callable[..., Any]) -> Callable[..., Any]:
    """``--explain`` / ``-v``: the evidence behind each finding in the table."""
    return click.option(
        "--explain",
        "-v",
        is_flag=True,
        help="Add the evidence behind each finding, the whole hints and the run's context.",
    )(function)


def clip_option(function: Callable[..., Any]) -> Callable[..., Any]:
    """``--clip``: the global gradient norm and clipping advice of every run."""
    return click.option(
        "--clip",
        is_flag=True,
        help="Show the global gradient norm and clipping advice of every run (default: only"
        " where the run blew up, went NaN or clips in a way worth a word).",
    )(function)


def steps_option(function: Callable[..., Any]) -> Callable[..., Any]:
    """``--steps A:B`` (parsed by :meth:`gradcheck.events.steps.StepWindow.parse`)."""
    return click.option(
        "--steps", metavar="A:B", help="Only steps A to B (inclusive; A: or :B open)."
    )(function)


def config_option(function: Callable[..., Any]) -> Callable[..., Any]:
    """``--config FILE``: thresholds from TOML."""
    return click.option(
        "--config",
        "config_path",
        metavar="FILE",
        shell_complete=complete_paths,
        help="Thresholds from a TOML file (default: [tool.gradcheck] in ./pyproject.toml).",
    )(function)


def pattern_options(function: Callable[..., Any]) -> Callable[..., Any]:
    """``--grad-pattern`` and ``--weight-pattern``: user regexes for tags."""
    function = click.option(
        "--weight-pattern", metavar="RE", help="Regex for weight tags, group (?P<name>)."
    )(function)
    return click.option(
        "--grad-pattern", metavar="RE", help="Regex for gradient tags, group (?P<name>)."
    )(function)


def jobs_options(function: Callable[..., Any]) -> Callable[..., Any]:
    """``--jobs N``, ``--scheduler ADDRESS`` and ``--no-progress``."""
    function = click.option("--no-progress", is_flag=True, help="No progress bar on stderr.")(
        function
    )
    function = click.option(
        "--scheduler",
        metavar="ADDRESS",
        help="Send the work to a Dask cluster: its scheduler's address (tcp://HOST:8786), or"
        " local[:N] for N worker processes on this machine (needs dask[distributed]).",
    )(function)
    return click.option(
        "--jobs",
        "-j",
        type=click.IntRange(min=1),
        metavar="N",
        help="Processes reading event files and judging runs (default: one per CPU, 8 at most;"
        " 1: this one only).",
    )(function)


def storage_option(function: Callable[..., Any]) -> Callable[..., Any]:
    """``--storage-option KEY=VALUE`` (repeatable): fsspec options for URLs, secrets refused
    (:func:`gradcheck.events.storage.parse_storage_options`)."""
    return click.option(
        "--storage-option",
        "storage_options",
        multiple=True,
        metavar="K=V",
        help="An fsspec option for URLs (s3://...), e.g. endpoint_url=URL or anon=true"
        " (repeatable; no secrets).",
    )(function)


def filter_options(function: Callable[..., Any]) -> Callable[..., Any]:
    """``--layer GLOB`` and ``--run GLOB``: which parameters and runs are shown."""
    function = click.option(
        "--run", "run_glob", metavar="GLOB", help="Only runs whose path matches GLOB."
    )(function)
    return click.option(
        "--layer", metavar="GLOB", help="Only parameters whose name or tag matches GLOB."
    )(function)


def view_options(function: Callable[..., Any]) -> Callable[..., Any]:
    """``--explain``, ``--clip``, ``--width``, ``--layer`` and ``--run``, in this order: what a
    report of runs shows."""
    for decorator in (filter_options, width_option, clip_option, explain_option):
        function = decorator(function)
    return function


def storage_kwargs(texts: Sequence[str]) -> dict[str, object] | None:
    """The ``--storage-option`` texts as options (None without any: fsspec is not imported)."""
    if not texts:
        return None
    from gradcheck.events.storage import parse_storage_options

    return parse_storage_options(texts).kwargs()


@dataclass(frozen=True, eq=False)
class Reading:
    """How the runs are read and judged, from :func:`reading_options`: ``--config``, the tag
    patterns, ``--storage-option``, and with a pool ``--jobs``, ``--scheduler`` and
    ``--no-progress``."""

    config_path: str | None
    grad_pattern: str | None
    weight_pattern: str | None
    storage_options: tuple[str, ...]
    jobs: int | None = None
    scheduler: str | None = None
    no_progress: bool = False

    def settings(self) -> tuple[Config, TagRules]:
        """The thresholds and tag rules: options given on the command line win over the file."""
        from gradcheck.tags import TagRules
        from gradcheck.verdicts.config import load_config

        config = load_config(self.config_path)
        rules = TagRules.from_patterns(
            self.grad_pattern or config.grad_pattern, self.weight_pattern or config.weight_pattern
        )
        return config, rules

    def storage(self) -> dict[str, object] | None:
        """The storage options (None without any: fsspec is not imported)."""
        return storage_kwargs(self.storage_options)

    @contextmanager
    def workers(self) -> Iterator[Workers | None]:
        """The Dask cluster's workers with ``--scheduler`` (None: the command's own pool)."""
        if self.scheduler is None:
            yield None
            return
        if self.jobs is not None:
            raise click.UsageError("--jobs and --scheduler: give one (the cluster has its workers)")
        from gradcheck.engine.cluster import connect

        with connect(self.scheduler) as workers:
            yield workers


def fail_on_option(help_text: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``--fail-on LIST``: the verdicts that fail (parsed by ``gate.parse_fail_on``)."""
    return click.option("--fail-on", show_default=DEFAULT_FAIL_ON, metavar="LIST", help=help_text)


def top_option(help_text: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``--top N``: layers with findings listed per run."""
    return click.option(
        "--top",
        type=click.IntRange(min=1),
        default=DEFAULT_TOP,
        show_default=True,
        metavar="N",
        help=help_text,
    )


def reading_options(*, jobs: bool) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``--config``, the tag patterns, ``--jobs``, ``--scheduler`` and ``--no-progress`` (with
    ``jobs``), ``--storage-option`` and ``--debug``, in this order, given to the command as one
    :class:`Reading` (its ``reading`` argument)."""
    decorators = [config_option, pattern_options, *([jobs_options] if jobs else [])]
    decorators += [storage_option, debug_option]

    def decorate(function: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(function)
        def command(
            *args: Any,
            config_path: str | None,
            grad_pattern: str | None,
            weight_pattern: str | None,
            storage_options: tuple[str, ...],
            jobs: int | None = None,
            scheduler: str | None = None,
            no_progress: bool = False,
            **kwargs: Any,
        ) -> Any:
            given = (config_path, grad_pattern, weight_pattern, tuple(storage_options))
            reading = Reading(*given, jobs, scheduler, no_progress)
            return function(*args, reading=reading, **kwargs)

        for decorator in reversed(decorators):
            command = decorator(command)
        return command

    return decorate
