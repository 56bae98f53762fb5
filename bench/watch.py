"""The cost of ``gradcheck watch`` on a training that logs 100 histograms a second (issue 21).

    python bench/watch.py [--seconds 120] [--rate 100] [--parameters 10] [--interval 1]

A writer process appends to one PyTorch-style event file (``layer<i>.weight`` and its
``.grad``, histograms of 30 buckets, and a loss scalar per step) at ``--rate`` histograms a
second, ``2 * --parameters`` histograms a step, flushing each step and printing when it did.
``gradcheck watch --format json --fail-on none`` follows the folder from before the first
write. Reported:

- CPU: the watch process's CPU time (user + system, from ``/proc/<pid>/stat``) over wall time,
  from its first update on (the steady state; start-up apart) and over its whole life; the
  issue's target is under 5% of a core.
- update latency: for every step, from the writer's flush to the arrival of the first JSON
  line whose ``newest_step`` reaches it (a look every ``--interval`` seconds: about half an
  interval on average, the target is within two intervals), median, 95th percentile and max.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: python bench/watch.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from bench import encode  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
BUCKETS = 30
_EDGES = np.linspace(-1.0, 1.0, BUCKETS + 1)
_COUNTS = np.full(BUCKETS, 10.0)
_SQUARES = float((_COUNTS * ((_EDGES[1:] + _EDGES[:-1]) / 2) ** 2).sum())


def _histogram(scale: float) -> encode.TorchHistogram:
    return encode.TorchHistogram(
        min=-scale,
        max=scale,
        num=float(_COUNTS.sum()),
        sum=0.0,
        sum_squares=_SQUARES * scale * scale,
        bucket_limit=_EDGES[1:] * scale,
        bucket=_COUNTS,
    )


def write(folder: Path, rate: float, parameters: int, seconds: float) -> None:
    """The writer (a child process): one step of ``2 * parameters`` histograms every
    ``2 * parameters / rate`` seconds, flushed, then ``step <n> <time>`` on stdout."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"events.out.tfevents.{int(time.time())}.benchhost.{os.getpid()}.0"
    period = 2 * parameters / rate
    started = time.time()
    with path.open("wb") as stream:
        stream.write(encode.frame(encode.file_version_event(started, "bench")))
        step = 0
        while time.time() - started < seconds:
            wall = time.time()
            for number in range(parameters):
                weight = _histogram(0.1 * (1 + number / parameters) * (1 + 0.001 * step))
                grad = _histogram(0.01 * (1 + 0.02 * ((number + 31 * step) % 17)))
                tag = f"layer{number}.weight"
                stream.write(encode.frame(encode.histo_event(tag, wall, step, weight)))
                stream.write(encode.frame(encode.histo_event(f"{tag}.grad", wall, step, grad)))
            loss = encode.simple_value_event("Loss/train", wall, step, 1.0 / (step + 1))
            stream.write(encode.frame(loss))
            stream.flush()
            print(f"step {step} {time.time():.6f}", flush=True)
            step += 1
            time.sleep(max(0.0, started + step * period - time.time()))


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _lines(stream: object, into: list[tuple[float, str]]) -> None:
    for line in stream:  # type: ignore[attr-defined]
        into.append((time.time(), line))


def measure(seconds: float, rate: float, parameters: int, interval: float, folder: Path) -> dict:
    environ = {**os.environ, "PYTHONPATH": str(REPO)}
    watch = subprocess.Popen(
        [sys.executable, "-m", "gradcheck", "watch", str(folder), "--interval", str(interval),
         "--format", "json", "--fail-on", "none"],
        stdout=subprocess.PIPE, text=True, env=environ,
    )  # fmt: skip
    watch_started = time.time()
    writer = subprocess.Popen(
        [sys.executable, __file__, "--write", str(folder / "run"), "--rate", str(rate),
         "--parameters", str(parameters), "--seconds", str(seconds)],
        stdout=subprocess.PIPE, text=True, env=environ,
    )  # fmt: skip
    updates: list[tuple[float, str]] = []
    flushes: list[tuple[float, str]] = []
    readers = [
        threading.Thread(target=_lines, args=(watch.stdout, updates), daemon=True),
        threading.Thread(target=_lines, args=(writer.stdout, flushes), daemon=True),
    ]
    for reader in readers:
        reader.start()
    while not updates:
        time.sleep(0.01)
    steady_from, steady_cpu = time.time(), _cpu_seconds(watch.pid)
    writer.wait()
    time.sleep(3 * interval)  # the last steps reach watch
    steady_to, end_cpu = time.time(), _cpu_seconds(watch.pid)
    watch.send_signal(signal.SIGINT)
    watch.wait(timeout=60)
    readers[0].join(timeout=10)
    flushed = {int(line.split()[1]): float(line.split()[2]) for _, line in flushes}
    seen = [(arrived, json.loads(line)) for arrived, line in updates]
    latencies = []
    for step, at in sorted(flushed.items()):
        arrival = next((t for t, update in seen if (update.get("newest_step") or -1) >= step), None)
        if arrival is not None:
            latencies.append(arrival - at)
    lat = np.array(latencies)
    return {
        "seconds": seconds,
        "histograms_per_second": rate,
        "parameters": parameters,
        "interval": interval,
        "steps_written": len(flushed),
        "updates": len(seen),
        "bytes": max((update.get("bytes") or 0) for _, update in seen),
        "cpu_share_steady": (end_cpu - steady_cpu) / (steady_to - steady_from),
        "cpu_share_total": end_cpu / (steady_to - watch_started),
        "latency_median": float(np.median(lat)),
        "latency_p95": float(np.percentile(lat, 95)),
        "latency_max": float(lat.max()),
        "steps_unseen": len(flushed) - len(latencies),
        "watch_status": watch.returncode,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--rate", type=float, default=100.0, help="histograms a second")
    parser.add_argument("--parameters", type=int, default=10)
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument("--json", metavar="FILE", help="also write the figures to FILE")
    parser.add_argument("--write", metavar="FOLDER", help=argparse.SUPPRESS)  # the writer
    args = parser.parse_args()
    if args.write:
        write(Path(args.write), args.rate, args.parameters, args.seconds)
        return 0
    import tempfile

    with tempfile.TemporaryDirectory(prefix="gradcheck-watch-bench-") as folder:
        result = measure(args.seconds, args.rate, args.parameters, args.interval, Path(folder))
    for key, value in result.items():
        print(f"{key:>24}: {value:.4g}" if isinstance(value, float) else f"{key:>24}: {value}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
