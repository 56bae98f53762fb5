"""Indented JSON text, the same bytes as ``json.dumps(doc, indent=2, ensure_ascii=False,
allow_nan=False)``, several times faster on large reports.

With ``indent``, the standard library's encoder leaves its C accelerator and writes every value
through nested Python generators (most of a large sweep's report: ``bench/README.md``). Here
the tree is walked in Python only down to the containers whose items are all plain scalars
(a parameter's statistics, its trend, its flags), and each of those is written by the C
encoder in one call: its item separator carries the line break and the indentation of that
depth, which is all the indented layout adds. Anything else (a subclass of ``float``, a
key that is not a string) takes the slow path, written as the standard library writes it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import cache
from json.encoder import encode_basestring
from typing import Any

__all__ = ["dumps"]

_PLAIN = frozenset({str, int, float, bool, type(None)})  # exactly these types, no subclass
_INDENT = 2


def dumps(document: Any, depth: int = 0) -> str:
    """``document`` as ``json.dumps(document, indent=2, ensure_ascii=False, allow_nan=False)``;
    with ``depth``, as it writes a value nested that deep in another (its first line not
    indented, every further line by ``2 * depth`` more spaces), for a document written in parts.

    Raises as it does: ``ValueError`` on NaN or infinity, ``TypeError`` on a value JSON has no
    type for (circular references, which it reports as ``ValueError``, recurse until
    ``RecursionError`` here: reports are trees).
    """
    return _text(document, depth)


def _text(value: Any, depth: int) -> str:
    """``value``'s text at nesting ``depth`` (its first line's indentation not included)."""
    kind = type(value)
    if kind is str:
        return encode_basestring(value)
    if kind is dict:
        if not value:
            return "{}"
        if all(type(key) is str and type(item) in _PLAIN for key, item in value.items()):
            return _plain_text(value, depth)
        inner = _newline(depth + 1)
        entries = [f"{_key(key)}: {_text(item, depth + 1)}" for key, item in value.items()]
        return "{" + inner + ("," + inner).join(entries) + _newline(depth) + "}"
    if kind is list or kind is tuple:
        if not value:
            return "[]"
        if all(type(item) in _PLAIN for item in value):
            return _plain_text(value, depth)
        inner = _newline(depth + 1)
        entries = [_text(item, depth + 1) for item in value]
        return "[" + inner + ("," + inner).join(entries) + _newline(depth) + "]"
    if isinstance(value, dict | list | tuple):  # a subclass: as the standard library, by isinstance
        return _text(dict(value) if isinstance(value, dict) else list(value), depth)
    return _scalar(value)


def _plain_text(value: dict[str, Any] | list[Any] | tuple[Any, ...], depth: int) -> str:
    """A container of plain scalars, written by the C encoder in one call."""
    text = _plain_encoder(depth + 1)(value)  # "[a,\n    b]": the brackets still to open
    return text[0] + _newline(depth + 1) + text[1:-1] + _newline(depth) + text[-1]


@cache
def _newline(depth: int) -> str:
    return "\n" + " " * (_INDENT * depth)


@cache
def _plain_encoder(depth: int) -> Callable[[Any], str]:
    """The C encoder whose items are separated by a line break indented to ``depth``."""
    encoder = json.JSONEncoder(
        ensure_ascii=False, allow_nan=False, separators=("," + _newline(depth), ": ")
    )
    return encoder.encode


def _scalar(value: Any) -> str:
    """One scalar as the standard library's Python encoder writes it."""
    if isinstance(value, str):
        return encode_basestring(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float):
        return _float(value)
    raise TypeError(f"Object of type {value.__class__.__name__} is not JSON serializable")


def _float(value: float) -> str:
    if value != value or value in (float("inf"), float("-inf")):
        raise ValueError("Out of range float values are not JSON compliant: " + repr(value))
    return float.__repr__(value)


def _key(key: Any) -> str:
    """A dict key as the standard library converts it (``skipkeys=False``)."""
    if isinstance(key, str):
        return encode_basestring(key)
    if key is None or isinstance(key, (int, float)):  # bool is an int
        return encode_basestring(_scalar(key))  # the scalar's text, quoted
    raise TypeError(f"keys must be str, int, float, bool or None, not {key.__class__.__name__}")
