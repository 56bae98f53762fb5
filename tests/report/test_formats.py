"""Formatters on hand-built reports: golden files, the 80-column limit, the JSON contract.

Regenerate the golden files after an intended change with
``GRADCHECK_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/report/test_formats.py`` and review
the diff.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from gradcheck import cli
from gradcheck.report import FORMATS, Env, FormatOptions, formatter_for
from gradcheck.report.csv import CsvFormatter
from gradcheck.report.github import GithubFormatter
from gradcheck.report.json_format import SCHEMA_VERSION, JsonFormatter, report_document
from gradcheck.report.markdown import MarkdownFormatter
from gradcheck.report.numbers import format_number, format_ratio, format_steps
from gradcheck.report.sparkline import BLOCKS, resample, sparkline
from gradcheck.report.table import TableFormatter
from gradcheck.report.view import notes_for, select_layers
from tests.support.golden import check_golden
from tests.support.handmade import (
    clean_report,
    healthy_run,
    layer,
    sample_report,
    spiky_report,
    troubled_run,
)

ANSI = re.compile(r"\x1b\[[0-9;]*m")


# --- the registry -----------------------------------------------------------------------------


def test_every_format_choice_has_a_formatter() -> None:
    analyze_format = next(p for p in cli.cli.commands["analyze"].params if p.name == "format_name")
    choices = set(analyze_format.type.choices)  # type: ignore[attr-defined]
    assert choices == set(FORMATS) == set(cli.FORMAT_CHOICES)
    for name in choices:
        text = formatter_for(name).format(sample_report())
        assert text.endswith("\n") and ("fc1.weight" in text or name == "table" and "fc1" in text)


# --- golden files -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "formatter"),
    [
        ("report.table.txt", TableFormatter(FormatOptions(env=Env(width=80)))),
        ("report.all.table.txt", TableFormatter(FormatOptions(env=Env(width=80), show_all=True))),
        ("report.top2.table.txt", TableFormatter(FormatOptions(env=Env(width=80), top=2))),
        ("report.wide.table.txt", TableFormatter(FormatOptions(env=Env(width=120)))),
        ("report.json", JsonFormatter()),
        ("report.md", MarkdownFormatter()),
        ("report.csv", CsvFormatter()),
    ],
)
def test_golden(name: str, formatter: object) -> None:
    check_golden(name, formatter.format(sample_report()))  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("name", "formatter"),
    [
        ("spiky.table.txt", TableFormatter(FormatOptions(env=Env(width=80)))),
        ("spiky.explain.table.txt", TableFormatter(FormatOptions(env=Env(width=80), explain=True))),
        ("spiky.json", JsonFormatter()),
        ("spiky.md", MarkdownFormatter()),
        ("spiky.csv", CsvFormatter()),
        ("spiky.github.txt", GithubFormatter(FormatOptions(fail_on=frozenset({"dead"})))),
    ],
)
def test_golden_dead_layer_and_loss_spikes(name: str, formatter: object) -> None:
    """Issue 35: a layer's outputs judged dead, and the run's loss spikes with their leaders."""
    check_golden(name, formatter.format(spiky_report()))  # type: ignore[attr-defined]


def test_golden_colour_table_on_a_terminal() -> None:
    env = Env(stdout_isatty=True, width=80)
    text = TableFormatter(FormatOptions(env=env)).format(sample_report())
    check_golden("report.color.table.txt", text)
    assert "\x1b[1;31mnan" in text  # bold red NaN verdict
    assert ANSI.sub("", text) == TableFormatter(FormatOptions(env=Env(width=80))).format(
        sample_report()
    )


# --- table ------------------------------------------------------------------------------------


@pytest.mark.parametrize("width", [40, 60, 80, 100])
@pytest.mark.parametrize(("show_all", "explain"), [(False, False), (False, True), (True, False)])
def test_table_fits_the_width(width: int, show_all: bool, explain: bool) -> None:
    options = FormatOptions(env=Env(width=width), show_all=show_all, explain=explain)
    lines = TableFormatter(options).format(sample_report()).splitlines()
    assert max(len(line) for line in lines) <= width
    assert len(lines) > 8


def test_table_honours_no_color_on_a_terminal() -> None:
    env = Env(stdout_isatty=True, no_color=True, width=80)
    assert not env.color
    assert not ANSI.search(TableFormatter(FormatOptions(env=env)).format(sample_report()))


def test_a_healthy_run_takes_two_lines_none_repeating_another() -> None:
    text = TableFormatter(FormatOptions()).format(clean_report())
    assert text.splitlines() == [
        "runs/healthy · steps 0–2 · 1 file",
        "  all healthy: gradients and weights of 2 parameters",
    ]


def test_table_lists_layers_and_every_parameter_with_all() -> None:
    folded = TableFormatter(FormatOptions()).format(sample_report())
    assert "fc3" not in folded  # healthy: counted ("2 ok"), not listed
    assert "6 parameters in 5 layers: 1 nan · 1 exploding · 1 vanishing · 1 static · 2 ok" in (
        folded
    )
    unfolded = TableFormatter(FormatOptions(show_all=True)).format(sample_report())
    assert "fc3.weight" in unfolded and "fc3.bias|odd" in unfolded


def test_table_rows_are_layers_worst_first_with_onset_parameters_and_sparkline() -> None:
    lines = TableFormatter(FormatOptions()).format(sample_report()).splitlines()
    heading = next(i for i, line in enumerate(lines) if line.startswith("  verdict   from"))
    rows = [line.split() for line in lines[heading + 1 : heading + 5]]
    assert [row[:4] for row in rows] == [
        ["nan", "24", "fc1", "weight"],
        ["exploding", "12", "fc2", "weight"],
        ["vanishing", "0", "encoder.layers.0.self_attention", "in_proj_weight"],
        ["static", "bn1", "weight", "·" * 16],  # no onset; a gradient that is exactly zero
    ]
    assert rows[0][4].endswith("█!!!!") and rows[0][4][0] == BLOCKS[0]  # 32 steps in 16


def test_table_all_rows_are_parameters_with_key_numbers() -> None:
    lines = TableFormatter(FormatOptions(show_all=True)).format(sample_report()).splitlines()
    heading = next(i for i, line in enumerate(lines) if line.startswith("  verdict   parameter"))
    rows = [line.split() for line in lines[heading + 1 : heading + 7]]
    assert [row[0] for row in rows] == ["nan", "exploding", "vanishing", "static", "ok", "ok"]
    assert rows[0][1:7] == ["fc1.weight", "24", "3.16", "–", "1", "0.84"]


def test_table_evidence_only_with_explain() -> None:
    evidence = "gradient norm is NaN from step 24"
    assert evidence not in TableFormatter(FormatOptions()).format(sample_report())
    assert evidence in TableFormatter(FormatOptions(explain=True)).format(sample_report())
    assert evidence in TableFormatter(FormatOptions(show_all=True)).format(sample_report())


def test_table_top_counts_what_it_does_not_list() -> None:
    text = TableFormatter(FormatOptions(top=1)).format(sample_report())
    assert "… 3 more layers with findings (--top N, --all)" in text
    assert "fc2" not in text


# --- JSON -------------------------------------------------------------------------------------


def strict_json(text: str) -> dict:
    """Parse ``text`` refusing NaN/Infinity, which strict JSON parsers (jq, JS) reject."""

    def refuse(token: str) -> None:
        raise AssertionError(f"non-standard JSON constant {token}")

    return json.loads(text, parse_constant=refuse)


def test_json_follows_the_schema() -> None:
    document = strict_json(JsonFormatter().format(sample_report()))
    assert document["schema"] == SCHEMA_VERSION == 1
    assert document["gradcheck"] == "0.1.0"
    assert document["warnings"] == ["runs/empty: no histogram or scalar could be read"]
    troubled, healthy = document["runs"]
    assert troubled["run"] == "runs/troubled" and troubled["steps"] == [0, 31]
    assert len(troubled["files"]) == 2 and troubled["warnings"][0].startswith("events.out")
    names = [entry["name"] for entry in troubled["layers"]]
    assert len(names) == 6 and "fc3.weight" in names  # healthy parameters included
    severities = [entry["severity"] for entry in troubled["layers"]]
    assert severities == sorted(severities, reverse=True)
    first = troubled["layers"][0]
    assert set(first) >= {
        "name",
        "weight_tag",
        "grad_tag",
        "verdict",
        "flags",
        "severity",
        "first_bad_step",
        "onsets",
        "evidence",
        "notes",
        "stats",
    }
    assert first["flags"] == ["nan", "exploding"] and first["first_bad_step"] == 24
    assert first["stats"]["grad_norm_last"] is None
    assert first["trend"][-1] is None and first["trend"][0] == pytest.approx(0.1)
    assert troubled["clipping"]["max"] is None and troubled["clipping"]["suggested_clip_norm"] == 5
    assert healthy["layers"][0]["grad_tag"] is None
    assert troubled["counts"] == {
        "nan": 1, "exploding": 1, "diverging": 0, "vanishing": 1, "dead": 0, "saturated": 0,
        "static": 1, "slow": 0, "overflow": 0, "ok": 2,
    }  # fmt: skip
    assert troubled["judgeable"] is True and troubled["gradients"] == "per_parameter"
    assert troubled["holds"] is None and troubled["notes"] == []
    assert first["onsets"] == {} and first["notes"] == []
    assert troubled["spikes"] == [] and first["activation_tag"] is None


def test_json_lists_spikes_and_activation_rows() -> None:
    """Issue 35: ``runs[].spikes`` as ``{"step", "loss_ratio", "led_by", ...}``; a layer judged
    from its outputs names its activation tag and no weight or gradient tag."""
    (run,) = strict_json(JsonFormatter().format(spiky_report()))["runs"]
    assert run["spikes"] == [
        {"step": 152, "loss_ratio": 8.25, "led_by": ["lm_head.weight"], "gradient_step": 151,
         "rise": 240.0, "note": None},
        {"step": 304, "loss_ratio": 4.5, "led_by": [], "gradient_step": None, "rise": None,
         "note": "no gradient logged at step 304 or the logged step before (303)"},
    ]  # fmt: skip
    dead = run["layers"][0]
    assert (dead["name"], dead["verdict"], dead["activation_tag"]) == (
        "relu2", "dead", "activations/relu2"
    )  # fmt: skip
    assert dead["weight_tag"] is dead["grad_tag"] is None and dead["onsets"] == {"dead": 1}


@pytest.mark.parametrize("runs", [0, 1, 3])
def test_json_is_made_a_run_at_a_time_as_the_standard_library_writes_it_whole(runs: int) -> None:
    """``chunks``: the head, then one part per run (a sweep's document is never held whole);
    joined, the text of the whole document as ``json.dumps(indent=2)`` writes it."""
    base = sample_report()
    report = replace(base, runs=(base.runs * 3)[:runs])
    parts = list(JsonFormatter().chunks(report))
    whole = json.dumps(report_document(report), indent=2, ensure_ascii=False, allow_nan=False)
    assert "".join(parts) == whole + "\n"
    assert len(parts) == (1 if runs == 0 else runs + 2)
    assert len(strict_json("".join(parts))["runs"]) == runs


@pytest.mark.parametrize("runs", [0, 1, 3])
def test_csv_is_made_a_run_at_a_time(runs: int) -> None:
    """``chunks``: the header row, then each run's rows (the bytes: ``test_golden``)."""
    base = sample_report()
    report = replace(base, runs=(base.runs * 3)[:runs])
    header, *parts = CsvFormatter().chunks(report)
    assert next(csv.reader(io.StringIO(header)))[:2] == ["run", "name"]
    assert len(list(csv.reader(io.StringIO(header)))) == 1 and len(parts) == runs
    for part, run in zip(parts, report.runs, strict=True):
        rows = list(csv.reader(io.StringIO(part)))
        assert len(rows) == len(run.layers) and {row[0] for row in rows} == {run.run}


def test_json_sorts_layers_by_severity_even_if_the_report_does_not() -> None:
    run = troubled_run()
    shuffled = replace(run, layers=tuple(reversed(run.layers)))
    document = strict_json(JsonFormatter().format(replace(sample_report(), runs=(shuffled,))))
    assert [entry["verdict"] for entry in document["runs"][0]["layers"]][:2] == ["nan", "exploding"]


def test_json_turns_numpy_numbers_into_plain_ones() -> None:
    odd = layer(
        "w",
        "ok",
        stats={"count": np.int64(7), "mean": np.float32(0.5), "bad": np.float64("nan")},
        trend=(np.float32(1.5),),
    )
    run = replace(healthy_run(), layers=(odd,))
    stats = strict_json(JsonFormatter().format(replace(clean_report(), runs=(run,))))["runs"][0][
        "layers"
    ][0]["stats"]
    assert stats == {"count": 7, "mean": 0.5, "bad": None}


# --- CSV and Markdown -------------------------------------------------------------------------


def test_csv_is_one_row_per_run_and_parameter_for_pandas() -> None:
    frame = pd.read_csv(io.StringIO(CsvFormatter().format(sample_report())))
    assert len(frame) == 8
    assert list(frame.columns[:4]) == ["run", "name", "verdict", "flags"]
    assert {"grad_norm_median", "weight_norm_median", "nonfinite_steps"} <= set(frame.columns)
    nan_row = frame[frame["name"] == "fc1.weight"].iloc[0]
    assert nan_row["flags"] == "nan;exploding" and nan_row["first_bad_step"] == 24
    assert math.isnan(nan_row["grad_norm_last"])
    vanishing = frame[frame["verdict"] == "vanishing"].iloc[0]
    assert vanishing["grad_norm_median"] == pytest.approx(2.4e-8)
    assert frame[frame["run"] == "runs/healthy"]["grad_tag"].isna().all()


def test_csv_quotes_cells_that_hold_commas() -> None:
    rows = list(csv.reader(io.StringIO(CsvFormatter().format(sample_report()))))
    assert len({len(row) for row in rows}) == 1
    hint = rows[0].index("hint")
    assert rows[3][hint].startswith("Saturating activations deep in the stack; try ReLU,")


def test_markdown_has_a_summary_and_a_table_per_run() -> None:
    text = MarkdownFormatter().format(sample_report())
    assert text.startswith("## gradcheck 0.1.0: 2 runs, 4 findings (1 nan")
    assert "### `runs/troubled`" in text and "### `runs/healthy`" in text
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    assert len(rows) == 2 + 4  # header, alignment, four findings
    assert all(row.count(" | ") == rows[0].count(" | ") for row in rows)
    assert "`fc3.bias|odd`" in text  # healthy, so listed outside the table: no escape needed


# --- helpers ----------------------------------------------------------------------------------


def test_sparkline_is_log_scaled_and_marks_nan_and_zero() -> None:
    assert sparkline([1e-6, 1e-3, 1.0], 10) == BLOCKS[0] + BLOCKS[4] + BLOCKS[-1]
    assert sparkline([1.0, math.nan, 0.0, math.inf], 10) == BLOCKS[0] + "!·!"
    assert sparkline([], 10) == "" and sparkline([1.0], 0) == ""
    assert sparkline([3.0] * 5, 10) == BLOCKS[0] * 5


def test_resample_keeps_spikes_and_nan() -> None:
    values = [1.0] * 100
    values[37] = 1e6
    values[90] = math.nan
    points = resample(values, 10)
    assert len(points) == 10 and points[3] == 1e6 and math.isnan(points[9])
    assert points.count(1.0) == 8


def test_number_formats() -> None:
    assert [format_number(v) for v in (None, math.nan, -math.inf, 0, 0.0, 3.14159)] == [
        "–",
        "nan",
        "-inf",
        "0",
        "0",
        "3.14",
    ]
    assert format_number(2.4e-8) == "2.4e-8" and format_number(123456.0) == "1.2e5"
    assert format_number(1250.0) == "1250" and format_number(0.00103) == "1.0e-3"
    assert format_number(3.5e21) == "3.5e21" and float(format_number(2.4e-8)) == 2.4e-8
    assert format_ratio(2.7e-9) == "3e-9" and format_ratio(0.25) == "0.25"
    assert format_steps((0, 31)) == "0–31" and format_steps((5, 5)) == "5"
    assert format_steps(None) == "–"


def test_notes_give_each_hint_once() -> None:
    notes, left_out = notes_for(troubled_run().layers, every=False)
    assert [note.layer.name for note in notes] == [
        "fc1.weight",
        "fc2.weight",
        "encoder.layers.0.self_attention.in_proj_weight",
        "bn1.weight",
    ]
    assert left_out == 0
    twins = tuple(replace(x, name=f"{x.name}.twin") for x in troubled_run().layers[:2])
    notes, left_out = notes_for(troubled_run().layers[:2] + twins, every=False)
    assert [(n.layer.name, bool(n.hint)) for n in notes] == [
        ("fc1.weight", True),
        ("fc2.weight", True),
    ]
    assert left_out == 2
    notes, left_out = notes_for(troubled_run().layers[:2] + twins, every=True)
    assert len(notes) == 4 and left_out == 0 and notes[2].hint == ""


def test_select_layers_top_all_and_fold() -> None:
    run = troubled_run()
    picked = select_layers(run, top=2, show_all=False)
    assert [x.name for x in picked.listed] == ["fc1.weight", "fc2.weight"]
    assert len(picked.hidden) == 2 and len(picked.folded) == 2
    everything = select_layers(run, top=2, show_all=True)
    assert len(everything.listed) == 6 and not everything.hidden and not everything.folded
