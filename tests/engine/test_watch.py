"""``gradcheck watch``: following event files while they grow (``engine/follow.py``,
``watch.py``) and the command (``cli.watch``).

The logs are real: the committed sample runs (torch, TF2 and Keras writers) appended to a
copy in chunks that cut records anywhere, and a torch training run in a child process that
writes with ``SummaryWriter`` while ``gradcheck watch`` follows it. Every poll must give what
``gradcheck analyze`` gives on the log cut at its last complete record, and the last what
``analyze`` gives on the finished log.
"""

from __future__ import annotations

import io
import json
import os
import random
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from gradcheck import __version__
from gradcheck.cli.status import ExitStatus
from gradcheck.engine import fastpath, join, ranges
from gradcheck.engine.parts import file_part, reduce_file
from gradcheck.errors import InputError
from gradcheck.events.framing import Frame, iter_frames
from gradcheck.events.steps import StepWindow
from gradcheck.model import Report, Run
from gradcheck.pipeline import analyze, analyze_parts, disagreements
from gradcheck.report.json_format import report_document
from gradcheck.tags import DEFAULT_RULES
from gradcheck.verdicts.config import DEFAULT_CONFIG
from gradcheck.watch import Watcher
from tests.support import eventfiles as ef
from tests.support.cli import invoke
from tests.support.paths import REPO
from tests.support.synthetic_runs import nan_histo

SAMPLES = REPO / "sample_runs"
GROWN = ["torch_exploding_nan", "tf_loop_exploding_nan", "keras_healthy_callback", "torch_frozen"]


def event_file(run: str) -> Path:
    (path,) = (SAMPLES / run).glob("*tfevents*")
    return path


def document(report: object, root: Path) -> str:
    """The report's JSON with the log's directory taken out (two copies of a log compare)."""
    return json.dumps(report_document(report)).replace(str(root), "ROOT")  # type: ignore[arg-type]


def analyze_cut(data: bytes, end: int, name: str, root: Path, open_end: bool = False) -> str | None:
    """``analyze``'s JSON on the first ``end`` bytes of a log (None: nothing to analyse);
    ``open_end``: judged as a log still being written (``RunContext.open_end``), the file
    read whole by ``analyze``'s own reader and judged by its ``analyze_parts``."""
    shutil.rmtree(root, ignore_errors=True)
    (root / "run").mkdir(parents=True)
    (root / "run" / name).write_bytes(data[:end])
    if not open_end:
        try:
            return document(analyze([str(root)], jobs=1), root)
        except InputError:  # "nothing to read": the watcher waits
            return None
    run = Run(str(root / "run"), (str(root / "run" / name),))
    part = reduce_file(run.files[0], run.path, StepWindow())
    if not part.values_kept:
        return None
    judged = analyze_parts(run, [part], DEFAULT_CONFIG, DEFAULT_RULES, open_end=True)
    return document(Report(__version__, (judged,), disagreements([judged])), root)


