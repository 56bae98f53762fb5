"""The default terminal view's pieces: layer rows, names that stay distinct, short advice,
the width (terminal, ``COLUMNS``, ``--width``) and when clipping advice is shown."""

from __future__ import annotations

import dataclasses
import io

import numpy as np
import pytest

from gradcheck.model import Report, RunReport
from gradcheck.report import Env, FormatOptions
from gradcheck.report.advice import LINE, SHORT, advice_for
from gradcheck.report.layers import common_prefix, layer_view, split_name
from gradcheck.report.names import distinct_shortened, shortened
from gradcheck.report.table import TableFormatter
from gradcheck.report.view import clipping_applies
from gradcheck.verdicts import clipping, hints
from gradcheck.verdicts.clipping import steps_for_percentile
from gradcheck.verdicts.config import DEFAULT_CONFIG
from gradcheck.verdicts.rules import slow
from tests.support.handmade import healthy_run, layer, troubled_run


def run_of(*layers: object) -> RunReport:
    return dataclasses.replace(healthy_run(), layers=tuple(layers), run="runs/x")


def test_split_name_by_the_last_path_component() -> None:
    assert split_name("mlp/dense_0/kernel") == ("mlp/dense_0", "kernel")
    assert split_name("encoder.layers.0.in_proj_weight") == ("encoder.layers.0", "in_proj_weight")
    assert split_name("model/block.1/kernel") == ("model/block.1", "kernel")
    assert split_name("kernel#1") == ("kernel#1", "")
    assert split_name("(global gradient norm)") == ("(global gradient norm)", "")


def test_common_prefix_keeps_a_layer_and_a_parameter() -> None:
    assert common_prefix(["mlp/a/kernel", "mlp/b/bias"]) == "mlp/"
    assert common_prefix(["model/gen/a/kernel", "model/gen/b/kernel"]) == "model/gen/"
    assert common_prefix(["mlp/a/kernel", "mlp/a/bias"]) == "mlp/"  # one layer: it stays
    assert common_prefix(["0.weight", "2.weight"]) == ""
    assert common_prefix(["mlp/a/kernel", "mlp.b.bias"]) == ""  # mixed separators
    assert common_prefix(["mlp/a/kernel", "(global gradient norm)"]) == ""


def vanishing_stack(count: int, healthy_from: int) -> RunReport:
    """``dense_i/kernel`` and ``dense_i/bias`` for i < count, vanishing below ``healthy_from``."""
    layers = []
    for i in range(count):
        for j, name in enumerate(("kernel", "bias")):
            verdict = "vanishing" if i < healthy_from else "ok"
            layers.append(
                layer(
                    f"seq/dense_{i}/{name}",
                    verdict,
                    severity=10.0 - i if verdict != "ok" else 0.0,
                    first_bad_step=0 if verdict != "ok" else None,
                    depth=2 * i + j,
                    hint=hints.VANISHING_EARLY if verdict != "ok" else "",
                )
            )
    return run_of(*layers)


def test_consecutive_layers_with_one_verdict_and_onset_fold_into_one_row() -> None:
    view = layer_view(vanishing_stack(9, healthy_from=6))
    assert view.prefix == "seq/"
    assert view.layers == 9 and view.healthy_layers == 3
    (row,) = view.rows
    assert row.layer_text() == "dense_0 … dense_5"
    assert row.parameter_text() == "kernel, bias"
    assert row.verdict == "vanishing" and row.onset == 0 and len(row.members) == 12


def test_a_healthy_layer_or_another_onset_breaks_a_fold_and_rows_go_worst_first() -> None:
    run = run_of(
        layer("a/kernel", "nan", severity=5, first_bad_step=22, depth=0),
        layer("b/kernel", "ok", depth=1),
        layer("c/kernel", "nan", severity=9, first_bad_step=21, depth=2),
        layer("c/bias", "exploding", severity=3, first_bad_step=4, depth=3),
        layer("d/kernel", "nan", severity=1, first_bad_step=22, depth=4),
        layer("e/kernel", "static", severity=1, depth=5),
    )
    rows = layer_view(run).rows
    assert [(r.layer_text(), r.verdict, r.onset) for r in rows] == [
        ("c", "nan", 21),  # the earliest NaN first: where it started
        ("a", "nan", 22),
        ("d", "nan", 22),  # not folded with a: b lies between them
        ("e", "static", None),
    ]
    assert rows[0].parameter_text() == "kernel, bias"  # c's bias exploded: named in c's row


