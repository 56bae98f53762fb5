"""Pairing weight and gradient series (and per-parameter scalars) under one parameter name.

The tags of one parameter reduce to the same name (:mod:`gradcheck.tags.roles`):
``Gradients_dense/kernel:0``, ``dense/kernel:0``, ``dense/kernel_0/histogram`` and
``weights/dense/kernel`` all give ``dense/kernel``; ``fc1.weight/grad`` and ``fc1.weight`` give
``fc1.weight``. :func:`pair_parameters` groups them into the parameters the verdicts judge.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from gradcheck.series.data import SeriesKey
from gradcheck.tags.roles import DEFAULT_RULES, TagRules
from gradcheck.tags.scalars import ScalarRole, scalar_roles


@dataclass(eq=False)
class ParameterTags:
    """The series that describe one parameter, under its normalised name."""

    name: str
    depth: int  # order of first appearance (0 = first)
    weight: SeriesKey | None = None
    gradient: SeriesKey | None = None
    weight_norm: str | None = None  # scalar tags written by gradcheck's logging helpers
    grad_norm: str | None = None
    weight_nonfinite: str | None = None
    grad_nonfinite: str | None = None
    weight_also: tuple[SeriesKey, ...] = ()
    """Further weight series of the same variable, written by another writer into the same run
    (Keras' ``TensorBoard(histogram_freq=1)`` beside ``GradientLogger``; a hand-written
    ``add_histogram`` beside the PyTorch helper): one parameter, judged on ``weight`` (see
    :func:`gradcheck.verdicts.signals.decide_series`), the others confirming its movement."""
    gradient_also: tuple[SeriesKey, ...] = ()
    """Further gradient series of the same variable (as ``weight_also``)."""


Slots = dict[str, "SeriesKey | str | list[SeriesKey]"]
"""A parameter's series while pairing: slot -> histogram key, scalar tag, or further keys."""

_SCALAR_FIELDS = ("weight_norm", "grad_norm", "weight_nonfinite", "grad_nonfinite")


def pair_parameters(
    histogram_keys: list[SeriesKey],
    scalar_tags: list[str],
    rules: TagRules | None = None,
    roles: Mapping[str, ScalarRole] | None = None,
) -> list[ParameterTags]:
    """Group weight and gradient series (and per-parameter scalars) into parameters.

    ``histogram_keys`` and ``scalar_tags`` are in order of first appearance; parameters are
    numbered in that order (histograms first). Series of a colliding tag (``index`` > 0) get
    ``#index`` after their name, as the reader names them. ``other`` and ``activation``
    series are left out (activations are judged as layers of their own:
    :mod:`gradcheck.verdicts.activations`).
    Two series of one role under one name are one variable logged by two writers (Keras'
    ``<path>/histogram`` beside ``weights/<path>``): one parameter, the later series in
    ``weight_also`` / ``gradient_also``.
    A weight and a gradient left without a partner are paired when their names differ only by
    a convention of their own (:func:`_alternative_names`). ``roles``: the scalars' roles when
    the caller has them (:func:`scalar_roles` of ``scalar_tags``).
    """
    rules = rules or DEFAULT_RULES
    found: dict[str, Slots] = {}
    for tag, index in histogram_keys:
        role, name = rules.classify(tag)
        if role in ("other", "activation"):
            continue
        name = f"{name}#{index}" if index else name
        slot = "gradient" if role == "gradient" else "weight"
        slots = found.setdefault(name, {})
        if slot in slots:  # another writer's series of the same variable
            also = slots.setdefault(f"{slot}_also", [])
            assert isinstance(also, list)
            also.append((tag, index))
        else:
            slots[slot] = (tag, index)
    for tag, scalar in (scalar_roles(scalar_tags) if roles is None else roles).items():
        if scalar.name is not None and scalar.kind in _SCALAR_FIELDS:
            found.setdefault(scalar.name, {}).setdefault(scalar.kind, tag)
    _pair_leftovers(found, uniquified=False)
    _pair_leftovers(found, uniquified=True)  # only after every exact convention has paired
    return [_parameter(name, depth, slots) for depth, (name, slots) in enumerate(found.items())]


