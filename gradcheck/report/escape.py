"""Untrusted text made harmless for each output, one function per kind of output.

Tag names, run directory names, writer names, and the warnings and evidence that quote them
come from the event files, which anyone who can push a branch can shape. Each formatter passes
every such string through the function of its output here, and nowhere else escapes them:

- :func:`terminal` (table, inspect, messages on stderr): every character that Python does not
  count as printable (control characters C0, DEL and C1, so escape sequences and OSC; bidi
  overrides and isolates U+202A-U+202E, U+2066-U+2069 and the other invisible format
  characters; line and paragraph separators; spaces other than U+0020) is shown as its escape,
  ``\\x1b``, ``\\u202e``, as ``repr`` would. Rich markup is never interpreted (the consoles are
  built with ``markup=False``), so ``[bold]`` stays text.
- :func:`markdown_text`, :func:`markdown_code` (Markdown for GitHub): the terminal escapes
  first (so no newline can end a table row or start a heading), then HTML's ``& < >`` as
  entities and Markdown's inline punctuation backslash-escaped; names in code spans fenced by
  more backticks than they hold.
- :func:`csv_text` (CSV): a text cell starting with ``= + - @``, tab or carriage return gets
  a leading ``'`` (OWASP, "CSV Injection"), so that a spreadsheet does not run it as a formula.

JSON keeps every string exactly (it is data, and its consumers escape for their own output).
:func:`each_string` applies an escape to every string of a report's frozen dataclasses.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

_T = TypeVar("_T")


def terminal(text: str) -> str:
    """``text`` with every non-printable character shown as its Python escape."""
    if text.isprintable():  # the usual name: no copy
        return text
    return "".join(char if char.isprintable() else _escaped(char) for char in text)


def terminal_lines(text: str) -> str:
    """:func:`terminal` line by line: the line breaks a message holds on purpose stay (each
    output escapes them its own way), every other non-printable character is shown escaped.
    For outputs that render text to a person (GitHub's log and annotations, JUnit viewers,
    browsers): an escape sequence or a bidi override there hides or reorders what is shown."""
    return "\n".join(terminal(line) for line in text.split("\n"))


def _escaped(char: str) -> str:
    """``\\n``, ``\\x1b``, ``\\u202e``, ``\\U000e0041``: the escape ``repr`` uses."""
    return repr(char)[1:-1]


_MARKDOWN = str.maketrans(
    {
        "&": "&amp;",
        "<": "&lt;",
        ">": "&gt;",
        **{char: "\\" + char for char in "\\`*_[]|~$"},
    }
)
"""HTML's special characters as entities (GitHub renders inline HTML); the punctuation that
opens Markdown's inline constructs (emphasis, code, links and images, table cells,
strikethrough, math) backslash-escaped. Block constructs (headings, lists, quotes) start a
line, and escaped text holds no line break."""


def markdown_text(text: str) -> str:
    """``text`` as literal Markdown text, also inside a table cell."""
    return terminal(text).translate(_MARKDOWN)


_BACKTICKS = re.compile("`+")


def markdown_code(text: str, *, in_table: bool = False) -> str:
    """``text`` as a Markdown code span (rendered literally: no HTML, links or emphasis).

    The fence is one backtick longer than the longest run of backticks in ``text``; inside a
    table (``in_table``) pipes are escaped, which GitHub's tables undo even in code spans.
    """
    code = terminal(text)
    if in_table:
        code = code.replace("|", "\\|")
    fence = "`" * (1 + max((len(run) for run in _BACKTICKS.findall(code)), default=0))
    if code.startswith(("`", " ")) or code.endswith(("`", " ")):
        code = f" {code} "  # CommonMark strips one space on each side, no more
    return f"{fence}{code}{fence}"


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
"""What a spreadsheet may take for the start of a formula (OWASP, "CSV Injection")."""


def csv_text(text: str) -> str:
    """A text cell that a spreadsheet shows as text: ``'`` before a formula's first character."""
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def each_string(value: _T, escape: Callable[[str], str]) -> _T:
    """``value`` with ``escape`` applied to every string in it: in the fields of (frozen)
    dataclasses, in tuples and lists, in mappings' keys and values. Other values are kept,
    and so is every part in which no string changed (the usual report: no copy at all).

    A formatter that escapes the whole report once cannot forget a field, nor a field added
    later (a new warning, a new name).
    """
    return _each(value, escape)  # type: ignore[no-any-return]


_NUMBERS = (int, float)
_ATOMS = frozenset({int, float, bool, type(None)})


def _each(value: Any, escape: Callable[[str], str]) -> Any:
    kind: type = type(value)
    if kind is str:
        return escape(value)
    if kind in _ATOMS:
        return value
    fields = _init_fields(kind)
    if fields:  # a dataclass
        old = [getattr(value, name) for name in fields]
        new = [_each(item, escape) for item in old]
        if _same(new, old):
            return value
        return dataclasses.replace(value, **dict(zip(fields, new, strict=True)))
    if isinstance(value, (tuple, list)):
        if value and isinstance(value[0], _NUMBERS):
            return value  # a series of numbers (a trend, a step range): never mixed with text
        items = [_each(item, escape) for item in value]
        return value if _same(items, value) else kind(items)
    if isinstance(value, Mapping):
        keys = [_each(key, escape) for key in value]
        items = [_each(item, escape) for item in value.values()]
        if _same(keys, value.keys()) and _same(items, value.values()):
            return value
        return dict(zip(keys, items, strict=True))
    if isinstance(value, str):  # a str subclass
        return escape(value)
    return value


def _same(new: Iterable[Any], old: Iterable[Any]) -> bool:
    """Every item of ``new`` is the very object of ``old`` at its place."""
    return all(a is b for a, b in zip(new, old, strict=True))


@functools.cache
def _init_fields(kind: type) -> tuple[str, ...]:
    """The fields of dataclass ``kind`` set by its ``__init__`` (empty for other types)."""
    if not dataclasses.is_dataclass(kind):
        return ()
    return tuple(field.name for field in dataclasses.fields(kind) if field.init)
