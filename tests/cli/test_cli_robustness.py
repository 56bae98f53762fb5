"""The command on hostile or unlucky input that is not the log's records: a config file that
never ends, a regex built to backtrack, thresholds that switch a check off, a report that cannot
be written whole, paths that are not files, and SIGTERM while worker processes read.

Every case ends with one line on stderr and a documented exit status, through the real command.
"""

from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from gradcheck import cli
from gradcheck.cli.status import ExitStatus
from gradcheck.events.reader import unreadable
from gradcheck.inspect import FileSummary, InspectReport, RunSummary
from gradcheck.report.inspect_table import inspect_table
from gradcheck.report.interface import Env
from gradcheck.verdicts.config import MAX_CONFIG_BYTES
from tests.support import eventfiles as ef
from tests.support.cli import assert_one_line_error, invoke
from tests.support.paths import REPO
from tests.support.synthetic_runs import write_run

SAMPLE_RUN = REPO / "sample_runs" / "torch_exploding_nan"


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_run(tmp_path_factory.mktemp("logs") / "run", exploding=True)


# --- config files --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("explode_factor = inf", "explode_factor must be a finite number above 1, got inf"),
        ("explode_factor = nan", "explode_factor must be a finite number above 1, got nan"),
        ("vanish_absolute = 0", "vanish_absolute must be a finite number above 0, got 0.0"),
        ("baseline_fraction = 1.5", "baseline_fraction must be a number in (0, 1], got 1.5"),
        ("clip_suggest_percentile = inf", "clip_suggest_percentile must be a number in (0, 100]"),
    ],
)
def test_a_threshold_that_would_switch_a_check_off_is_exit_2(
    run: Path, tmp_path: Path, setting: str, message: str
) -> None:
    config = tmp_path / "gradcheck.toml"
    config.write_text(setting + "\n", encoding="utf-8")
    assert_one_line_error(invoke("analyze", str(run), "--config", str(config)), message)


def test_config_from_a_device_a_fifo_or_too_big_is_exit_2(run: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)  # read, it would wait for a writer forever
    big = tmp_path / "big.toml"
    big.write_text("#" * (MAX_CONFIG_BYTES + 1), encoding="utf-8")
    deep = tmp_path / "deep.toml"
    deep.write_text("a = " + "[" * 100_000 + "]" * 100_000 + "\n", encoding="utf-8")
    cases = {
        "/dev/zero": "is a character device, not a regular file",
        str(fifo): "is a FIFO (named pipe), not a regular file",
        str(big): "is larger than 1048576 bytes (1 MiB)",
        str(deep): "is not valid TOML: nested too deeply",  # was a RecursionError: status 3
    }
    for path, message in cases.items():
        assert_one_line_error(invoke("analyze", str(run), "--config", path), path, message)


# --- user regexes --------------------------------------------------------------------------


def test_a_backtracking_grad_pattern_is_matched_in_linear_time(tmp_path: Path) -> None:
    """With Python's engine this pattern took 13 s on a 28-letter tag, twice as long per
    letter more; 60 letters would take ~1,500 years."""
    tag = "grads/" + "a" * 60 + "!"
    events = [ef.summary_event(step, [ef.histo_of(tag, np.ones(4))]) for step in range(3)]
    ef.write_events(tmp_path / "run" / "events.out.tfevents.1.host", [ef.file_version(), *events])
    started = time.perf_counter()
    result = invoke("analyze", str(tmp_path / "run"), "--grad-pattern", "^grads/(?P<name>(a+)+)$")
    assert time.perf_counter() - started < 10
    assert result.exit_code == ExitStatus.OK, result.output


@pytest.mark.parametrize(
    ("pattern", "feature"),
    [
        ("^g/(?P<name>.+)(?=/grad)", "invalid perl operator: (?="),
        ("^g/(?P<name>.+)(?<!bias)$", "invalid perl operator: (?<"),
        (r"^(?P<name>\w)\1", r"invalid escape sequence: \1"),
        ("^(?P<name>a++)", "bad repetition operator: ++"),
    ],
)
def test_a_pattern_outside_re2_is_exit_2_naming_the_feature(
    run: Path, pattern: str, feature: str
) -> None:
    for option in ("--grad-pattern", "--weight-pattern"):
        result = invoke("analyze", str(run), option, pattern)
        assert_one_line_error(result, option, "outside RE2's syntax", feature)


