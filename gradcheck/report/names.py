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


def ends_kept(name: str, width: int) -> str:
    """``name``'s first path component, ``…``, and as many of its last components as fit
    (``embedder_lstm_0/…/kernel``): the start names the block, the end the parameter; else
    ``name`` whole."""
    if len(name) <= width:
        return name
    separator = separator_of(name)
    parts = name.split(separator)
    for start in range(2, len(parts)):
        text = separator.join([parts[0], ELLIPSIS, *parts[start:]])
        if len(text) <= width:
            return text
    return name


def tail_cut(name: str, width: int) -> str:
    """``name``'s last ``width - 1`` characters after ``…`` (``…ll_5/recurrent_kernel``)."""
    if len(name) <= width or width < 2:
        return name
    return ELLIPSIS + name[len(name) - width + 1 :]


def distinct_shortened(names: list[str], width: int) -> list[str]:
    """Each name shortened to ``width`` so that different names still read differently:
    whole path components dropped from the start (:func:`shortened`), else from the middle
    (:func:`ends_kept`), else characters from the start (:func:`tail_cut`), the first of these
    that keeps it apart from the others; else the name whole (the column wraps it: two lines
    rather than a collision)."""
    chosen = list(names)
    pending = list(range(len(names)))
    for cut in (shortened, ends_kept, tail_cut):
        tried = {index: cut(names[index], width) for index in pending}
        texts = [tried.get(index, chosen[index]) for index in range(len(names))]
        owners: dict[str, set[str]] = {}
        for name, text in zip(names, texts, strict=True):
            owners.setdefault(text, set()).add(name)
        still = []
        for index in pending:
            text = tried[index]
            if len(text) <= width and len(owners[text]) == 1:
                chosen[index] = text
            else:
                still.append(index)
        pending = still
    return chosen
