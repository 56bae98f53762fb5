"""The analysis pipeline: paths -> runs -> records -> per-file series -> run verdicts -> Report.

``analyze`` is what ``gradcheck analyze`` runs, and what a notebook can call. Each event file
is reduced on its own by :func:`gradcheck.engine.parts.reduce_file` (on every core: see
``gradcheck.engine.pool``), the parts of a run are merged in file order, and the merged series are
judged by ``detect.analyze_run`` (several runs on several cores: :func:`judge_runs`). The step
window is applied to the records before any statistic, so verdicts are about that window; the
layer glob only filters what is reported.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import partial

from gradcheck import __version__
from gradcheck.engine import plan
from gradcheck.engine.parts import FilePart as FilePart
from gradcheck.engine.parts import reduce_file as reduce_file
from gradcheck.engine.parts import reduce_stream
from gradcheck.engine.pool import SPLIT_SIZE, Workers, map_shared, read_files
from gradcheck.errors import InputError
from gradcheck.events.discover import discover
from gradcheck.events.steps import StepWindow
from gradcheck.events.storage import NO_OPTIONS, StorageOptions, file_size
from gradcheck.model import (
    FileInfo,
    Report,
    Run,
    RunData,
    RunReport,
    Sweep,
)
from gradcheck.series.merge import merge
from gradcheck.sources import WRITERS as SOURCE_WRITERS
from gradcheck.sources import is_source
from gradcheck.sources import records as source_records
from gradcheck.tags import DEFAULT_RULES, TagRules
from gradcheck.verdicts.config import DEFAULT_CONFIG, Config
from gradcheck.verdicts.detect import analyze_run

ProgressCallback = Callable[[int, int], None]
"""Called as ``progress(bytes_done, bytes_total)`` while event files are read."""


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
    with _using(workers, jobs) as chosen:
        sizes = _whole_runs(runs, chosen, storage)
        if sizes is not None:  # judged where they were read
            judged = read_and_judge_runs(
                runs, sizes, window, progress, config, rules, chosen, storage, charts
            )
            parts_by_run = [parts for _, parts in judged]
            reports = [report for report, _ in judged]
        else:
            parts_by_run = read_runs(runs, window, progress, chosen, storage)
        _check_readable(paths, [part for parts in parts_by_run for part in parts], window)
        if sizes is None:  # judged once all is known to be readable
            reports = judge_runs(runs, parts_by_run, config, rules, chosen, charts)
    return report_of(reports, layer_glob, sweep)


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
    """The sweep of ``reports`` when ``wanted`` (None: when they look like a sweep)."""
    from gradcheck.verdicts.sweep import looks_like_sweep, summarize

    if wanted is False or (wanted is None and not looks_like_sweep(reports)):
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


WHOLE_RUNS_MIN_BYTES = 4 << 20
"""Runs are each read and judged in one task, on the workers, when there are several, none
has a file big enough to be cut in ranges, and they hold this much in all (a sweep): only
their reports travel back (``bench/README.md``, "Worker processes")."""


def _whole_runs(
    runs: Sequence[Run], workers: Workers, storage: StorageOptions = NO_OPTIONS
) -> list[int] | None:
    """The bytes of each run when each is better read and judged in one task (see
    :data:`WHOLE_RUNS_MIN_BYTES`; an executor given takes every run so), else None."""
    if len(runs) < 2 or not (workers.jobs >= 2 or workers.given):
        return None
    sizes = [[_size(path, storage) for path in run.files] for run in runs]
    if not workers.given:
        biggest = max((size for files in sizes for size in files), default=0)
        if biggest >= SPLIT_SIZE or sum(map(sum, sizes)) < WHOLE_RUNS_MIN_BYTES:
            return None
    return [sum(files) for files in sizes]


def read_and_judge_runs(
    runs: Sequence[Run],
    sizes: Sequence[int],
    window: StepWindow,
    progress: ProgressCallback | None,
    config: Config,
    rules: TagRules,
    workers: Workers,
    storage: StorageOptions = NO_OPTIONS,
    charts: bool = True,
) -> list[tuple[RunReport, list[FilePart]]]:
    """Every run read and judged in one task on the ``workers`` (a sweep's many small runs),
    in order: its report, and its files' parts without their series (what
    :func:`_check_readable` looks at); ``sizes``: each run's bytes; ``storage`` goes with
    each task; ``charts``: as for :func:`analyze`."""
    total = sum(sizes)
    done = 0

    def advance(batch: int) -> None:
        nonlocal done
        done += sum(sizes[at] for at in batches[batch])
        if progress is not None:
            progress(done, total)

    if progress is not None:
        progress(0, total)
    batches = _batches(sizes, workers.jobs * TASKS_PER_WORKER)
    done_runs = map_shared(
        partial(
            _read_and_judged,
            window=window,
            config=config,
            rules=rules,
            storage=storage,
            charts=charts,
        ),
        [[runs[at] for at in batch] for batch in batches],
        [float(sum(sizes[at] for at in batch)) for batch in batches],
        0.0,
        workers,
        advance,
    )
    return [judged for batch in done_runs for judged in batch]


TASKS_PER_WORKER = 8
"""A sweep's runs go to the workers in about this many tasks a worker, each of neighbouring
runs of about equal bytes: enough for a faster worker to take more, few enough that a task's
own cost (a few ms through a Dask scheduler) is shared by many small runs."""


def _batches(sizes: Sequence[int], tasks: int) -> list[list[int]]:
    """The positions of ``sizes`` cut into at most about ``tasks`` runs of neighbours, each
    of ``sum(sizes) / tasks`` bytes or more (the last one may hold less)."""
    if not sizes:
        return []
    share = sum(sizes) / max(tasks, 1)
    batches: list[list[int]] = [[]]
    held = 0
    for at, size in enumerate(sizes):
        if batches[-1] and held >= share:
            batches.append([])
            held = 0
        batches[-1].append(at)
        held += size
    return batches


def _read_and_judged(
    runs: Sequence[Run],
    window: StepWindow,
    config: Config,
    rules: TagRules,
    storage: StorageOptions = NO_OPTIONS,
    charts: bool = True,
) -> list[tuple[RunReport, list[FilePart]]]:
    """Runs read and judged, one after the other (a task of :func:`read_and_judge_runs`)."""
    judged = []
    for run in runs:
        if is_source(run):
            parts = [reduce_stream(source_records(run), window)]
        else:
            parts = [reduce_file(path, run.path, window, storage=storage) for path in run.files]
        report = analyze_parts(run, parts, config, rules, charts=charts)
        judged.append((report, [replace(part, data=_without_series(part.data)) for part in parts]))
    return judged


def _without_series(data: RunData) -> RunData:
    return replace(data, histograms={}, scalars={})


@contextmanager
def _using(workers: Workers | None, jobs: int | None) -> Iterator[Workers]:
    """The ``workers`` given (left open), or this command's own, for ``jobs``."""
    if workers is not None:
        yield workers
        return
    with Workers(jobs) as own:
        yield own


