"""Reduce benchmark runs to medians and ratios, check the issue's targets, render a table."""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench import params

if TYPE_CHECKING:
    from bench.gen import DatasetInfo
    from bench.run import Result

BUSY_THRESHOLD = 0.3  # CPUs used by other processes above which a run counts as under load
SLOW_READERS = ("tbparse", "accumulator", "accumulator-notf")
SERVERS = ("rust", "rust-checksum")  # TensorBoard's Rust data server, without and with CRCs
SMALL_RUN_MB = 1.0  # a sweep's runs below this size are small: issue 22's sweep target


@dataclass(frozen=True)
class ReaderSummary:
    """Medians over the repeats of one reader on one dataset."""

    reader: str
    runs: int
    wall_seconds: float  # median
    wall_seconds_all: tuple[float, ...]
    cpu_seconds: float  # median
    max_rss_mb: float  # largest over repeats (one process)
    tree_rss_mb: float  # largest over repeats (process tree, sampled)
    other_cpus: float  # largest over repeats: CPUs busy with other work meanwhile
    problems: tuple[str, ...]
    verdicts: Mapping[str, int] | None = None
    tree_pss_mb: float | None = None  # largest over repeats (process tree's Pss, sampled)


@dataclass(frozen=True)
class DatasetSummary:
    """Every reader on one dataset, and the ratios the issue asks about."""

    dataset: str
    encoding: str
    files: int
    megabytes: float
    histograms: int
    readers: Mapping[str, ReaderSummary]
    ratios: Mapping[str, float] = field(default_factory=dict)
    runs: int = 1  # run directories (a sweep has one per run)

    @property
    def small_sweep(self) -> bool:
        """Many small runs (issue 22's sweep), not a few big ones."""
        return self.runs > 1 and self.megabytes / self.runs < SMALL_RUN_MB


@dataclass(frozen=True)
class Target:
    """One of the issue's targets, as measured."""

    name: str
    dataset: str
    measured: float
    threshold: float
    passed: bool
    note: str = ""  # why a target cannot be met there, when the measurements show it


def _summarise_reader(name: str, runs: Sequence[Result]) -> ReaderSummary:
    walls = tuple(round(r.measurement.wall_seconds, 3) for r in runs)
    verdicts = next((r.verdicts for r in runs if r.verdicts), None)
    return ReaderSummary(
        reader=name,
        runs=len(runs),
        wall_seconds=round(statistics.median(walls), 3),
        wall_seconds_all=walls,
        cpu_seconds=round(statistics.median(r.measurement.cpu_seconds for r in runs), 3),
        max_rss_mb=round(max(r.measurement.max_rss_mb for r in runs), 1),
        tree_rss_mb=round(max(r.measurement.tree_rss_mb for r in runs), 1),
        other_cpus=round(max(r.measurement.other_cpus for r in runs), 2),
        problems=tuple(sorted({r.problem for r in runs if r.problem})),
        verdicts=verdicts,
        tree_pss_mb=_largest(r.measurement.tree_pss_mb for r in runs),
    )


def _largest(values: Iterable[float | None]) -> float | None:
    """The largest of the values measured, None when none was."""
    measured = [value for value in values if value is not None]
    return round(max(measured), 1) if measured else None


def _ratios(readers: Mapping[str, ReaderSummary]) -> dict[str, float]:
    """The issue's ratios of medians, and the same of each reader's best run (``best ...``):
    the least disturbed runs, steadier where the machine's speed swings between runs."""
    usable = {name: summary for name, summary in readers.items() if not summary.problems}
    ratios = _ratios_of({name: s.wall_seconds for name, s in usable.items()})
    best = _ratios_of({name: min(s.wall_seconds_all) for name, s in usable.items()})
    ratios.update({f"best {key}": value for key, value in best.items()})
    return ratios


