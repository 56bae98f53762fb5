"""Reference readers, each in its own process: ``python bench/readers.py NAME PATH``.

- ``bare``: the TFRecord framing read with ``struct`` from a buffered file, each payload parsed
  with ``event_pb2.Event.FromString``; no CRC check, nothing kept (the issue's bare loop).
- ``tbparse``: ``SummaryReader(path, pivot=False)`` and its histograms, scalars and tensors
  frames (TF2 histograms and scalars are tensors to tbparse).
- ``accumulator``: ``EventAccumulator(path, size_guidance=0 for every kind).Reload()``, then
  every histogram, scalar and tensor fetched (tensors converted with ``make_ndarray``).
- ``accumulator-notf``: the same with ``import tensorflow`` made to fail, so tensorboard falls
  back to its pure-Python record reader and CRC (what a user without TensorFlow gets).
- ``gradcheck-read``: iterate ``gradcheck.read(path)`` (the reader alone, no statistics).
- ``gradcheck-load``, ``gradcheck-judge``: the stages of ``gradcheck analyze --jobs 1``, each
  stopped earlier (the sweep series' floor by stage): with the imports of ``analyze --format
  json`` (the ``imports`` reader's), ``gradcheck-load`` reads every run (C engine: framing,
  CRCs, statistics, series), ``gradcheck-judge`` reads and judges them (verdicts and the
  report object, not its JSON text). Both end with ``os._exit``, as the CLI does.
- ``rust``, ``rust-checksum``: TensorBoard's Rust data server (``tensorboard_data_server``,
  "rustboard") loading the directory once, every sample kept, without and with ``--checksum``
  (it checks a record's CRC only when the record fails to parse, by default). It runs as its
  own process (``rust_command``), timed from its start to its "Finished load cycle" line
  (``bench/run.py`` runs the binary itself, see ``measure.run_measured``'s ``ready``); this
  script reports that time, then loads the logs again and counts the values the server holds
  over its gRPC interface (``rust_values``).

PATH is a directory (its event files, its run directories' too, read in path order) or one
event file. The reader prints one JSON line: values seen, import time and time after imports.
"""

from __future__ import annotations

import json
import os
import struct
import sys
import time
from collections.abc import Callable
from pathlib import Path

_IMPORT_STARTED = time.perf_counter()


def event_files(path: str) -> list[str]:
    """The event files at ``path``: a file, or the ``*tfevents*`` files under a directory
    (its run directories' too), by path."""
    if os.path.isfile(path):
        return [path]
    return sorted(str(p) for p in Path(path).rglob("*tfevents*") if p.is_file())


def bare(path: str) -> dict[str, int]:
    """Frame with struct, parse every payload as an Event; count summary values."""
    from tensorboard.compat.proto import event_pb2

    mark = time.perf_counter()
    parse = event_pb2.Event.FromString
    unpack = struct.Struct("<Q").unpack
    events = values = 0
    for file in event_files(path):
        with open(file, "rb") as stream:
            while True:
                header = stream.read(12)
                if len(header) < 12:
                    break
                (length,) = unpack(header[:8])
                payload = stream.read(length)
                stream.read(4)
                if len(payload) < length:
                    break
                event = parse(payload)
                events += 1
                values += len(event.summary.value)
    return {"events": events, "values": values, "_work_started": mark}  # type: ignore[dict-item]


def tbparse(path: str) -> dict[str, int]:
    """tbparse's long-format frames (it parses everything up front)."""
    from tbparse import SummaryReader

    mark = time.perf_counter()
    reader = SummaryReader(path, pivot=False)
    histograms, scalars, tensors = reader.histograms, reader.scalars, reader.tensors
    return {
        "values": len(histograms) + len(scalars) + len(tensors),
        "_work_started": mark,  # type: ignore[dict-item]
    }


