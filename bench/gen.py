"""Write realistic TensorBoard logs for the benchmark (issue 6).

Datasets, each a run directory under ``bench/data/`` with a ``<name>.json`` beside it:

- ``tensor-<size>``: TF2 ``tf.summary.histogram`` style, ``[30, 3]`` DT_DOUBLE tensors, tags
  ``weights/<var>`` and ``gradients/<var>`` for a 64-variable Keras CNN, ``histograms`` plugin
  metadata on the first value of each tag only, scalar tensors ``loss`` and ``learning_rate``.
- ``histo-<size>``: PyTorch ``SummaryWriter.add_histogram`` style ``HistogramProto`` (min, max,
  num, sum, sum_squares, several hundred buckets), tags ``<param>`` and ``<param>.grad`` for
  ResNet-18, scalars ``Loss/train`` and ``lr`` as ``simple_value``.
- ``<encoding>-<n>x<size>``: the same run split over n files (a resumed run), and
  ``<encoding>-<n>runs<size>``: n runs of one file each (a sweep, ``run0`` ...), for the
  multi-core measurement.

One event per value, as real writers do, with realistic wall times; values evolve over steps
(see ``network.py``). Sizes are decimal (``40MB`` = 40e6 bytes): a file is written step by step
until it reaches its size. The framing is computed here with the C CRC32C and is byte-identical
to ``RecordWriter``'s (checked in ``tests/project/test_bench_guard.py``).

    python bench/gen.py --sizes 40MB,160MB,1GB --encodings tensor,histo \\
        --multi 4x40MB,4x250MB,4runs40MB
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import BinaryIO, Literal

if __package__ in (None, ""):  # run as a script: python bench/gen.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import encode  # noqa: E402
from bench.network import Parameter, ValueModel, keras_cnn, torch_resnet18  # noqa: E402

Encoding = Literal["tensor", "histo"]
ENCODINGS: tuple[Encoding, ...] = ("tensor", "histo")
GENERATOR_VERSION = 1  # bump when the output changes: run.py regenerates stale datasets
DATA_DIR = Path(__file__).resolve().parent / "data"
START_WALL_TIME = 1_717_000_000.0
HOST, PID = "benchhost", 4242


@dataclass(frozen=True)
class DatasetSpec:
    """What to write: encoding, bytes per file, number of files."""

    encoding: Encoding
    file_bytes: int
    files: int = 1
    runs: bool = False  # each file a run of its own (a sweep), not the next part of one run

    @property
    def name(self) -> str:
        size = format_size(self.file_bytes)
        if self.files == 1:
            return f"{self.encoding}-{size}"
        return f"{self.encoding}-{self.files}{'runs' if self.runs else 'x'}{size}"


@dataclass(frozen=True)
class DatasetInfo:
    """What was written (stored as ``<name>.json`` beside the run directory)."""

    name: str
    encoding: str
    directory: str
    files: tuple[str, ...]
    bytes: int
    steps: int
    histograms: int
    scalars: int
    parameters: int
    generator_version: int
    seconds: float


def parse_size(text: str) -> int:
    """``40MB``, ``1GB``, ``500kB`` or a plain number of bytes (decimal units)."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kMG]?B?)\s*", text, flags=re.IGNORECASE)
    if not match:
        raise ValueError(f"not a size: {text!r} (expected e.g. 40MB, 1GB)")
    units = {"": 1, "b": 1, "k": 1e3, "kb": 1e3, "m": 1e6, "mb": 1e6, "g": 1e9, "gb": 1e9}
    return int(float(match.group(1)) * units[match.group(2).lower()])


