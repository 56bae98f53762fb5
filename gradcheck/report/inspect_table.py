"""``gradcheck inspect``'s table (rich): per run and file, one row per tag, then damage and
notices. Apart from the JSON listing (``inspect_view``) so that ``--format json`` does not
import rich (``bench/startup.py``)."""

from __future__ import annotations

import dataclasses
import os

from rich.console import Console
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from gradcheck.inspect import FileSummary, InspectReport, RunSummary, TagSummary
from gradcheck.report.escape import each_string, terminal
from gradcheck.report.interface import Env
from gradcheck.report.names import distinct_shortened
from gradcheck.report.numbers import format_steps
from gradcheck.report.table import console_text, hanging, text_console
from gradcheck.report.view import plural

KIND_LABELS = {
    "weight histogram": "weight",
    "gradient histogram": "gradient",
    "activation histogram": "outputs",
    "other histogram": "other",
    "scalar": "scalar",
}
ENCODING_LABELS = {"simple_value": "simple"}


def inspect_table(report: InspectReport, env: Env) -> str:
    """Per run and file: size, records, writer, one row per tag, then damage and notices.

    On a terminal long tag names are shortened to fit its width; written to a pipe or a file
    (``env.stdout_isatty`` false) they are printed whole, for grep and scripts, and lines run
    as long as they need.
    """
    report = each_string(report, terminal)  # names and messages come from the logs
    whole = not env.stdout_isatty
    table_width = env.width  # the columns shown depend on it, not on the names' lengths
    if whole:
        tags = [tag for run in report.runs for file in run.files for tag in file.tags]
        longest = max((len(tag.name) for tag in tags), default=0)
        longest += max((len(tag.parameter or "") for tag in tags), default=0)
        env = dataclasses.replace(env, width=max(env.width, TABLE_FIXED + 4 + longest))
    console = text_console(env)
    for position, run in enumerate(report.runs):
        if position:
            console.print()
        _print_run(console, run, table_width, whole)
    return console_text(console)


def _print_run(console: Console, run: RunSummary, width: int, whole: bool) -> None:
    console.print(Text(run.path, style="bold"))
    summary = f"{plural(len(run.files), 'file')} · steps {format_steps(run.steps)}"
    console.print(Padding(Text(summary), (0, 0, 0, 2)))
    for file in run.files:
        console.print(Padding(Text(_file_line(file)), (0, 0, 0, 2)))
        if file.tags:
            console.print(Padding(_tag_table(file.tags, width - 4, whole), (0, 0, 0, 4)))
        else:
            console.print(Padding(Text("no histogram or scalar", style="dim"), (0, 0, 0, 4)))
        damages = [damage.message for damage in file.damages]
        if damages:
            console.print(Padding(hanging("!", damages, "yellow"), (0, 0, 0, 4)))
    notices = [notice.message for notice in run.notices]
    if notices:
        console.print(Padding(hanging("!", notices, "yellow"), (0, 0, 0, 2)))


def _file_line(file: FileSummary) -> str:
    """``events.out.tfevents... · 1.2 MB · 4,321 records · pytorch``; ``... · not readable``
    for a file that could not be opened (its damage line below says why): not ``0 B``."""
    name = os.path.basename(file.path)
    if file.records == 0 and any(d.kind == "unreadable" and d.offset == 0 for d in file.damages):
        return f"{name} · not readable"
    parts = [name, human_size(file.size), plural(file.records, "record")]
    return " · ".join([*parts, file.writer or "writer unknown"])


WIDE_ENOUGH_FOR_PARAMETER = 110
"""From this width on, the table also shows the parameter name each histogram tag pairs under
(always in ``--format json``)."""


FIXED_COLUMNS = {"kind": 8, "encoding": 8, "steps": 11, "count": 6, "elements": 9}
TABLE_FIXED = sum(FIXED_COLUMNS.values()) + len(FIXED_COLUMNS) + 2
"""Width of the tag table's fixed columns and the spaces between all of them."""


def _tag_table(tags: tuple[TagSummary, ...], width: int, whole: bool = False) -> Table:
    """One row per tag, the tag (and parameter) columns taking what the others leave (with
    ``whole``, as much as the longest name needs)."""
    fixed = FIXED_COLUMNS
    with_parameter = width >= WIDE_ENOUGH_FOR_PARAMETER
    columns = len(fixed) + 1 + with_parameter
    free = width - sum(fixed.values()) - columns
    tag_width = max(12, free // 2 if with_parameter else free)
    if whole:
        tag_width = max(
            [tag_width, *(len(t.name) for t in tags), *(len(t.parameter or "") for t in tags)]
        )
    table = Table(box=None, pad_edge=False, padding=(0, 0, 0, 1), show_edge=False)
    table.add_column("kind", width=fixed["kind"], no_wrap=True)
    table.add_column("tag", width=min(tag_width, max(len(t.name) for t in tags)), overflow="fold")
    if with_parameter:
        longest = max(len(t.parameter or "–") for t in tags)
        table.add_column("parameter", width=min(tag_width, longest), overflow="fold")
    names = distinct_shortened([t.name for t in tags], tag_width)
    owners = distinct_shortened([t.parameter or "–" for t in tags], tag_width)
    table.add_column("encoding", width=fixed["encoding"], no_wrap=True)
    table.add_column("steps", width=fixed["steps"], no_wrap=True)
    table.add_column("count", width=fixed["count"], justify="right", no_wrap=True)
    table.add_column("elements", width=fixed["elements"], justify="right", no_wrap=True)
    for tag, name, owner in zip(tags, names, owners, strict=True):
        cells = [KIND_LABELS[tag.kind], name]
        if with_parameter:
            cells.append(owner)
        cells += [
            ENCODING_LABELS.get(tag.encoding, tag.encoding),
            format_steps((tag.first_step, tag.last_step)),
            str(tag.count),
            _elements(tag.element_counts),
        ]
        table.add_row(*cells)
    return table


def _elements(counts: tuple[int, ...]) -> str:
    """Values per histogram: ``5000``, or ``50/5000/5500`` when a tag collides, ``–`` if none."""
    if not counts:
        return "–"
    text = "/".join(str(count) for count in counts)
    return text if len(text) <= 9 else f"{len(counts)} sizes"


def human_size(size: int) -> str:
    """``812 B``, ``12.3 KB``, ``1.6 MB`` (powers of 1000, as file managers show)."""
    if size < 1000:
        return f"{size} B"
    value = size / 1000
    for unit in ("KB", "MB"):
        if value < 1000:
            return f"{value:.1f} {unit}"
        value /= 1000
    return f"{value:.1f} GB"
