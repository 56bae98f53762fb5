"""``--scheduler``: the work on a real Dask cluster (scheduler and worker processes started
here, on 127.0.0.1) gives the report of one local process; a worker killed during a sweep
is survived."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gradcheck import pipeline
from gradcheck.engine import cluster
from gradcheck.engine.pool import default_jobs
from gradcheck.errors import ConfigError, InputError
from gradcheck.model import Report
from tests.support.paths import REPO
from tests.support.synthetic_runs import write_run

distributed = pytest.importorskip("distributed")

SAMPLE_RUNS = REPO / "sample_runs"


@pytest.fixture(scope="module")
def scheduler() -> Iterator[str]:
    """A cluster of two worker processes; workers read with the pure-Python reader (slower:
    time to kill one mid-task). Its address, as a user would pass it."""
    from distributed import LocalCluster

    with LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address=":0",
        env={"GRADCHECK_NO_EXT": "1", "PYTHONPATH": str(REPO)},
    ) as local:
        yield local.scheduler_address


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("sweep")
    for number in range(12):
        write_run(root / f"lr={0.1 * (number + 1):.1f}", exploding=number % 3 == 0, seed=number)
    return root


def _analyze(path: Path, **options: object) -> Report:
    return pipeline.analyze([str(path)], **options)  # type: ignore[arg-type]


def test_a_sweep_on_the_cluster_reports_as_one_local_process(scheduler: str, sweep: Path) -> None:
    local = _analyze(sweep, jobs=1)
    with cluster.connect(scheduler) as workers:
        assert workers.jobs == 2 and workers.given
        remote = _analyze(sweep, workers=workers)
    assert repr(remote) == repr(local)  # repr: NaN in the trends
    assert sum(run.counts["nan"] > 0 for run in local.runs) == 4  # not vacuous


def test_one_run_of_several_files_is_read_file_by_file_on_the_cluster(
    scheduler: str, tmp_path: Path
) -> None:
    run = write_run(tmp_path / "three", exploding=True, seed=3, files=3)
    with cluster.connect(scheduler) as workers:
        remote = _analyze(run, workers=workers)
        (loaded,) = pipeline.load_runs([str(run)], workers=workers)
    assert repr(remote) == repr(_analyze(run, jobs=1))
    assert repr(loaded.report) == repr(remote.runs[0])


def _worker_pids(client: distributed.Client) -> dict[str, int]:
    return dict(client.run(os.getpid))


def test_a_worker_killed_during_a_sweep_is_survived(scheduler: str, sweep: Path) -> None:
    """SIGKILL to a worker as soon as it holds a task of the sweep: its nanny starts another,
    Dask runs its tasks again, and the report is the local one."""
    local = _analyze(sweep, jobs=1)
    result: list[Report] = []
    with distributed.Client(scheduler) as watcher, cluster.connect(scheduler) as workers:
        victim, pid = next(iter(_worker_pids(watcher).items()))
        thread = threading.Thread(target=lambda: result.append(_analyze(sweep, workers=workers)))
        thread.start()
        deadline = time.monotonic() + 60
        while not watcher.processing().get(victim):
            assert time.monotonic() < deadline and thread.is_alive(), "no task reached it"
            time.sleep(0.002)
        os.kill(pid, signal.SIGKILL)
        thread.join(timeout=240)
        assert result, "the sweep did not finish"
        watcher.wait_for_workers(2, timeout=120)
        after = _worker_pids(watcher)
    assert repr(result[0]) == repr(local)
    assert pid not in after.values() and len(after) == 2  # a new worker took its place


def test_the_command_line_with_a_local_cluster_reports_as_without(tmp_path: Path) -> None:
    """``--scheduler local:2`` from the README, on the sample runs: the same JSON and exit
    status as ``-j 1``."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}

    def run(*options: str) -> subprocess.CompletedProcess[str]:
        command = [
            sys.executable,
            "-m",
            "gradcheck",
            "analyze",
            str(SAMPLE_RUNS),
            "--format",
            "json",
        ]
        return subprocess.run(
            [*command, *options], capture_output=True, text=True, env=env, timeout=300
        )

    here, there = run("-j", "1"), run("--scheduler", "local:2", "--no-progress")
    assert there.returncode == here.returncode == 1, there.stderr
    assert there.stdout == here.stdout
    assert there.stderr == here.stderr  # no line of Dask's own
    assert len(json.loads(there.stdout)["runs"]) == 7


def test_jobs_and_a_scheduler_together_are_a_usage_error(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-m", "gradcheck", "analyze", str(SAMPLE_RUNS)]
    done = subprocess.run(
        [*command, "-j", "2", "--scheduler", "local:2"], capture_output=True, text=True, env=env
    )
    assert done.returncode == 2
    assert "--jobs and --scheduler" in done.stderr


@pytest.mark.parametrize("spec", ["local:0", "local:two", "locally"])
def test_a_bad_local_spec_is_a_config_error(spec: str) -> None:
    with pytest.raises(ConfigError, match="expected local, local:N"), cluster.connect(spec):
        pass


def test_local_alone_takes_one_worker_a_cpu() -> None:
    assert cluster.local_workers("local") == default_jobs()
    assert cluster.local_workers("local:3") == 3
    assert cluster.local_workers("tcp://10.0.0.1:8786") is None


def test_a_scheduler_that_does_not_answer_is_an_input_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import socket

    with socket.socket() as unused:  # a port nobody listens on
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    monkeypatch.setattr(cluster, "CONNECT_SECONDS", 1)
    address = f"tcp://127.0.0.1:{port}"
    expected = f"cannot reach the Dask scheduler at {address}"
    with pytest.raises(InputError, match=expected), cluster.connect(address):
        pass


def test_without_dask_the_error_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "distributed", None)  # import fails
    with (
        pytest.raises(
            InputError, match=r"pip install 'dask\[distributed\]' \(gradcheck's dask extra\)"
        ),
        cluster.connect("local:1"),
    ):
        pass
