"""Hyperparameters read from run directory names: ``lr=0.5``, ``lr_0.5``, ``bs64``.

Sweep tools name each run after its settings (Ray Tune ``batch_size=64,lr=0.001``, hand-made
``lr_0.1_bs32``, Hydra ``lr=0.1``). A run's path below the directory common to all runs of the
report is read component by component (outer first; a later value of a name wins), each split
at ``,``, ``;``, ``+`` and white space into chunks:

- a chunk holding ``=`` gives its ``key=value`` pairs (``lr=0.5_bs=64``: two). A key is
  words joined by ``_`` before the ``=`` (``train_lr=0.1`` is ``train_lr``; Ray Tune's
  ``00000_0_batch_size=64`` is ``batch_size``); a value ends at ``_`` before a digit or the
  next key (Ray's ``_2023-01-02`` date is not part of it) and is a number when it reads as
  one, else text (``act=leaky_relu``);
- any other chunk is split at ``_``: a number after words is the value of those words joined
  (``lr_0.5``, ``learning_rate_1e-4``), letters directly followed by a number are a pair
  (``bs64``). Numbers are decimal (``1e-4``, ``.5``); ``nan`` and ``inf`` are words.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

from gradcheck.model import HParamValue

_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_KEY = r"[A-Za-z][A-Za-z0-9.]*(?:_[A-Za-z][A-Za-z0-9.]*)*"
_PAIR = re.compile(rf"({_KEY})=((?:[^=_]|_(?!\d|{_KEY}=))+)")
_CHUNKS = re.compile(r"[,;+\s]+")
_NUMBER_ONLY = re.compile(_NUMBER)
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]*")
_GLUED = re.compile(rf"([A-Za-z]+)({_NUMBER})")


def name_hparams(components: Sequence[str]) -> dict[str, HParamValue]:
    """The hyperparameters the path ``components`` name, in order of appearance."""
    found: dict[str, HParamValue] = {}
    for component in components:
        for chunk in _CHUNKS.split(component):
            if "=" in chunk:
                for key, value in _PAIR.findall(chunk):
                    found[key] = _value(value)
            else:
                found.update(_underscored(chunk.split("_")))
    return found


def _underscored(tokens: list[str]) -> dict[str, HParamValue]:
    found: dict[str, HParamValue] = {}
    words: list[str] = []
    for token in tokens:
        glued = _GLUED.fullmatch(token)
        if _NUMBER_ONLY.fullmatch(token):
            if words:
                found["_".join(words)] = float(token)
            words = []
        elif glued is not None:
            found[glued.group(1)] = float(glued.group(2))
            words = []
        elif _WORD.fullmatch(token):
            words.append(token)
        else:
            words = []
    return found


def _value(text: str) -> HParamValue:
    return float(text) if _NUMBER_ONLY.fullmatch(text) else text


def name_components(runs: Sequence[str]) -> list[list[str]]:
    """Each run path's components below the directory all of them share (a lone run: its
    last component)."""
    split = [[part for part in os.path.normpath(run).split(os.sep) if part] for run in runs]
    if not split:
        return []
    common = 0
    shortest = min(len(parts) for parts in split)
    while common < shortest and all(parts[common] == split[0][common] for parts in split):
        common += 1
    common = min(common, shortest - 1)  # one run, or a run that holds the others: its name
    return [parts[common:] for parts in split]
