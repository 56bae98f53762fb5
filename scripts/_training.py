"""Helpers shared by the run generators ``make_zoo.py``, ``make_heldout.py``,
``compare_pairs.py`` and ``clip_runs.py``.

The seed shift of ``--seed``, writing the runs with their ``expected.json``, the framework
imports (one thread, seeded), the PyTorch summary writer, a plain MLP and the two PyTorch
losses. The generators import this module from their own directory (they put ``scripts/`` on
``sys.path``), also when loaded by path from the tests.
Frameworks are imported only when a helper needs them.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

SEED_SHIFT = 0
"""``--seed``: every random seed of the runs is shifted by 1000 x this (0: the usual set)."""


def seeded(seed: int) -> int:
    """``seed`` shifted by ``--seed``: the same runs with fresh data, inits and batches."""
    return seed + 1000 * SEED_SHIFT


def out_and_only(description: str, names: list[str]) -> tuple[Path, list[str] | None]:
    """``--out DIR [--only NAME ...]`` from the command line; exits if a run to write exists."""
    parser = argparse.ArgumentParser(description=description.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--only", nargs="*", choices=sorted(names))
    arguments = parser.parse_args()
    for name in arguments.only or names:
        if (arguments.out / name).exists():
            sys.exit(f"{arguments.out / name} exists: remove it first")
    return arguments.out, arguments.only


def generate(out: Path, runs: list[tuple[str, Callable[[Path], None], Any]]) -> None:
    """Each ``(name, make, truth)`` of ``runs`` into ``out/<name>`` (emptied first),
    ``asdict(truth)`` as its ``expected.json``, and the time it took on stderr."""
    for name, make, truth in runs:
        log_dir = out / name
        if log_dir.exists():
            for path in sorted(log_dir.rglob("*"), reverse=True):
                path.unlink() if path.is_file() else path.rmdir()
        log_dir.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        make(log_dir)
        (log_dir / "expected.json").write_text(json.dumps(asdict(truth), indent=1))
        print(f"{name}: {time.perf_counter() - started:.1f} s", file=sys.stderr)


def torch_module() -> Any:
    """``torch`` on one thread."""
    import torch

    torch.set_num_threads(1)
    return torch


def summary_writer(log_dir: Path, tensorboardx: bool = False) -> Any:
    """``torch.utils.tensorboard.SummaryWriter`` (or tensorboardX's) on ``log_dir``."""
    if tensorboardx:
        from tensorboardX import SummaryWriter as XWriter

        return XWriter(str(log_dir))
    from torch.utils.tensorboard import SummaryWriter

    return SummaryWriter(str(log_dir))


def mlp(torch: Any, sizes: list[int], activation: Any, init: Callable | None = None) -> Any:
    """Linear layers of ``sizes`` with ``activation()`` between them; ``init(weight)`` if given."""
    layers: list[Any] = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:], strict=True)):
        linear = torch.nn.Linear(a, b)
        if init is not None:
            init(linear.weight)
        layers.append(linear)
        if i < len(sizes) - 2:
            layers.append(activation())
    return torch.nn.Sequential(*layers)


def ce(torch: Any) -> Callable:
    return torch.nn.functional.cross_entropy


def mse(torch: Any) -> Callable:
    return torch.nn.functional.mse_loss


def tf_module() -> Any:
    """``tensorflow`` on one thread, its global seed set (shifted by ``--seed``)."""
    import tensorflow as tf

    tf.random.set_seed(seeded(0))
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    return tf
