"""The evidence of a share of a layer's outputs (dead, saturated): its level, how long it
held, and how exactly the histogram's buckets pin it down."""

from __future__ import annotations

import numpy as np

from gradcheck.verdicts.rules.base import fmt


def share_evidence(
    what: str,
    steps: np.ndarray,
    share: np.ndarray,
    low: np.ndarray,
    high: np.ndarray,
    threshold: float,
) -> str:
    """``0.97 of its outputs exactly zero at step 290, at or above 0.9 at every one of the 12
    logged steps since step 180 (exact: ...)`` (arrays over the steps since the onset)."""
    count = int(steps.size)
    held = (
        f"at or above {threshold:g} at every one of the {count} logged steps since step "
        f"{int(steps[0])}"
    )
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