def format_size(size: int) -> str:
    """Inverse of ``parse_size`` for round sizes: 40000000 -> ``40MB``."""
    for unit, factor in (("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if size % factor == 0:
            return f"{size // factor}{unit}"
    return f"{size}B"


def parse_dataset(name: str) -> DatasetSpec:
    """``tensor-40MB``, ``histo-4x40MB`` (one run in 4 files) or ``tensor-4runs40MB`` (4 runs
    of one file each) -> spec."""
    match = re.fullmatch(r"(tensor|histo)-(?:(\d+)(x|runs))?(.+)", name)
    if not match:
        raise ValueError(
            f"not a dataset name: {name!r} (expected e.g. tensor-40MB, histo-4x40MB,"
            " tensor-4runs40MB)"
        )
    encoding: Encoding = "tensor" if match.group(1) == "tensor" else "histo"
    files, runs = int(match.group(2) or 1), match.group(3) == "runs"
    return DatasetSpec(encoding, parse_size(match.group(4)), files, runs and files > 1)


class RecordFile:
    """An event file being written: frames payloads, counts bytes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.size = 0
        self._stream: BinaryIO = open(path, "wb", buffering=1 << 24)  # noqa: SIM115

    def write(self, payload: bytes) -> None:
        """Append one record."""
        record = encode.frame(payload)
        self._stream.write(record)
        self.size += len(record)

    def close(self) -> None:
        """Flush and close."""
        self._stream.close()


class Clock:
    """Wall times as a training loop produces them: ~0.3 s per step, tens of µs per event."""

    def __init__(self, model: ValueModel) -> None:
        self.rng = model.rng
        self.now = START_WALL_TIME

    def start_step(self) -> None:
        self.now += float(self.rng.uniform(0.2, 0.4))

    def tick(self) -> float:
        self.now += float(self.rng.uniform(1.5e-5, 4e-5))
        return self.now


def _tensor_step(
    model: ValueModel, clock: Clock, step: int, first: set[str]
) -> Iterator[tuple[str, bytes]]:
    """One step of a TF2 custom loop: weight and gradient histogram per variable, scalars."""
    values = model.step(step)
    weights = encode.tf2_buckets(values.weights, values.valid, values.weight)
    gradients = encode.tf2_buckets(values.gradients, values.valid, values.weight)
    for index, param in enumerate(model.params):
        for tag, rows in (
            (f"weights/{param.name}", weights),
            (f"gradients/{param.name}", gradients),
        ):
            payload = encode.tensor_histogram_event(
                tag, clock.tick(), step, rows[index], tag not in first
            )
            first.add(tag)
            yield "histogram", payload
    learning_rate = 1e-3 * 0.5 ** (step // 2000)
    for tag, number in (("loss", model.loss(step)), ("learning_rate", learning_rate)):
        yield (
            "scalar",
            encode.tensor_scalar_event(tag, clock.tick(), step, number, tag not in first),
        )
        first.add(tag)


def _histo_step(
    model: ValueModel, clock: Clock, step: int, first: set[str]
) -> Iterator[tuple[str, bytes]]:
    """One step of a PyTorch loop: ``add_histogram`` of each parameter and its ``.grad``."""
    values = model.step(step)
    weights = encode.torch_histograms(values.weights, values.valid, values.weight)
    gradients = encode.torch_histograms(values.gradients, values.valid, values.weight)
    for index, param in enumerate(model.params):
        yield "histogram", encode.histo_event(param.name, clock.tick(), step, weights[index])
        yield (
            "histogram",
            encode.histo_event(f"{param.name}.grad", clock.tick(), step, gradients[index]),
        )
    learning_rate = 0.1 * 0.1 ** (step // 3000)
    yield "scalar", encode.simple_value_event("Loss/train", clock.tick(), step, model.loss(step))
    yield "scalar", encode.simple_value_event("lr", clock.tick(), step, learning_rate)


STYLES = {
    # encoding: (parameters, samples per parameter, file suffix, writer, step function)
    "tensor": (keras_cnn, 512, ".v2", "tensorflow.core.util.events_writer", _tensor_step),
    "histo": (
        torch_resnet18,
        4096,
        "",
        "tensorboard.summary.writer.event_file_writer",
        _histo_step,
    ),
}


def _file_name(wall_time: float, number: int, suffix: str) -> str:
    return f"events.out.tfevents.{math.floor(wall_time)}.{HOST}.{PID}.{number}{suffix}"


def write_dataset(directory: Path, spec: DatasetSpec, seed: int = 0) -> DatasetInfo:
    """Write ``spec`` into ``directory`` (created; old event files removed) and describe it.

    A sweep (``spec.runs``) puts each file in a run directory of its own (``run0``, ...), each
    run from step 0 with values of its own seed; ``steps`` then counts every run's steps."""
    started = time.perf_counter()
    directory.mkdir(parents=True, exist_ok=True)
    for old in directory.rglob("*tfevents*"):
        old.unlink()
    make_params, samples, suffix, writer_name, step_events = STYLES[spec.encoding]
    params: tuple[Parameter, ...] = make_params()
    model = ValueModel(params, samples, seed)
    clock = Clock(model)
    step, counts, paths, total = 0, {"histogram": 0, "scalar": 0}, [], 0
    run_start = 0
    for number in range(spec.files):
        where = directory
        if spec.runs:
            where = directory / f"run{number}"
            where.mkdir(exist_ok=True)
            model, run_start = ValueModel(params, samples, seed + number), step
            clock = Clock(model)
        path = where / _file_name(clock.now, number, suffix)
        out = RecordFile(path)
        out.write(encode.file_version_event(clock.tick(), writer_name))
        first: set[str] = set()
        while out.size < spec.file_bytes:
            clock.start_step()
            for kind, payload in step_events(model, clock, step - run_start, first):
                out.write(payload)
                counts[kind] += 1
            step += 1
        out.close()
        paths.append(str(path))
        total += out.size
    return DatasetInfo(
        name=spec.name,
        encoding=spec.encoding,
        directory=str(directory),
        files=tuple(paths),
        bytes=total,
        steps=step,
        histograms=counts["histogram"],
        scalars=counts["scalar"],
        parameters=len(params),
        generator_version=GENERATOR_VERSION,
        seconds=round(time.perf_counter() - started, 2),
    )


def info_path(data_dir: Path, name: str) -> Path:
    """Where a dataset's description is stored."""
    return data_dir / f"{name}.json"


def load_info(data_dir: Path, name: str) -> DatasetInfo | None:
    """The stored description of an up-to-date, complete dataset, else None."""
    path = info_path(data_dir, name)
    try:
        stored = json.loads(path.read_text())
        info = DatasetInfo(**{**stored, "files": tuple(stored["files"])})
    except (OSError, ValueError, TypeError, KeyError):
        return None
    if info.generator_version != GENERATOR_VERSION:
        return None
    if not all(Path(file).is_file() for file in info.files):
        return None
    return info


def ensure_dataset(data_dir: Path, name: str, force: bool = False) -> DatasetInfo:
    """The dataset ``name`` under ``data_dir``, written first if missing or stale."""
    if not force and (info := load_info(data_dir, name)) is not None:
        return info
    spec = parse_dataset(name)
    seed = sum(name.encode())
    info_path(data_dir, name).unlink(missing_ok=True)
    info = write_dataset(data_dir / name, spec, seed)
    info_path(data_dir, name).write_text(json.dumps(asdict(info), indent=1) + "\n")
    return info


def dataset_names(
    sizes: Sequence[str], encodings: Sequence[str], multi: Sequence[str]
) -> list[str]:
    """Names for every (encoding, size) and every multi-file layout (``4x40MB``: one run in 4
    files; ``4runs40MB``: 4 runs of one file)."""
    names = [f"{enc}-{format_size(parse_size(size))}" for enc in encodings for size in sizes]
    for layout in multi:
        match = re.fullmatch(r"(\d+)(x|runs)(.+)", layout.strip())
        if not match:
            raise ValueError(f"not a multi-file layout: {layout!r} (expected e.g. 4x40MB)")
        files, kind, size = int(match.group(1)), match.group(2), parse_size(match.group(3))
        names += [f"{enc}-{files}{kind}{format_size(size)}" for enc in encodings[:1]]
    return names


def _split(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: write the benchmark datasets that are missing or stale."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DATA_DIR, help="where datasets go")
    parser.add_argument("--sizes", default="40MB,160MB,1GB", help="comma list of file sizes")
    parser.add_argument("--encodings", default="tensor,histo", help="tensor, histo or both")
    parser.add_argument(
        "--multi",
        default="4x40MB,4x250MB,4runs40MB",
        help="multi-file layouts: 4x40MB (one run in 4 files), 4runs40MB (4 runs; first encoding)",
    )
    parser.add_argument("--force", action="store_true", help="rewrite even if up to date")
    args = parser.parse_args(argv)
    try:
        names = dataset_names(_split(args.sizes), _split(args.encodings), _split(args.multi))
        for name in names:
            parse_dataset(name)
    except ValueError as error:
        parser.error(str(error))
    for name in names:
        info = ensure_dataset(args.data, name, force=args.force)
        print(
            f"{info.name}: {len(info.files)} file(s), {info.bytes / 1e6:.1f} MB,"
            f" {info.steps} steps, {info.histograms} histograms, {info.scalars} scalars"
            f" ({info.seconds} s to write)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
