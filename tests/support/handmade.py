"""Hand-built reports for the formatter and CLI tests: every verdict, warnings, clipping, NaN.

The numbers are chosen to look like real runs (a gradient norm that rises by decades and turns
NaN, a first layer five decades below the last) so that the golden files read like the tool's
real output, but nothing here comes from the analysis: formatters are tested on their own.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping

import numpy as np

from gradcheck.model import (
    ClipInfo,
    LayerResult,
    Reference,
    Report,
    RunReport,
    Spike,
    StepSeries,
    Verdict,
)
from gradcheck.verdicts import hints
from gradcheck.verdicts.clip_advice import advice
from gradcheck.verdicts.config import DEFAULT_CONFIG

NAN = math.nan


def layer(
    name: str,
    verdict: Verdict,
    *,
    severity: float = 0.0,
    first_bad_step: int | None = None,
    flags: tuple[Verdict, ...] | None = None,
    stats: Mapping[str, float | int | None] | None = None,
    trend: tuple[float, ...] = (),
    evidence: str = "",
    hint: str = "",
    depth: int = 0,
    weight_only: bool = False,
    references: tuple[Reference, ...] = (),
) -> LayerResult:
    """A LayerResult with the tag names of gradcheck's own logging helpers; its full series
    (charts) is ``trend`` at steps 0, 1, ..."""
    return LayerResult(
        name=name,
        weight_tag=f"weights/{name}",
        grad_tag=None if weight_only else f"gradients/{name}",
        verdict=verdict,
        flags=flags if flags is not None else (() if verdict == "ok" else (verdict,)),
        severity=severity,
        first_bad_step=first_bad_step,
        evidence=evidence,
        hint=hint,
        depth=depth,
        stats=dict(stats or {}),
        trend=trend,
        trend_of="gradient L2 norm",
        series=step_series("gradient L2 norm", trend) if trend else None,
        references=references,
    )


def step_series(label: str, values: tuple[float, ...]) -> StepSeries:
    """``values`` at steps 0, 1, ...; the non-finite ones marked as such."""
    array = np.array(values, dtype=float)
    steps = np.arange(array.size, dtype=np.int64)
    return StepSeries(label, steps, array, steps[~np.isfinite(array)])


def rising_then_nan() -> tuple[float, ...]:
    """A gradient norm rising a decade every 4 steps from 0.1, NaN for the last 8 steps."""
    return tuple(0.1 * 10 ** (i / 4) for i in range(24)) + (NAN,) * 8


def troubled_run() -> RunReport:
    """One run with a finding of every kind, two healthy parameters, warnings and clipping."""
    layers = (
        layer(
            "fc1.weight",
            "nan",
            severity=412.5,
            first_bad_step=24,
            flags=("nan", "exploding"),
            stats={
                "grad_norm_median": 3.16,
                "grad_norm_last": None,
                "grad_ratio_to_largest": 1.0,
                "weight_movement": 0.84,
                "nonfinite_steps": 8,
            },
            trend=rising_then_nan(),
            evidence="gradient norm is NaN from step 24 after rising 1.0e+05x above its "
            "first-steps median 0.1 (threshold 100x).",
            hint="Lower the learning rate or clip the global gradient norm.",
        ),
        layer(
            "fc2.weight",
            "exploding",
            severity=210.0,
            first_bad_step=12,
            stats={
                "grad_norm_median": 8.9,
                "grad_norm_last": 1250.0,
                "grad_ratio_to_largest": 0.62,
                "weight_movement": 0.51,
            },
            trend=tuple(1.0 * 10 ** (i / 8) for i in range(32)),
            evidence="gradient norm rose 1.2e+03x above its first-steps median 1.0 by step 12 "
            "(threshold 100x).",
            hint="Learning rate too high for this layer; clip gradients or add normalisation.",
            depth=1,
            references=(Reference("early baseline", 1.0), Reference("threshold", 100.0)),
        ),
        layer(
            "encoder.layers.0.self_attention.in_proj_weight",
            "vanishing",
            severity=55.0,
            first_bad_step=0,
            stats={
                "grad_norm_median": 2.4e-8,
                "grad_norm_last": 1.1e-8,
                "grad_ratio_to_largest": 2.7e-9,
                "weight_movement": 3.0e-6,
            },
            trend=tuple(2.4e-8 * 0.97**i for i in range(32)),
            evidence="median gradient norm 2.4e-08 is 2.7e-09 of the run's largest "
            "(threshold 1e-04).",
            hint="Saturating activations deep in the stack; try ReLU, better initialisation "
            "or residual connections.",
            depth=2,
        ),
        layer(
            "bn1.weight",
            "static",
            severity=12.0,
            stats={"grad_norm_median": 0.0, "grad_norm_last": 0.0, "weight_movement": 0.0},
            trend=(0.0,) * 32,
            evidence="weights bit-identical over 32 steps while the run's other weights moved "
            "a median 0.51 (frozen on purpose?).",
            hint="A frozen layer, or BatchNorm gamma/beta left out of the optimizer.",
            depth=3,
        ),
        layer(
            "fc3.bias|odd",
            "ok",
            stats={
                "grad_norm_median": 0.51,
                "grad_norm_last": 0.47,
                "grad_ratio_to_largest": 0.057,
                "weight_movement": 0.12,
            },
            trend=(0.5, 0.52, 0.49, 0.47),
            depth=4,
        ),
        layer(
            "fc3.weight",
            "ok",
            stats={
                "grad_norm_median": 2.2,
                "grad_norm_last": 2.0,
                "grad_ratio_to_largest": 0.25,
                "weight_movement": 0.09,
            },
            trend=(2.1, 2.3, 2.2, 2.0),
            depth=5,
        ),
    )
    return RunReport(
        run="runs/troubled",
        files=(
            "events.out.tfevents.1700000000.host.1.0",
            "events.out.tfevents.1700000900.host.1.0",
        ),
        steps=(0, 31),
        writers=("pytorch/tensorboardX (HistogramProto)",),
        warnings=(
            "events.out.tfevents.1700000900.host.1.0: incomplete final record at byte 40960 "
            "(training still running?): 87 bytes not read",
        ),
        layers=layers,
        clipping=with_advice(
            ClipInfo(
                source="scalar gradient_norm/global",
                steps=(0, 31),
                median=3.4,
                p99=1.9e5,
                maximum=math.inf,
                clipped=False,
                ceiling=None,
                suggested_clip_norm=5.0,
                rule="1.5x the median of the first half",
                trend=(1.0, 2.0, math.inf),
                kind="value",
                clip_value=0.5,
                clipped_share=0.75,
                suggested_share=0.05,
                framework="pytorch",
                series=step_series("global gradient L2 norm", (1.0, 2.0, 3.0, math.inf)),
            )
        ),
        counts={"nan": 1, "exploding": 1, "vanishing": 1, "static": 1, "ok": 2},
        updates="Kernels moved a median 4e-4 of their scale per update (usual: ~1e-3); slowest "
        "fc3.bias|odd 2e-6",
    )


def with_advice(clip: ClipInfo) -> ClipInfo:
    """``clip`` with the advice gradcheck gives for it."""
    return dataclasses.replace(clip, advice=advice(clip, DEFAULT_CONFIG))


def healthy_run() -> RunReport:
    """A Keras weights-only run where every parameter is fine."""
    layers = (
        layer(
            "dense/kernel",
            "ok",
            stats={"weight_norm_median": 4.1, "weight_movement": 0.21},
            trend=(4.0, 4.1, 4.2),
            weight_only=True,
        ),
        layer(
            "dense/bias",
            "ok",
            stats={"weight_norm_median": 0.3, "weight_movement": None},
            trend=(0.0, 0.2, 0.3),
            weight_only=True,
            depth=1,
        ),
    )
    return RunReport(
        run="runs/healthy",
        files=("events.out.tfevents.1700000000.host.2.0.v2",),
        steps=(0, 2),
        writers=("tensorflow (TF2 summary ops)",),
        warnings=(),
        layers=layers,
        counts={"ok": 2},
    )


def activation(
    name: str, verdict: Verdict, shares: tuple[float, ...], **fields: object
) -> LayerResult:
    """A layer's outputs judged from an activation histogram ``activations/<name>``."""
    return LayerResult(
        name=name,
        weight_tag=None,
        grad_tag=None,
        verdict=verdict,
        flags=() if verdict == "ok" else (verdict,),
        severity=1.5 if verdict == "dead" else 0.0,
        first_bad_step=fields.get("first_bad_step"),  # type: ignore[arg-type]
        evidence=str(fields.get("evidence", "")),
        hint=hints.DEAD if verdict == "dead" else "",
        depth=int(fields.get("depth", 0)),  # type: ignore[call-overload]
        stats={"exact_zero_share_last": shares[-1]},
        trend=shares,
        trend_of="share of outputs exactly 0",
        onsets={"dead": fields["first_bad_step"]} if verdict == "dead" else {},  # type: ignore[dict-item]
        series=step_series("share of outputs exactly 0", shares),
        activation_tag=f"activations/{name}",
    )


