"""``gradcheck compare`` without a framework: name matching, the CLI's contract (JSON schema,
exit statuses, bad input) on the committed real pair ``sample_pairs/summed_loss`` (Keras
``model.fit`` against a ``tf.GradientTape`` loop that sums its loss over batches of 32, written
by ``scripts/compare_pairs.py``), and the formatters on hand-built comparisons (escaping,
NaN/Inf as null). ``tests/compare/test_compare_real.py`` trains the pairs afresh."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from gradcheck import cli
from gradcheck.cli.status import ExitStatus
from gradcheck.compare.matching import layer_ranks, match_names, without_model_scope
from gradcheck.errors import ConfigError
from gradcheck.model import Comparison, ParameterComparison
from gradcheck.report import COMPARE_FORMATS, comparison_formatter_for
from gradcheck.report.interface import Env, FormatOptions
from gradcheck.verdicts.config import Config
from tests.support.paths import REPO

PAIR = REPO / "sample_pairs" / "summed_loss"
FIT, LOOP = str(PAIR / "fit"), str(PAIR / "loop")
BATCH = 32  # scripts/compare_pairs.py BATCH
CONTRACT_KEYS = {"schema", "gradcheck", "a", "b", "summary", "parameters"}
PARAMETER_KEYS = {
    "name",
    "in",
    "verdict_a",
    "verdict_b",
    "grad_norm_ratio_first",
    "grad_norm_ratio_median",
    "update_ratio_median",
    "moves_a",
    "moves_b",
    "first_divergent_step",
}


def invoke(*args: str, width: int = 80) -> Result:
    return CliRunner().invoke(
        cli.cli, ["compare", *args], prog_name="gradcheck", obj=Env(width=width)
    )


def compared_json(*args: str) -> dict:
    result = invoke(FIT, LOOP, "--format", "json", *args)
    assert result.exit_code == ExitStatus.OK, result.stderr
    document: dict = json.loads(result.stdout)
    return document


# --------------------------------------------------------------------------------------------
# Name matching
# --------------------------------------------------------------------------------------------


def test_a_differing_keras_model_scope_still_matches() -> None:
    pairs = match_names(["sequential/dense/kernel"], ["sequential_1/dense/kernel"])
    assert [(p.name_a, p.name_b, p.matched_by) for p in pairs] == [
        ("sequential/dense/kernel", "sequential_1/dense/kernel", "model prefix")
    ]


def test_auto_numbered_layers_of_a_second_build_match_by_order() -> None:
    a = ["sequential/dense/kernel", "sequential/dense_1/kernel", "sequential/dense_1/bias"]
    b = ["sequential_1/dense_3/kernel", "sequential_1/dense_2/kernel", "sequential_1/dense_3/bias"]
    pairs = {p.name_a: (p.name_b, p.matched_by) for p in match_names(a, b)}
    assert pairs == {
        "sequential/dense/kernel": ("sequential_1/dense_2/kernel", "layer numbering"),
        "sequential/dense_1/kernel": ("sequential_1/dense_3/kernel", "layer numbering"),
        "sequential/dense_1/bias": ("sequential_1/dense_3/bias", "layer numbering"),
    }


def test_same_names_match_first_and_the_rest_is_reported_per_side() -> None:
    pairs = match_names(["fc1.weight", "fc1.bias", "fc2.weight"], ["fc1.weight", "head.weight"])
    found = [(p.name_a, p.name_b, p.matched_by) for p in pairs]
    assert found == [
        ("fc1.weight", "fc1.weight", "same name"),
        ("fc1.bias", None, None),
        ("fc2.weight", None, None),
        (None, "head.weight", None),
    ]


def test_layer_order_does_not_match_layers_of_another_architecture() -> None:
    pairs = match_names(["mlp/hidden/kernel"], ["mlp/hidden_1/kernel", "mlp/hidden_2/kernel"])
    assert all(pair.matched_by is None for pair in pairs) and len(pairs) == 3


def test_model_scope_and_layer_ranks() -> None:
    assert without_model_scope("model_3/conv/kernel") == "conv/kernel"
    assert without_model_scope("encoder/conv/kernel") == "encoder/conv/kernel"
    ranks = layer_ranks(["sequential_1/dense_7/kernel", "sequential_1/dense_2/kernel"])
    assert ranks == {
        "sequential_1/dense_7/kernel": "dense#1/2/kernel",
        "sequential_1/dense_2/kernel": "dense#0/2/kernel",
    }


# --------------------------------------------------------------------------------------------
# The command on a real pair
# --------------------------------------------------------------------------------------------


def test_summed_loss_pair_names_the_batch_size() -> None:
    document = compared_json()
    assert set(document) >= CONTRACT_KEYS and document["schema"] == 1
    assert document["cause"] == "gradient_factor"
    assert f"B's gradients are {BATCH}x A's from the first step" in document["summary"]
    assert f"a loss summed instead of averaged over a batch of {BATCH}?" in document["summary"]
    parameters = document["parameters"]
    assert len(parameters) == 4
    for parameter in parameters:
        assert set(parameter) >= PARAMETER_KEYS
        assert parameter["in"] == "both"
        assert parameter["grad_norm_ratio_first"] == pytest.approx(BATCH, rel=0.1)
        assert parameter["first_divergent_step"] == 0
        assert parameter["moves_a"] is True and parameter["moves_b"] is True
        assert parameter["verdict_a"] == "ok" and parameter["verdict_b"] == "ok"
        # SGD at one learning rate: 32x larger gradients move the weights several times more
        assert parameter["update_ratio_median"] > 4
    assert document["steps"] == [0, 11] and document["common_steps"] == 12


def test_names_are_matched_across_two_builds_and_reported() -> None:
    document = compared_json()
    pairs = {p["name"]: p["name_b"] for p in document["parameters"]}
    assert pairs == {
        "sequential/dense/kernel": "sequential_1/dense_2/kernel",
        "sequential/dense/bias": "sequential_1/dense_2/bias",
        "sequential/dense_1/kernel": "sequential_1/dense_3/kernel",
        "sequential/dense_1/bias": "sequential_1/dense_3/bias",
    }
    assert document["names"] == "4 parameters matched (4 by layer order)"


def test_table_fits_80_columns_and_says_the_cause() -> None:
    result = invoke(FIT, LOOP)
    assert result.exit_code == ExitStatus.OK
    lines = result.stdout.splitlines()
    assert max(map(len, lines)) <= 80
    assert any(line.startswith("dense/kernel") and " 32 " in line for line in lines)
    assert "a loss summed instead of averaged over a batch of" in result.stdout
    assert "dense/kernel is dense_2/kernel in B" in result.stdout


def test_markdown_has_one_row_per_parameter() -> None:
    result = invoke(FIT, LOOP, "--format", "markdown")
    assert result.exit_code == ExitStatus.OK
    rows = [line for line in result.stdout.splitlines() if line.startswith("| ")]
    assert len(rows) == 2 + 4
    assert "`sequential_1/dense_2/kernel`" in result.stdout


def test_fail_on_divergence_exits_1_and_a_run_against_itself_exits_0() -> None:
    assert invoke(FIT, LOOP, "--fail-on-divergence").exit_code == ExitStatus.FINDINGS
    assert invoke(FIT, LOOP).exit_code == ExitStatus.OK
    same = invoke(FIT, FIT, "--fail-on-divergence", "--format", "json")
    assert same.exit_code == ExitStatus.OK
    document = json.loads(same.stdout)
    assert document["cause"] is None and document["summary"].startswith("The runs agree")
    assert {p["grad_norm_ratio_first"] for p in document["parameters"]} == {1.0}


def test_compare_factor_from_a_config_file(tmp_path: Path) -> None:
    config = tmp_path / "gradcheck.toml"
    config.write_text("compare_factor = 64\n")  # a band wide enough for 32x
    result = invoke(FIT, LOOP, "--config", str(config), "--fail-on-divergence")
    assert result.exit_code == ExitStatus.OK, result.stdout
    with pytest.raises(ConfigError, match="compare_factor must be a finite number above 1"):
        Config(compare_factor=1.0)


def test_layer_glob_and_step_window() -> None:
    document = compared_json("--layer", "*bias", "--steps", "3:8")
    names = sorted(p["name"] for p in document["parameters"])
    assert names == ["sequential/dense/bias", "sequential/dense_1/bias"]
    assert all(p["common_steps"] == 6 for p in document["parameters"])
    assert document["steps"] == [3, 8]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((str(PAIR), LOOP), "holds 2 runs"),
        ((FIT, str(PAIR / "missing")), "does not exist"),
        ((FIT, str(REPO / "sample_runs" / "torch_frozen")), "no parameter of"),
        ((FIT, LOOP, "--layer", "nothing*"), "no parameter matches --layer"),
        ((FIT, LOOP, "--steps", "500:"), "no histogram or scalar in steps 500:"),
        ((FIT, LOOP, "--format", "csv"), "Invalid value for '--format'"),
    ],
)
def test_bad_input_is_one_line_and_status_2(args: tuple[str, ...], message: str) -> None:
    result = invoke(*args)
    assert result.exit_code == ExitStatus.INPUT_ERROR, result.output
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


# --------------------------------------------------------------------------------------------
# Formatters on hand-built comparisons
# --------------------------------------------------------------------------------------------


def _parameter(name: str, **changes: object) -> ParameterComparison:
    fields: dict = dict(
        name=name,
        name_b=None,
        presence="both",
        matched_by="same name",
        kind="other",
        verdict_a="ok",
        verdict_b="nan",
        common_steps=3,
        grad_norm_ratio_first=math.nan,
        grad_norm_ratio_median=math.inf,
        update_ratio_median=2.0,
        step_size_ratio_median=None,
        moves_a=True,
        moves_b=None,
        first_divergent_step=2,
        diverges=True,
        difference=math.inf,
    )
    fields.update(changes)
    return ParameterComparison(**fields)


def _comparison(*parameters: ParameterComparison) -> Comparison:
    return Comparison(
        version="0",
        a="runs/a",
        b="runs/b",
        factor=4.0,
        steps=(0, 2),
        common_steps=3,
        summary="The runs agree at first and part at step 2.",
        cause="diverges_later",
        names="1 parameter matched",
        parameters=parameters,
    )


def test_every_compare_format_has_a_formatter() -> None:
    assert set(COMPARE_FORMATS) == set(cli.COMPARE_FORMAT_CHOICES)
    for name in COMPARE_FORMATS:
        text = comparison_formatter_for(name, FormatOptions()).format(_comparison(_parameter("w")))
        assert text.endswith("\n") and "w" in text


def test_json_writes_non_finite_ratios_as_null() -> None:
    text = comparison_formatter_for("json").format(_comparison(_parameter("w")))
    (parameter,) = json.loads(text)["parameters"]
    assert parameter["grad_norm_ratio_first"] is None
    assert parameter["grad_norm_ratio_median"] is None
    assert parameter["update_ratio_median"] == 2.0
    assert parameter["moves_b"] is None


HOSTILE = "evil`|name\n\x1b[31mred"


def test_markdown_and_table_escape_names_from_the_log() -> None:
    comparison = _comparison(_parameter(HOSTILE, name_b="b|`x"))
    markdown = comparison_formatter_for("markdown").format(comparison)
    table = comparison_formatter_for("table", FormatOptions(env=Env(width=80))).format(comparison)
    for text in (markdown, table):
        assert "\x1b" not in text and "\\x1b" in text
        assert "\\n" in text and "name\n" not in text  # the newline is shown, not obeyed
    (row,) = [line for line in markdown.splitlines() if "evil" in line]
    assert row.count(" | ") == 8  # the name's pipe did not open a cell
    assert "``evil`\\|name\\n\\x1b[31mred``" in row  # fenced by two backticks


def test_runs_that_log_weights_only_are_compared_on_their_weights() -> None:
    run = str(REPO / "sample_runs" / "keras_fit_weights_only" / "train")
    result = invoke(run, run, "--format", "json", "--fail-on-divergence")
    assert result.exit_code == ExitStatus.OK, result.stderr
    document = json.loads(result.stdout)
    assert document["summary"].startswith("The runs agree on what both logged")
    assert document["common_steps"] == 8
    moving = {p["name"]: p["update_ratio_median"] for p in document["parameters"] if p["moves_a"]}
    assert moving and set(moving.values()) == {1.0}
    assert all(p["grad_norm_ratio_first"] is None for p in document["parameters"])


def _golden_comparison() -> Comparison:
    """BatchNorm statistics static in B, a renamed kernel, a parameter in A only."""
    moving = dict(
        kind="bn_moving",
        grad_norm_ratio_first=None,
        grad_norm_ratio_median=None,
        update_ratio_median=0.0,
        verdict_b="static",
        moves_b=False,
        first_divergent_step=None,
    )
    agreeing = dict(verdict_b="ok", moves_b=True, first_divergent_step=None, diverges=False)
    return _comparison(
        _parameter("model/bn/moving_mean", name_b="model_1/bn_1/moving_mean", **moving),
        _parameter(
            "model/dense/kernel",
            name_b="model_1/dense_2/kernel",
            grad_norm_ratio_first=1.2,
            grad_norm_ratio_median=0.8,
            update_ratio_median=1.1,
            difference=0.08,
            **agreeing,
        ),
        _parameter(
            "model/extra/bias",
            presence="a",
            matched_by=None,
            verdict_b=None,
            grad_norm_ratio_first=None,
            grad_norm_ratio_median=None,
            update_ratio_median=None,
            first_divergent_step=None,
            diverges=False,
            difference=0.0,
        ),
    )


@pytest.mark.parametrize(
    ("name", "format_name"),
    [("comparison.table.txt", "table"), ("comparison.md", "markdown"), ("comparison.json", "json")],
)
def test_golden_comparison(name: str, format_name: str) -> None:
    from tests.support.golden import check_golden

    formatter = comparison_formatter_for(format_name, FormatOptions(env=Env(width=80)))
    check_golden(name, formatter.format(_golden_comparison()))


def test_weights_that_move_in_a_only_name_the_optimizer_list() -> None:
    from gradcheck.compare.causes import name_cause

    frozen = _parameter(
        "1.weight", kind="bn_affine", moves_a=True, moves_b=False, grad_norm_ratio_first=1.0
    )
    healthy = _parameter("0.weight", moves_a=True, moves_b=True, grad_norm_ratio_first=1.1)
    summary, cause = name_cause([frozen, healthy], 4.0, 10)
    assert cause == "not_updated"
    assert summary.startswith("1 parameter moves in A only (1.weight): B never updates it")
    assert "optimizer's variable list" in summary


def test_a_factor_on_a_s_side_is_said_the_other_way_round() -> None:
    from gradcheck.compare.causes import name_cause

    parameters = [
        _parameter(name, grad_norm_ratio_first=ratio, moves_a=True, moves_b=True, verdict_b="ok")
        for name, ratio in (("w", 1 / 256), ("b", 1 / 250))
    ]
    summary, cause = name_cause(parameters, 4.0, 10)
    assert cause == "gradient_factor"
    assert summary.startswith("A's gradients are 253x B's from the first step")
    spread = [
        *parameters,
        _parameter("v", grad_norm_ratio_first=1 / 20, moves_b=True, verdict_b="ok"),
    ]
    assert name_cause(spread, 4.0, 10)[1] != "gradient_factor"  # not one factor: no such cause


def test_no_constant_factor_or_learning_rate_is_named_after_a_blow_up() -> None:
    """A run that diverged has ratios that measure the blow-up: 'a batch of 4e27?' or 'B's
    learning rate 1095x A's?' were named between a healthy run and its diverged twin."""
    from gradcheck.compare.causes import name_cause

    blown = [
        _parameter(name, grad_norm_ratio_first=ratio, moves_a=True, moves_b=True, verdict_b=v)
        for name, ratio, v in (("w", 4e27, "nan"), ("b", 3.9e27, "ok"))
    ]
    summary, cause = name_cause(blown, 4.0, 10)
    assert cause not in ("gradient_factor", "learning_rate"), summary
    absurd = [
        _parameter(name, grad_norm_ratio_first=4e27, moves_a=True, moves_b=True, verdict_b="ok")
        for name in ("w", "b")
    ]
    assert name_cause(absurd, 4.0, 10)[1] != "gradient_factor"


RUNS15 = REPO / "tests" / "data" / "runs15"


def test_compare_sees_the_parameters_analyze_sees() -> None:
    """A Keras run resumed from a checkpoint (its tags lose ``sequential/`` halfway) and a
    run with only a global gradient norm: compare takes the joined series and the
    ``(global gradient norm)`` row, as analyze does (it paired the tags itself before)."""
    resumed = invoke(
        str(RUNS15 / "keras_fit_train_validation" / "train"),
        str(RUNS15 / "keras_resumed_from_checkpoint" / "train"),
        "--format", "json",
    )  # fmt: skip
    document = json.loads(resumed.stdout)
    assert [p["in"] for p in document["parameters"]] == ["both"] * 4
    hf = invoke(
        str(RUNS15 / "hf_scalars_clipped_healthy"),
        str(RUNS15 / "hf_scalars_exploding"), "--format", "json",
    )  # fmt: skip
    assert hf.exit_code == ExitStatus.OK, hf.output
    (row,) = json.loads(hf.stdout)["parameters"]
    assert row["name"] == "(global gradient norm)" and row["verdict_b"] == "nan"
