"""Fault injection: event files that shrink while gradcheck reads them (through the real
CLI), and real writers' files under any corruption (both engines).

A log rotated, truncated or copied over in place during ``analyze`` must never kill the
process (a memory-mapped file that shrinks does, with SIGBUS): the bytes read are analysed and
the file is reported once as changed while read, the rest of the report intact. The
truncation is made deterministic by a hook in the child process that truncates each file
once its first batch of records has been read.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gradcheck.cli.status import ExitStatus
from gradcheck.engine import fastpath
from tests.support import eventfiles as ef
from tests.support.damage import KINDS, WRITER_FILES, Damaged, Operation, frames_in
from tests.support.paths import REPO
from tests.support.twins import check_file

CUT = 1 << 20  # bytes left after the truncation

# Runs the CLI with each event file truncated to CUT bytes once reading it has begun: after
# the C engine's first batch of values (``RangeReader._consume``), or the pure-Python
# reader's first record (``reader.records_of_frame``); in every process, forked ones too.
SHRINKING_CLI = """
import os, sys
import gradcheck.cli, gradcheck.engine.fastpath as fastpath, gradcheck.events.reader as reader
cut, done = int(sys.argv[1]), set()
def shrink(path):
    if path not in done:
        done.add(path)
        os.truncate(path, cut)
consume, records = fastpath.RangeReader._consume, reader.records_of_frame
def consume_then_shrink(self, rows):
    consume(self, rows)
    shrink(self.path)
def shrink_then_record(frame, path, state, tally):
    shrink(path)
    return records(frame, path, state, tally)
fastpath.RangeReader._consume = consume_then_shrink
reader.records_of_frame = shrink_then_record
sys.argv = ["gradcheck", *sys.argv[2:]]
gradcheck.cli.main()
"""


@pytest.fixture(scope="module")
def big_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 24 MB event file (more than one chunk of either reader): 40 histograms of 200
    buckets per step, written with tensorboard's record writer."""
    rng = np.random.default_rng(0)
    events = [ef.file_version()]
    for step in range(170):
        values = [
            ef.histo_of(f"layer{i}/{kind}", rng.normal(0, 0.1, 500), bins=200)
            for i in range(20)
            for kind in ("kernel", "kernel_grad")
        ]
        events.append(ef.summary_event(step, values, wall_time=1.0 + step))
    path = tmp_path_factory.mktemp("big") / "events.out.tfevents.1.host"
    ef.write_events(path, events)
    assert path.stat().st_size > 20 << 20
    return path


# The 24 MB log cut in two byte ranges, each read 1 MB at a time: one by this process, one by
# a worker (``pool.takes_one_here``), whichever starts reading first truncating the file.
IN_RANGES = """
import gradcheck.engine.fastpath, gradcheck.engine.ranges, gradcheck.engine.read
gradcheck.engine.ranges.SPLIT_SIZE = gradcheck.engine.read.POOL_MIN_BYTES = 1 << 20
gradcheck.engine.ranges.PIECE_SECONDS = 1e-9
gradcheck.engine.fastpath.CHUNK = 1 << 20
"""


