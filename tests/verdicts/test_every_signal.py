"""Every signal a run logs is judged, and a run that could not be judged never passes (issue 15).

The logs are written by tensorboardX's ``SummaryWriter`` with the tag names the tools use:
Lightning's ``grad_norm`` (``grad_2.0_norm/<param>``, ``grad_2.0_norm_total``), the HF Trainer's
``train/grad_norm``, hand-written per-parameter norms, a GradScaler run's skipped steps and its
``loss_scale``; the verdicts and the exit statuses go through the real CLI.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner, Result

from gradcheck import cli
from gradcheck.cli.status import ExitStatus
from gradcheck.events.discover import discover
from gradcheck.events.reader import read_run
from gradcheck.model import GLOBAL_NORM_ROW, LayerResult, RunReport
from gradcheck.series.reduce import reduce_records
from gradcheck.verdicts.detect import analyze_run

tensorboardX = pytest.importorskip("tensorboardX")

PARAMS = ("layer.0.weight", "layer.0.bias", "layer.2.weight", "layer.2.bias")
INF, NAN = math.inf, math.nan


def write(directory: Path, steps: range, scalars: Callable[[int], dict[str, float]]) -> Path:
    writer = tensorboardX.SummaryWriter(str(directory))
    for step in steps:
        for tag, value in scalars(step).items():
            writer.add_scalar(tag, value, step)
    writer.close()
    return directory


def write_histograms(
    directory: Path, steps: range, tensors: Callable[[int], dict[str, np.ndarray]]
) -> Path:
    writer = tensorboardX.SummaryWriter(str(directory))
    for step in steps:
        for tag, values in tensors(step).items():
            writer.add_histogram(tag, values, step)
    writer.close()
    return directory


def analyze(path: Path) -> RunReport:
    (run,) = discover([str(path)])
    return analyze_run(reduce_records(read_run(run)))


def by_name(report: RunReport) -> dict[str, LayerResult]:
    return {layer.name: layer for layer in report.layers}


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli.cli, list(args), prog_name="gradcheck", catch_exceptions=False)


def healthy_norm(step: int, scale: float, seed: int) -> float:
    return scale * (1 + 0.2 * np.sin(step * 0.7 + seed)) * 0.995**step


# --------------------------------------------------------------------------------------------
# Scalar gradient norms
# --------------------------------------------------------------------------------------------


def test_lightning_run_diverged_from_its_first_step_fails_the_gate(tmp_path: Path) -> None:
    """Total norm Inf at the first logged step and NaN after it, no histograms at all: was
    'no parameters' and exit 0 even with --fail-on any."""

    def norms(step: int) -> dict[str, float]:
        bad = INF if step == 0 else NAN
        return {
            **{f"grad_2.0_norm/{name}": bad for name in PARAMS},
            "grad_2.0_norm_total": bad,
            "train_loss": NAN,
        }

    run = write(tmp_path / "lightning", range(0, 40, 2), norms)
    layers = by_name(analyze(run))
    assert set(layers) == set(PARAMS)  # per-parameter norms are the parameters, in depth order
    assert [layers[name].depth for name in PARAMS] == [0, 1, 2, 3]
    assert all(layer.verdict == "nan" and layer.first_bad_step == 0 for layer in layers.values())
    for fail_on in ("any", "nan"):
        assert invoke("analyze", str(run), "--fail-on", fail_on).exit_code == ExitStatus.FINDINGS


def test_lightning_norms_and_histograms_of_one_parameter_are_one_row(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    writer = tensorboardX.SummaryWriter(str(tmp_path / "run"))
    for step in range(0, 30, 3):
        for i, name in enumerate(PARAMS):
            writer.add_histogram(name, rng.normal(0, 0.1, 64) + 1e-3 * step, step)
            writer.add_scalar(f"grad_2.0_norm/{name}", healthy_norm(step, 0.5, i), step)
    writer.close()
    layers = by_name(analyze(tmp_path / "run"))
    assert set(layers) == set(PARAMS)
    weight = layers["layer.0.weight"]
    assert weight.weight_tag == "layer.0.weight"
    assert weight.grad_tag == "grad_2.0_norm/layer.0.weight"
    assert weight.verdict == "ok"
    assert weight.stats["grad_norm_median"] == pytest.approx(0.5, rel=0.3)


@pytest.mark.parametrize(
    "convention",
    ["grad_norm/{}", "{}/grad_norm", "gradients/{}/norm", "grad_2.0_norm/{}", "grad_inf_norm/{}"],
)
def test_per_parameter_norm_conventions_judge_vanishing_by_depth(
    tmp_path: Path, convention: str
) -> None:
    """A deep sigmoid stack's norms fall five decades towards the input; the last layers'
    are healthy. Norms without element counts are compared with the plain 1e-3 margin."""
    depth = 8
    names = [f"fc{i}.weight" for i in range(depth)]

    def norms(step: int) -> dict[str, float]:
        values = {
            convention.format(name): healthy_norm(step, 0.3 * 10 ** (-(depth - 1 - i) * 0.8), i)
            for i, name in enumerate(names)
        }
        return {**values, "loss": 1.386}  # stalled

    run = write(tmp_path / "deep", range(0, 100, 5), norms)
    layers = by_name(analyze(run))
    assert set(layers) == set(names)
    ratios = {name: 10 ** (-(depth - 1 - i) * 0.8) for i, name in enumerate(names)}
    for name, layer in layers.items():
        expected = "vanishing" if ratios[name] < 1e-3 else "ok"
        assert layer.verdict == expected, (name, layer.evidence)
    assert "0.001 threshold" in layers["fc0.weight"].evidence  # never the stalled 1e-2


# --------------------------------------------------------------------------------------------
# A global norm only
# --------------------------------------------------------------------------------------------


def hf_style(step: int) -> dict[str, float]:
    """Healthy near 1 for 100 steps, then a decade every 10 steps, Inf from step 180."""
    if step < 100:
        norm = healthy_norm(step, 1.0, 0)
    elif step < 180:
        norm = 10 ** ((step - 100) / 10)
    else:
        norm = INF
    loss = 2.0 - step / 200 if step < 120 else 50.0
    return {"train/grad_norm": norm, "train/loss": loss, "train/learning_rate": 1e-3}


def test_a_global_norm_only_run_gets_a_judged_row_and_a_clip_norm_from_healthy_steps(
    tmp_path: Path,
) -> None:
    run = write(tmp_path / "hf", range(0, 200, 5), hf_style)
    report = analyze(run)
    assert report.gradients == "global"
    assert [layer.name for layer in report.layers] == [GLOBAL_NORM_ROW]
    row = report.layers[0]
    assert row.flags == ("nan", "exploding") and row.grad_tag == "train/grad_norm"
    assert row.first_bad_step == 180 and 100 <= row.onsets["exploding"] <= 110
    assert report.clipping is not None
    suggested = report.clipping.suggested_clip_norm
    assert suggested is not None and 0.9 < suggested < 1.5  # not 1e5: healthy steps only
    assert "before" in report.clipping.rule
    assert any("only a global gradient norm" in note for note in report.notes)
    result = invoke("analyze", str(run), "--format", "json")
    assert result.exit_code == ExitStatus.FINDINGS
    (document,) = json.loads(result.stdout)["runs"]
    assert document["gradients"] == "global" and document["layers"][0]["onsets"]["nan"] == 180


# --------------------------------------------------------------------------------------------
# Silence is never success
# --------------------------------------------------------------------------------------------


def test_scalars_only_logs_exit_4_and_say_what_they_hold(tmp_path: Path) -> None:
    run = write(tmp_path / "run", range(20), lambda s: {"loss": 1 / (1 + s), "accuracy": s / 20})
    result = invoke("analyze", str(run), "--fail-on", "any")
    assert result.exit_code == ExitStatus.NOTHING_TO_JUDGE == 4
    assert "nothing to judge: only scalars: loss, accuracy" in result.stdout
    (line,) = result.stderr.splitlines()
    assert (
        line.startswith("gradcheck: nothing to judge:") and "only scalars: loss, accuracy" in line
    )
    result = invoke("analyze", str(run), "--format", "json", "--fail-on", "none")
    assert result.exit_code == 4
    (document,) = json.loads(result.stdout)["runs"]
    assert document["judgeable"] is False and document["holds"] == "only scalars: loss, accuracy"


def test_a_run_with_nothing_to_judge_beside_one_that_has_is_listed_plainly(
    tmp_path: Path,
) -> None:
    rng = np.random.default_rng(1)
    write_histograms(
        tmp_path / "train", range(5), lambda s: {"dense/kernel": rng.normal(0, 0.1, 50) + s}
    )
    write(tmp_path / "validation", range(5), lambda s: {"epoch_loss": 1.0, "epoch_accuracy": 0.5})
    result = invoke("analyze", str(tmp_path), "--fail-on", "any")
    assert result.exit_code == ExitStatus.OK
    assert "nothing to judge: only scalars: epoch_loss, epoch_accuracy" in result.stdout
    assert "no parameters" not in result.stdout
    assert "no gradients logged: vanishing and exploding gradients cannot be judged" in (
        " ".join(result.stdout.split())
    )


# --------------------------------------------------------------------------------------------
# Overflow under loss scaling
# --------------------------------------------------------------------------------------------


def write_amp_run(directory: Path, *, diverge: bool) -> Path:
    """Gradients Inf at isolated steps (as GradScaler leaves them, the scale halving there),
    weights finite; with ``diverge`` the weights turn NaN at step 60 and stay NaN."""
    rng = np.random.default_rng(2)
    overflow = {0, 4, 8, 44}
    writer = tensorboardX.SummaryWriter(str(directory))
    scale = 2.0**16
    weights = {name: rng.normal(0, 0.1, 128) for name in PARAMS}
    for step in range(0, 100, 4):
        for i, name in enumerate(PARAMS):
            norm = INF if step in overflow else healthy_norm(step, 0.2, i)
            writer.add_scalar(f"gradient_norm/{name}", norm, step)
            weights[name] = weights[name] + rng.normal(0, 1e-3, 128)
            values = weights[name] * (NAN if diverge and step >= 60 else 1.0)
            writer.add_scalar(f"weight_norm/{name}", float(np.linalg.norm(values)), step)
            writer.add_histogram(f"weights/{name}", np.nan_to_num(values), step)
            writer.add_scalar(f"weight_nonfinite/{name}", float((~np.isfinite(values)).sum()), step)
        scale = scale / 2 if step in overflow else scale
        writer.add_scalar("loss_scale", scale, step)
        writer.add_scalar("loss", 2.0 * 0.99**step, step)
    writer.close()
    return directory


def test_transient_overflow_under_loss_scaling_is_not_nan(tmp_path: Path) -> None:
    report = analyze(write_amp_run(tmp_path / "amp", diverge=False))
    assert report.counts["nan"] == 0 and report.counts["overflow"] == len(PARAMS)
    layer = report.layers[0]
    assert layer.first_bad_step == 0 and layer.stats["overflow_steps"] == 4
    assert "loss scale (loss_scale) went down" in layer.evidence
    assert "use loss scaling" not in layer.hint
    assert invoke("analyze", str(tmp_path / "amp")).exit_code == ExitStatus.OK  # default gate
    assert invoke("analyze", str(tmp_path / "amp"), "--fail-on", "overflow").exit_code == 1


def test_a_diverged_run_under_loss_scaling_is_nan_without_the_loss_scaling_advice(
    tmp_path: Path,
) -> None:
    report = analyze(write_amp_run(tmp_path / "amp", diverge=True))
    assert report.counts["nan"] == len(PARAMS)
    layer = report.layers[0]
    assert layer.first_bad_step == 0 and "weights non-finite from step 60" in layer.evidence
    assert "use loss scaling" not in layer.hint and "loss scaling did not absorb" in layer.hint


# --------------------------------------------------------------------------------------------
# Pairing and static
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("weight", "gradient", "name", "layers"),
    [
        ("hist/weights/{}", "hist/grads/{}", "hist/{}", ("fc", "fc_1")),
        ("{}/weight", "{}/grad", "{}", ("fc", "fc_1")),
        # TF1: the variable took the summary's name scope, so the histogram got a ``_1``
        ("{}_1", "{}/gradient", "{}", ("dense/kernel", "dense_1/kernel")),
    ],
)
def test_weight_and_gradient_tags_pair_in_common_conventions(
    tmp_path: Path, weight: str, gradient: str, name: str, layers: tuple[str, str]
) -> None:
    rng = np.random.default_rng(3)

    def tensors(step: int) -> dict[str, np.ndarray]:
        out = {}
        for layer in layers:
            out[weight.format(layer)] = rng.normal(0, 0.1, 100) + 1e-2 * step
            out[gradient.format(layer)] = rng.normal(0, 0.01, 100)
        return out

    report = analyze(write_histograms(tmp_path / "run", range(10), tensors))
    assert sorted(layer.name for layer in report.layers) == sorted(name.format(x) for x in layers)
    for layer in report.layers:
        assert layer.weight_tag is not None and layer.grad_tag is not None, layer.name


def test_parameters_left_out_of_the_optimizer_are_static_beside_moving_siblings(
    tmp_path: Path,
) -> None:
    """Biases and LayerNorm dropped from the optimizer: bit-identical weights, healthy
    gradients, while the kernels of their own layers move."""
    rng = np.random.default_rng(4)
    frozen = {
        "fc1.bias": rng.normal(0, 0.1, 32),
        "norm.weight": np.ones(32) + rng.normal(0, 0.01, 32),
    }
    start = {"fc1.weight": rng.normal(0, 0.1, 256), "fc2.weight": rng.normal(0, 0.1, 256)}

    def tensors(step: int) -> dict[str, np.ndarray]:
        out = {
            name: values + 1e-2 * step * rng.normal(0, 0.1, values.size)
            for name, values in start.items()
        }
        out.update(frozen)
        for name in (*start, *frozen):
            out[f"{name}/grad"] = rng.normal(0, 0.01, out[name].size)
        return out

    layers = by_name(analyze(write_histograms(tmp_path / "run", range(12), tensors)))
    assert {n for n, layer in layers.items() if layer.verdict == "static"} == set(frozen)
    assert "its gradient is not zero" in layers["fc1.bias"].evidence


def test_an_unmoved_bias_is_by_design_beside_a_healthy_kernel_and_vanishing_beside_a_faint_one(
    tmp_path: Path,
) -> None:
    """Two biases that do not move, with about zero gradient, while their layers' kernels do:
    beside a kernel with a healthy gradient, a bias before a normalisation (none by design);
    beside a kernel whose gradient vanished too (a deep sigmoid stack), no normalisation need
    be there, and the note says it is the gradient that is missing."""
    rng = np.random.default_rng(7)
    kernel_grads = {"fc0.weight": 1e-6, "fc1.weight": 0.05, "fc2.weight": 0.1}
    biases = {name: rng.normal(0, 0.1, 32) for name in ("fc0.bias", "fc1.bias")}
    kernels = {name: rng.normal(0, 0.1, 256) for name in kernel_grads}

    def tensors(step: int) -> dict[str, np.ndarray]:
        out = {name: v + 1e-2 * step * rng.normal(0, 0.1, v.size) for name, v in kernels.items()}
        out.update(biases)
        for name, scale in kernel_grads.items():
            out[f"{name}/grad"] = rng.normal(0, scale, 256)
        for name in biases:
            out[f"{name}/grad"] = rng.normal(0, 1e-10, 32)
        return out

    layers = by_name(analyze(write_histograms(tmp_path / "run", range(12), tensors)))
    (faint,) = [note for note in layers["fc0.bias"].notes if note.startswith("not static")]
    assert layers["fc0.bias"].verdict == "vanishing"
    assert "as is its layer's: a vanishing gradient" in faint and "normalisation" not in faint
    (design,) = [note for note in layers["fc1.bias"].notes if note.startswith("not static")]
    assert "a bias before a normalisation gets none by design" in design
    assert layers["fc1.bias"].verdict == "ok"


def test_a_run_whose_optimizer_never_steps_is_static_throughout(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    weights = {f"fc{i}.weight": rng.normal(0, 0.1, 128) for i in range(3)}

    def tensors(step: int) -> dict[str, np.ndarray]:
        grads = {f"{name}/grad": rng.normal(0, 0.05, 128) for name in weights}
        return {**weights, **grads}

    report = analyze(write_histograms(tmp_path / "run", range(10), tensors))
    assert report.counts["static"] == 3
    assert "as every other weight of the run" in report.layers[0].evidence


def test_analyze_warns_about_a_restart_across_files_as_inspect_does(tmp_path: Path) -> None:
    """A resumed training writes a new file whose steps go back: the older steps are
    superseded, and the report says so (it did only within one file)."""
    rng = np.random.default_rng(6)
    for suffix, steps in (("a", range(0, 20)), ("b", range(10, 30))):
        writer = tensorboardX.SummaryWriter(str(tmp_path / "run"), filename_suffix=suffix)
        for step in steps:
            writer.add_histogram("fc.weight", rng.normal(0, 0.1, 64) + 1e-2 * step, step)
            writer.add_histogram("fc.weight/grad", rng.normal(0, 0.01, 64), step)
        writer.close()
    for jobs in ("1", "2"):
        result = invoke("analyze", str(tmp_path / "run"), "--format", "json", "-j", jobs)
        (run,) = json.loads(result.stdout)["runs"]
        (warning,) = run["warnings"]
        assert warning.endswith(
            "b: steps go back from 19 to 10 (first seen on tag 'fc.weight'): "
            "training was restarted; data at steps >= 10 from before the "
            "restart is superseded by the newer data, as TensorBoard does"
        )


def test_series_renamed_mid_run_are_joined_with_a_word(tmp_path: Path) -> None:
    """A Keras model reloaded from a checkpoint logs ``dense/kernel/histogram`` where it
    logged ``sequential/dense/kernel/histogram``: one parameter each, not two."""
    rng = np.random.default_rng(7)
    names = ("dense/kernel", "dense/bias", "dense_1/kernel")
    writer = tensorboardX.SummaryWriter(str(tmp_path / "run"))
    for step in range(6):
        prefix = "sequential/" if step < 3 else ""
        for name in names:
            writer.add_histogram(f"{prefix}{name}/histogram", rng.normal(step, 0.1, 64), step)
    writer.close()
    report = analyze(tmp_path / "run")
    assert [layer.name for layer in report.layers] == list(names)
    assert all(layer.stats["weight_steps"] == 6 for layer in report.layers)
    (warning,) = report.warnings
    assert "3 series changed name at step 3" in warning and "'sequential'" in warning


def test_two_runs_of_one_training_that_disagree_say_why(tmp_path: Path) -> None:
    """The stock callback's weights per epoch saw a layer stand still, the gradient logger's
    run every few steps saw it move: the report says the two runs disagree and how they
    differ, instead of two contradictory verdicts side by side."""
    rng = np.random.default_rng(8)
    names = ("fc1.weight", "fc2.weight", "fc3.weight")
    start = {name: rng.normal(0, 0.1, 64) for name in names}
    epochs = tensorboardX.SummaryWriter(str(tmp_path / "keras" / "train"))
    steps = tensorboardX.SummaryWriter(str(tmp_path / "gradcheck"))
    for step in range(0, 40, 4):  # one training: both loggers write as it goes
        for name in names:
            steps.add_histogram(f"weights/{name}", start[name] + 0.005 * step, step)
            steps.add_histogram(f"gradients/{name}", rng.normal(0, 0.01, 64), step)
        if step % 8 == 0:
            epoch = step // 8
            for name in names:
                moved = 0.0 if name == "fc2.weight" else 0.05 * epoch
                epochs.add_histogram(name, start[name] + moved, epoch)
    epochs.close()
    steps.close()
    result = invoke("analyze", str(tmp_path), "--format", "json")
    document = json.loads(result.stdout)
    verdicts = {
        run["run"]: {x["name"]: x["verdict"] for x in run["layers"]} for run in document["runs"]
    }
    assert verdicts[str(tmp_path / "keras" / "train")]["fc2.weight"] == "static"
    assert verdicts[str(tmp_path / "gradcheck")]["fc2.weight"] == "ok"
    (warning,) = document["warnings"]
    assert "log the same 3 parameters (one training logged twice?)" in warning
    assert "fc2.weight (ok / static)" in warning or "fc2.weight (static / ok)" in warning
    assert "with no gradients, steps 0-4" in warning and "with gradients, steps 0-36" in warning


def test_runs_written_one_after_the_other_are_not_one_training(tmp_path: Path) -> None:
    """Two trainings of one architecture, one logging gradients, run one after the other:
    their verdicts may differ, and nothing says they are one training logged twice."""
    rng = np.random.default_rng(9)
    start = {name: rng.normal(0, 0.1, 64) for name in ("fc1.weight", "fc2.weight")}
    first = tensorboardX.SummaryWriter(str(tmp_path / "a"))
    for epoch in range(5):
        for name, values in start.items():
            first.add_histogram(name, values + (0 if name == "fc2.weight" else 0.05 * epoch), epoch)
    first.close()
    import time

    time.sleep(1.1)  # event wall times have a resolution finer than this
    second = tensorboardX.SummaryWriter(str(tmp_path / "b"))
    for step in range(5):
        for name, values in start.items():
            second.add_histogram(f"weights/{name}", values + 0.005 * step, step)
            second.add_histogram(f"gradients/{name}", rng.normal(0, 0.01, 64), step)
    second.close()
    document = json.loads(invoke("analyze", str(tmp_path), "--format", "json").stdout)
    assert document["warnings"] == []


def test_statistics_over_parameters_are_not_parameters(tmp_path: Path) -> None:
    """``grad_norm/max``, ``/min``, ``/mean`` summarise every parameter's norm: read as three
    parameters, the smallest was 'vanishing' against the largest on a healthy run."""

    def scalars(step: int) -> dict[str, float]:
        return {
            "grad_norm/max": healthy_norm(step, 3.0, 0),
            "grad_norm/min": healthy_norm(step, 2e-4, 1),
            "grad_norm/mean": healthy_norm(step, 0.5, 2),
            "loss": 2.0 * 0.98**step,
        }

    run = write(tmp_path / "run", range(0, 100, 5), scalars)
    report = analyze(run)
    assert report.layers == () and not report.judgeable
    assert invoke("analyze", str(run)).exit_code == ExitStatus.NOTHING_TO_JUDGE


def test_a_stretch_of_non_finite_norms_without_sign_of_loss_scaling_is_nan(tmp_path: Path) -> None:
    """Norms only (no weights, no loss scale): 30 logged steps in a row non-finite, then
    finite again, is no skipped overflow; a few isolated ones are."""

    def norms(bad: set[int]) -> Callable[[int], dict[str, float]]:
        return lambda step: {
            f"grad_2.0_norm/{name}": INF if step in bad else healthy_norm(step, 0.3, i)
            for i, name in enumerate(PARAMS)
        }

    block = write(tmp_path / "block", range(100), norms(set(range(20, 50))))
    assert {layer.verdict for layer in analyze(block).layers} == {"nan"}
    isolated = write(tmp_path / "isolated", range(100), norms({3, 40, 77}))
    assert {layer.verdict for layer in analyze(isolated).layers} == {"overflow"}