def _ratios_of(wall: Mapping[str, float]) -> dict[str, float]:
    ratios: dict[str, float] = {}
    if "gradcheck" in wall and "bare" in wall:
        ratios["gradcheck/bare"] = round(wall["gradcheck"] / wall["bare"], 3)
    for start_up in ("floor", "imports"):
        if start_up in wall and "bare" in wall:
            ratios[f"{start_up}/bare"] = round(wall[start_up] / wall["bare"], 3)
    for slow in SLOW_READERS:
        if slow in wall and "gradcheck" in wall:
            ratios[f"{slow}/gradcheck"] = round(wall[slow] / wall["gradcheck"], 2)
    if "gradcheck-1job" in wall and "gradcheck" in wall:
        ratios["gradcheck-1job/gradcheck"] = round(wall["gradcheck-1job"] / wall["gradcheck"], 3)
    for server in SERVERS:
        for ours in ("gradcheck", "gradcheck-1job"):
            if server in wall and ours in wall:
                ratios[f"{ours}/{server}"] = round(wall[ours] / wall[server], 3)
    if "inspect" in wall and "gradcheck" in wall:
        ratios["inspect/gradcheck"] = round(wall["inspect"] / wall["gradcheck"], 3)
    for ours in ("gradcheck", "imports"):
        if "python" in wall and ours in wall:
            ratios[f"{ours}/python"] = round(wall[ours] / wall["python"], 3)
    return ratios


def summarise(results: Sequence[Result], infos: Mapping[str, DatasetInfo]) -> list[DatasetSummary]:
    """Group runs by dataset and reader; medians, peaks and ratios."""
    summaries = []
    for name, info in infos.items():
        by_reader: dict[str, list[Result]] = {}
        for result in results:
            if result.dataset == name:
                by_reader.setdefault(result.reader, []).append(result)
        readers = {reader: _summarise_reader(reader, runs) for reader, runs in by_reader.items()}
        summaries.append(
            DatasetSummary(
                dataset=name,
                encoding=info.encoding,
                files=len(info.files),
                megabytes=round(info.bytes / 1e6, 1),
                histograms=info.histograms,
                readers=readers,
                ratios=_ratios(readers),
                runs=len({Path(file).parent for file in info.files}),
            )
        )
    return summaries


def evaluate_targets(
    summaries: Sequence[DatasetSummary], ceiling: float | None = None
) -> list[Target]:
    """The issue's targets, each checked where it was measured; ``ceiling``: the two-core
    ceiling's ratio (``bench/ceiling.py``), for the bound on the 2-core target."""
    targets = []
    for summary in summaries:
        ratios = summary.ratios
        for name, reader in summary.readers.items():
            if name.startswith("gradcheck") and reader.problems:
                targets.append(Target(f"{name} ran and checked out", summary.dataset, 0, 1, False))
        if summary.files == 1 and "gradcheck/bare" in ratios:
            value = ratios["gradcheck/bare"]
            note = "" if value <= 1.0 else _start_up_note(ratios)
            targets.append(
                Target(
                    "no slower than the bare loop", summary.dataset, value, 1.0, value <= 1.0, note
                )
            )
        for slow in SLOW_READERS:
            if f"{slow}/gradcheck" in ratios:
                value = ratios[f"{slow}/gradcheck"]
                targets.append(
                    Target(f"15x faster than {slow}", summary.dataset, value, 15.0, value >= 15.0)
                )
        several = summary.files > 1 and not summary.small_sweep  # one file: printed only
        if several and "gradcheck-1job/gradcheck" in ratios:
            value = ratios["gradcheck-1job/gradcheck"]
            note = _two_core_note(summary, ceiling, 1.6)
            targets.append(
                Target(
                    "2 cores vs 1 on several files", summary.dataset, value, 1.6, value >= 1.6, note
                )
            )
        targets += _issue_22_targets(summary)
    targets += _memory_targets(summaries)
    targets += _parameter_targets(summaries)
    return targets


def _issue_22_targets(summary: DatasetSummary) -> list[Target]:
    """Against the Rust data server (160 MB logs and more, sweeps of small runs), ``inspect``
    against ``analyze``, and the tiny run against ``python -c pass``."""
    ratios, found = summary.ratios, []
    if summary.files == 1 and summary.megabytes >= 160 and "gradcheck/rust" in ratios:
        value = ratios["gradcheck/rust"]
        note = _beside_server(summary, "gradcheck", "rust")
        found.append(
            Target(
                "no slower than the Rust server", summary.dataset, value, 1.0, value <= 1.0, note
            )
        )
    if summary.small_sweep and "gradcheck/rust" in ratios:
        value = ratios["gradcheck/rust"]
        found.append(
            Target(
                "sweep within 1.5x of the Rust server", summary.dataset, value, 1.5, value <= 1.5
            )
        )
    if "inspect/gradcheck" in ratios:
        value = ratios["inspect/gradcheck"]
        found.append(
            Target("inspect within 1.2x of analyze", summary.dataset, value, 1.2, value <= 1.2)
        )
    if "gradcheck/python" in ratios:
        value = ratios["gradcheck/python"]
        found.append(
            Target("tiny run within 6x of python -c pass", summary.dataset, value, 6.0, value <= 6)
        )
    return found