def read_runs(
    runs: Sequence[Run],
    window: StepWindow,
    progress: ProgressCallback | None,
    workers: Workers | None = None,
    storage: StorageOptions = NO_OPTIONS,
) -> list[list[FilePart]]:
    """Every file of ``runs`` reduced (the map step: one independent task per file, or byte
    range of a big file), grouped by run, in file order. A run of another log format
    (``gradcheck.sources``) is read here, whole, as one part."""
    event_runs = [run for run in runs if not is_source(run)]
    tracker = _ProgressTracker(event_runs, progress, storage)
    files = [(path, run.path) for run in event_runs for path in run.files]
    parts = iter(read_files(files, window, tracker, workers, storage))
    parts_by_run = [
        [reduce_stream(source_records(run), window)]
        if is_source(run)
        else [next(parts) for _ in run.files]
        for run in runs
    ]
    tracker.finish()
    return parts_by_run


@dataclass(frozen=True)
class LoadedRun:
    """One run's merged series and its report (what ``gradcheck compare`` compares)."""

    data: RunData
    report: RunReport


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
    window = steps if steps is not None else StepWindow()
    storage = StorageOptions.of(storage_options)
    runs = [_only_run(path, storage) for path in paths]
    with _using(workers, jobs) as chosen:
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


def judge_runs(
    runs: Sequence[Run],
    parts_by_run: Sequence[Sequence[FilePart]],
    config: Config,
    rules: TagRules,
    workers: Workers | None = None,
    charts: bool = True,
) -> list[RunReport]:
    """The report of every run (see :func:`analyze_parts`; ``charts`` as for :func:`analyze`),
    in order; runs share the
    ``workers`` (see :func:`gradcheck.engine.pool.map_shared`) when there is enough to
    judge (``engine.plan``): a sweep of many runs would otherwise wait on one core after reading
    on all of them."""
    weights = [plan.verdict_seconds([part.data for part in parts]) for parts in parts_by_run]
    return map_shared(
        partial(_judged, config=config, rules=rules, charts=charts),
        list(zip(runs, parts_by_run, strict=True)),
        weights,
        plan.VERDICT_SPLIT_SECONDS,
        workers,
    )


def _judged(
    item: tuple[Run, Sequence[FilePart]], config: Config, rules: TagRules, charts: bool = True
) -> RunReport:
    return analyze_parts(item[0], item[1], config, rules, charts=charts)


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


class _ProgressTracker:
    """Turns per-file byte offsets into overall ``(bytes_done, bytes_total)`` reports."""

    def __init__(
        self,
        runs: Sequence[Run],
        progress: ProgressCallback | None,
        storage: StorageOptions = NO_OPTIONS,
    ) -> None:
        self._progress = progress
        self._sizes = [_size(path, storage) for run in runs for path in run.files]
        self._total = sum(self._sizes)
        self._finished = 0  # bytes of files completely read
        self._file = -1

    def reporter(self) -> Callable[[int], None] | None:
        """The offset callback for the next file (``None`` when nobody listens)."""
        if self._progress is None:
            return None
        if self._file >= 0:
            self._finished += self._sizes[self._file]
        self._file += 1
        self._progress(self._finished, self._total)
        return self._at_offset

    def advance(self, size: int) -> None:
        """A part of ``size`` bytes was read (by a pool worker, which does not report offsets)."""
        self._finished += size
        if self._progress is not None:
            self._progress(min(self._finished, self._total), self._total)

    def finish(self) -> None:
        """Report that every byte has been read."""
        if self._progress is not None:
            self._progress(self._total, self._total)

    def _at_offset(self, offset: int) -> None:
        if self._progress is not None:
            self._progress(self._finished + offset, self._total)


def _size(path: str, storage: StorageOptions = NO_OPTIONS) -> int:
    """File size in bytes, 0 when it cannot be read (the reader reports why)."""
    try:
        return file_size(path, storage)
    except OSError:
        return 0


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
    files = plural(len(infos), "event file")
    if all(info.size == 0 for info in infos):
        return f"{files}, {'empty' if len(infos) == 1 else 'all empty'} (0 bytes)"
    if not any(info.records for info in infos):
        return f"no valid TFRecord in {files} (not event files, or damaged beyond repair)"
    events = sum(info.events for info in infos)
    return f"{events} events in {files} but no histogram or scalar (graphs, images, text only)"


def plural(count: int, noun: str) -> str:
    """``1 event file``, ``2 event files``."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"