@pytest.fixture(params=["c", "reference"])
def engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both engines: the C one joins ranges; the reference re-reads a grown file whole."""
    if request.param == "reference":
        monkeypatch.setattr(fastpath, "available", lambda: False)
    elif not fastpath.available():
        pytest.skip("the C extension is not built")
    return str(request.param)


@pytest.mark.parametrize("run", GROWN)
def test_every_poll_is_analyze_of_the_log_so_far(run: str, engine: str, tmp_path: Path) -> None:
    source = event_file(run)
    data = source.read_bytes()
    logs, cut = tmp_path / "logs", tmp_path / "cut"
    (logs / "run").mkdir(parents=True)
    target = logs / "run" / source.name
    target.write_bytes(b"")
    watcher = Watcher([str(logs)])
    rng = random.Random(run)
    at = polls = halves = 0
    onsets: dict[tuple[str, str], int] = {}
    while at < len(data):
        size = rng.randint(1, len(data) // 6)
        with target.open("ab") as stream:
            stream.write(data[at : at + size])
        at += size
        update = watcher.update()
        polls += 1
        end = update.bytes_read
        assert end <= at
        halves += end < at  # a record was cut: left for the next poll
        expected = analyze_cut(data, end, source.name, cut, open_end=True)
        got = None if update.report is None else document(update.report, logs)
        assert got == expected, f"poll {polls} at byte {at} (read to {end})"
        for run_report in update.report.runs if update.report is not None else ():
            for layer in run_report.layers:  # no finding comes and goes, no onset moves
                for verdict, step in layer.onsets.items():
                    assert onsets.setdefault((layer.name, verdict), step) == step, layer.name
                was_nan = (layer.name, "nan") in onsets
                assert not was_nan or layer.verdict == "nan", (layer.name, layer.verdict)
    final = watcher.update(final=True)
    assert final.report is not None and final.bytes_read == len(data)
    assert document(final.report, logs) == document(analyze([str(logs)], jobs=1), logs)
    assert polls >= 6 and halves >= 3  # the chunks did cut records


def test_appended_bytes_only_are_read(tmp_path: Path) -> None:
    """With the C engine each poll reads the appended range and joins it (no re-read)."""
    if not fastpath.available():
        pytest.skip("the C extension is not built")
    source = event_file("torch_exploding_nan")
    data = source.read_bytes()
    (tmp_path / "run").mkdir()
    target = tmp_path / "run" / source.name
    target.write_bytes(data[: len(data) // 2])
    watcher = Watcher([str(tmp_path)])
    first = watcher.update()
    assert first.new_bytes == first.bytes_read <= len(data) // 2
    with target.open("ab") as stream:
        stream.write(data[len(data) // 2 :])
    second = watcher.update()
    assert second.new_bytes == len(data) - first.bytes_read  # not the whole file again
    third = watcher.update()
    assert third.new_bytes == 0 and third.changes == ()


def test_a_run_that_appears_is_followed_too(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    shutil.copy(event_file("torch_frozen"), tmp_path / "a")
    watcher = Watcher([str(tmp_path)], fail_on=frozenset())
    first = watcher.update()
    assert first.report is not None and len(first.report.runs) == 1
    (tmp_path / "b").mkdir()
    shutil.copy(event_file("torch_exploding_nan"), tmp_path / "b")
    second = watcher.update()
    assert second.report is not None and len(second.report.runs) == 2
    nan = [change for change in second.changes if change.verdict == "nan"]
    assert nan and all(c.run.endswith("b") and c.was is None for c in nan)
    assert {change.first_bad_step for change in nan} == {56, 58}
    expected = analyze([str(tmp_path)], jobs=1)
    assert document(second.report, tmp_path) == document(expected, tmp_path)


def test_no_event_file_yet_is_waiting_not_an_error(tmp_path: Path) -> None:
    watcher = Watcher([str(tmp_path / "logs")])
    update = watcher.update()
    assert update.report is None and "does not exist" in update.waiting
    (tmp_path / "logs" / "run").mkdir(parents=True)
    shutil.copy(event_file("torch_exploding_nan"), tmp_path / "logs" / "run")
    update = watcher.update()
    assert update.report is not None and update.failures
    assert update.failures[0].layer.first_bad_step == 56


def test_a_path_not_there_yet_is_waited_for_while_the_others_are_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``watch runA runB`` before runB exists: runA is judged meanwhile (one warning says
    what is waited for); a listing that fails later (a network blip) keeps what was read."""
    from gradcheck.engine import follow

    (tmp_path / "a").mkdir()
    shutil.copy(event_file("torch_exploding_nan"), tmp_path / "a")
    watcher = Watcher([str(tmp_path / "a"), str(tmp_path / "b")])
    first = watcher.update()
    assert first.report is not None and [run.run for run in first.report.runs] == [
        str(tmp_path / "a")
    ]
    assert [line for line in first.warnings if "does not exist" in line] == [
        f"waiting: {str(tmp_path / 'b')!r} does not exist: give an event file or a log directory."
    ]
    assert not watcher.update().warnings  # said once
    (tmp_path / "b").mkdir()
    shutil.copy(event_file("torch_frozen"), tmp_path / "b")
    both = watcher.update()
    assert both.report is not None and len(both.report.runs) == 2
    discover = follow.discover

    def blip(paths: list[str], storage: object) -> object:
        if paths == [str(tmp_path / "a")]:
            raise InputError("cannot list 'a': Service Unavailable.")
        return discover(paths, storage)  # type: ignore[arg-type]

    monkeypatch.setattr(follow, "discover", blip)
    during = watcher.update()
    assert any("cannot list 'a'" in line and "kept" in line for line in during.warnings)
    assert during.new_bytes == 0  # nothing read again from the start
    final = watcher.update(final=True)
    assert final.report is not None
    assert [run.run for run in final.report.runs] == [run.run for run in both.report.runs]