def round_ratios(summary: DatasetSummary, ours: str, theirs: str) -> list[float]:
    """``ours`` over ``theirs`` in each round (both ran in it, interleaved): steadier than
    the ratio of medians where other work loads the machine by the minute."""
    a, b = summary.readers.get(ours), summary.readers.get(theirs)
    if a is None or b is None or a.problems or b.problems:
        return []
    return [x / y for x, y in zip(a.wall_seconds_all, b.wall_seconds_all, strict=False) if y > 0]


def _beside_server(summary: DatasetSummary, ours: str, server: str) -> str:
    """Issue 36's line: both medians and the range of the same-round ratios."""
    each = round_ratios(summary, ours, server)
    if not each:
        return ""
    a, b = summary.readers[ours].wall_seconds, summary.readers[server].wall_seconds
    median = statistics.median(each)
    return (
        f"{ours} {a:.2f} s, the server {b:.2f} s; the same round's ratio"
        f" {min(each):.2f}-{max(each):.2f} (median {median:.2f}, {len(each)} rounds)"
    )


def _parameter_targets(summaries: Sequence[DatasetSummary]) -> list[Target]:
    """Cost per histogram (after start-up) at 5,000 and 20,000 parameters against 1,000."""
    found = []
    for steps, (_, costs) in params.costs_by_steps({s.dataset: s for s in summaries}).items():
        for count, cost in costs.items():
            if count > 1000 and 1000 in costs:
                value = round(cost / costs[1000], 3)
                name = params.dataset_name(count, steps)
                found.append(
                    Target("cost per histogram vs 1,000 params", name, value, 1.25, value <= 1.25)
                )
    return found


def _start_up_note(ratios: Mapping[str, float]) -> str:
    """Beside an unmet "no slower than the bare loop": how much of the loop's time goes to
    start-up alone, before a byte is read. Unreachable where the floor (Python, numpy and
    click) alone takes the loop's time; else gradcheck's imports, for whoever plans more."""
    floor, imports = ratios.get("floor/bare"), ratios.get("imports/bare")
    if floor is not None and floor >= 1.0:
        return (
            f"unreachable here: Python and importing numpy and click alone take {floor:.2f}x"
            " the bare loop"
        )
    if floor is None or imports is None:
        return ""
    return (
        f"start-up alone, before a byte is read: {imports:.2f}x the bare loop"
        f" (Python, numpy and click: {floor:.2f}x)"
    )


def two_core_bound(one: float, floor: float, ceiling: float) -> float:
    """The most two processes can gain over ``one`` process's time when the ``floor`` (Python
    and the imports, which nothing can share) is serial and all the rest runs two at a time
    as fast as the machine's two-core ``ceiling`` allows. An estimate: the ceiling is
    measured apart, and on this VM it swings by 0.2x from one bench run to the next."""
    return one / (floor + (one - floor) / ceiling)


def _two_core_note(summary: DatasetSummary, ceiling: float | None, threshold: float) -> str:
    one, floor = summary.readers.get("gradcheck-1job"), summary.readers.get("floor")
    if ceiling is None or one is None or floor is None or one.problems or floor.problems:
        return ""
    bound = two_core_bound(one.wall_seconds, floor.wall_seconds, ceiling)
    below = ", below the target" if bound < threshold else ""
    return (
        f"bound: the floor ({floor.wall_seconds:.2f} s) serial, the rest at the two-core"
        f" ceiling ({ceiling:.2f}x): about {bound:.2f}x at most{below}"
    )