def spiky_run() -> RunReport:
    """A torch run with forward hooks (one ReLU layer dead) and two loss spikes, one led by a
    parameter's gradient, one where no gradient was logged."""
    layers = (
        activation(
            "relu2",
            "dead",
            (0.5, 0.97, 0.99),
            first_bad_step=1,
            evidence="0.990 of its outputs exactly zero at step 2, at or above 0.9 at every one "
            "of the 2 logged steps since step 1 (exact: each bucket holds only such values or "
            "none)",
            depth=1,
        ),
        activation("relu1", "ok", (0.5, 0.48, 0.51)),
        layer("lm_head.weight", "ok", trend=(1.0, 1.2, 1.1), depth=2),
    )
    return RunReport(
        run="runs/spiky",
        files=("events.out.tfevents.1700000000.host.3.0",),
        steps=(0, 2),
        writers=("pytorch/tensorboardX (HistogramProto)",),
        warnings=(),
        layers=layers,
        counts={"dead": 1, "ok": 2},
        spikes=(
            Spike(152, 8.25, ("lm_head.weight",), gradient_step=151, rise=240.0),
            Spike(
                304, 4.5, (), note="no gradient logged at step 304 or the logged step before (303)"
            ),
        ),
        loss=step_series("training loss (loss)", (1.0, 8.25, 1.1)),
    )


