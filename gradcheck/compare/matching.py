"""Which parameter of run A is which of run B, for ``gradcheck compare``.

Two builds of one Keras model rarely share names: a second ``Sequential`` in a process is
``sequential_1``, and its unnamed layers go on counting (``dense_2``, ``dense_3`` where the
first build had ``dense``, ``dense_1``). Names are matched in rounds, each on what the last
left unmatched, and only where a name is unique on both sides: the same name; the same name
without a leading Keras model scope; then with auto-numbered layer names counted per layer
type (the k-th of n ``dense*`` layers of A is the k-th of B's, when B has n too), which holds
when both runs built the same architecture.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gradcheck.model import NameMatch

NAMES_LISTED = 5  # names of parameters in one run only, in the sentence (JSON lists all)
_KERAS_MODEL_SCOPE = re.compile(r"^(?:sequential|functional|model)(?:_\d+)?$")
_NUMBERED_LAYER = re.compile(r"^(?P<base>.*?)(?:_(?P<number>\d+))?\Z", re.DOTALL)


@dataclass(frozen=True)
class NamePair:
    """A parameter of A and its twin in B (``None`` on the side where it is missing)."""

    name_a: str | None
    name_b: str | None
    matched_by: NameMatch | None


def without_model_scope(name: str) -> str:
    """``sequential_1/dense/kernel`` -> ``dense/kernel``; other names unchanged."""
    first, separator, rest = name.partition("/")
    return rest if separator and rest and _KERAS_MODEL_SCOPE.match(first) else name


def layer_ranks(names: Sequence[str]) -> dict[str, str]:
    """Each name (model scope dropped) with its layer, the component before the variable's
    own name, replaced by ``<base>#<rank>/<count>``: ``dense`` -> ``dense#0/2`` and ``dense_1``
    -> ``dense#1/2`` when there are two (Keras numbers a layer type's unnamed layers in the
    order it creates them). The count keeps two architectures apart: one ``hidden`` layer is
    not the first of two."""
    split = {name: without_model_scope(name).split("/") for name in names}
    layers_by_base: dict[str, set[tuple[int, str]]] = {}
    for parts in split.values():
        if len(parts) >= 2:
            base, number = _layer_number(parts[-2])
            layers_by_base.setdefault(base, set()).add((number, parts[-2]))
    rank = {
        layer: f"{base}#{position}/{len(layers)}"
        for base, layers in layers_by_base.items()
        for position, (_, layer) in enumerate(sorted(layers))
    }
    keys = {}
    for name, parts in split.items():
        if len(parts) >= 2:
            parts = [*parts[:-2], rank[parts[-2]], parts[-1]]
        keys[name] = "/".join(parts)
    return keys


def _layer_number(layer: str) -> tuple[str, int]:
    """``dense_3`` -> ``("dense", 3)``; ``dense`` -> ``("dense", -1)`` (the first of its kind)."""
    match = _NUMBERED_LAYER.match(layer)
    assert match is not None  # the pattern matches any string: empty (``a//b``), newlines
    number = match.group("number")
    return match.group("base"), -1 if number is None else int(number)


def match_names(names_a: Sequence[str], names_b: Sequence[str]) -> list[NamePair]:
    """Pairs in A's order, then B's names left over; every name appears once."""
    ranks_a, ranks_b = layer_ranks(names_a), layer_ranks(names_b)
    rounds: list[tuple[NameMatch, Callable[[str], str], Callable[[str], str]]] = [
        ("same name", str, str),
        ("model prefix", without_model_scope, without_model_scope),
        ("layer numbering", ranks_a.__getitem__, ranks_b.__getitem__),
    ]
    twin: dict[str, tuple[str, NameMatch]] = {}
    left_a, left_b = list(names_a), list(names_b)
    for how, key_a, key_b in rounds:
        unique_a = _unique_keys(left_a, key_a)
        unique_b = _unique_keys(left_b, key_b)
        for key, name_a in unique_a.items():
            if key in unique_b:
                twin[name_a] = (unique_b[key], how)
        matched_b = {name for name, _ in twin.values()}
        left_a = [name for name in left_a if name not in twin]
        left_b = [name for name in left_b if name not in matched_b]
    pairs = [
        NamePair(name, twin[name][0], twin[name][1]) if name in twin else NamePair(name, None, None)
        for name in names_a
    ]
    return pairs + [NamePair(None, name, None) for name in left_b]


def _unique_keys(names: Sequence[str], key: Callable[[str], str]) -> dict[str, str]:
    """``key(name) -> name`` for the keys only one of ``names`` has."""
    found: dict[str, list[str]] = {}
    for name in names:
        found.setdefault(key(name), []).append(name)
    return {k: group[0] for k, group in found.items() if len(group) == 1}


def names_phrase(pairs: Sequence[NamePair]) -> str:
    """``4 parameters matched (4 after dropping the model scope, 4 by layer numbering); in A
    only: x; in B only: y``."""
    matched = [pair for pair in pairs if pair.matched_by is not None]
    text = f"{len(matched)} {'parameter' if len(matched) == 1 else 'parameters'} matched"
    renamed = [
        f"{sum(pair.matched_by == how for pair in matched)} {label}"
        for how, label in (
            ("model prefix", "without the model scope"),
            ("layer numbering", "by layer order"),
        )
        if any(pair.matched_by == how for pair in matched)
    ]
    if renamed:
        text += f" ({', '.join(renamed)})"
    for side, names in (
        ("A", [p.name_a for p in pairs if p.matched_by is None and p.name_a]),
        ("B", [p.name_b for p in pairs if p.matched_by is None and p.name_b]),
    ):
        if names:
            more = len(names) - NAMES_LISTED
            listed = ", ".join(n for n in names[:NAMES_LISTED] if n)
            text += f"; in {side} only: {listed}" + (f" and {more} more" if more > 0 else "")
    return text
