"""The analysis pipeline: paths -> runs -> per-file series -> run verdicts -> Report.

``analyze`` is what ``gradcheck analyze`` runs, and what a notebook can call: runs found
(``events.discover``), read and judged through one door (``engine.read.map_runs``: each run's
parts merged in file order and judged by ``detect.analyze_run``, on every core the work is
worth), then the report. The step window is applied to the records before any statistic, so
verdicts are about that window; the layer glob only filters what is reported.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING

from gradcheck import __version__
from gradcheck.engine.parts import FilePart
from gradcheck.engine.pool import Workers
from gradcheck.engine.read import ProgressCallback, map_runs, read_runs, using
from gradcheck.errors import InputError
from gradcheck.events.discover import discover
from gradcheck.events.steps import StepWindow
from gradcheck.events.storage import NO_OPTIONS, StorageOptions
from gradcheck.model import FileInfo, Report, Run, RunData, RunReport, Sweep
from gradcheck.series.merge import merge
from gradcheck.sources import WRITERS as SOURCE_WRITERS
from gradcheck.tags import DEFAULT_RULES, TagRules
from gradcheck.verdicts.config import DEFAULT_CONFIG, Config
from gradcheck.verdicts.detect import analyze_run

if TYPE_CHECKING:
    from gradcheck.compare.runs import LoadedRun


def analyze(
    paths: Sequence[str],
    *,
    config: Config = DEFAULT_CONFIG,
    rules: TagRules = DEFAULT_RULES,
    layer_glob: str | None = None,
    run_glob: str | None = None,
    steps: StepWindow | None = None,
    progress: ProgressCallback | None = None,
    jobs: int | None = None,
    workers: Workers | None = None,
    sweep: bool | None = None,
    storage_options: Mapping[str, object] | None = None,
    charts: bool = True,
) -> Report:
    """Analyse the event files under ``paths`` and return the report of every run.

    ``jobs``: processes reading files in parallel (None: one per CPU; 1: no pool);
    ``workers``: where the work runs instead (a Dask cluster's, see ``engine.cluster``).
    ``sweep``: whether the report carries the sweep view (None: when the runs look like a
    sweep, :func:`gradcheck.verdicts.sweep.looks_like_sweep`).
    ``storage_options``: fsspec options for URLs (``endpoint_url``, ``anon``...).
    ``charts``: whether each parameter carries its series at every step (``LayerResult.series``
    and ``update_series``, which only the HTML report draws); without them a report is a few
    times cheaper to send back from a worker process (``bench/README.md``, "Worker processes").

    Raises ``InputError`` for a missing path, no event file, no run or parameter matching the
    globs, or when no event can be read at all (exit status 2 in the CLI); event files of
    graphs, images or text only give runs with nothing to judge (``RunReport.judgeable``).
    """
    window = steps if steps is not None else StepWindow()
    storage = StorageOptions.of(storage_options)
    runs = select_runs(discover(paths, storage), run_glob)
    judge = partial(analyze_parts, config=config, rules=rules, charts=charts)
    with using(workers, jobs) as chosen:
        judged = map_runs(runs, window, judge, progress, chosen, storage)
    _check_readable(paths, [part for _, parts in judged for part in parts], window)
    return report_of([report for report, _ in judged], layer_glob, sweep)


def report_of(
    reports: Sequence[RunReport], layer_glob: str | None = None, sweep: bool | None = None
) -> Report:
    """The report on the runs' ``reports``: their parameters matching ``layer_glob``, the
    runs that disagree, the sweep view (``sweep`` as for :func:`analyze`)."""
    shown = tuple(filter_layers(reports, layer_glob))
    return Report(
        version=__version__,
        runs=shown,
        warnings=disagreements(reports),
        sweep=sweep_view(shown, sweep),
    )


def sweep_view(reports: Sequence[RunReport], wanted: bool | None) -> Sweep | None:
    """The sweep of ``reports`` when ``wanted`` (None: when they look like a sweep; one run
    never does, and its analysis does not import the sweep's modules)."""
    if wanted is False or (wanted is None and len(reports) < 2):
        return None
    from gradcheck.verdicts.sweep import looks_like_sweep, summarize

    if wanted is None and not looks_like_sweep(reports):
        return None
    return summarize(reports)


MAX_DISAGREEMENTS = 3
"""Lines about runs that disagree, at most (the rest are counted)."""


def disagreements(reports: Sequence[RunReport]) -> tuple[str, ...]:
    """A line for each pair of runs that look like one training logged twice and give some
    parameters different verdicts, with what tells the two runs apart: the same parameters,
    one run with gradients and the other without, written during the same time (Keras'
    TensorBoard callback in ``train/`` and gradcheck's logger beside it). Runs of a sweep log
    the same parameters the same way: they differ in their verdicts by design and are not
    compared."""
    lines = [
        line
        for at, first in enumerate(reports)
        for second in reports[at + 1 :]
        if first.gradients != second.gradients
        and _written_together(first, second)
        and (line := _disagreement(first, second))
    ]
    if len(lines) > MAX_DISAGREEMENTS:
        rest = len(lines) - MAX_DISAGREEMENTS
        lines = [*lines[:MAX_DISAGREEMENTS], f"... and {rest} more pairs of runs that disagree"]
    return tuple(lines)


def _written_together(a: RunReport, b: RunReport) -> bool:
    """Whether the two runs' histograms were written during the same time (one training's
    two loggers), not one after the other or by unrelated trainings."""
    if a.wall_times is None or b.wall_times is None:
        return False
    return a.wall_times[0] <= b.wall_times[1] and b.wall_times[0] <= a.wall_times[1]


def _disagreement(a: RunReport, b: RunReport) -> str:
    verdicts_a = {layer.name: layer.verdict for layer in a.layers}
    verdicts_b = {layer.name: layer.verdict for layer in b.layers}
    shared = [name for name in verdicts_a if name in verdicts_b]
    if len(shared) < 2 or 2 * len(shared) < min(len(verdicts_a), len(verdicts_b)):
        return ""
    differ = [name for name in shared if verdicts_a[name] != verdicts_b[name]]
    if not differ:
        return ""
    shown = ", ".join(f"{n} ({verdicts_a[n]} / {verdicts_b[n]})" for n in differ[:3])
    more = f" and {len(differ) - 3} more" if len(differ) > 3 else ""
    return (
        f"{a.run} and {b.run} log the same {len(shared)} parameters (one training logged "
        f"twice?) and disagree on {shown}{more}: {_coverage(a)} against {_coverage(b)}; "
        "gradients and more steps are the better evidence"
    )


def _coverage(run: RunReport) -> str:
    gradients = {"per_parameter": "gradients", "global": "a global norm", "none": "no gradients"}
    steps = "no steps" if run.steps is None else f"steps {run.steps[0]}-{run.steps[1]}"
    return f"{run.run} with {gradients[run.gradients]}, {steps}"


def load_runs(
    paths: Sequence[str],
    *,
    config: Config = DEFAULT_CONFIG,
    rules: TagRules = DEFAULT_RULES,
    steps: StepWindow | None = None,
    progress: ProgressCallback | None = None,
    jobs: int | None = None,
    workers: Workers | None = None,
    storage_options: Mapping[str, object] | None = None,
) -> list[LoadedRun]:
    """The one run under each of ``paths``, read and judged (``storage_options``: as for
    :func:`analyze`).

    Raises ``InputError`` when a path holds no run or several (naming them), or when a run
    has no histogram or scalar in the step window.
    """
    from gradcheck.compare.runs import LoadedRun

    window = steps if steps is not None else StepWindow()
    storage = StorageOptions.of(storage_options)
    runs = [_only_run(path, storage) for path in paths]
    with using(workers, jobs) as chosen:
        parts_by_run = read_runs(runs, window, progress, chosen, storage)
    loaded = []
    for path, run, parts in zip(paths, runs, parts_by_run, strict=True):
        _check_readable([path], parts, window, values=True)
        data = merge([part.data for part in parts])
        loaded.append(LoadedRun(data, _judged_data(run, data, parts, config, rules)))
    return loaded


def _only_run(path: str, storage: StorageOptions = NO_OPTIONS) -> Run:
    """The single run under ``path``; InputError naming what was found otherwise."""
    runs = discover([path], storage)
    if len(runs) != 1:
        found = ", ".join(run.path for run in runs[:5]) + (", ..." if len(runs) > 5 else "")
        raise InputError(f"{path} holds {len(runs)} runs ({found}): give the directory of one run")
    return runs[0]


def analyze_parts(
    run: Run,
    parts: Sequence[FilePart],
    config: Config,
    rules: TagRules,
    open_end: bool = False,
    charts: bool = True,
) -> RunReport:
    """Merge a run's per-file parts (in file order) and judge its parameters (``open_end``:
    the log is still being written, see ``gradcheck.watch``; ``charts`` as for
    :func:`analyze`)."""
    data = merge([part.data for part in parts])
    return _judged_data(run, data, parts, config, rules, open_end, charts)


def _judged_data(
    run: Run,
    data: RunData,
    parts: Sequence[FilePart],
    config: Config,
    rules: TagRules,
    open_end: bool = False,
    charts: bool = True,
) -> RunReport:
    """The report on ``run``'s merged ``data`` (its ``parts``: whether any value was kept)."""
    report = analyze_run(data, config, rules, open_end, charts)
    warnings = report.warnings
    read_nothing = not any(info.events for info in data.file_infos)  # else: report.holds says
    if read_nothing and not any(part.values_kept for part in parts):
        warnings += ("no histogram or scalar could be read in this run",)
    return replace(report, run=run.path, warnings=warnings)


def select_runs(runs: Sequence[Run], run_glob: str | None) -> list[Run]:
    """Runs whose path or directory name matches ``run_glob`` (all runs without one)."""
    if run_glob is None:
        return list(runs)
    selected = [run for run in runs if _matches(run_glob, run.path, os.path.basename(run.path))]
    if not selected:
        names = listed([run.path for run in runs])
        raise InputError(f"no run matches --run {run_glob!r} (runs found: {names})")
    return selected


def filter_layers(reports: Sequence[RunReport], layer_glob: str | None) -> list[RunReport]:
    """Keep the parameters whose name or tags match ``layer_glob``; recount verdicts."""
    if layer_glob is None:
        return list(reports)
    filtered = []
    for report in reports:
        layers = tuple(
            layer
            for layer in report.layers
            if _matches(layer_glob, layer.name, layer.weight_tag, layer.grad_tag)
        )
        counts = {verdict: 0 for verdict in report.counts}
        for layer in layers:
            counts[layer.verdict] = counts.get(layer.verdict, 0) + 1
        filtered.append(replace(report, layers=layers, counts=counts))
    if not any(report.layers for report in filtered):
        raise InputError(f"no parameter matches --layer {layer_glob!r}")
    return filtered


def _matches(pattern: str, *names: str | None) -> bool:
    """True when ``pattern`` (a shell glob, case-sensitive) matches one of ``names``."""
    return any(name is not None and fnmatch.fnmatchcase(name, pattern) for name in names)


def _check_readable(
    paths: Sequence[str], parts: Sequence[FilePart], window: StepWindow, values: bool = False
) -> None:
    """Nothing to analyse is an input error that says why, not an empty report.

    Event files whose records verify but hold no histogram or scalar (a graph, images, text)
    are a log with nothing to judge, which the report says (exit status 4, as for a log of
    scalars only); with ``values`` (``compare``, which needs numbers to compare) an error."""
    where = listed(paths)
    if not any(part.values_read for part in parts):
        unopened = [d for part in parts for d in part.data.damages if d.kind == "unreadable"]
        if unopened:  # the reason, not "0 bytes": the file could not be read at all
            reasons = listed([damage.message for damage in unopened], 1)
            raise InputError(f"nothing could be read from {where}: {reasons}")
        infos = [info for part in parts for info in part.data.file_infos]
        if values or not any(info.events for info in infos):
            if infos and all(info.writer in SOURCE_WRITERS for info in infos):
                raise InputError(f"nothing could be read from {where}: {_why_not_logged(parts)}")
            raise InputError(f"no TensorBoard records could be read from {where}: {_why(infos)}")
        return
    if not any(part.values_kept for part in parts):
        raise InputError(f"no histogram or scalar in steps {window} under {where}")


def listed(names: Sequence[str], limit: int = 3) -> str:
    """``a, b, c and 4 more``: the first ``limit`` names, the rest counted (a message stays
    one short line however many paths or runs there are)."""
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _why_not_logged(parts: Sequence[FilePart]) -> str:
    """Why files of other log formats gave no value: their damage, else their emptiness."""
    damages = [damage.message for part in parts for damage in part.data.damages]
    if damages:
        return listed(damages, 1)
    writers = sorted({info.writer or "" for part in parts for info in part.data.file_infos})
    return f"no value logged yet ({', '.join(writers)})"


def _why(infos: Sequence[FileInfo]) -> str:
    """Why event files gave no histogram or scalar, from what the reader saw in them."""
    from gradcheck.report.view import plural

    files = plural(len(infos), "event file")
    if all(info.size == 0 for info in infos):
        return f"{files}, {'empty' if len(infos) == 1 else 'all empty'} (0 bytes)"
    if not any(info.records for info in infos):
        return f"no valid TFRecord in {files} (not event files, or damaged beyond repair)"
    events = sum(info.events for info in infos)
    return f"{events} events in {files} but no histogram or scalar (graphs, images, text only)"
