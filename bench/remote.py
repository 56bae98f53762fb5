"""Reading logs from object storage (issue 20): the local S3 server against local disk.

Starts moto's S3 server (``python -m moto.server``, the server the tests run in a thread) on
127.0.0.1 in a process of its own, uploads the bench logs (``bench/gen.py``:
``bench/data/tensor-160MB`` and ``histo-160MB`` by default) and times ``gradcheck analyze
--format json`` end to end, each run in its own process, alternating the local path and the
``s3://`` URL (``--jobs 1`` and the default jobs); the reports must be the same. gradcheck and
the server share the machine's cores, as they would not in production (the server is Python:
werkzeug, one thread per request). It also times what the server alone costs: one GET of the
whole object, and GETs of 16 MB ranges (gradcheck's window) back to back, through s3fs from
this process, against reading the file from disk.

    .venv/bin/python bench/gen.py --sizes 160MB --multi ''
    .venv/bin/python bench/remote.py --repeats 5
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPOSITORY = HERE.parent
BUCKET = "bench"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(HERE / "data"), help="where bench/gen.py wrote")
    parser.add_argument("--logs", default="tensor-160MB,histo-160MB", help="comma list")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--jobs", default="1,default", help="comma list of --jobs values")
    arguments = parser.parse_args()
    os.environ.update(
        AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_DEFAULT_REGION="us-east-1"
    )
    port = _free_port()
    server = subprocess.Popen(  # its own process: the GIL is not shared with the client
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        _wait_for(port)
        logs = [Path(arguments.data) / name for name in arguments.logs.split(",")]
        _upload(endpoint, logs)
        for log in logs:
            _server_alone(endpoint, log, arguments.repeats)
            for jobs in arguments.jobs.split(","):
                _end_to_end(endpoint, log, jobs, arguments.repeats)
    finally:
        server.terminate()
        server.wait()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _wait_for(port: int) -> None:
    for _ in range(100):
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise SystemExit(f"the S3 server did not start on port {port}")


def _upload(endpoint: str, logs: list[Path]) -> None:
    import s3fs

    fs = s3fs.S3FileSystem(endpoint_url=endpoint)
    fs.mkdir(BUCKET)
    for log in logs:
        for path in sorted(log.rglob("*")):
            if path.is_file():
                fs.put_file(str(path), f"{BUCKET}/{path.relative_to(log.parent).as_posix()}")


def _server_alone(endpoint: str, log: Path, repeats: int) -> None:
    """The server's own cost: one GET of the whole file, then 16 MB ranges in turn."""
    import s3fs

    files = [p for p in log.rglob("*") if p.is_file()]
    if len(files) != 1:  # a sweep: the server alone is measured on the single-file logs
        return
    fs = s3fs.S3FileSystem(endpoint_url=endpoint)
    (path,) = files
    key = f"{BUCKET}/{path.relative_to(log.parent).as_posix()}"
    size = path.stat().st_size
    block = 16 << 20
    whole, ranges, disk = [], [], []
    for _ in range(repeats):
        start = time.perf_counter()
        assert len(fs.cat_file(key)) == size
        whole.append(time.perf_counter() - start)
        start = time.perf_counter()
        got = sum(
            len(fs.cat_file(key, start=at, end=min(size, at + block)))
            for at in range(0, size, block)
        )
        assert got == size
        ranges.append(time.perf_counter() - start)
        start = time.perf_counter()
        with open(path, "rb") as stream:
            while stream.read(block):
                pass
        disk.append(time.perf_counter() - start)
    megabytes = size / 1e6
    for name, times in (("one GET", whole), ("16 MB GETs", ranges), ("disk read", disk)):
        print(f"{log.name}: {name}: {_summary(times, megabytes)}", flush=True)


def _end_to_end(endpoint: str, log: Path, jobs: str, repeats: int) -> None:
    """``gradcheck analyze`` on the local path and on the URL, alternating."""
    url = f"s3://{BUCKET}/{log.name}"
    size = sum(p.stat().st_size for p in log.rglob("*") if p.is_file())
    job_options = [] if jobs == "default" else ["--jobs", jobs]
    local_command = [str(log), *job_options]
    remote_command = [url, f"--storage-option=endpoint_url={endpoint}", *job_options]
    times: dict[str, list[float]] = {"local": [], "s3": []}
    outputs: dict[str, bytes] = {}
    for _ in range(repeats):
        for name, command in (("local", local_command), ("s3", remote_command)):
            seconds, output = _time_analyze(command)
            times[name].append(seconds)
            outputs[name] = output.replace(url.encode(), str(log).encode())
    assert outputs["local"] == outputs["s3"], "the reports differ"
    megabytes = size / 1e6
    local, remote = statistics.median(times["local"]), statistics.median(times["s3"])
    print(f"{log.name} --jobs {jobs}: local {_summary(times['local'], megabytes)}")
    print(f"{log.name} --jobs {jobs}: s3    {_summary(times['s3'], megabytes)}")
    print(f"{log.name} --jobs {jobs}: s3 throughput / local: {local / remote:.2f}", flush=True)


def _time_analyze(arguments: list[str]) -> tuple[float, bytes]:
    command = [sys.executable, "-m", "gradcheck", "analyze", *arguments, "--format", "json"]
    environment = {**os.environ, "PYTHONPATH": str(REPOSITORY)}
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, env=environment, check=False)
    seconds = time.perf_counter() - start
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(command)}: exit {done.returncode}: {done.stderr.decode()}")
    return seconds, done.stdout


def _summary(times: list[float], megabytes: float) -> str:
    median = statistics.median(times)
    return (
        f"median {median:.3f} s ({megabytes / median:.0f} MB/s), "
        f"range {min(times):.3f}-{max(times):.3f} s over {len(times)}"
    )


if __name__ == "__main__":
    main()