def _memory_targets(summaries: Sequence[DatasetSummary]) -> list[Target]:
    targets = []
    for encoding in sorted({s.encoding for s in summaries}):
        measured = [
            s
            for s in summaries
            if s.encoding == encoding and s.files == 1 and "gradcheck" in s.readers
        ]
        if not measured:
            continue
        largest = max(measured, key=lambda s: s.megabytes)
        if largest.megabytes >= 900:
            gradcheck = largest.readers["gradcheck"]
            summed = gradcheck.tree_rss_mb
            peak = summed if gradcheck.tree_pss_mb is None else gradcheck.tree_pss_mb
            note = (
                ""
                if gradcheck.tree_pss_mb is None
                else f"the processes' Pss summed (a page the workers share with the command "
                f"counted once); their VmRSS summed: {summed:.0f} MB"
            )
            targets.append(
                Target(
                    "peak memory on the 1 GB log (MB)",
                    largest.dataset,
                    peak,
                    300.0,
                    peak <= 300.0,
                    note,
                )
            )
    return targets


def _seconds(summary: DatasetSummary, reader: str) -> str:
    found = summary.readers.get(reader)
    if found is None:
        return "-"
    return "FAILED" if found.problems else f"{found.wall_seconds:.2f}"


def _ratio(summary: DatasetSummary, key: str, fmt: str) -> str:
    return format(summary.ratios[key], fmt) if key in summary.ratios else "-"


def _is_series(summary: DatasetSummary) -> bool:
    """A dataset of issue 22's series (parameters, tiny run, sweep), shown in tables of their
    own rather than the main one."""
    return summary.dataset.startswith("params-") or summary.small_sweep


def _table(summaries: Sequence[DatasetSummary]) -> list[str]:
    header = (
        f"{'dataset':<15}{'MB':>7}{'hists':>9}{'bare s':>8}{'gradchk s':>10}{'gc/bare':>8}"
        f"{'rust s':>7}{'gc/rs':>6}{'rs+crc s':>9}{'gc/rs+c':>8}"
        f"{'tbparse s':>10}{'x':>6}{'EA s':>8}{'x':>6}{'gc peak MB':>11}{'gc CPUs':>8}"
    )
    lines = [header, "-" * len(header)]
    for s in summaries:
        if _is_series(s):
            continue
        gradcheck = s.readers.get("gradcheck")
        peak = f"{gradcheck.tree_rss_mb:.0f}" if gradcheck else "-"
        cores = f"{gradcheck.cpu_seconds / gradcheck.wall_seconds:.2f}" if gradcheck else "-"
        lines.append(
            f"{s.dataset:<15}{s.megabytes:>7.0f}{s.histograms:>9}{_seconds(s, 'bare'):>8}"
            f"{_seconds(s, 'gradcheck'):>10}{_ratio(s, 'gradcheck/bare', '.2f'):>8}"
            f"{_seconds(s, 'rust'):>7}{_ratio(s, 'gradcheck/rust', '.2f'):>6}"
            f"{_seconds(s, 'rust-checksum'):>9}{_ratio(s, 'gradcheck/rust-checksum', '.2f'):>8}"
            f"{_seconds(s, 'tbparse'):>10}{_ratio(s, 'tbparse/gradcheck', '.1f'):>6}"
            f"{_seconds(s, 'accumulator'):>8}{_ratio(s, 'accumulator/gradcheck', '.1f'):>6}"
            f"{peak:>11}{cores:>8}"
        )
    return lines


def _sweep_table(summaries: Sequence[DatasetSummary]) -> list[str]:
    """Sweeps of small runs: runs per second, gradcheck's cost per run beyond the tiny run's
    (its start-up), and its time over the Rust server's."""
    sweeps = [s for s in summaries if s.small_sweep]
    if not sweeps:
        return []
    tiny = next((s for s in summaries if s.dataset == params.tiny_name()), None)
    start_up = tiny.readers["gradcheck"].wall_seconds if tiny and "gradcheck" in tiny.readers else 0
    header = (
        f"{'dataset':<24}{'runs':>5}{'MB':>5}{'gc -j1 s':>9}{'gc s':>6}{'runs/s':>7}"
        f"{'ms/run':>7}{'rust s':>7}{'rs+crc s':>9}{'gc/rs':>6}{'-j1/rs':>7}{'gc/rs+c':>8}"
    )
    lines = [
        f"sweeps: ms/run = (gradcheck's time - the tiny run's {start_up:.3f} s) / runs;"
        " gc/rs target 1.5 at most",
        header,
        "-" * len(header),
    ]
    for s in sweeps:
        gc = s.readers.get("gradcheck")
        rate = f"{s.runs / gc.wall_seconds:.0f}" if gc and not gc.problems else "-"
        per_run = (
            f"{(gc.wall_seconds - start_up) / s.runs * 1e3:.1f}" if gc and not gc.problems else "-"
        )
        lines.append(
            f"{s.dataset:<24}{s.runs:>5}{s.megabytes:>5.0f}{_seconds(s, 'gradcheck-1job'):>9}"
            f"{_seconds(s, 'gradcheck'):>6}{rate:>7}{per_run:>7}{_seconds(s, 'rust'):>7}"
            f"{_seconds(s, 'rust-checksum'):>9}{_ratio(s, 'gradcheck/rust', '.2f'):>6}"
            f"{_ratio(s, 'gradcheck-1job/rust', '.2f'):>7}"
            f"{_ratio(s, 'gradcheck/rust-checksum', '.2f'):>8}"
        )
    return lines


