"""The pipeline on real event files: per-file reduction, step window, globs, progress, errors."""

from __future__ import annotations

import dataclasses
import os
import pickle
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from gradcheck import pipeline
from gradcheck.engine import plan, read
from gradcheck.engine import pool as parallel
from gradcheck.engine.parts import FilePart, reduce_file
from gradcheck.errors import InputError
from gradcheck.events.discover import discover
from gradcheck.events.reader import read_run
from gradcheck.events.steps import StepWindow
from gradcheck.model import Report, Run, RunReport
from gradcheck.pipeline import analyze, filter_layers
from gradcheck.series.reduce import reduce_records
from gradcheck.tags import TagRules
from gradcheck.verdicts.config import DEFAULT_CONFIG
from gradcheck.verdicts.detect import analyze_run
from tests.support import eventfiles as ef
from tests.support.synthetic_runs import BLOW_UP, NAN_FROM, PARAMETERS, STEPS, write_run

RULES = TagRules.from_patterns(None, None)


def run_analysis(*paths: Path, **options: object) -> Report:
    return analyze([str(p) for p in paths], config=DEFAULT_CONFIG, rules=RULES, **options)  # type: ignore[arg-type]


def verdicts(report: Report) -> dict[str, tuple[str, int | None]]:
    (run,) = report.runs
    return {layer.name: (layer.verdict, layer.first_bad_step) for layer in run.layers}


def test_files_reduced_apart_and_merged_match_the_whole_run(tmp_path: Path) -> None:
    one = write_run(tmp_path / "one", exploding=True, seed=4)
    three = write_run(tmp_path / "three", exploding=True, seed=4, files=3)
    split = run_analysis(three)
    assert len(split.runs[0].files) == 3
    assert verdicts(split) == verdicts(run_analysis(one))
    (whole,) = discover([str(three)])
    streamed = analyze_run(reduce_records(read_run(whole)), DEFAULT_CONFIG, RULES)
    assert {x.name: x.verdict for x in streamed.layers} == {
        name: verdict for name, (verdict, _) in verdicts(split).items()
    }
    assert all(verdict == "nan" for verdict, _ in verdicts(split).values())
    assert sorted(verdicts(split)) == sorted(PARAMETERS)  # not vacuous: every layer is there


def test_step_window_is_applied_before_the_statistics(tmp_path: Path) -> None:
    run = write_run(tmp_path / "exploding", exploding=True)
    before = run_analysis(run, steps=StepWindow(None, BLOW_UP - 1))
    assert before.runs[0].steps == (0, BLOW_UP - 1)
    assert {verdict for verdict, _ in verdicts(before).values()} == {"ok"}
    late = run_analysis(run, steps=StepWindow(NAN_FROM, None))
    assert late.runs[0].steps == (NAN_FROM, STEPS - 1)
    assert all(verdict == "nan" for verdict, _ in verdicts(late).values())
    assert sorted(verdicts(late)) == sorted(PARAMETERS)
    assert {step for _, step in verdicts(late).values()} == {NAN_FROM}


def test_layer_glob_matches_names_and_tags_and_recounts(tmp_path: Path) -> None:
    run = write_run(tmp_path / "exploding", exploding=True)
    report = run_analysis(run, layer_glob="gradients/fc1.*")
    assert sorted(verdicts(report)) == ["fc1.bias", "fc1.weight"]
    assert report.runs[0].counts["nan"] == 2
    unfiltered = run_analysis(run)
    assert filter_layers(unfiltered.runs, None) == list(unfiltered.runs)
    with pytest.raises(InputError, match="no parameter matches --layer 'conv\\*'"):
        filter_layers(unfiltered.runs, "conv*")


def test_run_glob_matches_the_directory_name(tmp_path: Path) -> None:
    write_run(tmp_path / "healthy", exploding=False)
    write_run(tmp_path / "exploding", exploding=True)
    report = run_analysis(tmp_path, run_glob="heal*")
    assert [run.run for run in report.runs] == [str(tmp_path / "healthy")]
    with pytest.raises(InputError, match="no run matches --run 'x\\*' \\(runs found: "):
        run_analysis(tmp_path, run_glob="x*")


