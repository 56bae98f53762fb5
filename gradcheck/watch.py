"""``gradcheck watch``'s core: poll the followed event files, judge the runs that changed, and
say what changed since the previous update.

Each update's report is what ``gradcheck analyze`` gives on the log cut at its last complete
record (:mod:`gradcheck.engine.follow` reads only the appended bytes; the runs are merged and
judged as ``pipeline.analyze_parts`` does), so a finding shown is one the same rules give on
the log so far. A run is judged again only when one of its files changed. The CLI decides when
to poll and what to print; this module never prints, sleeps or exits.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from gradcheck.engine.follow import Follower, Poll
from gradcheck.errors import InputError
from gradcheck.events.steps import StepWindow
from gradcheck.events.storage import NO_OPTIONS, StorageOptions
from gradcheck.model import LayerResult, Report, RunReport, Verdict
from gradcheck.pipeline import analyze_parts, report_of
from gradcheck.tags import DEFAULT_RULES, TagRules
from gradcheck.verdicts.config import DEFAULT_CONFIG, Config
from gradcheck.verdicts.gate import DEFAULT_FAIL_ON, fails, parse_fail_on
from gradcheck.verdicts.registry import OK


@dataclass(frozen=True)
class Change:
    """A parameter whose verdict or first bad step is not what the previous update said."""

    run: str
    parameter: str
    verdict: Verdict
    was: Verdict | None  # None: the parameter is new
    first_bad_step: int | None
    was_step: int | None


@dataclass(frozen=True)
class Failure:
    """A parameter with a finding in ``--fail-on``."""

    run: str
    layer: LayerResult


@dataclass(frozen=True)
class Update:
    """One poll's outcome: the report on the log so far and what changed since the last one."""

    number: int  # 1 for the first update
    report: Report | None  # None while there is nothing to judge yet (see ``waiting``)
    waiting: str  # why there is no report yet ("" once there is one)
    changes: tuple[Change, ...]
    failures: tuple[Failure, ...]  # parameters failing ``fail_on`` (their runs' report order)
    new_bytes: int  # bytes read by this update
    bytes_read: int  # complete records under the paths
    values_read: int  # histogram and scalar values in the parts
    values_per_second: float  # values read per second since the previous update
    newest_step: int | None  # the last step of any run
    seconds_since_data: float  # since the last update that read new bytes (or the start)
    elapsed: float  # seconds since the watcher started
    warnings: tuple[str, ...]  # files read again from the start, and why
    final: bool = False


@dataclass
class Watcher:
    """Follows ``paths`` and turns each poll into an :class:`Update` (``update``)."""

    paths: Sequence[str]
    config: Config = DEFAULT_CONFIG
    rules: TagRules = DEFAULT_RULES
    layer_glob: str | None = None
    run_glob: str | None = None
    steps: StepWindow | None = None
    fail_on: frozenset[Verdict] = field(default_factory=lambda: parse_fail_on(DEFAULT_FAIL_ON))
    clock: Callable[[], float] = time.monotonic
    storage: StorageOptions = NO_OPTIONS  # fsspec options for URLs

    def __post_init__(self) -> None:
        window = self.steps if self.steps is not None else StepWindow()
        self._follower = Follower(list(self.paths), window, self.run_glob, self.storage)
        self._reports: dict[str, RunReport] = {}
        self._started = self.clock()
        self._last_data = self._started
        self._last_time = self._started
        self._values = 0
        self._number = 0
        self._previous: Report | None = None

    def update(self, final: bool = False) -> Update:
        """Poll once and judge what changed; ``final``: the training is over (a record left
        half-written is read as damage, as ``gradcheck analyze`` reads it)."""
        poll = self._follower.poll(final=final)
        now = self.clock()
        if poll.new_bytes:
            self._last_data = now
        report, waiting = self._report(poll, final)
        values = sum(part.values_read for parts in poll.parts for part in parts)
        rate = max(values - self._values, 0) / max(now - self._last_time, 1e-9)
        self._values, self._last_time = values, now
        self._number += 1
        changes = changed_layers(self._previous, report) if report is not None else ()
        if report is not None:
            self._previous = report
        return Update(
            number=self._number,
            report=report,
            waiting=waiting,
            changes=changes,
            failures=failures(report, self.fail_on) if report is not None else (),
            new_bytes=poll.new_bytes,
            bytes_read=poll.bytes_read,
            values_read=values,
            values_per_second=rate if self._number > 1 else 0.0,
            newest_step=newest_step(report),
            seconds_since_data=now - self._last_data,
            elapsed=now - self._started,
            warnings=poll.warnings,
            final=final,
        )

    def _report(self, poll: Poll, final: bool) -> tuple[Report | None, str]:
        """The report on the poll's parts (runs whose parts did not change are not judged
        again), or None and why there is nothing to report yet."""
        if not poll.runs:
            return None, poll.waiting
        reports = []
        for run, parts in zip(poll.runs, poll.parts, strict=True):
            report = self._reports.get(run.path)
            if report is None or run.path in poll.changed or final or report.files != run.files:
                report = analyze_parts(run, parts, self.config, self.rules, not final)
                self._reports[run.path] = report
            reports.append(report)
        for gone in set(self._reports) - {run.path for run in poll.runs}:
            del self._reports[gone]
        if not any(part.values_kept for parts in poll.parts for part in parts):
            return None, "no histogram or scalar in the event files yet"
        try:
            return report_of(reports, self.layer_glob), ""  # as analyze's
        except InputError as error:  # the parameter may still appear
            return None, str(error)


def changed_layers(before: Report | None, after: Report) -> tuple[Change, ...]:
    """Parameters of ``after`` whose verdict or first bad step differs from ``before``'s
    (every parameter that is not ok, on the first report)."""
    was = {
        (run.run, layer.name): layer
        for run in (before.runs if before is not None else ())
        for layer in run.layers
    }
    changes = []
    for run in after.runs:
        for layer in run.layers:
            old = was.get((run.run, layer.name))
            if old is None and before is None and layer.verdict == OK:
                continue
            if old is not None and (old.verdict, old.first_bad_step) == (
                layer.verdict,
                layer.first_bad_step,
            ):
                continue
            changes.append(
                Change(
                    run=run.run,
                    parameter=layer.name,
                    verdict=layer.verdict,
                    was=None if old is None else old.verdict,
                    first_bad_step=layer.first_bad_step,
                    was_step=None if old is None else old.first_bad_step,
                )
            )
    return tuple(changes)


def failures(report: Report, fail_on: frozenset[Verdict]) -> tuple[Failure, ...]:
    """The parameters of ``report`` that fail ``fail_on``, in report order."""
    return tuple(
        Failure(run.run, layer)
        for run in report.runs
        for layer in run.layers
        if fails(layer, fail_on)
    )


def newest_step(report: Report | None) -> int | None:
    """The last step any run logged (None without a value)."""
    lasts = [run.steps[1] for run in report.runs if run.steps is not None] if report else []
    return max(lasts) if lasts else None