STAGES = (
    ("start-up", "imports"),
    ("reading", "gradcheck-load"),
    ("verdicts", "gradcheck-judge"),
    ("JSON report", "gradcheck-1job"),
)
"""A sweep's ``analyze --jobs 1`` by stage: each reader (its own process, as every reader)
stops one stage later than the one before it, so a stage's time is its reader's median less
the previous reader's (``bench/readers.py``: ``gradcheck-load``, ``gradcheck-judge``)."""


def stage_seconds(summary: DatasetSummary) -> dict[str, float] | None:
    """Each stage's seconds in ``summary`` (None unless every stage's reader ran there)."""
    readers = summary.readers
    if any(name not in readers or readers[name].problems for _, name in STAGES):
        return None
    stages, before = {}, 0.0
    for stage, name in STAGES:
        stages[stage] = readers[name].wall_seconds - before
        before = readers[name].wall_seconds
    return stages


def _stage_table(summaries: Sequence[DatasetSummary]) -> list[str]:
    """Where a sweep's time goes, at ``--jobs 1``: seconds and ms a run per stage, beside the
    Rust server's whole load (which has no verdicts and no report to write)."""
    rows = [(s, stages) for s in summaries if s.small_sweep and (stages := stage_seconds(s))]
    if not rows:
        return []
    header = f"{'dataset':<24}" + "".join(f"{stage:>20}" for stage, _ in STAGES) + f"{'rust s':>9}"
    lines = [
        "sweep stages at --jobs 1 (each stage's reader its own process; s, ms/run): a stage is"
        " its reader's median less the previous one's; start-up is not per run",
        header,
        "-" * len(header),
    ]
    for s, stages in rows:
        cells = "".join(_stage_cell(stage, seconds, s.runs) for stage, seconds in stages.items())
        lines.append(f"{s.dataset:<24}{cells}{_seconds(s, 'rust'):>9}")
    return lines


def _stage_cell(stage: str, seconds: float, runs: int) -> str:
    """``1.23 s   4.5``: a stage's seconds and its ms a run (none for the start-up)."""
    per_run = "" if stage == "start-up" else f"{seconds / runs * 1e3:.1f}"
    return f"{seconds:>10.2f} s{per_run:>8}"


def _start_up_lines(summaries: Sequence[DatasetSummary]) -> list[str]:
    """The tiny run against ``python -c pass``, and ``inspect`` against ``analyze``."""
    lines = []
    for s in summaries:
        if "gradcheck/python" in s.ratios:
            lines.append(
                f"start-up ({s.dataset}, {s.histograms} histograms): python -c pass"
                f" {_seconds(s, 'python')} s, gradcheck's imports {_seconds(s, 'imports')} s,"
                f" the tiny run end to end {_seconds(s, 'gradcheck')} s:"
                f" {s.ratios['gradcheck/python']:.2f}x python (target 6 at most)"
            )
        if "inspect/gradcheck" in s.ratios:
            lines.append(
                f"inspect vs analyze ({s.dataset}): inspect {_seconds(s, 'inspect')} s,"
                f" analyze {_seconds(s, 'gradcheck')} s: {s.ratios['inspect/gradcheck']:.2f}x"
                " (target 1.2 at most)"
            )
    return lines


_EXTRA_READERS = ("gradcheck-1job", "gradcheck-read", "accumulator-notf", "floor", "imports")