# --- writing the report ----------------------------------------------------------------------


def _limit_file_size() -> None:
    """In the child: files may not grow past 2,000 bytes, and a write past it fails with
    EFBIG instead of killing the process with SIGXFSZ (as a full disk fails a write)."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (2000, 2000))


def test_a_report_that_cannot_be_written_whole_leaves_the_old_file_alone(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    report.write_text("the previous report\n", encoding="utf-8")
    args = [sys.executable, "-m", "gradcheck", "analyze", str(SAMPLE_RUN), "--format", "json"]
    done = subprocess.run(
        [*args, "--all", "-o", str(report)],
        capture_output=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        preexec_fn=_limit_file_size,
        timeout=120,
    )
    assert done.returncode == ExitStatus.INPUT_ERROR, done.stderr
    assert done.stderr.decode().splitlines() == [
        f"gradcheck: error: cannot write {report}: File too large"
    ]
    assert report.read_text(encoding="utf-8") == "the previous report\n"  # not truncated
    assert os.listdir(tmp_path) == ["report.json"]  # no temporary file left


def test_a_report_whose_part_cannot_be_made_leaves_the_old_file_alone(tmp_path: Path) -> None:
    """A report written as it is made (``Formatter.chunks``): a part that fails after others
    were written leaves the previous file, and no temporary one."""
    report = tmp_path / "report.json"
    report.write_text("the previous report\n", encoding="utf-8")

    def parts() -> Iterator[str]:
        yield '{\n  "runs": ['
        raise RuntimeError("a run's document could not be made")

    with pytest.raises(RuntimeError):
        cli.write_whole(str(report), parts())
    assert report.read_text(encoding="utf-8") == "the previous report\n"
    assert os.listdir(tmp_path) == ["report.json"]
    cli.write_whole(str(report), iter(["{", "}\n"]))
    assert report.read_text(encoding="utf-8") == "{}\n"


def test_a_report_is_written_whole_with_the_usual_permissions(tmp_path: Path) -> None:
    report = tmp_path / "report.md"
    result = invoke("analyze", str(SAMPLE_RUN), "--format", "markdown", "-o", str(report))
    assert result.exit_code == ExitStatus.FINDINGS, result.output
    assert report.read_text(encoding="utf-8").startswith("## gradcheck")
    umask = os.umask(0)
    os.umask(umask)
    assert report.stat().st_mode & 0o777 == 0o666 & ~umask  # not mkstemp's 0o600
    assert os.listdir(tmp_path) == ["report.md"]
    report.chmod(0o640)
    link = tmp_path / "link.md"
    link.symlink_to(report)
    assert invoke("analyze", str(SAMPLE_RUN), "--format", "csv", "-o", str(link)).exit_code == 1
    assert link.is_symlink() and report.read_text(encoding="utf-8").startswith('"run"')
    assert report.stat().st_mode & 0o777 == 0o640  # the file kept its permissions


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_output_to_a_full_device_is_exit_2_and_the_device_stays(run: Path) -> None:
    """A device is written directly (never renamed over)."""
    result = invoke("analyze", str(run), "-o", "/dev/full")
    assert_one_line_error(result, "cannot write /dev/full: No space left on device")
    assert Path("/dev/full").is_char_device()


# --- paths that are not event files ----------------------------------------------------------


def test_a_fifo_or_a_device_as_path_says_what_it_is(tmp_path: Path) -> None:
    fifo = tmp_path / "events.out.tfevents.fifo"
    os.mkfifo(fifo)
    for command in ("analyze", "inspect"):
        assert_one_line_error(invoke(command, str(fifo)), "is a FIFO (named pipe), not an event")
        assert_one_line_error(invoke(command, "/dev/zero"), "is a character device, not an event")
    assert_one_line_error(invoke("analyze", str(tmp_path / "gone")), "does not exist")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their permissions")
def test_an_unreadable_file_is_named_with_the_reason(run: Path, tmp_path: Path) -> None:
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    (locked,) = copy.iterdir()
    locked.chmod(0)
    result = invoke("inspect", str(copy))
    assert f"{locked.name} · not readable" in result.stdout and " 0 B" not in result.stdout
    assert f"cannot read {str(locked)!r} at byte 0: Permission denied" in result.stdout
    assert_one_line_error(
        invoke("analyze", str(copy)), "nothing could be read", "Permission denied"
    )


@pytest.mark.skipif(not Path("/proc/self/mem").exists(), reason="needs Linux's /proc")
@pytest.mark.parametrize("engine", ["c", "python"])
def test_a_file_whose_reading_fails_is_named_with_the_reason(
    engine: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """/proc/self/mem opens but every read at byte 0 fails (EIO), as root too: the reason is
    given, never "empty (0 bytes)", and ``inspect`` does not list it as ``0 B``."""
    if engine == "python":
        monkeypatch.setenv("GRADCHECK_NO_EXT", "1")
    reason = "cannot read '/proc/self/mem' at byte 0: Input/output error"
    result = invoke("analyze", "/proc/self/mem")
    assert_one_line_error(result, "nothing could be read from /proc/self/mem: " + reason)
    listing = invoke("inspect", "/proc/self/mem")
    assert listing.exit_code == ExitStatus.OK
    assert "  mem · not readable\n" in listing.stdout and reason in listing.stdout
    assert "0 B" not in listing.stdout


def test_inspect_shows_a_file_it_could_not_open_as_not_readable() -> None:
    """The listing of a file whose opening failed (the reader's own damage record)."""
    damage = unreadable(
        "run", "run/events.out.tfevents.1", 0, PermissionError(13, "Permission denied")
    )
    file = FileSummary("run/events.out.tfevents.1", 0, 0, 0, None, (), (damage,))
    listing = InspectReport((RunSummary("run", (file,), ()),))
    text = inspect_table(listing, Env())
    assert "events.out.tfevents.1 · not readable\n" in text and "0 B" not in text
    assert "cannot read 'run/events.out.tfevents.1' at byte 0: Permission denied" in text


# --- signals ---------------------------------------------------------------------------------


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(child) for child in text.split()]