def test_progress_reaches_the_total_and_never_goes_back(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", exploding=False, files=2)
    calls: list[tuple[int, int]] = []
    run_analysis(run, progress=lambda done, total: calls.append((done, total)))
    sizes = sum(path.stat().st_size for path in run.iterdir())
    assert calls and all(total == sizes for _, total in calls)
    done = [d for d, _ in calls]
    assert done == sorted(done) and done[0] == 0 and done[-1] == sizes


def test_a_run_with_nothing_readable_is_reported_among_readable_ones(tmp_path: Path) -> None:
    write_run(tmp_path / "good", exploding=False)
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "events.out.tfevents.1.host").write_bytes(b"")
    report = run_analysis(tmp_path)
    empty = next(run for run in report.runs if run.run.endswith("empty"))
    assert empty.layers == () and empty.steps is None
    assert empty.warnings[-1] == "no histogram or scalar could be read in this run"


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"", "1 event file, empty (0 bytes)"),
        (b"\x00garbage" * 300, "no valid TFRecord in 1 event file"),
    ],
)
def test_nothing_readable_says_why(tmp_path: Path, content: bytes, reason: str) -> None:
    (tmp_path / "events.out.tfevents.1.host").write_bytes(content)
    with pytest.raises(InputError, match="no TensorBoard records could be read from") as error:
        run_analysis(tmp_path)
    assert reason in str(error.value)


def test_events_without_values_are_a_run_with_nothing_to_judge(tmp_path: Path) -> None:
    (tmp_path / "events.out.tfevents.1.host").write_bytes(
        ef.frame([ef.file_version().SerializeToString()])
    )
    (run,) = run_analysis(tmp_path).runs
    assert not run.judgeable
    assert run.holds == "no histogram or scalar (1 event: graphs, images or text)"
    assert run.warnings == ()


