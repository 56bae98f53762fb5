"""Time the C engine's CRC32C (``_scan.masked_crc32c``) on a whole event file and on
record-sized buffers, optionally against another build of ``_scan`` (say, the previous commit's).

    .venv/bin/python bench/crc_speed.py [FILE] [--against OLD.so] [--repeats 7]

FILE defaults to the first file of ``bench/data/tensor-4x250MB`` (read into memory once). The
buffers: 8 bytes (a record's length), 300 and 800 (TF2 records), 8 KB (PyTorch records) and the
whole file. Builds alternate within each repeat (the machine's speed drifts); each number is the
best of ``--repeats``. Per call times include Python's call (the 0-byte line shows that part).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

if __package__ in (None, ""):  # run as a script: python bench/crc_speed.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gradcheck.native import _scan  # type: ignore[attr-defined]  # noqa: E402

DEFAULT_FILE = Path(__file__).resolve().parent / "data" / "tensor-4x250MB"
RECORD_SIZES = (0, 8, 300, 800, 8192)
BYTES_PER_SIZE = 64 << 20  # calls per size: enough to cross 64 MB (or 200,000 calls)


def load_build(path: Path) -> ModuleType:
    """Another ``_scan`` extension module, from its shared object (loaded beside this one)."""
    spec = importlib.util.spec_from_file_location("_scan", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"{path}: not an extension module")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def seconds_per_call(crc: Callable[[memoryview], int], buffer: memoryview, calls: int) -> float:
    """Wall time of ``calls`` calls of ``crc`` on ``buffer``, over ``calls``."""
    started = time.perf_counter()
    for _ in range(calls):
        crc(buffer)
    return (time.perf_counter() - started) / calls


def best_times(builds: dict[str, ModuleType], buffer: memoryview, repeats: int) -> dict[str, float]:
    """Best seconds per call for each build, the builds alternating within each repeat."""
    calls = max(1, min(200_000, BYTES_PER_SIZE // max(len(buffer), 1)))
    best = dict.fromkeys(builds, float("inf"))
    for repeat in range(repeats):
        order = list(builds) if repeat % 2 == 0 else list(reversed(builds))
        for name in order:
            elapsed = seconds_per_call(builds[name].masked_crc32c, buffer, calls)
            best[name] = min(best[name], elapsed)
    return best


def first_event_file(path: Path) -> Path:
    """``path``, or the first event file of the directory ``path``."""
    if path.is_dir():
        files = sorted(path.glob("events.out.tfevents.*"))
        if not files:
            raise SystemExit(f"{path}: no event file (write it with bench/gen.py)")
        return files[0]
    return path


def main() -> None:
    """Print one line per buffer size: each build's time per call and bytes per second."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("file", nargs="?", type=Path, default=DEFAULT_FILE)
    parser.add_argument("--against", type=Path, help="another build's _scan*.so, timed as 'old'")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    builds = {"new": _scan}
    if args.against:
        builds = {"old": load_build(args.against), "new": _scan}
    for name, module in builds.items():
        print(f"{name}: {module.__file__} ({module.CRC_IMPLEMENTATION})")
    path = first_event_file(args.file)
    data = memoryview(path.read_bytes())
    checks = {module.masked_crc32c(data) for module in builds.values()}
    if len(checks) != 1:
        raise SystemExit("the builds disagree on the file's CRC")
    print(f"{'bytes':>10} " + " ".join(f"{n + ' ns/call':>16} {n + ' GB/s':>9}" for n in builds))
    for size in (*RECORD_SIZES, len(data)):
        best = best_times(builds, data[:size], args.repeats)
        cells = [f"{best[n] * 1e9:16.1f} {size / best[n] / 1e9:9.2f}" for n in builds]
        ratio = f"  old/new {best['old'] / best['new']:.2f}" if "old" in builds else ""
        print(f"{size:>10} " + " ".join(cells) + ratio)


if __name__ == "__main__":
    main()