def accumulator(path: str) -> dict[str, int]:
    """tensorboard's EventAccumulator keeping everything, then every value fetched."""
    from tensorboard.backend.event_processing import event_accumulator as ea
    from tensorboard.util import tensor_util

    mark = time.perf_counter()
    kinds = (ea.COMPRESSED_HISTOGRAMS, ea.IMAGES, ea.AUDIO, ea.SCALARS, ea.HISTOGRAMS, ea.TENSORS)
    acc = ea.EventAccumulator(path, size_guidance={kind: 0 for kind in kinds})
    acc.Reload()
    tags = acc.Tags()
    values = sum(len(acc.Histograms(tag)) for tag in tags[ea.HISTOGRAMS])
    values += sum(len(acc.Scalars(tag)) for tag in tags[ea.SCALARS])
    for tag in tags[ea.TENSORS]:
        arrays = [tensor_util.make_ndarray(event.tensor_proto) for event in acc.Tensors(tag)]
        values += len(arrays)
    return {"values": values, "_work_started": mark}  # type: ignore[dict-item]


def accumulator_without_tensorflow(path: str) -> dict[str, int]:
    """EventAccumulator as a user without TensorFlow runs it (pure-Python CRC)."""
    sys.modules["tensorflow"] = None  # type: ignore[assignment]  # import tensorflow fails
    return accumulator(path)


def gradcheck_read(path: str) -> dict[str, int]:
    """gradcheck's reader alone: every record, no statistics."""
    import gradcheck

    mark = time.perf_counter()
    counts: dict[str, int] = {}
    for record in gradcheck.read(path):
        kind = type(record).__name__
        counts[kind] = counts.get(kind, 0) + 1
    values = counts.get("HistogramRecord", 0) + counts.get("ScalarRecord", 0)
    return {"values": values, **counts, "_work_started": mark}  # type: ignore[dict-item]


def _gradcheck_stages(path: str, judge: bool) -> dict[str, int]:
    """``gradcheck analyze PATH --jobs 1`` up to its stage: read every run (``judge``: and
    judge it), with the imports the CLI's JSON report needs (so that a stage's time less the
    ``imports`` reader's is that stage's); counts the values read."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as gradcheck's entry point does
    import gradcheck.cli  # the imports of analyze --format json

    gradcheck.cli.collect_less_often()  # as gradcheck's entry point does
    import gradcheck.report.json_format  # noqa: F401
    from gradcheck import pipeline
    from gradcheck.config import DEFAULT_CONFIG
    from gradcheck.engine.pool import Workers
    from gradcheck.engine.read import read_runs
    from gradcheck.events.discover import discover
    from gradcheck.events.steps import StepWindow
    from gradcheck.tags import DEFAULT_RULES

    mark = time.perf_counter()
    runs = discover([path])
    with Workers(1) as workers:  # as analyze --jobs 1: no process pool
        parts = read_runs(runs, StepWindow(), None, workers)
        reports = (
            [  # as analyze --format json: no per-step chart series
                pipeline.analyze_parts(run, run_parts, DEFAULT_CONFIG, DEFAULT_RULES, charts=False)
                for run, run_parts in zip(runs, parts, strict=True)
            ]
            if judge
            else None
        )
    values = sum(
        sum(s.histograms_read for s in part.data.histograms.values())
        + sum(len(s) for s in part.data.scalars.values())
        for run_parts in parts
        for part in run_parts
    )
    result = {"values": values, "runs": len(runs), "_work_started": mark}
    if reports is not None:
        report = pipeline.report_of(reports)
        result["layers"] = sum(len(run.layers) for run in report.runs)
    return result  # type: ignore[return-value]


RUST_READY = "Finished load cycle"
"""What the Rust data server logs (at ``--verbose``) once it has read every file in the logdir."""
RUST_KEEP_ALL = "scalars=all,histograms=all,tensors=all"
"""``--samples-per-plugin``: keep every sample (its default downsamples: 1,000 scalars and 500
histograms per series are kept at random), as gradcheck and the other readers do."""


def rust_server() -> str:
    """The Rust data server's binary, as the ``tensorboard-data-server`` package ships it."""
    import tensorboard_data_server

    binary = tensorboard_data_server.server_binary()
    if binary is None:
        raise RuntimeError("tensorboard-data-server has no binary for this platform")
    return str(binary)


def rust_command(path: str, checksum: bool) -> list[str]:
    """The Rust data server loading ``path`` once on 127.0.0.1 (any free port), every sample
    kept, logging its load cycle to stderr, and exiting when its stdin closes."""
    return [
        rust_server(),
        "--logdir",
        path,
        "--reload",
        "once",
        "--host",
        "127.0.0.1",
        "--port",
        "0",
        "--samples-per-plugin",
        RUST_KEEP_ALL,
        "--verbose",
        "--die-after-stdin",
        "--checksum" if checksum else "--no-checksum",
    ]


