"""HF Trainer output directories: ``trainer_state.json``'s ``log_history``.

The Trainer writes ``trainer_state.json`` into every ``checkpoint-<step>/`` it saves and, at
``trainer.save_state()``, into the output directory itself. ``log_history`` is a list of
entries, each a dict of what was logged at one ``step``: ``loss``, ``grad_norm`` (the global
gradient norm ``clip_grad_norm_`` returned, before clipping), ``learning_rate``, ``epoch``;
evaluations add ``eval_*`` entries, the end of training one with ``train_loss`` and timings.
Each numeric key becomes a scalar tag of that name at the entry's step (a record's ``offset``
is its entry's position in ``log_history``; no wall time is logged: 0).

One run per output directory: a checkpoint's state is a prefix of a newer one's, so the states
are read newest first (the output directory's own, then checkpoints from the highest step) and
an older one only for steps the newer ones did not reach (a newer file cut short by a crash):
every step is judged once. A half-written or damaged file costs only the entries it lost.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterator

from gradcheck.model import Record, Run
from gradcheck.sources.base import damage, file_info, number, scalar, unreadable

NAME = "hf-trainer"
LABEL = "HF Trainer trainer_state.json"
STATE_FILE = "trainer_state.json"
WRITER = "transformers Trainer (trainer_state.json)"
_CHECKPOINT = re.compile(r"^checkpoint-(?P<step>\d+)$")
_LOG_HISTORY = re.compile(r'"log_history"\s*:\s*\[')
Entry = dict[str, object]


def find(directory: str, subdirectories: list[str], names: list[str], top: bool) -> list[Run]:
    """The output directory ``directory`` as one run when it or its ``checkpoint-*/`` hold a
    ``trainer_state.json``; a checkpoint directory is part of its parent's run unless the
    user gave it (``top``)."""
    if not top and _CHECKPOINT.match(os.path.basename(directory)):
        return []
    files = [os.path.join(directory, STATE_FILE)] if STATE_FILE in names else []
    checkpoints = sorted(
        (int(match.group("step")), name)
        for name in subdirectories
        if (match := _CHECKPOINT.match(name))
    )
    for _, name in reversed(checkpoints):
        path = os.path.join(directory, name, STATE_FILE)
        if os.path.isfile(path):
            files.append(path)
    return [Run(path=directory, files=tuple(files), format=NAME)] if files else []


def records(run: Run) -> Iterator[Record]:
    """The scalars of every step, newest state first (see the module docstring)."""
    reached = -math.inf  # the last step read from a newer state
    for path in run.files:
        step_of_file = _checkpoint_step(path)
        if step_of_file is not None and step_of_file <= reached:
            continue  # an older checkpoint: a prefix of what was read
        items, read = _read_entries(run.path, path)
        newest = reached
        for item in items:
            if not isinstance(item, tuple):
                yield item
                continue
            position, entry = item
            step = entry["step"]
            assert isinstance(step, int)  # _read_entries keeps only such entries
            if step > reached:
                yield from _scalars(run.path, path, position, step, entry)
                newest = max(newest, step)
        reached = newest
        yield file_info(run.path, path, read, WRITER)


def _scalars(run: str, path: str, position: int, step: int, entry: Entry) -> Iterator[Record]:
    for key, value in entry.items():
        if key != "step" and (converted := number(value)) is not None:
            yield scalar(run, path, position, key, step, 0.0, converted)


def _checkpoint_step(path: str) -> int | None:
    match = _CHECKPOINT.match(os.path.basename(os.path.dirname(path)))
    return int(match.group("step")) if match else None


def _read_entries(run: str, path: str) -> tuple[list[tuple[int, Entry] | Record], int]:
    """``log_history``'s entries as ``(position, entry)``, with a ``Damage`` where entries were
    lost; and how many entries were read."""
    import json  # only for a trainer_state.json: discovery asks every directory (start-up)

    try:
        with open(path, "rb") as stream:
            data = stream.read()
    except OSError as error:
        return [unreadable(run, path, error)], 0
    text = data.decode("utf-8", errors="replace")
    try:
        state = json.loads(text)
    except ValueError:
        return _salvaged(run, path, text)
    history = state.get("log_history") if isinstance(state, dict) else None
    if not isinstance(history, list):
        lost = damage(run, path, 0, "undecodable", len(data), f"{path}: no log_history list")
        return [lost], 0
    items: list[tuple[int, Entry] | Record] = []
    for position, entry in enumerate(history):
        if isinstance(entry, dict) and isinstance(entry.get("step"), int):
            items.append((position, entry))
        else:
            items.append(_bad_entry(run, path, position))
    return items, len(history)


def _salvaged(run: str, path: str, text: str) -> tuple[list[tuple[int, Entry] | Record], int]:
    """The entries of a file that is not valid JSON as a whole (half-written, or damaged in
    places): each entry that parses on its own, a ``Damage`` for each stretch that does not."""
    import json

    start = _LOG_HISTORY.search(text)
    if start is None:
        message = f"{path} is not JSON and holds no log_history: nothing read"
        return [damage(run, path, 0, "undecodable", len(text.encode()), message)], 0
    decoder = json.JSONDecoder()
    items: list[tuple[int, Entry] | Record] = []
    pos, position, size = start.end(), 0, len(text)
    while True:
        while pos < size and text[pos] in " \t\r\n,":
            pos += 1
        if pos >= size or text[pos] == "]":
            break
        try:
            entry, end = decoder.raw_decode(text, pos)
        except ValueError:
            resume = text.find("{", pos + 1)
            items.append(_lost_stretch(run, path, text, pos, resume))
            if resume < 0:
                break
            pos = resume
            continue
        items.append((position, entry) if _is_entry(entry) else _bad_entry(run, path, position))
        position, pos = position + 1, end
    return items, position


def _is_entry(entry: object) -> bool:
    return isinstance(entry, dict) and isinstance(entry.get("step"), int)


def _lost_stretch(run: str, path: str, text: str, start: int, resume: int) -> Record:
    """The damage from character ``start`` to ``resume`` (-1: to the end: a cut-short file)."""
    offset = len(text[:start].encode())
    if resume < 0:
        lost = len(text[start:].encode())
        return damage(
            run,
            path,
            offset,
            "incomplete_tail",
            lost,
            f"half-written log_history, at byte {offset}: the entries from there lost "
            f"({lost} bytes)",
        )
    lost = len(text[start:resume].encode())
    return damage(
        run,
        path,
        offset,
        "undecodable",
        lost,
        f"damaged log_history entry, at byte {offset}: that entry lost ({lost} bytes)",
    )


def _bad_entry(run: str, path: str, position: int) -> Record:
    return damage(
        run,
        path,
        position,
        "undecodable",
        0,
        f"log_history entry {position} of {path} has no integer step: that entry lost",
    )
