"""A share of a layer's outputs (dead, saturated): the stretch in which it held, the onset of
its rise into it, and the evidence (its level, how long it held, how exactly the histogram's
buckets pin it down)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import numpy as np

from gradcheck.verdicts.config import Config
from gradcheck.verdicts.numeric import median
from gradcheck.verdicts.onset import MIN_TREND_VALUES, onset_position
from gradcheck.verdicts.rules.base import Finding, baseline_size, fmt, severity

if TYPE_CHECKING:
    from gradcheck.model import Verdict
    from gradcheck.verdicts.activations import Activation

Which = Literal["zero", "bound"]
"""The share a rule judges: of exact zeros (dead), or near the bounds of the range (saturated)."""
LOW_KEYS = {"zero": "exact_zero_share_low", "bound": "bound_share_low"}
"""The number of a finding that says the lowest share the buckets allow in its stretch."""

LIVE_FLOOR = 1e-6
"""The smallest share left (``1 - share``) the onset rule sees: a share of exactly 1 has a
finite inverse."""


def held_share(
    steps: np.ndarray, share: np.ndarray, threshold: float, config: Config
) -> tuple[int, int] | None:
    """Where a share (NaN: not measured, taken as 0) is at or above ``threshold`` at every
    logged step to the last, at ``activation_steps`` logged steps or more: the position of the
    stretch's first step, and the onset of the rise into it (None when it does not hold).

    The onset is the shared rule's (:mod:`gradcheck.verdicts.onset`) on the inverse of the share
    left, ``1 / (1 - share)``: a share rising towards 1 is what is left of the layer's outputs
    shrinking by factors, as a blow-up grows by them (0.5 zeros to 0.95 is 2 to 20, 10x), so a
    layer that dies over a few steps has its onset where its zeros began to climb, and one that
    dies at a step, at that step."""
    holds = np.nan_to_num(share, nan=0.0) >= threshold
    if not holds.size or not holds[-1]:
        return None
    breaks = np.flatnonzero(~holds)
    start = int(breaks[-1]) + 1 if breaks.size else 0
    if holds.size - start < max(config.activation_steps, 1):
        return None
    left = 1.0 - np.clip(np.nan_to_num(share[: start + 1], nan=0.0), 0.0, 1.0)
    rise = 1.0 / np.maximum(left, LIVE_FLOOR)
    window = max(MIN_TREND_VALUES, baseline_size(share.size, config))
    early = median(rise[: baseline_size(share.size, config)])
    onset = onset_position(rise, steps[: start + 1], start, window, early)
    return start, int(steps[onset])


def share_evidence(
    what: str,
    steps: np.ndarray,
    share: np.ndarray,
    low: np.ndarray,
    high: np.ndarray,
    threshold: float,
    onset: int,
) -> str:
    """``0.97 of its outputs exactly zero at step 290, at or above 0.9 at every one of the 12
    logged steps since step 180, rising into it from step 170 (exact: ...)`` (arrays over the
    steps of the stretch that held; ``onset``: the step its rise into it began)."""
    count = int(steps.size)
    held = (
        f"at or above {threshold:g} at every one of the {count} logged steps since step "
        f"{int(steps[0])}"
    )
    if onset < int(steps[0]):
        held += f", rising into it from step {onset}"
    pinned = _pinned(steps, share, low, high)
    return f"{_share(share[-1])} of its outputs {what} at step {int(steps[-1])}, {held} ({pinned})"


def _share(value: float) -> str:
    return f"{value:.3f}" if np.isfinite(value) else fmt(value)


def _pinned(steps: np.ndarray, share: np.ndarray, low: np.ndarray, high: np.ndarray) -> str:
    """How exact the shares are: from buckets that hold only such values, or estimated where a
    bucket also holds others (the widest bounds the buckets allow then said)."""
    spread = np.nan_to_num(high - low, nan=0.0)
    if not spread.size or float(spread.max()) <= 1e-6:
        return "exact: each bucket holds only such values or none"
    at = int(np.argmax(spread))
    return (
        "estimated: a bucket also holds other values, its share taken from the density of "
        f"the bucket beside it; the buckets allow {_share(low[at])} to {_share(high[at])} "
        f"at step {int(steps[at])}"
    )


def held_finding(
    verdict: Verdict,
    activation: Activation,
    which: Which,
    threshold: float,
    what: str,
    hint: str,
    config: Config,
) -> Finding | None:
    """``verdict``'s finding when the layer's ``which`` share held at or above ``threshold``
    (:func:`held_share`): its evidence (``what`` the share is of), severity by the last share,
    and the step the stretch began (``<verdict>_from_step``) with the lowest share the buckets
    allow in it (``exact_zero_share_low``, ``bound_share_low``)."""
    steps, share = activation.steps, getattr(activation, which)
    low, high = getattr(activation, f"{which}_low"), getattr(activation, f"{which}_high")
    found = held_share(steps, share, threshold, config)
    if found is None:
        return None
    start, onset = found
    since = slice(start, None)
    evidence = share_evidence(
        what, steps[since], share[since], low[since], high[since], threshold, onset
    )
    return Finding(
        verdict,
        severity(verdict, float(share[-1]) / threshold),
        onset,
        evidence,
        hint,
        {
            f"{verdict}_from_step": int(steps[start]),
            LOW_KEYS[which]: float(low[since].min()),
        },
    )


def charted(activation: Activation, flags: tuple[Verdict, ...]) -> Which:
    """The share a layer's row shows (its trend and chart): near the bounds for a saturated
    layer (or a bounded one without a finding), else exact zeros."""
    bounded = activation.bound_kind is not None and "dead" not in flags
    return "bound" if "saturated" in flags or bounded else "zero"


def threshold_of(flags: tuple[Verdict, ...], config: Config) -> float | None:
    """The threshold of the row's most severe share finding (None without one)."""
    if "dead" in flags:
        return config.dead_zero_share
    if "saturated" in flags:
        return config.saturated_share
    return None
