"""Issue 37: the whole verdict stage on degenerate series never raises, and its evidence never
states ``nan``/``inf`` as a number nor a ratio on the wrong side of the threshold it cites.

Series are built the way the writers record them (TF2 bucket tensors, PyTorch protos with exact
fields, exact-norm scalars as gradcheck's helpers log them): zero updates, zero or constant
tensors, a single logged step, all-NaN and all-Inf tensors, empty tensors, values near the ends
of float32, and two writers' series of one variable.
"""

from __future__ import annotations

import re

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gradcheck.model import HistogramRecord, Record, Report, RunReport, ScalarRecord
from gradcheck.report import formatter_for
from gradcheck.series.reduce import reduce_records
from gradcheck.verdicts.detect import analyze_run
from gradcheck.verdicts.rules.slow import orders
from tests.support.histograms import tf2_buckets, torch_proto

RUN = "runs/degenerate"
SIZE = 12

KINDS = (
    "moving",  # a weight that trains
    "frozen",  # the same values at every step: zero updates
    "one_ulp",  # one element moves by one float32 ulp at some steps only
    "zero",
    "constant",
    "nan",
    "inf",
    "nan_later",  # finite, then NaN from the middle on
    "empty",  # a tensor of no elements
    "tiny",  # around 1e-40: float32's subnormals (tensors are float32; statistics too)
    "huge",  # around 1e35: near float32's largest
    "spiky",  # zero, then a jump of 30 orders, then zero again
)


def values_at(kind: str, step: int, steps: int, seed: int) -> np.ndarray:
    """The tensor of ``kind`` at ``step``."""
    rng = np.random.default_rng(seed)
    base = rng.normal(0.0, 0.3, SIZE)
    if kind == "moving":
        return base + 0.01 * step * rng.normal(0.0, 0.3, SIZE)
    if kind == "frozen":
        return base
    if kind == "one_ulp":
        moved = base.astype(np.float32)
        if step % 3 == 2:
            moved[0] = np.nextafter(moved[0], np.float32(np.inf))
        return moved.astype(np.float64)
    if kind == "zero":
        return np.zeros(SIZE)
    if kind == "constant":
        return np.full(SIZE, 0.5)
    if kind == "nan":
        return np.full(SIZE, np.nan)
    if kind == "inf":
        return np.full(SIZE, np.inf)
    if kind == "nan_later":
        return base if step < steps // 2 else np.full(SIZE, np.nan)
    if kind == "empty":
        return np.empty(0)
    if kind == "tiny":
        return base * 1e-40
    if kind == "huge":
        return base * 1e35
    assert kind == "spiky"
    return base * 1e30 if step == steps // 2 else np.zeros(SIZE)


def histogram(tag: str, step: int, values: np.ndarray, encoding: str) -> HistogramRecord:
    if encoding == "histo" and values.size:
        buckets = torch_proto(values)
    else:
        buckets = tf2_buckets(values)
        encoding = "tensor"
    return HistogramRecord(
        RUN, "f", 0, tag, 0, step, float(step), encoding,  # type: ignore[arg-type]
        buckets.left, buckets.right, buckets.counts, **buckets.fields(),
    )  # fmt: skip


def scalar(tag: str, step: int, value: float) -> ScalarRecord:
    return ScalarRecord(RUN, "f", 0, tag, step, float(step), "tensor", float(value))


def exact_norm(values: np.ndarray) -> float:
    with np.errstate(over="ignore", invalid="ignore"):
        return float(np.sqrt(np.sum(np.square(values))))


parameter_plans = st.fixed_dictionaries(
    {
        "weight": st.sampled_from(KINDS),
        "gradient": st.none() | st.sampled_from(KINDS),
        "exact_norms": st.booleans(),
        "second_writer": st.booleans(),  # Keras' TensorBoard callback beside GradientLogger
        "encoding": st.sampled_from(("histo", "tensor")),
    }
)
run_plans = st.fixed_dictionaries(
    {
        "steps": st.integers(1, 9),
        "parameters": st.lists(parameter_plans, min_size=1, max_size=4),
        "loss": st.sampled_from(("none", "falling", "flat", "nan", "zero")),
        "learning_rate": st.sampled_from((None, 0.0, 1e-3, float("inf"))),
    }
)


