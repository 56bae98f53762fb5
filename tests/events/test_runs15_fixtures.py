"""The issue-15 fixtures (``scripts/make_issue15_runs.py``) checked against their own TRUTH.tsv.

Only facts about the files, read back with gradcheck's reader: the tags TRUTH names are there,
non-finite values start where TRUTH says, the overflow steps of the AMP run are the steps whose
loss scale dropped, the plateau run's gradients really rise 100x and more, static weights are
bit-identical. Verdicts are asserted elsewhere (by the tests of the analysis).
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from tests.support.paths import TEST_DATA
from tests.support.readback import Logs, read_logs

RUNS15 = TEST_DATA / "runs15"
COLUMNS = ("run", "parameter", "expect", "step", "tags", "why")
TRUTH = [
    dict(zip(COLUMNS, line.split("\t"), strict=True))
    for line in (RUNS15 / "TRUTH.tsv").read_text(encoding="utf-8").splitlines()[1:]
]
VERDICTS = {"nan", "exploding", "vanishing", "static", "overflow", "ok"}
CLASSES = VERDICTS | {"nothing-judgeable", "no-gradients"}


def logs(run: str) -> Logs:
    return read_logs(RUNS15 / run)


def rows(run: str, parameter: str | None = None) -> list[dict[str, str]]:
    return [r for r in TRUTH if r["run"] == run and parameter in (None, r["parameter"])]


def is_finite(logs: Logs, tag: str, step: int) -> bool:
    """The value of ``tag`` at ``step`` is finite (a histogram: its min, max and sum)."""
    if tag in logs.scalars:
        return math.isfinite(logs.scalars[tag][step])
    record = logs.histograms[tag][step]
    if record.sum is None:  # tensor encoding: the bucket edges
        return bool(np.isfinite(record.left).all() and np.isfinite(record.right).all())
    return all(math.isfinite(v) for v in (record.min, record.max, record.sum, record.sum_squares))


def histogram_norm(logs: Logs, tag: str, step: int) -> float:
    square = logs.histograms[tag][step].sum_squares
    assert square is not None
    return math.sqrt(square)


def test_truth_is_well_formed_and_every_run_has_one_class_row() -> None:
    runs = {r["run"] for r in TRUTH}
    directories = {str(f.parent.relative_to(RUNS15)) for f in RUNS15.rglob("*tfevents*")}
    assert runs == directories  # every run that has events has its truth, and the reverse
    for run in runs:
        classes = [r for r in rows(run) if r["parameter"] == "(run)"]
        assert len(classes) == 1 and classes[0]["expect"] in CLASSES, run
    for row in TRUTH:
        assert row["expect"] in CLASSES and row["why"] != "-"
        assert row["step"] == "-" or int(row["step"]) >= 0
        if row["expect"] in {"nan", "exploding", "vanishing", "static", "overflow"}:
            assert row["step"] != "-", row


@pytest.mark.parametrize("run", sorted({r["run"] for r in TRUTH}))
def test_each_run_is_small_and_holds_every_tag_its_truth_names(run: str) -> None:
    files = list((RUNS15 / run).glob("*tfevents*"))
    assert files and all(f.stat().st_size < 1_000_000 for f in files)
    found = logs(run)
    tags = set(found.scalars) | set(found.histograms)
    for row in rows(run):
        for tag in row["tags"].split(",") if row["tags"] != "-" else []:
            assert tag in tags, (row["parameter"], tag)


@pytest.mark.parametrize(
    "row", [r for r in TRUTH if r["expect"] == "nan" and r["tags"] != "-"], ids=lambda r: r["run"]
)
def test_nan_rows_start_at_the_first_non_finite_logged_value(row: dict[str, str]) -> None:
    found = logs(row["run"])
    first = min(
        (
            s
            for tag in row["tags"].split(",")
            for s in found.steps(tag)
            if not is_finite(found, tag, s)
        ),
        default=None,
    )
    assert first == int(row["step"]), row["parameter"]


def test_lightning_diverged_total_norm_is_inf_first_then_nan() -> None:
    total = logs("lightning_diverged_inf_then_nan").scalars["grad_2.0_norm_total"]
    steps = sorted(total)
    assert math.isinf(total[steps[0]]) and all(math.isnan(total[s]) for s in steps[1:])


@pytest.mark.parametrize(
    ("run", "tag"),
    [
        ("lightning_gradual_explosion", "grad_2.0_norm_total"),
        ("hf_scalars_exploding", "train/grad_norm"),
    ],
)
def test_exploding_onsets_are_where_the_global_norm_leaves_its_level(run: str, tag: str) -> None:
    onset = int(
        next(r for r in rows(run, "(global gradient norm)") if r["expect"] == "exploding")["step"]
    )
    norm = logs(run).scalars[tag]
    before = np.median([norm[s] for s in sorted(norm) if onset - 10 <= s < onset])
    assert norm[onset] > 1.5 * before
    assert max(v for v in norm.values() if math.isfinite(v)) > 1e6 * before


def test_amp_overflow_steps_are_the_steps_whose_loss_scale_dropped() -> None:
    found = logs("amp_overflow_skipped")
    scale = found.scalars["amp/loss_scale"]
    steps = sorted(scale)
    dropped = [s for s, after in zip(steps, steps[1:], strict=False) if scale[after] < scale[s]]
    why = rows("amp_overflow_skipped", "(run)")[0]["why"]
    listed = [int(s) for s in re.search(r"skips steps ([\d,]+)", why).group(1).split(",")]  # type: ignore[union-attr]
    assert dropped == listed[:-1] or dropped == listed  # the last drop shows at the next step
    assert listed[0] == 0 and len(listed) >= 5
    names = [r["parameter"] for r in rows("amp_overflow_skipped") if r["parameter"] != "(run)"]
    for name in names:
        norms = found.scalars[f"grad_norm/{name}"]
        assert all(math.isfinite(v) for s, v in norms.items() if s not in listed)
        for s in found.steps(name):  # weights stay finite
            assert is_finite(found, name, s)
    non_finite_steps = {
        s
        for name in names
        for s, v in found.scalars[f"grad_norm/{name}"].items()
        if not math.isfinite(v)
    }
    assert non_finite_steps == set(listed)
    assert all(math.isfinite(v) for v in found.scalars["loss"].values())


def test_amp_divergence_keeps_non_finite_gradients_and_loss_to_the_end() -> None:
    found = logs("amp_diverged_nan")
    start = int(rows("amp_diverged_nan", "(run)")[0]["step"])
    last = max(found.scalars["loss"])
    assert not math.isfinite(found.scalars["loss"][last])
    norms = [values for tag, values in found.scalars.items() if tag.startswith("grad_norm/")]
    bad = [s for s in range(start, last + 1) if not all(math.isfinite(n[s]) for n in norms)]
    assert bad[0] == start and len(bad) >= (last + 1 - start) - 2
    assert all(math.isfinite(n[s]) for n in norms for s in range(start))


def test_plateau_run_gradients_rise_as_its_truth_says_and_its_loss_falls() -> None:
    found = logs("plateau_escape_healthy")
    names = [r["parameter"] for r in rows("plateau_escape_healthy") if r["parameter"] != "(run)"]
    steps = found.steps("0.weight/grad")
    total = {
        s: math.sqrt(sum(histogram_norm(found, n + "/grad", s) ** 2 for n in names)) for s in steps
    }
    factor = max(total.values()) / np.median([total[s] for s in steps[:10]])
    why = rows("plateau_escape_healthy", "(run)")[0]["why"]
    assert factor >= 100
    assert factor == pytest.approx(float(re.search(r"rises (\d+)x", why).group(1)), abs=1)  # type: ignore[union-attr]
    loss = found.scalars["loss"]
    assert np.mean([loss[s] for s in sorted(loss)[-10:]]) < loss[0] / 2


def test_branch_gradient_rises_1e4x_while_the_loss_still_falls() -> None:
    found = logs("loss_falls_while_branch_explodes")
    loss = found.scalars["loss"]
    lowest = min(loss, key=loss.__getitem__)
    rise = histogram_norm(found, "branch.weight/grad", lowest) / histogram_norm(
        found, "branch.weight/grad", 0
    )
    assert rise >= 1e4 and lowest > 20 and loss[max(loss)] < loss[0]
    main = [histogram_norm(found, "main.weight/grad", s) for s in found.steps("main.weight/grad")]
    assert max(main) <= 1.01 * main[0]  # the main layer's gradient only falls


@pytest.mark.parametrize("run", ["dropped_param_group_static", "optimizer_step_never_called"])
def test_static_weights_are_bit_identical_and_the_others_move(run: str) -> None:
    found = logs(run)
    for row in rows(run):
        if row["parameter"] == "(run)":
            continue
        weight, grad = row["tags"].split(",")
        records = [found.histograms[weight][s] for s in found.steps(weight)]
        same = all(
            (r.sum, r.sum_squares, r.min, r.max)
            == (records[0].sum, records[0].sum_squares, records[0].min, records[0].max)
            for r in records
        )
        assert same == (row["expect"] == "static"), row["parameter"]
        assert all(histogram_norm(found, grad, s) > 1e-4 for s in found.steps(grad))


def test_vanishing_rows_have_tiny_norms_and_ok_rows_do_not() -> None:
    for run in ("norms_prefix_vanishing", "norms_suffix_vanishing", "norms_gradients_vanishing"):
        found = logs(run)
        for row in rows(run):
            if row["parameter"] == "(run)":
                continue
            median = float(np.median(list(found.scalars[row["tags"]].values())))
            assert (median < 1e-4) == (row["expect"] == "vanishing"), (run, row["parameter"])


def test_keras_resume_drops_the_model_prefix_and_goes_on_counting_epochs() -> None:
    found = logs("keras_resumed_from_checkpoint/train")
    assert found.steps("sequential/hidden/kernel/histogram") == [0, 1, 2]
    assert found.steps("hidden/kernel/histogram") == [3, 4, 5]


@pytest.mark.parametrize("run", ["keras_fit_train_validation/validation", "scalars_only"])
def test_nothing_judgeable_runs_hold_only_scalars(run: str) -> None:
    found = logs(run)
    assert not found.histograms and found.scalars
    assert not [t for t in found.scalars if "norm" in t or "grad" in t]


def test_weights_only_runs_hold_no_gradient() -> None:
    for run in (
        "weights_only_healthy",
        "keras_fit_train_validation/train",
        "keras_gradient_logger_and_tensorboard/keras/train",
    ):
        found = logs(run)
        assert found.histograms and not [t for t in found.histograms if "grad" in t]


def test_tf1_uniquified_names_are_the_tags() -> None:
    found = logs("tf1_graph_same_name")
    assert {"dense/kernel_1", "dense/kernel_2", "dense_1/kernel_1", "dense_1/kernel_2"} <= set(
        found.histograms
    )
    assert "dense/kernel" not in found.histograms
    # the weight (first, _1) is not the gradient (second, _2): they differ at every step
    for step in found.steps("dense/kernel_1"):
        assert histogram_norm(found, "dense/kernel_1", step) != histogram_norm(
            found, "dense/kernel_2", step
        )
