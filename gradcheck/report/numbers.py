"""Short, stable renderings of the numbers humans read in the table and in Markdown."""

from __future__ import annotations

import math

MISSING = "–"


def format_number(value: float | int | None) -> str:
    """At most 6 characters for a norm: ``0.0123``, ``12.3``, ``1250``, ``1.2e-7``, ``nan``.

    Three significant digits (two in exponent form) are enough to compare norms that differ by
    orders of magnitude; the JSON and CSV formats carry the full values. ``–`` when absent.
    """
    if value is None:
        return MISSING
    if isinstance(value, bool):
        return str(value).lower()
    number = float(value)
    if math.isnan(number):
        return "nan"
    if math.isinf(number):
        return "inf" if number > 0 else "-inf"
    if isinstance(value, int) and abs(value) < 10**6:
        return str(value)
    if number == 0:
        return "0"
    if 100 <= abs(number) < 1e5:
        return f"{number:.0f}"
    if 1e-2 <= abs(number) < 100:
        return f"{number:.3g}"
    return compact_exponent(f"{number:.1e}")


def format_ratio(value: float | int | None) -> str:
    """A ratio to the run's largest level, e.g. ``1``, ``0.25``, ``3e-6``."""
    if value is None:
        return MISSING
    number = float(value)
    if not math.isfinite(number):
        return format_number(number)
    if number == 0 or 1e-2 <= abs(number) < 1e3:
        return f"{number:.2g}"
    return compact_exponent(f"{number:.0e}")


def compact_exponent(text: str) -> str:
    """``1.2e-07`` -> ``1.2e-7``, ``3.5e+21`` -> ``3.5e21``: still valid float syntax."""
    mantissa, _, exponent = text.partition("e")
    return f"{mantissa}e{int(exponent)}"


def format_steps(steps: tuple[int, int] | None) -> str:
    """``0–199`` for a step range, ``–`` when the run has no values."""
    if steps is None:
        return MISSING
    first, last = steps
    return str(first) if first == last else f"{first}–{last}"