def _extra_lines(summaries: Sequence[DatasetSummary]) -> list[str]:
    lines = []
    for s in summaries:
        for name, reader in s.readers.items():
            if name in _EXTRA_READERS and not _is_series(s):
                lines.append(f"{s.dataset}: {name} {_seconds(s, name)} s")
            for problem in reader.problems:
                lines.append(f"{s.dataset}: {name}: PROBLEM: {problem}")
        if "gradcheck-1job/gradcheck" in s.ratios and not s.dataset.startswith("params-"):
            lines.append(
                f"{s.dataset}: speed-up of the default over --jobs 1:"
                f" {s.ratios['gradcheck-1job/gradcheck']:.2f}x"
            )
        best = [
            label.format(s.ratios["best " + key])
            for key, label in _BEST_LABELS
            if "best " + key in s.ratios
        ]
        if best:
            lines.append(f"{s.dataset}: best runs: {', '.join(best)}")
    return lines


_BEST_LABELS = (
    ("gradcheck/bare", "gc/bare {:.2f}"),
    ("floor/bare", "floor/bare {:.2f}"),
    ("imports/bare", "imports/bare {:.2f}"),
    ("tbparse/gradcheck", "tbparse {:.1f}x"),
    ("accumulator/gradcheck", "EA {:.1f}x"),
    ("gradcheck-1job/gradcheck", "default over --jobs 1 {:.2f}x"),
    ("gradcheck/rust", "gc/rust {:.2f}"),
    ("gradcheck/rust-checksum", "gc/rust-checksum {:.2f}"),
    ("gradcheck-1job/rust", "gc -j1/rust {:.2f}"),
    ("inspect/gradcheck", "inspect/analyze {:.2f}"),
    ("gradcheck/python", "tiny run/python {:.2f}"),
)


def render(
    summaries: Sequence[DatasetSummary],
    targets: Sequence[Target],
    facts: Mapping[str, Any],
    args: argparse.Namespace,
) -> str:
    """The table of medians and ratios, the targets, and how loaded the machine was."""
    lines = [
        f"gradcheck benchmark, {facts['date']}, {facts['cpus']} CPUs,"
        f" median of {args.repeats} runs ({args.series_repeats} in the series, {args.big_repeats}"
        " on their logs of 300 MB or more), each reader its own process",
        "x = that reader's time / gradcheck's; gc/bare = gradcheck's time / the bare loop's",
        f"slow readers (tbparse, EventAccumulator) measured only up to {args.slow_max_size} logs",
        "",
        *_table(summaries),
        "",
        *_extra_lines(summaries),
        "",
        *_sweep_table(summaries),
        "",
        *_stage_table(summaries),
        "",
        *params.render({s.dataset: s for s in summaries}),
        "",
        *_start_up_lines(summaries),
        "",
        "targets:",
    ]
    for target in targets:
        mark = "PASS" if target.passed else "FAIL"
        lines.append(
            f"  {mark}  {target.name:<36} {target.dataset:<15} {target.measured:>8.2f}"
            f" (target {target.threshold:g})"
        )
        if target.note:
            lines.append(f"        {target.note}")
    busiest = max(
        (r.other_cpus for s in summaries for r in s.readers.values()),
        default=0.0,
    )
    if busiest > BUSY_THRESHOLD:
        lines.append(
            f"MEASURED UNDER LOAD: other processes used up to {busiest:.1f} CPUs during some runs"
        )
    ceiling = facts.get("two_core_ceiling")
    if ceiling:
        lines.append(
            f"two-core ceiling: two gradcheck --jobs 1 processes, one file of {ceiling['dataset']}"
            f" each, took {ceiling['at_once']:.2f} s at once against"
            f" {ceiling['one_after_the_other']:.2f} s one after the other: {ceiling['ratio']:.2f}x,"
            " the most two processes can gain on this machine before any serial work"
        )
    lines.append(
        f"python start-up {facts['python_startup_seconds']} s;"
        f" gradcheck start-up {facts.get('gradcheck_startup_seconds', '-')} s"
    )
    lines.append(_code_line(facts.get("code_at_start", {}), facts.get("code_at_end", {})))
    return "\n".join(lines)


def _code_line(start: Mapping[str, Any], end: Mapping[str, Any]) -> str:
    """Which gradcheck was measured; a warning when it changed while the benchmark ran."""
    line = f"gradcheck at commit {start.get('commit')}"
    if start.get("uncommitted"):
        line += f" plus {len(start['uncommitted'])} uncommitted file(s) under gradcheck/"
    if end and end != start:
        line += f"; CHANGED DURING THE RUN (commit {end.get('commit')} at the end)"
    return line