def test_folds_stay_within_a_submodel_and_name_the_last_layer_short() -> None:
    names = ["gen/LSTM1/cell_5", "gen/LSTM2/cell_6", "gen/Dense1", "disc/LSTM1/cell_9"]
    run = run_of(
        *(
            layer(f"{name}/kernel", "nan", severity=1, first_bad_step=50, depth=i)
            for i, name in enumerate(names)
        )
    )
    rows = layer_view(run).rows
    assert [row.layer_text() for row in rows] == ["gen/LSTM1/cell_5 … Dense1", "disc/LSTM1/cell_9"]


def test_names_lose_leading_components_and_never_collide() -> None:
    assert shortened("generator/LSTM1/lstm_cell_5/recurrent_kernel", 30) == (
        "…/lstm_cell_5/recurrent_kernel"
    )
    assert shortened("fc1.weight", 15) == "fc1.weight"
    names = [f"gen/LSTM{i}/lstm_cell_{i}/recurrent_kernel" for i in range(3)]
    short = distinct_shortened(names, 30)
    assert len(set(short)) == 3 and all(len(text) <= 30 for text in short)
    twins = ["a/block/kernel", "b/block/kernel"]  # alike by their tail: the ends are kept
    assert distinct_shortened(twins, 12) == ["a/…/kernel", "b/…/kernel"]
    cells = ["xx_block_1/kernel", "xx_block_2/kernel"]  # alike however cut: kept whole (wrapped)
    assert distinct_shortened(cells, 8) == cells


def test_recurrent_kernels_stay_distinct_in_a_narrow_table() -> None:
    """The TimeGAN case: three ``…recurrent_kernel`` parameters once read the same."""
    run = run_of(
        *(
            layer(
                f"model/generator/LSTM{i}/lstm_cell_{i + 5}/{kind}",
                "nan",
                severity=1,
                first_bad_step=50,
                depth=3 * i + j,
            )  # fmt: skip
            for i in range(3)
            for j, kind in enumerate(("kernel", "recurrent_kernel", "bias"))
        ),
        layer("model/embedder/Dense1/kernel", "ok", depth=20),
    )
    report = Report(version="0", runs=(run,))
    text = TableFormatter(FormatOptions(env=Env(width=60), show_all=True)).format(report)
    rows = [line for line in text.splitlines() if line.startswith("  nan ")]
    recurrent = [line for line in rows if "recurrent_kernel" in line]
    assert len(rows) == 9 and len(recurrent) == 3 and len(set(recurrent)) == 3
    assert all(len(line) <= 60 for line in text.splitlines())
    assert "under model/" in text and not any("model/" in row for row in rows)  # said once


def hint_constants() -> list[str]:
    """Every hint text a rule can give (the module's upper-case strings, and slow's)."""
    texts = [
        value
        for name, value in vars(hints).items()
        if name.isupper() and isinstance(value, str) and not value.startswith(" ")
    ]
    return [*texts, slow.SLOW]


def test_every_hint_has_a_short_cause_and_fix_that_fit_one_line() -> None:
    for hint in hint_constants():
        advice = advice_for(hint.split("{", 1)[0] + "x")
        assert advice.cause and advice.fix, hint[:40]
    assert all(len(a.cause) <= LINE and len(a.fix) <= LINE for a in SHORT.values())
    # a rule's additions keep the advice of the hint they extend
    assert advice_for(hints.STATIC_PLAIN + hints.STATIC_NO_GRADIENTS) == SHORT[hints.STATIC_PLAIN]
    assert (
        advice_for(hints.exploding_rise_hint("rnn.weight_hh_l0"))
        == SHORT[hints.EXPLODING_RECURRENT]
    )
    assert advice_for("a hint nobody shortened").fix == "a hint nobody shortened"


def test_one_line_of_cause_and_of_fix_per_verdict_kind() -> None:
    report = Report(version="0", runs=(vanishing_stack(9, 6),))
    text = TableFormatter(FormatOptions()).format(report)
    lines = text.splitlines()
    assert sum(SHORT[hints.VANISHING_EARLY].cause in line for line in lines) == 1
    assert sum(SHORT[hints.VANISHING_EARLY].fix in line for line in lines) == 1
    assert len(lines) == 7  # header, counts, table heading, one row, cause, fix, pointer


