"""``report.json_text.dumps`` writes what ``json.dumps(indent=2, ...)`` writes, raises as it."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gradcheck.report.json_text import dumps


def reference(document: Any) -> str:
    return json.dumps(document, indent=2, ensure_ascii=False, allow_nan=False)


scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
keys = (
    st.text()
    | st.integers()
    | st.booleans()
    | st.none()
    | st.floats(allow_nan=False, allow_infinity=False)
)
documents = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=5)
        | st.tuples(inner, inner)
        | st.dictionaries(keys, inner, max_size=5)
    ),
    max_leaves=40,
)


@given(documents)
def test_same_text_as_the_standard_library(document: Any) -> None:
    assert dumps(document) == reference(document)


@given(documents)
def test_a_value_at_a_depth_as_the_standard_library_nests_it(document: Any) -> None:
    """``dumps(value, depth=2)`` is the value's text where the standard library writes it two
    containers deep (how the JSON report writes its runs one at a time)."""
    nested = reference([[document]])
    assert nested == "[\n  [\n    " + dumps(document, depth=2) + "\n  ]\n]"


class Number(float):
    """A float subclass (as numpy's float64 is): written with float's repr."""


@pytest.mark.parametrize(
    "document",
    [
        {"stats": {"norm": np.float64(0.1), "steps": 3}, "trend": [Number(2.5), 1]},
        {"notes": [], "onsets": {}, "name": 'é\u2028"\\\n\x00', "deep": [[[{"a": [1e300]}]]]},
        [-0.0, 5e-324, 1.7976931348623157e308, 10**30, True, False, None],
    ],
)
def test_same_text_on_what_reports_hold(document: Any) -> None:
    assert dumps(document) == reference(document)


@pytest.mark.parametrize(
    "document",
    [[math.nan], {"a": [1.0, math.inf]}, {"a": {"b": -math.inf, "c": [1]}}, {math.nan: 1}],
)
def test_non_finite_numbers_raise_value_error(document: Any) -> None:
    with pytest.raises(ValueError, match="Out of range float values are not JSON compliant"):
        reference(document)
    with pytest.raises(ValueError, match="Out of range float values are not JSON compliant"):
        dumps(document)


@pytest.mark.parametrize("document", [[object()], {"a": [[np.int64(3)]]}, {(1, 2): 1}])
def test_values_without_a_json_type_raise_type_error(document: Any) -> None:
    with pytest.raises(TypeError) as expected:
        reference(document)
    with pytest.raises(TypeError) as raised:
        dumps(document)
    assert str(raised.value) == str(expected.value)