def spiky_report() -> Report:
    """The run with a dead layer and loss spikes alone."""
    return Report(version="0.1.0", runs=(spiky_run(),))


def sample_report() -> Report:
    """Two runs, one in trouble and one healthy, and a report-level warning."""
    return Report(
        version="0.1.0",
        runs=(troubled_run(), healthy_run()),
        warnings=("runs/empty: no histogram or scalar could be read",),
    )


def clean_report() -> Report:
    """Only the healthy run."""
    return Report(version="0.1.0", runs=(healthy_run(),))


HOSTILE_TAG = "<script>console.log('INJECTED')</script>%0A::error::x,y\r\n\x1b[31m\x00"
HOSTILE_RUN = 'runs/"><img src=x onerror="console.log(\'INJECTED\')">:1,2%'


def hostile_report() -> Report:
    """Names a log could carry that try to break out of every format: HTML markup and an
    event handler, a GitHub workflow command, CR/LF, ``%``, ``:``, ``,``, an ANSI escape and a
    NUL; a finding and a healthy parameter carry them."""
    bad = layer(
        HOSTILE_TAG,
        "nan",
        severity=400.0,
        first_bad_step=3,
        stats={"grad_norm_median": 1.0},
        trend=(1.0, 10.0, 100.0, NAN),
        evidence=f"gradient non-finite ({HOSTILE_TAG})",
        hint="Lower the learning rate.",
    )
    healthy = layer(HOSTILE_TAG + "ok", "ok", trend=(1.0, 1.1, 1.0), depth=1)
    run = RunReport(
        run=HOSTILE_RUN,
        files=("events.out.tfevents.1",),
        steps=(0, 3),
        writers=(f"writer {HOSTILE_TAG}",),
        warnings=(f"{HOSTILE_TAG}: a warning",),
        layers=(bad, healthy),
        counts={"nan": 1, "ok": 1},
    )
    return Report(version="0.1.0", runs=(run,), warnings=(f"{HOSTILE_RUN}: unreadable",))