# ``hist/weights/<p>`` (the role word inside the tag) pairs with ``hist/grads/<p>``, which
# names ``hist/<p>``; ``<p>/weight`` pairs with ``<p>/grad``; a TF1 summary whose name scope was
# taken (by the variable itself) is uniquified with ``_1``: ``dense/kernel_1`` for ``dense/kernel``.
_ROLE_INSIDE = re.compile(r"^(?P<before>.+/)(?:weights?|params?|parameters?)/(?P<after>.+)$", re.I)
_ROLE_LAST = re.compile(r"^(?P<name>.+)/(?:weights?|params?|parameters?|values?)$", re.IGNORECASE)
_UNIQUIFIED = re.compile(r"^(?P<name>.+)_\d+$")


_WEIGHT_SLOTS = frozenset(("weight", "weight_norm", "weight_nonfinite", "weight_also"))
_GRADIENT_SLOTS = frozenset(("gradient", "grad_norm", "grad_nonfinite", "gradient_also"))


def _alternative_names(name: str, uniquified: bool) -> set[str]:
    """Names that the same parameter may carry under another tag convention (with
    ``uniquified``, also without a TF1 ``_<n>`` suffix)."""
    names = {name}
    if match := _ROLE_INSIDE.match(name):
        names.add(match.group("before") + match.group("after"))
    if match := _ROLE_LAST.match(name):
        names.add(match.group("name"))
    if uniquified:
        names |= {m.group("name") for n in list(names) if (m := _UNIQUIFIED.match(n))}
    return names


def _pair_leftovers(found: dict[str, Slots], uniquified: bool) -> None:
    """Merge a weight-only and a gradient-only entry whose alternative names meet, when the
    match is unique both ways; the merged entry keeps the earlier one's place."""
    weights = [name for name, slots in found.items() if set(slots) <= _WEIGHT_SLOTS]
    gradients = [name for name, slots in found.items() if set(slots) <= _GRADIENT_SLOTS]
    if not weights or not gradients:
        return
    alternatives = {name: _alternative_names(name, uniquified) for name in weights + gradients}
    matches = {
        weight: [g for g in gradients if alternatives[weight] & alternatives[g]]
        for weight in weights
    }
    claimed = [g for found_for in matches.values() for g in found_for]
    for weight, candidates in matches.items():
        if len(candidates) != 1 or claimed.count(candidates[0]) != 1:
            continue
        gradient = candidates[0]
        names = list(found)
        first, second = sorted((weight, gradient), key=names.index)
        merged = {**found[weight], **found[gradient]}
        found[first] = merged  # keeps its position in the (insertion-ordered) dict
        del found[second]
        if first != gradient:  # the gradient's name is the common one: rename in place
            _rename(found, first, gradient)


def _rename(found: dict[str, Slots], old: str, new: str) -> None:
    items = [(new if name == old else name, slots) for name, slots in found.items()]
    found.clear()
    found.update(items)


def _parameter(name: str, depth: int, slots: Slots) -> ParameterTags:
    def key(slot: str) -> SeriesKey | None:
        value = slots.get(slot)
        return value if isinstance(value, tuple) else None

    def keys(slot: str) -> tuple[SeriesKey, ...]:
        value = slots.get(slot)
        return tuple(value) if isinstance(value, list) else ()

    def tag(slot: str) -> str | None:
        value = slots.get(slot)
        return value if isinstance(value, str) else None

    return ParameterTags(
        name=name,
        depth=depth,
        weight=key("weight"),
        gradient=key("gradient"),
        weight_norm=tag("weight_norm"),
        grad_norm=tag("grad_norm"),
        weight_nonfinite=tag("weight_nonfinite"),
        grad_nonfinite=tag("grad_nonfinite"),
        weight_also=keys("weight_also"),
        gradient_also=keys("gradient_also"),
    )