# --- width ------------------------------------------------------------------------------------


class Stream(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


@pytest.mark.parametrize(
    ("tty", "environ", "width", "expected"),
    [
        (False, {}, None, 80),
        (False, {"COLUMNS": "60"}, None, 60),
        (False, {"COLUMNS": "200"}, None, 200),
        (False, {"COLUMNS": "junk"}, None, 80),
        (False, {"COLUMNS": "60"}, 100, 100),
        (False, {"COLUMNS": "10"}, None, 40),  # the narrowest layout kept
    ],
)
def test_width_is_given_else_columns_else_80(
    tty: bool, environ: dict[str, str], width: int | None, expected: int
) -> None:
    env = Env.from_system(Stream(tty), Stream(False), environ, width=width)
    assert env.width == expected


def test_width_on_a_terminal_is_the_terminals(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "97")  # what shutil.get_terminal_size reads first
    assert Env.from_system(Stream(True), Stream(False), {}).width == 97


# --- clipping ---------------------------------------------------------------------------------


def test_clipping_advice_applies_after_a_blow_up_a_clip_worth_a_word_or_when_asked() -> None:
    troubled = troubled_run()
    assert clipping_applies(troubled)  # NaN and exploding
    calm = dataclasses.replace(
        troubled,
        layers=tuple(x for x in troubled.layers if x.verdict in ("vanishing", "static", "ok")),
        clipping=dataclasses.replace(troubled.clipping, noteworthy=False),  # type: ignore[arg-type]
    )
    assert not clipping_applies(calm)
    assert clipping_applies(calm, asked=True)
    noteworthy = dataclasses.replace(calm, clipping=troubled.clipping)
    assert clipping_applies(noteworthy) == bool(troubled.clipping and troubled.clipping.noteworthy)
    assert not clipping_applies(healthy_run(), asked=True)  # no global norm: nothing to say


def test_a_suggestion_needs_enough_steps_for_its_percentile() -> None:
    assert steps_for_percentile(95.0) == 20
    assert steps_for_percentile(99.0) == 100
    assert steps_for_percentile(50.0) == 3
    norms = np.linspace(1.0, 2.0, 19)
    suggested, rule = clipping._suggestion(norms, DEFAULT_CONFIG, None)
    assert suggested is None and "a 95th percentile needs 20" in rule
    suggested, _ = clipping._suggestion(np.linspace(1.0, 2.0, 20), DEFAULT_CONFIG, None)
    assert suggested == 1.9


def test_layers_with_different_causes_stay_apart_and_each_cause_is_named() -> None:
    """torch_frozen's case: a frozen layer (no gradient) beside one left out of the optimizer."""
    run = run_of(
        layer("0.weight", "static", severity=2, depth=0, hint=hints.STATIC_FROZEN),
        layer("0.bias", "static", severity=2, depth=1, hint=hints.STATIC_FROZEN),
        layer("1.weight", "static", severity=1, depth=2, hint=hints.STATIC_PLAIN),
        layer("1.bias", "static", severity=1, depth=3, hint=hints.STATIC_PLAIN),
    )
    assert [row.layer_text() for row in layer_view(run).rows] == ["0", "1"]
    text = TableFormatter(FormatOptions(env=Env(width=100))).format(Report("0", (run,)))
    assert f"0: {SHORT[hints.STATIC_FROZEN].cause}" in text
    assert f"1: {SHORT[hints.STATIC_PLAIN].cause}" in text


def test_width_option_and_columns_reach_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from gradcheck import cli
    from tests.support.handmade import sample_report

    monkeypatch.setattr("gradcheck.pipeline.analyze", lambda *args, **kwargs: sample_report())
    for args, environ in ((["--width", "60"], {}), ([], {"COLUMNS": "60"})):
        result = CliRunner(env=environ).invoke(cli.cli, ["analyze", "x", *args])
        lines = result.stdout.splitlines()
        assert max(len(line) for line in lines) <= 60 and max(map(len, lines)) > 50, args
    wide = CliRunner(env={"COLUMNS": "60"}).invoke(cli.cli, ["analyze", "x", "--width", "120"])
    assert max(len(line) for line in wide.stdout.splitlines()) > 80