def _default_sigint() -> None:
    """Ctrl-C as a terminal delivers it: a shell's background job (``make test &``, a CI
    runner) starts its commands with SIGINT ignored, and they would inherit that."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs Linux's /proc")
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_ends_the_command_and_its_readers(tmp_path: Path, signum: int) -> None:
    """Over 64 MB in 136 files, so that -j 2 forks a reader; the slower pure-Python reader,
    so that there is time to signal it while it works."""
    (source,) = (REPO / "sample_runs" / "tf_loop_exploding_nan").glob("events.out.tfevents.*")
    logs = tmp_path / "logs"
    logs.mkdir()
    copies = -(-(65 << 20) // source.stat().st_size)
    for copy in range(copies):
        shutil.copy(source, logs / f"events.out.tfevents.{copy:04}.host")
    env = {**os.environ, "PYTHONPATH": str(REPO), "GRADCHECK_NO_EXT": "1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "gradcheck", "analyze", str(logs), "-j", "2", "--no-progress"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        preexec_fn=_default_sigint,
    )
    deadline = time.monotonic() + 60
    while not (children := _children(process.pid)) and process.poll() is None:
        assert time.monotonic() < deadline, "no reader was forked"
        time.sleep(0.01)
    assert children, "the command ended before a reader was forked"
    time.sleep(0.3)  # the workers busy with their tasks
    children = _children(process.pid)
    assert children and process.poll() is None, "the command ended before the signal"
    process.send_signal(signum)
    out, err = process.communicate(timeout=60)
    expected = {signal.SIGTERM: (143, "terminated"), signal.SIGINT: (130, "interrupted")}
    status, word = expected[signum]
    assert process.returncode == status, err
    assert err.decode().lstrip("\n") == f"gradcheck: {word}\n"  # click ends a ^C's line first
    assert out == b""
    assert not [child for child in children if Path(f"/proc/{child}").exists()]
