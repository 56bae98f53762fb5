"""A finding's hint in two short lines, cause and fix, for the default terminal view.

The verdict rules give each finding a hint of one to three sentences
(:mod:`gradcheck.verdicts.hints`); ``--explain``, JSON and the other formats carry it whole.
The default view says, per verdict kind of a run, one line of cause and one of fix, written
here for each hint the rules give (a hint is recognised by its opening words: some rules add a
sentence or a number to it). A hint not written here yet shows whole as the fix, never nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from gradcheck.model import LayerResult
from gradcheck.verdicts import hints
from gradcheck.verdicts.rules.slow import SLOW


@dataclass(frozen=True)
class Advice:
    """Why a finding happens, and what to try first ("" cause: the hint did not say)."""

    cause: str
    fix: str


SHORT: dict[str, Advice] = {
    hints.NAN_AFTER_RISE: Advice(
        "gradients grew by orders of magnitude, then overflowed to NaN/Inf",
        "lower the learning rate, clip the global gradient norm, warm up",
    ),
    hints.NAN_AFTER_LOSS_RISE: Advice(
        "the training loss rose by orders of magnitude, then NaN/Inf",
        "lower the learning rate, clip the global gradient norm, warm up",
    ),
    hints.NAN_PLAIN: Advice(
        "NaN/Inf without a rise first: log(0), x/0, NaN inputs, fp16 overflow",
        "find the first bad op: set_detect_anomaly, enable_check_numerics",
    ),
    hints.NAN_SCALED: Advice(
        "NaN/Inf that loss scaling did not absorb: log(0), x/0, NaN inputs",
        "find the first bad op (set_detect_anomaly); float32 or bf16 there",
    ),
    hints.OVERFLOW: Advice(
        "loss scaling skipped steps that overflowed fp16 (harmless if few)",
        "if many: a lower init_scale, or that op in float32 (or bf16)",
    ),
    hints.EXPLODING_RECURRENT: Advice(
        "gradients through time blow up in recurrent layers without a clip",
        "clip the global gradient norm, lower the learning rate",
    ),
    hints.EXPLODING_RISE: Advice(
        "learning rate too large, or no gradient clipping",
        "lower the learning rate, clip the global gradient norm, warm up",
    ),
    hints.DIVERGING: Advice(
        "the training loss rose orders of magnitude and never came back",
        "lower the learning rate 10x, warm up; clipping alone does not fix it",
    ),
    hints.EXPLODING_FROM_START: Advice(
        "the weights grew orders of magnitude past their initial scale",
        "lower the learning rate 10-100x, warm up; log the first steps",
    ),
    hints.EXPLODING_DWARF: Advice(
        "gradients far larger than their weights: a summed loss, raw targets",
        "lower the learning rate; average the loss, normalise the targets",
    ),
    hints.EXPLODING_WEIGHTS: Advice(
        "weights grow without bound: learning rate too large, no weight decay",
        "lower the learning rate, clip gradients; log gradients too",
    ),
    hints.VANISHING_RECURRENT: Advice(
        "gradients fade through the recurrent layer's time steps",
        "orthogonal recurrent init, forget-gate bias 1, shorter sequences",
    ),
    hints.VANISHING_EARLY: Advice(
        "gradients shrink layer by layer: sigmoid/tanh or too small an init",
        "ReLU/GELU, He/Glorot init, normalisation or residual connections",
    ),
    hints.VANISHING_LATE: Advice(
        "a saturated output activation, or a layer barely tied to the loss",
        "compute the loss from logits; check how the layer reaches the loss",
    ),
    hints.VANISHING_ZERO: Advice(
        "gradient practically zero: dead ReLUs, or cut off from the loss",
        "lower the learning rate, LeakyReLU; look for detach/stop_gradient",
    ),
    hints.VANISHING_DECAY: Advice(
        "gradients decayed by decades, the loss did not: units saturate",
        "lower the learning rate, add normalisation, check for dead ReLUs",
    ),
    hints.STATIC_BN_AFFINE: Advice(
        "BatchNorm frozen, not in the optimizer, or in inference mode",
        "if not on purpose: trainable=True / model.train(), optimizer params",
    ),
    hints.STATIC_BN_MOVING: Advice(
        "BatchNorm moving statistics not updated: inference mode",
        "if not on purpose: training=True / model.train() while training",
    ),
    hints.STATIC_FROZEN: Advice(
        "no gradient computed: frozen, or not connected to the loss",
        "if not on purpose: requires_grad/trainable, or connect to the loss",
    ),
    hints.STATIC_STOPPED: Advice(
        "weights stopped changing part-way: the learning rate reached 0?",
        "size the LR schedule in optimizer steps, not epochs; log the LR",
    ),
    hints.STATIC_NEVER_TRAINED: Advice(
        "nothing moved while the run trained: no optimizer step taken",
        "call optimizer.step()/apply_gradients; check the lr and its params",
    ),
    hints.STATIC_PLAIN: Advice(
        "never updated: frozen, not in the optimizer, or no gradient",
        "if not on purpose: requires_grad/trainable, the optimizer's params",
    ),
    hints.STATIC_FLOAT32.split("{", 1)[0]: Advice(
        "updates too small for float32 to move the weights",
        "raise the learning rate by orders of magnitude; check its schedule",
    ),
    hints.DEAD: Advice(
        "ReLU units stopped firing: learning rate too large, bias, or init",
        "lower the learning rate, He init, LeakyReLU/GELU, BatchNorm before",
    ),
    hints.SATURATED: Advice(
        "tanh/sigmoid outputs at their bounds: large init, inputs or steps",
        "Glorot init, normalise inputs, lower the learning rate, or ReLU",
    ),
    SLOW: Advice(
        "weights move far less per update than in healthy training",
        "raise the learning rate (a range test finds one); check its schedule",
    ),
}
"""Keyed by each hint's text (or its opening, before a number the rule fills in); each line at
most :data:`LINE` characters, so that it stays one line beside its verdict at 80 columns (the
static ones shorter: a verdict with several causes names each one's layers before it)."""
LINE = 68


def advice_for(hint: str) -> Advice:
    """The short cause and fix of ``hint`` (the longest key it starts with); an unknown hint
    whole as the fix."""
    known = [key for key in SHORT if hint.startswith(key)]
    if known:
        return SHORT[max(known, key=len)]
    return Advice("", hint)


def verdict_advice(findings: list[LayerResult]) -> Advice | None:
    """The advice of a verdict kind in a run: its worst finding's hint (``findings`` worst
    first); None when no finding has a hint."""
    for finding in findings:
        if finding.hint:
            return advice_for(finding.hint)
    return None