def test_a_replaced_or_truncated_file_is_read_again_with_a_warning(
    engine: str, tmp_path: Path
) -> None:
    logs = tmp_path / "logs"
    (logs / "run").mkdir(parents=True)
    target = logs / "run" / "events.out.tfevents.1"
    shutil.copy(event_file("torch_exploding_nan"), target)
    watcher = Watcher([str(logs)])
    assert watcher.update().failures  # NaN from step 56
    # replaced: another training's file under the same name (a bigger one: it "grew")
    frozen = event_file("tf_loop_vanishing_sigmoid").read_bytes()
    assert len(frozen) > target.stat().st_size
    target.write_bytes(frozen)
    update = watcher.update()
    assert [w for w in update.warnings if "first record changed" in w and "again" in w]
    assert update.report is not None
    assert document(update.report, logs) == document(analyze([str(logs)]), logs)
    assert not update.failures  # the NaN run's findings are gone
    # truncated: cut in the middle of a record
    with target.open("r+b") as stream:
        stream.truncate(len(frozen) // 3)
    update = watcher.update()
    assert [w for w in update.warnings if "shrank from" in w and "again from the start" in w]
    assert update.bytes_read < len(frozen) // 3
    expected = analyze_cut(frozen, update.bytes_read, target.name, tmp_path / "cut", True)
    assert update.report is not None and document(update.report, logs) == expected
    # the half-written record is damage once the training is over, as analyze reads it
    final = watcher.update(final=True)
    assert final.report is not None
    assert document(final.report, logs) == document(analyze([str(logs)]), logs)
    assert any("file ends inside" in w for w in final.report.runs[0].warnings)


def test_a_file_that_goes_away_is_no_longer_counted(tmp_path: Path) -> None:
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    shutil.copy(event_file("torch_frozen"), tmp_path / "a")
    shutil.copy(event_file("torch_exploding_nan"), tmp_path / "b")
    watcher = Watcher([str(tmp_path)])
    assert watcher.update().failures
    shutil.rmtree(tmp_path / "b")
    update = watcher.update()
    assert [w for w in update.warnings if "no longer there" in w]
    assert update.report is not None and not update.failures
    assert [run.run for run in update.report.runs] == [str(tmp_path / "a")]


# --- the command, on finished logs -------------------------------------------------------------


def test_watch_until_idle_ends_with_analyze_s_report(tmp_path: Path) -> None:
    shutil.copytree(SAMPLES, tmp_path / "logs", ignore=shutil.ignore_patterns("*.md"))
    logs = str(tmp_path / "logs")
    result = invoke("watch", logs, "--until-idle", "0", "--fail-on", "none", "--format", "json")
    assert result.exit_code == ExitStatus.OK, result.output
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [line["update"] for line in lines] == [1, 2]
    first, last = lines
    assert first["new_bytes"] == first["bytes"] > 0 and "final" not in first
    assert {c["verdict"] for c in first["changes"]} >= {"nan", "vanishing", "static"}
    assert last["final"] is True and last["exit"] == "idle" and last["new_bytes"] == 0
    analyzed = invoke("analyze", logs, "--format", "json", "--fail-on", "none")
    assert last["report"] == json.loads(analyzed.stdout)


def test_watch_of_a_sweep_ends_with_analyze_s_report_sweep_view_included(
    tmp_path: Path,
) -> None:
    """The final report is built as analyze's, so a sweep's view is in it too."""
    shutil.copytree(REPO / "tests" / "data" / "sweep", tmp_path / "sweep")
    logs = str(tmp_path / "sweep")
    result = invoke("watch", logs, "--until-idle", "0", "--fail-on", "none", "--format", "json")
    assert result.exit_code == ExitStatus.OK, result.output
    last = json.loads(result.stdout.splitlines()[-1])
    analyzed = json.loads(invoke("analyze", logs, "--format", "json", "--fail-on", "none").stdout)
    assert last["report"]["sweep"]["runs"] == analyzed["sweep"]["runs"] == 10
    assert last["report"] == analyzed


def test_watch_exits_1_naming_the_finding(tmp_path: Path) -> None:
    result = invoke("watch", str(SAMPLES / "torch_exploding_nan"), "--format", "json")
    assert result.exit_code == ExitStatus.FINDINGS, result.output
    (line,) = [json.loads(line) for line in result.stdout.splitlines()]
    assert line["exit"] == "finding" and line["failing"][0]["first_bad_step"] == 56
    first = result.stderr.splitlines()[0]
    assert first.startswith("gradcheck: finding: ") and "0.weight: nan at step 56" in first
    assert "6 parameters failing --fail-on (6 nan)" in result.stderr


def test_watch_table_without_a_terminal_prints_the_report_at_the_end() -> None:
    result = invoke("watch", str(SAMPLES / "torch_frozen"), "--until-idle", "0")
    assert result.exit_code == ExitStatus.OK, result.output
    assert result.stdout.startswith(str(SAMPLES / "torch_frozen"))
    assert "static" in result.stdout
    assert "gradcheck: watching" in result.stderr and "update 1" in result.stderr
    assert f"{SAMPLES / 'torch_frozen'}: 0.weight: new -> static at step 0" in result.stderr


def test_watch_with_nothing_to_read_at_the_end_is_an_input_error(tmp_path: Path) -> None:
    result = invoke("watch", str(tmp_path / "nothing"), "--until-idle", "0")
    assert result.exit_code == ExitStatus.INPUT_ERROR
    assert "nothing to judge under" in result.stderr and "does not exist" in result.stderr


# --- a real training, watched while it runs ----------------------------------------------------

NAN_STEP = 25

TRAINER = """
import sys, time, torch
from torch.utils.tensorboard import SummaryWriter
from gradcheck.torch import log_gradients
logdir, nan_step, steps = (sys.argv[1:] or ["logs/run", "25", "2000"])[:3]
nan_step, steps = int(nan_step), int(steps)
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
writer = SummaryWriter(logdir)
x, y = torch.randn(64, 8), torch.randn(64, 1)
for step in range(steps):
    optimizer.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    if step == nan_step:
        loss = loss * float("nan")
    loss.backward()
    writer.add_scalar("loss", loss.item(), step)
    log_gradients(writer, model, step)  # weight and gradient histograms (NaN-safe)
    optimizer.step()
    writer.flush()
    print(f"step {step} flushed {time.time():.6f}", flush=True)
    time.sleep(0.05)
writer.close()
"""


def _gradcheck(*args: str) -> list[str]:
    return [sys.executable, "-m", "gradcheck", *args]


def _environ() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO)}


