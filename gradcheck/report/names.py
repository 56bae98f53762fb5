"""Names that fit a column and stay distinct.

A parameter's path tells siblings apart at its end (``…/lstm_cell_5/recurrent_kernel``) and
places them at its start; a name cut in the middle to a fixed width made three different
``generator/…/recurrent_kernel`` look the same (``genera…rrent_kernel``). Here a name too long
for its column loses whole leading path components first (``…/lstm_cell_5/recurrent_kernel``);
when that still does not fit or would make two names look alike, the name is kept whole and the
table wraps it: two lines rather than a collision.
"""

from __future__ import annotations

from gradcheck.report.layers import ELLIPSIS, separator_of


def shortened(name: str, width: int) -> str:
    """``name`` in at most ``width`` characters when dropping leading path components does it
    (``…/cell_5/kernel``); else ``name`` whole (the column wraps it)."""
    if len(name) <= width:
        return name
    separator = separator_of(name)
    parts = name.split(separator)
    for start in range(1, len(parts)):
        tail = ELLIPSIS + separator + separator.join(parts[start:])
        if len(tail) <= width:
            return tail
    return name


def distinct_shortened(names: list[str], width: int) -> list[str]:
    """Each name :func:`shortened` to ``width``, unless two different names would then read
    the same: those are kept whole (wrapped by the column)."""
    short = [shortened(name, width) for name in names]
    owners: dict[str, set[str]] = {}
    for name, text in zip(names, short, strict=True):
        owners.setdefault(text, set()).add(name)
    return [
        text if len(owners[text]) == 1 else name for name, text in zip(names, short, strict=True)
    ]