def _analyze_while_shrinking(
    logs: list[Path], *args: str, engine: str, setup: str = ""
) -> tuple[subprocess.CompletedProcess[str], dict]:  # type: ignore[type-arg]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("GRADCHECK_NO_EXT", None)
    if engine == "python":
        env["GRADCHECK_NO_EXT"] = "1"
    root = logs[0].parent.parent
    command = [sys.executable, "-c", setup + SHRINKING_CLI, str(CUT), "analyze", str(root)]
    done = subprocess.run(
        [*command, "--format", "json", *args], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode in (ExitStatus.OK, ExitStatus.FINDINGS), (done.returncode, done.stderr)
    return done, json.loads(done.stdout)


def _copies(big_log: Path, root: Path, count: int) -> list[Path]:
    logs = []
    for number in range(count):
        target = root / f"run{number}" / big_log.name
        target.parent.mkdir(parents=True)
        shutil.copyfile(big_log, target)
        logs.append(target)
    return logs


@pytest.mark.parametrize("engine", ["c", "python"])
def test_a_file_truncated_while_read_is_reported_once_and_the_report_is_whole(
    big_log: Path, tmp_path: Path, engine: str
) -> None:
    (log,) = _copies(big_log, tmp_path, 1)
    size = log.stat().st_size
    done, report = _analyze_while_shrinking([log], "-j", "1", engine=engine)
    assert log.stat().st_size == CUT  # the hook did truncate it mid-read
    (run,) = report["runs"]
    changed = [w for w in run["warnings"] if "shrank" in w]
    assert len(changed) == 1, run["warnings"]
    assert f"shrank from {size} to" in changed[0]
    assert "file changed while read" in changed[0]
    assert sum(run["counts"].values()) == 20  # what was read before the cut is analysed
    assert 0 < run["steps"][1] < 169


@pytest.mark.skipif(not hasattr(os, "fork"), reason="forked readers only where fork exists")
def test_forked_readers_survive_files_truncated_while_read(big_log: Path, tmp_path: Path) -> None:
    # Three files of 24 MB: more than the pool's minimum, so two processes read them.
    logs = _copies(big_log, tmp_path, 3)
    done, report = _analyze_while_shrinking(logs, "-j", "2", engine="c")
    assert all(log.stat().st_size == CUT for log in logs)
    assert len(report["runs"]) == 3
    for run in report["runs"]:
        assert len([w for w in run["warnings"] if "shrank" in w]) == 1, run["warnings"]
        assert sum(run["counts"].values()) == 20 and 0 < run["steps"][1] < 169


@pytest.mark.skipif(not hasattr(os, "fork"), reason="forked readers only where fork exists")
def test_a_file_read_in_byte_ranges_survives_being_truncated(big_log: Path, tmp_path: Path) -> None:
    """The ranges are read by this process and a worker; the file shrinks to 1 MB under
    them: the records before the cut are analysed, what was cut is said once, no crash."""
    (log,) = _copies(big_log, tmp_path, 1)
    done, report = _analyze_while_shrinking([log], "-j", "2", engine="c", setup=IN_RANGES)
    assert log.stat().st_size == CUT
    (run,) = report["runs"]
    assert len(run["warnings"]) == 1, run["warnings"]
    assert "events.out.tfevents.1.host" in run["warnings"][0]
    assert sum(run["counts"].values()) == 20 and 0 < run["steps"][1] < 169


# --------------------------------------------------------------------------------------------
# Corruption of real writers' files: every intact record is read, by both engines alike
# --------------------------------------------------------------------------------------------

# GRADCHECK_EXAMPLES=3000 runs a longer search (scripts/fuzz_reader.py runs many more).
SETTINGS = settings(
    max_examples=int(os.environ.get("GRADCHECK_EXAMPLES", "150")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


operations = st.tuples(
    st.sampled_from(KINDS),
    st.floats(0, 1),
    st.integers(1, 3000),
    st.integers(0, 255),
)


@SETTINGS
@given(
    source=st.sampled_from(WRITER_FILES),
    damage=st.lists(operations, min_size=1, max_size=3),
)
def test_every_intact_record_is_read_after_any_corruption_by_both_engines(
    tmp_path_factory: pytest.TempPathFactory, source: Path, damage: list[Operation]
) -> None:
    original = source.read_bytes()
    records = sorted(frames_in(original))
    assert sum(len(p) + 16 for _, p in records) == len(original)  # the fixture is intact
    damaged = Damaged(original)
    for operation in damage:
        damaged.apply(operation)
    data = bytes(damaged.data)
    got = frames_in(data)
    assert damaged.intact(records) <= got
    assert {p for _, p in got} <= {p for _, p in records}  # nothing false
    path = tmp_path_factory.mktemp("damaged") / source.name
    path.write_bytes(data)
    if fastpath.available():
        check_file(path)  # the C engine reads exactly what the reference reads, says the same