def test_watch_stops_a_diverging_training(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    logdir = tmp_path / "logs" / "run"
    interval = 0.5
    watcher = subprocess.Popen(
        _gradcheck("watch", str(tmp_path / "logs"), "--interval", str(interval), "--format",
                   "json"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_environ(), text=True,
    )  # fmt: skip
    script = tmp_path / "train.py"
    script.write_text(TRAINER, encoding="utf-8")
    trainer = subprocess.Popen(
        [sys.executable, str(script), str(logdir), str(NAN_STEP), "2000"],
        stdout=subprocess.PIPE, env=_environ(), text=True,
    )  # fmt: skip
    try:
        out, err = watcher.communicate(timeout=300)
        exited = time.time()
        still_training = trainer.poll() is None
    finally:
        trainer.send_signal(signal.SIGTERM)
        printed, _ = trainer.communicate(timeout=60)
    assert watcher.returncode == ExitStatus.FINDINGS, err
    lines = [json.loads(line) for line in out.splitlines()]
    last = lines[-1]
    assert last["exit"] == "finding"
    steps = {failure["first_bad_step"] for failure in last["failing"]}
    assert steps == {NAN_STEP}, last["failing"]
    assert f"nan at step {NAN_STEP}" in err
    assert lines[0]["waiting"] is not None  # started before the trainer wrote anything
    flushed = {
        int(words[1]): float(words[3])
        for words in (line.split() for line in printed.splitlines())
        if words[:1] == ["step"]
    }
    assert still_training and max(flushed) >= NAN_STEP  # watch ended before the training
    latency = exited - flushed[NAN_STEP]
    print(f"latency from the NaN step's flush to watch's exit: {latency:.2f} s "
          f"(interval {interval} s)")  # fmt: skip
    assert latency < 60  # generous: the target (two intervals) is measured in bench/watch.py


def test_the_readme_recipe_stops_a_diverging_training(tmp_path: Path) -> None:
    """The sidecar recipe of the watch guide, run as written (``python`` and ``gradcheck`` on
    the PATH are this interpreter and this checkout)."""
    pytest.importorskip("torch")
    readme = (REPO / "docs" / "guides" / "watch.md").read_text(encoding="utf-8")
    recipe = readme.split("<!-- watch-recipe:")[1].split("```sh\n")[1].split("```")[0]
    (tmp_path / "train.py").write_text(TRAINER, encoding="utf-8")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, command in (("python", ""), ("gradcheck", " -m gradcheck")):
        shim = bin_dir / name
        shim.write_text(f'#!/bin/sh\nexec {sys.executable}{command} "$@"\n', encoding="utf-8")
        shim.chmod(0o755)
    environ = {**_environ(), "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        ["bash", "-c", recipe], cwd=tmp_path, env=environ, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert done.returncode == 128 + signal.SIGTERM, done.stderr  # the training was killed
    assert f"nan at step {NAN_STEP}" in done.stderr
    assert str(Path("logs") / "run") in done.stdout  # the report printed at the end


# --- the live view, in a real terminal (tmux) --------------------------------------------------


def _wait_for(condition: Callable[[], bool], what: str, timeout: float = 120.0) -> None:
    """Poll ``condition`` until it holds (a deadline against a hang, not a timing test)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def test_the_live_view_redraws_and_ctrl_c_prints_the_last_report(tmp_path: Path) -> None:
    tmux = shutil.which("tmux")
    if tmux is None:
        pytest.skip("tmux is not installed")
    logs = tmp_path / "logs"
    (logs / "frozen").mkdir(parents=True)
    shutil.copy(event_file("torch_frozen"), logs / "frozen")
    socket = str(tmp_path / "tmux.sock")
    command = ["env", "-u", "COLUMNS", "-u", "LINES", f"PYTHONPATH={REPO}"]  # the pane's size
    command += _gradcheck("watch", str(logs), "--interval", "0.2", "--fail-on", "none")
    watch = " ".join(shlex.quote(word) for word in command)
    shell = f"{watch}; echo EXIT=$?; sleep 600"

    def pane(history: str = "0") -> str:
        done = subprocess.run(
            [tmux, "-S", socket, "capture-pane", "-p", "-t", "watch", "-S", history],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        return done.stdout

    subprocess.run(
        [tmux, "-S", socket, "new-session", "-d", "-s", "watch", "-x", "110", "-y", "50", shell],
        check=True,
    )
    try:
        _wait_for(lambda: "watching" in pane() and "static" in pane(), "the live view")
        assert "1 run · step 199" in pane()
        (logs / "nan").mkdir()
        shutil.copy(event_file("torch_exploding_nan"), logs / "nan")
        _wait_for(lambda: "2 runs" in pane(), "the view to show the new run")
        assert pane().index(str(logs / "nan")) < pane().index(str(logs / "frozen"))  # worst first
        subprocess.run([tmux, "-S", socket, "send-keys", "-t", "watch", "C-c"], check=True)
        _wait_for(lambda: "EXIT=" in pane(), "watch to exit")
        screen = pane("-500")  # the report printed at the end is taller than the terminal
        assert f"EXIT={ExitStatus.INTERRUPTED}" in screen
        assert "gradcheck: interrupted" in screen
        printed = screen.rsplit("watching", 1)[-1]  # after the live view's last frame, if kept
        assert str(logs / "frozen") in printed and str(logs / "nan") in printed
        rows = [line.split() for line in printed.splitlines()]
        assert ["nan", "56", "0,", "2", "weight,", "bias"] in [row[:6] for row in rows]
        assert "6 parameters in 3 layers: 6 nan" in printed  # a layer row, not a paragraph
    finally:
        subprocess.run([tmux, "-S", socket, "kill-server"], check=False)


def _default_sigint() -> None:
    """Ctrl-C as a terminal delivers it (a background job would start with SIGINT ignored)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_prints_the_last_report_and_exits_130() -> None:
    watch = subprocess.Popen(
        _gradcheck("watch", str(SAMPLES / "torch_frozen"), "--format", "json", "--interval",
                   "0.2"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_environ(), text=True,
        preexec_fn=_default_sigint,
    )  # fmt: skip
    assert watch.stdout is not None
    first = json.loads(watch.stdout.readline())  # the first update is out: it is watching
    assert first["update"] == 1 and first["runs"] == 1
    watch.send_signal(signal.SIGINT)
    rest, err = watch.communicate(timeout=60)
    assert watch.returncode == ExitStatus.INTERRUPTED, err
    assert err.endswith("gradcheck: interrupted\n")
    last = json.loads(rest.splitlines()[-1])
    assert last["final"] is True and last["exit"] == "interrupted"
    assert last["report"]["runs"][0]["counts"]["static"] == 4


def test_watch_stops_when_nobody_reads_its_lines(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    shutil.copy(event_file("torch_frozen"), tmp_path / "a")
    watch = subprocess.Popen(
        _gradcheck("watch", str(tmp_path), "--format", "json", "--interval", "0.05"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_environ(),
    )  # fmt: skip
    assert watch.stdout is not None
    watch.stdout.readline()
    watch.stdout.close()  # as `| head -1` does
    (tmp_path / "b").mkdir()
    shutil.copy(event_file("torch_clipped"), tmp_path / "b")  # new data: a line to write
    assert watch.wait(timeout=60) == ExitStatus.OK


# --- the open end: gradients non-finite at the newest step -------------------------------------


def _skipping_run(bad_steps: set[int], steps: int) -> list[bytes]:
    """Per step, the payload of a run whose gradients are NaN at ``bad_steps`` while the
    weights and the loss stay finite (as dynamic loss scaling leaves a skipped step)."""
    rng = np.random.default_rng(0)
    weights = rng.normal(0, 0.3, 256)
    payloads = [ef.file_version().SerializeToString()]
    for step in range(steps):
        gradient = rng.normal(0, 0.1, 256)
        values = [ef.histo_of("weights/fc.weight", weights)]
        if step in bad_steps:
            values.append(nan_histo("gradients/fc.weight", 256))
        else:
            values.append(ef.histo_of("gradients/fc.weight", gradient))
            weights = weights - 0.01 * gradient
        values.append(ef.simple_scalar("loss", 2.0 * 0.99**step))
        payloads.append(ef.summary_event(step, values).SerializeToString())
    return payloads


@pytest.mark.parametrize("stuck", [False, True])
def test_gradients_non_finite_at_the_newest_step_wait_three_steps(
    stuck: bool, tmp_path: Path
) -> None:
    """A skipped step is an overflow, live and at the end; gradients that stay non-finite
    are nan once more than ``OVERFLOW_RUN`` logged steps did not recover."""
    steps = 40
    bad = set(range(30, steps)) if stuck else {30}
    payloads = _skipping_run(bad, steps)
    (tmp_path / "run").mkdir()
    target = tmp_path / "run" / "events.out.tfevents.1.host"
    watcher = Watcher([str(tmp_path)], fail_on=frozenset({"nan"}))
    verdicts = {}
    for step in range(25, steps):
        target.write_bytes(ef.frame(payloads[: step + 2]))  # the file version and steps 0..step
        update = watcher.update()
        assert update.report is not None and update.newest_step == step
        (layer,) = update.report.runs[0].layers
        verdicts[step] = (layer.verdict, layer.first_bad_step)
    if stuck:  # overflow at 30, 31, 32 (3 bad steps may still recover), then nan from 30 on
        assert [verdicts[s][0] for s in range(29, 34)] == ["ok", *["overflow"] * 3, "nan"]
        assert all(verdicts[s] == ("nan", 30) for s in range(33, steps))
    else:
        assert all(verdicts[s] == ("overflow", 30) for s in range(30, steps))
    final = watcher.update(final=True)
    assert final.report is not None
    assert document(final.report, tmp_path) == document(analyze([str(tmp_path)]), tmp_path)
    assert final.report.runs[0].layers[0].verdict == ("nan" if stuck else "overflow")


# --- the engine's pieces the follower relies on ------------------------------------------------


def test_a_range_says_where_its_last_complete_record_ends(tmp_path: Path) -> None:
    if not fastpath.available():
        pytest.skip("the C extension is not built")
    data = event_file("tf_loop_exploding_nan").read_bytes()
    frames = [item for item in iter_frames(io.BytesIO(data)) if isinstance(item, Frame)]
    ends = [frame.offset + 16 + len(frame.payload) for frame in frames]
    assert ends[-1] == len(data)
    path = tmp_path / "events.out.tfevents.1"
    for cut in (ends[10], ends[10] + 5, ends[10] + 14, len(data) // 2, len(data)):
        path.write_bytes(data[:cut])
        result = fastpath.reduce_file_range(str(path), "run", StepWindow())
        assert result.end == max(end for end in ends if end <= cut)
        tails = [d for d in result.data.damages if d.offset >= result.end]
        assert [d.kind for d in tails] == ([] if cut == result.end else ["incomplete_tail"])


def test_joined_ranges_join_again_as_one_reading(tmp_path: Path) -> None:
    """A file followed as it grows is a chain of joins: each joined result carries its end,
    its steps and its plugins, so that the next range joins onto it exactly."""
    if not fastpath.available():
        pytest.skip("the C extension is not built")
    for name in ("tf_loop_exploding_nan", "torch_clipped"):
        path = str(event_file(name))
        whole = fastpath.reduce_file_range(path, "run", StepWindow())
        cuts = [0, *ranges.split_offsets(path, whole.end, 4)]
        assert len(cuts) == 4
        joined = None
        for start, limit in zip(cuts, [*cuts[1:], -1], strict=True):
            assumed = joined.plugins if joined is not None else None
            piece = fastpath.reduce_file_range(
                path, "run", StepWindow(), None, start, limit, assumed
            )
            assert piece.end == (limit if limit >= 0 else whole.end)
            if joined is not None:
                joined = join.join_ranges([joined, piece], [start])
                assert joined is not None and joined.end == piece.end
            else:
                joined = piece
        assert joined is not None
        assert _judged(joined, path) == _judged(whole, path)


def _judged(result: fastpath.RangeResult, path: str) -> str:
    """The JSON report on one file's range result, as analyze judges a file."""
    part = file_part(result, path, "run")
    report = analyze_parts(Run("run", (path,)), [part], DEFAULT_CONFIG, DEFAULT_RULES)
    return json.dumps(report_document(Report(__version__, (report,))))


def test_names_from_the_logs_reach_the_terminal_escaped(tmp_path: Path) -> None:
    """A run directory named with an escape sequence: the status, change and finding lines
    on stderr show it escaped; the JSON keeps it exact."""
    evil = tmp_path / "run\x1b[2J\u202e"
    evil.mkdir()
    shutil.copy(event_file("torch_exploding_nan"), evil)
    table = invoke("watch", str(tmp_path), "--until-idle", "0", "--fail-on", "none")
    assert table.exit_code == ExitStatus.OK, table.output
    found = invoke("watch", str(tmp_path), "--format", "json")
    assert found.exit_code == ExitStatus.FINDINGS
    for text in (table.stderr, table.stdout, found.stderr):
        assert "\x1b" not in text and "\u202e" not in text
        assert "run\\x1b[2J\\u202e" in text
    assert json.loads(found.stdout.splitlines()[-1])["failing"][0]["run"] == str(evil)


def test_polls_of_a_thinned_log_equal_analyze(tmp_path: Path) -> None:
    """Past 2,048 logged steps a series is thinned: the joined pieces keep the rows one
    reading keeps, and the NaN onset, once shown, stays."""
    rng = np.random.default_rng(3)
    payloads = [ef.file_version().SerializeToString()]
    for step in range(2600):
        diverged = step >= 2300
        values = [
            ef.histo_of("weights/fc.weight", rng.normal(0, 0.3, 64)),
            nan_histo("gradients/fc.weight", 64)
            if diverged
            else ef.histo_of("gradients/fc.weight", rng.normal(0, 0.1 * (1 + step % 7), 64)),
            ef.simple_scalar("loss", float("nan") if diverged else 2.0 * 0.999**step),
        ]
        payloads.append(ef.summary_event(step, values).SerializeToString())
    data = ef.frame(payloads)
    logs, cut = tmp_path / "logs", tmp_path / "cut"
    (logs / "run").mkdir(parents=True)
    target = logs / "run" / "events.out.tfevents.1.host"
    watcher = Watcher([str(logs)], fail_on=frozenset())
    onset = None
    for end in [*range(len(data) // 9, len(data), len(data) // 9), len(data)]:
        target.write_bytes(data[:end])
        update = watcher.update()
        assert update.report is not None
        expected = analyze_cut(data, update.bytes_read, target.name, cut, open_end=True)
        assert document(update.report, logs) == expected
        (layer,) = update.report.runs[0].layers
        if onset is not None:
            assert (layer.verdict, layer.first_bad_step) == ("nan", onset)
        elif layer.verdict == "nan":
            onset = layer.first_bad_step
    assert onset == 2300
    final = watcher.update(final=True)
    assert final.report is not None
    (thinned,) = final.report.runs[0].warnings
    assert "2 histogram series thinned" in thinned and "up to 2,600 steps read" in thinned
    assert document(final.report, logs) == document(analyze([str(logs)]), logs)