def test_reduce_file_can_run_in_another_process(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", exploding=False)
    (path,) = sorted(str(p) for p in run.iterdir())
    part = reduce_file(path, str(run), StepWindow(5, 9))
    assert (part.values_read, part.values_kept) == (STEPS * (2 * len(PARAMETERS) + 1), 5 * 7)
    assert pickle.loads(pickle.dumps(reduce_file)) is reduce_file
    copy = pickle.loads(pickle.dumps(part))
    assert isinstance(copy, FilePart) and copy.values_kept == part.values_kept
    assert sorted(copy.data.histograms) == sorted(part.data.histograms)


def test_runs_judged_on_two_processes_report_as_on_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Several runs share two worker processes for their verdicts (forced here: the runs are
    small); the reports are the same as on one, in the same order, and both workers judged."""
    for number, exploding in enumerate((True, False, True, False)):
        write_run(tmp_path / f"run{number}", exploding=exploding, seed=number)
    one = run_analysis(tmp_path, jobs=1)
    monkeypatch.setattr(pipeline, "analyze_parts", _judged_noting_pid)
    monkeypatch.setattr(plan, "VERDICT_SPLIT_SECONDS", 0.0)
    two = run_analysis(tmp_path, jobs=2)
    judged_by = [int(run.warnings[-1].split()[-1]) for run in two.runs]
    assert os.getpid() not in judged_by and len(set(judged_by)) == 2
    stripped = [dataclasses.replace(run, warnings=run.warnings[:-1]) for run in two.runs]
    assert repr(stripped) == repr(list(one.runs))  # repr: NaN in the trends
    assert [run.counts["nan"] > 0 for run in one.runs] == [True, False, True, False]


_JUDGED = pipeline.analyze_parts


def _judged_noting_pid(run: Run, parts: Sequence[FilePart], **options: object) -> RunReport:
    """``pipeline.analyze_parts`` slowed down (so that both workers take runs), its pid noted."""
    time.sleep(0.2)
    report = _JUDGED(run, parts, **options)  # type: ignore[arg-type]
    return dataclasses.replace(report, warnings=(*report.warnings, f"pid {os.getpid()}"))


def test_verdict_estimate_counts_a_series_once_and_its_rows_as_merged(tmp_path: Path) -> None:
    run = write_run(tmp_path / "three", exploding=False, files=3)
    parts = [reduce_file(str(path), str(run), StepWindow()) for path in sorted(run.iterdir())]
    keys = {key for part in parts for key in (*part.data.histograms, *part.data.scalars)}
    rows = sum(
        len(one)
        for part in parts
        for one in (*part.data.histograms.values(), *part.data.scalars.values())
    )
    assert len(keys) < sum(len(p.data.histograms) + len(p.data.scalars) for p in parts)
    expected = len(keys) * plan.VERDICT_SECONDS_PER_SERIES + rows * plan.VERDICT_SECONDS_PER_ROW
    assert plan.verdict_seconds([part.data for part in parts]) == pytest.approx(expected)


def test_the_default_is_one_process_per_cpu_up_to_a_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda _: set(range(64)), raising=False)
    assert parallel.default_jobs() == parallel.DEFAULT_JOBS_MAX == 8
    monkeypatch.setattr(os, "sched_getaffinity", lambda _: {0, 1}, raising=False)
    assert parallel.default_jobs() == 2


def test_runs_read_and_judged_each_in_one_task_report_as_on_one_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sweep: each run read and judged by a worker, only its report and its files' parts
    without series sent back; the report is the one of one process, damage included."""
    for number, exploding in enumerate((True, False, True)):
        write_run(tmp_path / f"run{number}", exploding=exploding, seed=number, files=2)
    damaged = tmp_path / "run1" / sorted(p.name for p in (tmp_path / "run1").iterdir())[0]
    damaged.write_bytes(damaged.read_bytes()[:-7])  # a half-written last record
    one = run_analysis(tmp_path, jobs=1)
    monkeypatch.setattr(read, "WHOLE_RUNS_MIN_BYTES", 0)
    seen: list[tuple[int, int]] = []
    two = run_analysis(tmp_path, jobs=2, progress=lambda done, total: seen.append((done, total)))
    assert repr(two) == repr(one)  # repr: NaN in the trends
    assert "incomplete final record" in one.runs[1].warnings[0]  # not vacuous: damage kept
    total = sum(p.stat().st_size for p in tmp_path.rglob("events.out.tfevents.*"))
    assert seen[0] == (0, total) and seen[-1] == (total, total)


def without_charts(report: Report) -> Report:
    runs = tuple(
        dataclasses.replace(
            run,
            layers=tuple(
                dataclasses.replace(layer, series=None, update_series=None) for layer in run.layers
            ),
            loss=None,
        )
        for run in report.runs
    )
    return dataclasses.replace(report, runs=runs)


def test_a_report_without_charts_is_the_report_without_its_per_step_series(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``charts=False`` (every format but HTML) leaves out what only the HTML report draws, in
    one process and from the workers' tasks alike; nothing else changes."""
    for number, exploding in enumerate((True, False)):
        write_run(tmp_path / f"run{number}", exploding=exploding, seed=number)
    charted = run_analysis(tmp_path, jobs=1)
    assert all(layer.series is not None for run in charted.runs for layer in run.layers)
    plain = run_analysis(tmp_path, jobs=1, charts=False)
    assert all(
        layer.series is layer.update_series is None for run in plain.runs for layer in run.layers
    )
    assert all(run.loss is None for run in plain.runs)
    assert repr(plain) == repr(without_charts(charted))  # repr: NaN in the trends
    monkeypatch.setattr(read, "WHOLE_RUNS_MIN_BYTES", 0)  # the runs read and judged in tasks
    assert repr(run_analysis(tmp_path, jobs=2, charts=False)) == repr(plain)


def test_runs_read_in_tasks_with_nothing_readable_is_an_input_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for number in range(2):
        (tmp_path / f"run{number}").mkdir()
        (tmp_path / f"run{number}" / "events.out.tfevents.1.host").write_bytes(b"\x00" * 64)
    monkeypatch.setattr(read, "WHOLE_RUNS_MIN_BYTES", 0)
    with pytest.raises(InputError, match="no valid TFRecord in 2 event files"):
        run_analysis(tmp_path, jobs=2)


def test_a_sweeps_runs_go_in_tasks_of_neighbours_of_about_equal_bytes() -> None:
    assert read._batches([10] * 8, 4) == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert read._batches([10] * 9, 4) == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    assert read._batches([100, 1, 1, 1, 1], 2) == [[0], [1, 2, 3, 4]]  # 51 bytes a task
    assert read._batches([5, 5], 16) == [[0], [1]]  # never an empty task
    assert read._batches([], 4) == []