def records(plan: dict) -> list[Record]:
    steps = plan["steps"]
    out: list[Record] = []
    for step in range(steps):
        for index, parameter in enumerate(plan["parameters"]):
            name = f"net/dense_{index}/{'bias' if index % 2 else 'kernel'}"
            weights = values_at(parameter["weight"], step, steps, seed=index)
            out.append(histogram(f"weights/{name}", step, weights, parameter["encoding"]))
            if parameter["second_writer"] and step % 2 == 0:  # epochs: sparser, another clock
                out.append(histogram(f"{name}/histogram", step // 2, weights, "tensor"))
            if parameter["exact_norms"]:
                out.append(scalar(f"weight_norm/{name}", step, exact_norm(weights)))
            if parameter["gradient"] is not None:
                gradient = values_at(parameter["gradient"], step, steps, seed=100 + index)
                out.append(histogram(f"gradients/{name}", step, gradient, parameter["encoding"]))
                if parameter["exact_norms"]:
                    out.append(scalar(f"gradient_norm/{name}", step, exact_norm(gradient)))
        loss = {"falling": 1.0 / (1 + step), "flat": 0.693, "nan": np.nan, "zero": 0.0}
        if plan["loss"] in loss:
            out.append(scalar("epoch_loss", step, loss[plan["loss"]]))
        if plan["learning_rate"] is not None:
            out.append(scalar("epoch_learning_rate", step, plan["learning_rate"]))
    return out


NON_FINITE = re.compile(r"(?<![\w.])-?(?:nan|inf)x?\b(?!:)")  # a number; not ``nan:``, the verdict
NUMBER = r"(-?[0-9][0-9.e+-]*)"
CLAIMS = (  # a ratio and the threshold the same sentence cites for it
    re.compile(rf"grew to {NUMBER}x .*?\(threshold {NUMBER}x"),
    re.compile(rf"rose to {NUMBER}x its early baseline \S+ \(threshold {NUMBER}x"),
)


def check_report(report: RunReport) -> None:
    for layer in report.layers:
        texts = [layer.evidence, *layer.notes]
        for text in texts:
            assert not NON_FINITE.search(text), (layer.name, text)
            assert "internal error" not in text, (layer.name, text)
        for claim in CLAIMS:
            for ratio, threshold in claim.findall(layer.evidence):
                assert float(ratio) >= float(threshold), (layer.name, layer.evidence)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan=run_plans)
def test_degenerate_series_never_raise_nor_print_non_finite_ratios(plan: dict) -> None:
    with np.errstate(all="ignore"):  # the writers' own arithmetic on such tensors
        run = records(plan)
    report = analyze_run(reduce_records(run))
    check_report(report)
    names = [layer.name for layer in report.layers]
    assert len(names) == len(set(names)) == len(plan["parameters"])  # two writers: one row
    whole = Report(version="test", runs=(report,))
    for name in ("json", "markdown", "table"):
        assert formatter_for(name).format(whole)


def test_orders_of_a_ratio_that_is_zero_or_not_finite() -> None:
    assert orders(1e3) == "1,000x"
    assert orders(float("inf")) == "1x"
    assert orders(float("nan")) == "1x"
    assert orders(0.0) == "1x"


def test_a_rule_that_raises_costs_its_parameter_a_note_not_the_report(monkeypatch) -> None:
    from gradcheck.verdicts import passes

    def find_boom(parameter, context):  # noqa: ANN001, ANN202
        if parameter.name.endswith("bias"):
            raise ZeroDivisionError("float division by zero")
        return None

    real = passes.rules
    monkeypatch.setattr(
        passes,
        "rules",
        lambda phase: (*real(phase), find_boom) if phase == "quiet" else real(phase),
    )
    plan = {
        "steps": 6,
        "parameters": [
            {"weight": "moving", "gradient": "moving", "exact_norms": True,
             "second_writer": False, "encoding": "histo"},
            {"weight": "frozen", "gradient": "tiny", "exact_norms": True,
             "second_writer": False, "encoding": "tensor"},
        ],
        "loss": "falling",
        "learning_rate": 1e-3,
    }  # fmt: skip
    report = analyze_run(reduce_records(records(plan)))
    kernel, bias = (
        next(x for x in report.layers if x.name.endswith(end)) for end in ("kernel", "bias")
    )
    assert bias.verdict == "vanishing"  # the other rules still judged it
    (note,) = [note for note in bias.notes if "internal error" in note]
    assert note.startswith("not judged for boom: internal error in gradcheck (ZeroDivisionError")
    assert not [note for note in kernel.notes if "internal error" in note]


def weight_only_run(bias_at, steps: int = 40) -> list[Record]:
    """Two kernels of spread 0.3 and a bias whose values ``bias_at(step)`` gives, weights only
    (Keras' TensorBoard callback logs no gradient)."""
    out: list[Record] = []
    rng = np.random.default_rng(0)
    kernels = {name: rng.normal(0.0, 0.3, 64) for name in ("dense/kernel", "out/kernel")}
    for step in range(steps):
        for name, values in kernels.items():
            out.append(histogram(f"{name}/histogram", step, values * (1 + 0.001 * step), "tensor"))
        out.append(histogram("dense/bias/histogram", step, bias_at(step), "tensor"))
    return out


def test_a_bias_growing_from_zero_is_judged_against_the_weights_around_it() -> None:
    """A zero-initialised bias moved by Adam (about lr per step) from 1e-6 to 0.3: 3e5 times its
    first values, about the kernels' size: not exploding (it was, at 'grew to 1x ... threshold
    100x')."""
    direction = np.random.default_rng(1).choice([-1.0, 1.0], 16)
    report = analyze_run(reduce_records(weight_only_run(lambda s: direction * 1e-6 * 1.4**s)))
    bias = next(layer for layer in report.layers if layer.name == "dense/bias")
    assert bias.stats["weight_norm_last"] > 100 * bias.stats["weight_norm_first"]
    assert bias.verdict == "ok", bias.evidence


def test_a_weight_growing_far_past_the_weights_around_it_is_exploding() -> None:
    direction = np.random.default_rng(1).choice([-1.0, 1.0], 16)
    report = analyze_run(reduce_records(weight_only_run(lambda s: direction * 0.01 * 1.5**s)))
    bias = next(layer for layer in report.layers if layer.name == "dense/bias")
    assert bias.verdict == "exploding", bias.evidence
    check_report(report)  # the ratio it states is past the threshold it cites
    assert "the run's typical weight RMS" in bias.evidence
