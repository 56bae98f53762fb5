"""Fuzz the reader with many thousands of corruptions of real writers' files (not in make test).

    PYTHONPATH=. python scripts/fuzz_reader.py --cases 10000 --seed 1

Each case applies one to four random corruptions (byte flips, removed or duplicated ranges,
zero runs written or inserted, headers claiming huge lengths) to one of ``tests/data/writers``'
files, then checks what ``tests/events/test_fault_injection.py`` checks on fewer cases: every record
whose bytes survive is read where it now is, nothing false is read, and the C engine reads and
reports exactly what the pure-Python reference does. Prints one line per failure (the seed
and case number reproduce it) and a summary; exits 1 if any case failed.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
import traceback
from collections.abc import Sequence
from pathlib import Path

if __package__ in (None, ""):  # run as a script: python scripts/fuzz_reader.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gradcheck.engine import fastpath  # noqa: E402
from tests.support.damage import (  # noqa: E402
    KINDS,
    WRITER_FILES,
    Damaged,
    Operation,
    frames_in,
)
from tests.support.twins import check_file  # noqa: E402


def random_operation(rng: random.Random) -> Operation:
    size = rng.choice([1, 2, 4, 12, 16, 100, 1000, 5000])
    return (rng.choice(KINDS), rng.random(), rng.randint(1, size), rng.randint(0, 255))


def run_case(source: Path, damage: list[Operation], folder: Path) -> None:
    """One case; raises AssertionError when a property does not hold."""
    original = source.read_bytes()
    records = sorted(frames_in(original))
    damaged = Damaged(original)
    for operation in damage:
        damaged.apply(operation)
    data = bytes(damaged.data)
    got = frames_in(data)
    missing = damaged.intact(records) - got
    assert not missing, f"{len(missing)} intact records not read"
    assert {p for _, p in got} <= {p for _, p in records}, "a false record was read"
    path = folder / source.name
    path.write_bytes(data)
    if fastpath.available():
        check_file(path)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    failures = 0
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        for number in range(args.cases):
            source = rng.choice(WRITER_FILES)
            damage = [random_operation(rng) for _ in range(rng.randint(1, 4))]
            try:
                run_case(source, damage, Path(folder))
            except AssertionError as error:
                failures += 1
                reason = str(error).splitlines()[0] if str(error) else traceback.format_exc(1)
                print(f"case {number} (seed {args.seed}): {source.name} {damage}: {reason}")
    seconds = time.perf_counter() - started
    engines = "both engines" if fastpath.available() else "the pure-Python reader only"
    print(f"{args.cases} cases, {failures} failed, {seconds:.0f} s ({engines})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
