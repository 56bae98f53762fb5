"""Logs written by the real libraries (``tests/support/library_logs.py``): HF Trainer, Lightning's
CSVLogger, MLflow's file and SQLite stores, W&B offline runs, each healthy, exploding, NaN
and vanishing. The verdicts and their onsets, and the same verdicts for an event file holding
the same numbers (``tests/support/as_event_file.py``), exit codes included.

The libraries write their logs once per session, in three processes side by side (HF;
Lightning with its CSV and MLflow loggers; W&B), a few seconds each
(``tests/support/library_runs.py``, the ``library_logs`` fixture).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from gradcheck.cli import cli
from gradcheck.events.reader import read_run
from gradcheck.model import GLOBAL_NORM_ROW, RunReport
from gradcheck.pipeline import analyze
from tests.support.as_event_file import write_as_event_file
from tests.support.library_logs import KINDS, NAN_STEP
from tests.support.library_runs import FORMATS, LibraryLogs, run_path, the_run


def report_of(logs: LibraryLogs, source: str, kind: str) -> RunReport:
    run = the_run(logs, source, kind)
    (report,) = [
        r for r in analyze([str(run_path(logs, source, kind))], jobs=1).runs if r.run == run.path
    ]
    return report


def judged(report: RunReport) -> dict[str, tuple[object, ...]]:
    """Each row's verdict, flags, onset and the onset of each flag."""
    return {
        layer.name: (layer.verdict, layer.flags, layer.first_bad_step, dict(layer.onsets))
        for layer in report.layers
    }


def first_layer(report: RunReport) -> tuple[str, str]:
    """The names of the first linear layer's weight and bias (``net.0.weight``, W&B's
    ``0.weight``)."""
    weight = next(layer.name for layer in report.layers if layer.name.endswith("0.weight"))
    return weight, weight[: -len("weight")] + "bias"


def last_weight(report: RunReport) -> str:
    """The weight of the last linear layer (the highest module number: ``net.16.weight``)."""
    weights = [layer.name for layer in report.layers if layer.name.endswith(".weight")]
    return max(weights, key=lambda name: int(name.split(".")[-2]))


PER_PARAMETER = ("lightning-csv", "mlflow-files", "mlflow-sqlite", "wandb")


@pytest.mark.slow
@pytest.mark.parametrize("source", FORMATS)
def test_healthy_runs_are_clean(library_logs: LibraryLogs, source: str) -> None:
    report = report_of(library_logs, source, "healthy")
    assert report.layers and {layer.verdict for layer in report.layers} == {"ok"}
    if source == "hf-trainer":  # the Trainer logs one global norm: its row
        assert [layer.name for layer in report.layers] == [GLOBAL_NORM_ROW]
        assert report.gradients == "global"
    else:
        assert len(report.layers) == 6 and report.gradients == "per_parameter"


@pytest.mark.slow
@pytest.mark.parametrize("source", PER_PARAMETER)
def test_exploding_linear_model_is_flagged_from_its_third_step(
    library_logs: LibraryLogs, source: str
) -> None:
    report = report_of(library_logs, source, "exploding")
    weight, bias = first_layer(report)
    rows = judged(report)
    assert set(rows) == {weight, bias}
    for name in (weight, bias):
        verdict, flags, onset, _ = rows[name]
        assert verdict == "exploding" and "nan" not in flags and onset == 3, rows


@pytest.mark.slow
def test_exploding_hf_run_is_flagged_on_its_global_norm(library_logs: LibraryLogs) -> None:
    rows = judged(report_of(library_logs, "hf-trainer", "exploding"))
    # the loss is scaled 1.5x a step from the start: the norm climbs from its first logged step
    # (the Trainer's step 1), which is the onset (issue 30's onset rule; was 5)
    assert rows == {GLOBAL_NORM_ROW: ("exploding", ("exploding",), 1, {"exploding": 1})}


@pytest.mark.slow
@pytest.mark.parametrize("source", PER_PARAMETER)
def test_nan_input_makes_every_parameter_nan_at_its_step(
    library_logs: LibraryLogs, source: str
) -> None:
    rows = judged(report_of(library_logs, source, "nan"))
    assert len(rows) == 6
    for name, (verdict, _, onset, onsets) in rows.items():
        assert verdict == "nan" and onset == NAN_STEP and onsets["nan"] == NAN_STEP, name


@pytest.mark.slow
def test_nan_loss_in_hf_run_is_flagged_at_the_step_it_logs(library_logs: LibraryLogs) -> None:
    # the loss turns NaN in the optimizer step that takes global_step NAN_STEP to NAN_STEP + 1:
    # the Trainer logs its grad_norm under the step it reached
    verdict, _, onset, _ = judged(report_of(library_logs, "hf-trainer", "nan"))[GLOBAL_NORM_ROW]
    assert (verdict, onset) == ("nan", NAN_STEP + 1)


@pytest.mark.slow
@pytest.mark.parametrize("source", PER_PARAMETER)
def test_deep_sigmoid_vanishes_from_the_first_layer(library_logs: LibraryLogs, source: str) -> None:
    report = report_of(library_logs, source, "vanishing")
    rows = judged(report)
    weight, _ = first_layer(report)
    assert rows[weight][0] == "vanishing" and rows[weight][2] == 0
    assert rows[last_weight(report)][0] == "ok"  # the output layer: the largest gradient
    assert (
        report.counts["vanishing"] >= 8 and report.counts["nan"] == report.counts["exploding"] == 0
    )


@pytest.mark.slow
def test_a_global_norm_cannot_show_vanishing(library_logs: LibraryLogs) -> None:
    report = report_of(library_logs, "hf-trainer", "vanishing")
    assert judged(report) == {GLOBAL_NORM_ROW: ("ok", (), None, {})}
    assert any("vanishing gradients" in note and "cannot" in note for note in report.notes)


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("source", FORMATS)
def test_an_event_file_of_the_same_numbers_gets_the_same_verdicts(
    library_logs: LibraryLogs, source: str, kind: str, tmp_path: Path
) -> None:
    run = the_run(library_logs, source, kind)
    written = write_as_event_file(read_run(run), tmp_path / "events.out.tfevents.1.same")
    assert written > 0
    source_report = report_of(library_logs, source, kind)
    (event_report,) = analyze([str(tmp_path)], jobs=1).runs
    assert judged(event_report) == judged(source_report)
    assert event_report.counts == source_report.counts
    assert event_report.gradients == source_report.gradients
    assert (event_report.clipping is None) == (source_report.clipping is None)
    if source_report.clipping is not None and event_report.clipping is not None:
        assert event_report.clipping.median == pytest.approx(source_report.clipping.median)
    selected = ["--run", kind] if source.startswith("mlflow") else []  # a store holds four
    exit_codes = [
        CliRunner().invoke(cli, ["analyze", *paths, "--format", "json"]).exit_code
        for paths in ([str(tmp_path)], [str(run_path(library_logs, source, kind)), *selected])
    ]
    expected = 1 if kind in ("nan", "exploding") else 0  # the default --fail-on
    assert exit_codes == [expected, expected]