def rust_values(path: str) -> int:
    """The scalars and histograms the Rust data server holds once it has loaded ``path``
    (every one, with ``RUST_KEEP_ALL``), counted over its gRPC interface."""
    import subprocess

    import grpc
    from tensorboard.data.proto import data_provider_pb2, data_provider_pb2_grpc

    server = subprocess.Popen(
        rust_command(path, checksum=False),
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    assert server.stderr is not None and server.stdin is not None
    try:
        port = ""
        for line in server.stderr:
            text = line.decode(errors="replace")
            if text.startswith("listening on "):
                port = text.rsplit(":", 1)[1].strip()
            if RUST_READY in text:
                break
        else:
            raise RuntimeError(f"the Rust data server ended before loading {path}")
        options = [("grpc.max_receive_message_length", -1)]
        with grpc.insecure_channel(f"127.0.0.1:{port}", options=options) as channel:
            stub = data_provider_pb2_grpc.TensorBoardDataProviderStub(channel)
            values = 0
            for plugin, read, request in (
                ("scalars", stub.ReadScalars, data_provider_pb2.ReadScalarsRequest()),
                ("histograms", stub.ReadTensors, data_provider_pb2.ReadTensorsRequest()),
            ):
                request.plugin_filter.plugin_name = plugin
                request.downsample.num_points = 1 << 40
                response = read(request)
                values += sum(len(tag.data.step) for run in response.runs for tag in run.tags)
        return values
    finally:
        server.stdin.close()
        server.wait(timeout=60)


def _rust(path: str, checksum: bool) -> dict[str, int]:
    """The server's load time (as ``bench/run.py`` measures it), then its values counted."""
    import tempfile

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from bench.measure import run_measured

    with tempfile.TemporaryDirectory() as scratch:
        measured = run_measured(
            rust_command(path, checksum),
            os.environ,
            Path.cwd(),
            Path(scratch) / "out",
            3600,
            RUST_READY,
        )
    if measured.returncode != 0:
        raise RuntimeError(f"the Rust data server did not finish loading: {measured.stderr_tail}")
    mark = time.perf_counter()
    return {
        "values": rust_values(path),
        "load_seconds": round(measured.wall_seconds, 4),  # type: ignore[dict-item]
        "peak_mb": round(measured.max_rss_mb, 1),  # type: ignore[dict-item]
        "_work_started": mark,  # type: ignore[dict-item]
    }


READERS: dict[str, Callable[[str], dict[str, int]]] = {
    "rust": lambda path: _rust(path, checksum=False),
    "rust-checksum": lambda path: _rust(path, checksum=True),
    "bare": bare,
    "tbparse": tbparse,
    "accumulator": accumulator,
    "accumulator-notf": accumulator_without_tensorflow,
    "gradcheck-read": gradcheck_read,
    "gradcheck-load": lambda path: _gradcheck_stages(path, judge=False),
    "gradcheck-judge": lambda path: _gradcheck_stages(path, judge=True),
}
EXITS_AT_ONCE = ("gradcheck-load", "gradcheck-judge")
"""Readers that end with ``os._exit`` once their line is printed, as ``gradcheck`` does (the
interpreter's teardown is no stage of gradcheck's)."""


def main(argv: list[str]) -> int:
    """``NAME PATH``: run one reader and print its JSON line."""
    if len(argv) != 2 or argv[0] not in READERS:
        print(f"usage: readers.py {{{','.join(READERS)}}} PATH", file=sys.stderr)
        return 2
    name, path = argv
    result = READERS[name](path)
    finished = time.perf_counter()
    work_started = float(result.pop("_work_started"))
    line = {
        "reader": name,
        **result,
        "import_seconds": round(work_started - _IMPORT_STARTED, 4),
        "work_seconds": round(finished - work_started, 4),
    }
    print(json.dumps(line), flush=True)
    if name in EXITS_AT_ONCE:
        sys.stderr.flush()
        os._exit(0)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
