"""``gradcheck export``: the long table in parquet, CSV and JSON Lines, by the real command.

The numbers are checked against tbparse's frames of the same files (real writers' files in
``tests/data/writers``: Keras, PyTorch, tensorboardX, TF2), against ``gradcheck.read`` for the
other log formats (the real libraries' logs of ``tests/support/library_runs.py``), and between the
three formats, bit for bit; NaN and infinities from a real PyTorch run stay what they were;
names from the logs stay data (exact in parquet and JSON Lines, formula-guarded in CSV); the
export holds one chunk at a time.
"""

from __future__ import annotations

import csv
import gc
import io
import json
import math
import os
import tracemalloc
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import gradcheck
from gradcheck import cli
from gradcheck.cli.status import ExitStatus
from gradcheck.export import export
from gradcheck.export.table import TABLE_COLUMNS, TEXT_COLUMNS
from gradcheck.model import HistogramRecord, ScalarRecord
from gradcheck.report.escape import FORMULA_STARTS, csv_text
from gradcheck.report.interface import Env
from tests.support import eventfiles as ef
from tests.support.library_runs import FORMATS as SOURCE_FORMATS
from tests.support.library_runs import LibraryLogs, run_path, the_run

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import tbparse  # noqa: E402  (a dev dependency: a failing import must not turn into a skip)

from tests.support.hostile import HOSTILE_PARAMETERS
from tests.support.paths import TEST_DATA

pytestmark = pytest.mark.filterwarnings("ignore:The inplace keyword")  # inside tbparse

WRITERS = TEST_DATA / "writers"
FORMATS = ("parquet", "csv", "jsonl")
BUCKETS = ("limits", "counts")


def run_export(*args: str, env: Env | None = None) -> tuple[int, bytes, str]:
    """``gradcheck export ARGS``: exit status, stdout bytes, stderr."""
    result = CliRunner().invoke(cli.cli, ["export", *args], obj=env or Env())
    return result.exit_code, result.stdout_bytes, result.stderr


def read_back(path: Path) -> pd.DataFrame:
    """An exported file as a DataFrame whose bucket cells are arrays (None on scalar rows)."""
    if path.suffix == ".parquet":
        table = pd.read_parquet(path)
        for name in ("limits", "counts"):
            table[name] = [None if a is None else np.asarray(a) for a in table[name]]
        return table
    if path.suffix == ".jsonl":
        rows = [json.loads(line) for line in path.read_text(encoding="ascii").splitlines()]
        table = pd.DataFrame(rows, columns=list(TABLE_COLUMNS))
    else:
        missing = {name: ["", "nan"] for name in TABLE_COLUMNS if name not in TEXT_COLUMNS}
        table = pd.read_csv(path, keep_default_na=False, na_values=missing, dtype=str)
        numbers = [name for name in TABLE_COLUMNS if name not in (*TEXT_COLUMNS, *BUCKETS)]
        table[numbers] = table[numbers].replace({"True": "1", "False": "0"}).astype(float)
        for name in ("limits", "counts"):
            table[name] = [None if pd.isna(cell) else json.loads(cell) for cell in table[name]]
    for name in ("limits", "counts"):
        table[name] = [None if a is None else np.asarray(a, dtype=np.float64) for a in table[name]]
    return table


def same_numbers(a: pd.Series, b: pd.Series) -> bool:
    """Equal float64 columns, NaN where NaN (bit for bit apart from NaN's payload)."""
    x, y = a.to_numpy(dtype=np.float64), b.to_numpy(dtype=np.float64)
    return bool(np.array_equal(x, y, equal_nan=True))


def same_arrays(a: pd.Series, b: pd.Series) -> bool:
    return all(
        (p is None and q is None)
        or (p is not None and q is not None and np.array_equal(p, q, equal_nan=True))
        for p, q in zip(a, b, strict=True)
    )


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, pd.DataFrame]:
    """``tests/data/writers`` exported by the command in each format, read back."""
    out = tmp_path_factory.mktemp("export")
    tables = {}
    for format_name in FORMATS:
        path = out / f"writers.{format_name}"
        status, _, stderr = run_export(str(WRITERS), "-o", str(path))
        assert status == ExitStatus.OK, stderr
        assert stderr.endswith(f"of 5 runs to {path}\n")
        tables[format_name] = read_back(path)
    return tables


@pytest.mark.parametrize("format_name", FORMATS)
def test_every_format_holds_the_frame_exactly(
    exported: dict[str, pd.DataFrame], format_name: str
) -> None:
    frame = gradcheck.frame(str(WRITERS))
    table = exported[format_name]
    assert list(table.columns) == list(TABLE_COLUMNS) == list(frame.columns)
    assert len(table) == len(frame) == 17 + 23
    for name in TABLE_COLUMNS:
        if name in TEXT_COLUMNS:
            assert list(table[name]) == list(frame[name]), name
        elif name in ("limits", "counts"):
            assert same_arrays(table[name], frame[name]), name
        elif name == "l2_norm_exact":
            assert list(table[name].astype(bool)) == list(frame[name]), name
        else:
            assert same_numbers(table[name], frame[name]), name


Key = tuple[str, str, int]


def as_text(*numbers: float | None) -> tuple[str, ...]:
    """Numbers as their repr: NaN equals NaN."""
    return tuple(repr(None if number is None else float(number)) for number in numbers)


def finite_or_none(*bounds: float) -> tuple[float | None, ...]:
    """A proto's min and max, None for a tensor that held a NaN: there the table's ``min``
    and ``max`` are the statistics' (the finite values' range), where tbparse shows NaN."""
    if all(math.isfinite(bound) for bound in bounds):
        return bounds
    return (None,) * len(bounds)


def tbparse_histograms() -> dict[Key, list[tuple[str, ...]]]:
    """tbparse's histograms (HistogramProto) and TF2 histogram tensors (through its
    ``tensor_to_histogram``) by (dir_name, tag, step): limits, counts and the proto fields."""
    columns = {"dir_name", "min", "max", "num", "sum", "sum_squares"}
    reader = tbparse.SummaryReader(str(WRITERS), extra_columns=columns)
    found: dict[Key, list[tuple[str, ...]]] = defaultdict(list)
    for row in reader.histograms.itertuples():
        fields = (*finite_or_none(row.min, row.max), row.num, row.sum, row.sum_squares)
        found[(row.dir_name, row.tag, int(row.step))].append(
            as_text(*row.limits, *row.counts, *fields)
        )
    for row in reader.tensors.itertuples():
        tensor = np.asarray(row.value)
        if tensor.ndim == 2 and tensor.shape[1] == 3:
            converted = tbparse.SummaryReader.tensor_to_histogram(tensor)
            found[(row.dir_name, row.tag, int(row.step))].append(
                as_text(*converted["limits"], *converted["counts"])
            )
    return found


def test_histograms_are_tbparse_s_limits_counts_and_proto_fields(
    exported: dict[str, pd.DataFrame],
) -> None:
    theirs = tbparse_histograms()
    for format_name, table in exported.items():
        ours: dict[Key, list[tuple[str, ...]]] = defaultdict(list)
        for row in table[table.kind == "histogram"].itertuples():
            bounds = (row.min, row.max) if math.isfinite(row.sum_squares) else (None, None)
            fields = (*bounds, row.num, row.sum, row.sum_squares)
            proto = fields if row.encoding == "histo" else ()
            ours[(row.dir_name, row.tag, int(row.step))].append(
                as_text(*row.limits, *row.counts, *proto)
            )
        assert {key: sorted(v) for key, v in ours.items()} == {
            key: sorted(v) for key, v in theirs.items()
        }, format_name
        assert sum(map(len, ours.values())) == 23


def test_scalars_are_tbparse_s_steps_values_and_wall_times(
    exported: dict[str, pd.DataFrame],
) -> None:
    reader = tbparse.SummaryReader(str(WRITERS), extra_columns={"dir_name", "wall_time"})
    theirs = sorted(
        (row.dir_name, row.tag, int(row.step), float(row.value), float(row.wall_time))
        for row in reader.scalars.itertuples()
    )
    for row in reader.tensors.itertuples():  # TF2 scalars are tensors to tbparse
        value = np.asarray(row.value)
        if value.size == 1 and value.dtype.kind == "f":
            theirs.append((row.dir_name, row.tag, int(row.step), float(value), float("nan")))
    for format_name, table in exported.items():
        scalars = table[table.kind == "scalar"]
        ours = sorted(
            (row.dir_name, row.tag, int(row.step), float(row.value), float(row.wall_time))
            for row in scalars.itertuples()
        )
        assert len(ours) == 17, format_name
        # tbparse's tensors frame has no wall time: compare those on the rest of the row
        assert [row[:4] for row in ours] == [row[:4] for row in sorted(theirs)], format_name
        with_times = {row for row in theirs if not math.isnan(row[4])}
        assert with_times <= set(ours), format_name


def test_dir_name_is_the_run_relative_to_the_path_given(exported: dict[str, pd.DataFrame]) -> None:
    table = exported["parquet"]
    assert set(table["dir_name"]) == {
        "keras_callback/train", "keras_callback/validation", "pytorch", "tensorboardx",
        "tf2_summary",
    }  # fmt: skip
    assert set(table["format"]) == {"tensorboard"}
    status, out, _ = run_export(str(WRITERS / "pytorch"))
    assert status == ExitStatus.OK
    assert {json.loads(line)["dir_name"] for line in out.splitlines()} == {""}


# --- NaN and infinities from a real writer ---------------------------------------------------


@pytest.fixture(scope="module")
def broken_torch_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A PyTorch run whose gradients hold a NaN and an Inf at step 1, logged by
    ``gradcheck.torch.log_gradients`` through ``SummaryWriter``, and a loss of inf then nan."""
    torch = pytest.importorskip("torch")
    from torch.utils.tensorboard import SummaryWriter

    from gradcheck.torch import log_gradients

    path = tmp_path_factory.mktemp("torch_nan")
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    with SummaryWriter(str(path)) as writer:
        for step, loss in enumerate((1.0, float("inf"), float("nan"))):
            model.zero_grad()
            model(torch.randn(3, 4)).sum().backward()
            if step == 1:
                model.weight.grad[0, 0] = float("nan")
                model.bias.grad[1] = float("inf")
            log_gradients(writer, model, step)
            writer.add_scalar("loss", loss, step)
    return path


@pytest.mark.parametrize("format_name", FORMATS)
def test_nan_and_inf_stay_what_they_were(
    broken_torch_run: Path, format_name: str, tmp_path: Path
) -> None:
    path = tmp_path / f"out.{format_name}"
    status, _, stderr = run_export(str(broken_torch_run), "-o", str(path))
    assert status == ExitStatus.OK, stderr
    table = read_back(path).set_index(["tag", "step"])
    loss = table.loc["loss"]["value"]
    assert loss.loc[0] == 1.0 and loss.loc[1] == math.inf and math.isnan(loss.loc[2])
    assert math.isnan(table.loc[("gradient_norm/global", 1), "value"])
    assert table.loc[("gradient_norm/bias", 1), "value"] == math.inf
    assert table.loc[("gradient_nonfinite/global", 1), "value"] == 2.0
    grad = table.loc[("gradients/weight", 1)]
    assert math.isnan(grad["sum"]) and math.isnan(grad["min"]) is False  # finite buckets' min
    assert grad["num"] == 8 and grad["counts"].sum() == 7  # the NaN is in no bucket
    assert grad["nonfinite_share"] == pytest.approx(1 / 8)
    frame = gradcheck.frame(str(broken_torch_run)).set_index(["tag", "step"])
    assert same_numbers(table["value"], frame["value"])
    assert same_numbers(table["sum_squares"], frame["sum_squares"])


def test_jsonl_writes_nan_and_null_apart(broken_torch_run: Path) -> None:
    """NaN is a NaN logged; null a column without meaning on the row."""
    status, out, _ = run_export(str(broken_torch_run))
    assert status == ExitStatus.OK
    rows = [json.loads(line) for line in out.decode("ascii").splitlines()]
    loss = next(row for row in rows if row["tag"] == "loss" and row["step"] == 2)
    assert math.isnan(loss["value"]) and loss["l2_norm"] is None and loss["limits"] is None
    histogram = next(row for row in rows if row["kind"] == "histogram")
    assert histogram["value"] is None and isinstance(histogram["limits"], list)
    assert b"NaN" in out and b"Infinity" in out


# --- the other log formats ------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("source", SOURCE_FORMATS)
def test_other_log_formats_export_every_value_they_hold(
    library_logs: LibraryLogs, source: str, tmp_path: Path
) -> None:
    """The NaN run of each format: every scalar and histogram ``gradcheck.read`` gives, the
    format named, W&B's histogram buckets as tbparse gives a TF2 tensor's."""
    run = the_run(library_logs, source, "nan")
    where = run_path(library_logs, source, "nan")
    path = tmp_path / "nan.parquet"
    assert run_export(str(where), "-o", str(path))[0] == ExitStatus.OK
    table = read_back(path)
    table = table[table.run == run.path].reset_index(drop=True)
    records = [
        r for r in gradcheck.read(str(where)) if isinstance(r, (ScalarRecord, HistogramRecord))
    ]
    records = [r for r in records if r.run == run.path]
    assert len(table) == len(records) > 0
    assert set(table["format"]) == {source}
    assert list(table["tag"]) == [r.tag for r in records]
    assert list(table["step"]) == [r.step for r in records]
    values = [r.value if isinstance(r, ScalarRecord) else np.nan for r in records]
    assert np.array_equal(table["value"].to_numpy(), np.array(values), equal_nan=True)
    assert table["value"].isna().sum() > table["kind"].eq("histogram").sum()  # the NaNs logged
    for row, record in zip(table.itertuples(), records, strict=True):
        if isinstance(record, HistogramRecord):
            assert np.array_equal(row.limits, [record.left[0], *record.right])
            assert np.array_equal(row.counts, [0.0, *record.counts], equal_nan=True)
    if source == "wandb":
        assert table["kind"].eq("histogram").sum() > 0
    if source.startswith("mlflow"):
        assert set(table["dir_name"]) == {os.path.relpath(run.path, where)}


# --- names from the logs ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def hostile_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hostile")
    run = root / "=cmd|' -C calc'!A0"
    run.mkdir()
    values = [ef.simple_scalar(name, 1.5) for name in HOSTILE_PARAMETERS]
    values += [ef.histo_of(f"weights/{name}", np.linspace(-1, 1, 9)) for name in HOSTILE_PARAMETERS]
    ef.write_events(run / "events.out.tfevents.1", [ef.summary_event(0, values)])
    return root


def test_csv_guards_formulas_and_changes_nothing_else(hostile_log: Path, tmp_path: Path) -> None:
    path = tmp_path / "out.csv"
    assert run_export(str(hostile_log), "-o", str(path))[0] == ExitStatus.OK
    with open(path, encoding="utf-8", newline="") as stream:
        rows = list(csv.DictReader(stream))
    tags = [row["tag"] for row in rows]
    expected = [*HOSTILE_PARAMETERS, *(f"weights/{name}" for name in HOSTILE_PARAMETERS)]
    assert tags == [csv_text(name) for name in expected]
    for row in rows:
        for name in TEXT_COLUMNS:
            assert not row[name].startswith(FORMULA_STARTS), (name, row[name])
    assert {row["dir_name"] for row in rows} == {"'=cmd|' -C calc'!A0"}
    assert {row["value"] for row in rows[: len(HOSTILE_PARAMETERS)]} == {"1.5"}


@pytest.mark.parametrize("format_name", ["parquet", "jsonl"])
def test_data_formats_keep_names_exactly(
    hostile_log: Path, format_name: str, tmp_path: Path
) -> None:
    path = tmp_path / f"out.{format_name}"
    assert run_export(str(hostile_log), "-o", str(path))[0] == ExitStatus.OK
    table = read_back(path)
    expected = [*HOSTILE_PARAMETERS, *(f"weights/{name}" for name in HOSTILE_PARAMETERS)]
    assert list(table["tag"]) == expected
    assert set(table["dir_name"]) == {"=cmd|' -C calc'!A0"}
    if format_name == "jsonl":
        assert path.read_bytes().isascii()  # no escape sequence or bidi override as such


def test_csv_on_a_terminal_shows_control_characters_escaped(hostile_log: Path) -> None:
    status, out, _ = run_export(str(hostile_log), "--format", "csv", env=Env(stdout_isatty=True))
    assert status == ExitStatus.OK
    text = out.decode("utf-8")
    assert "\x1b" not in text and "\u202e" not in text and "\x9b" not in text
    assert "clear\\x1b[2J" in text


# --- streaming ------------------------------------------------------------------------------


def test_chunks_make_the_same_table_and_one_row_group_each(tmp_path: Path) -> None:
    whole, parts = io.BytesIO(), tmp_path / "parts.parquet"
    export([str(WRITERS)], whole, "parquet")
    with open(parts, "wb") as stream:
        summary = export([str(WRITERS)], stream, "parquet", chunk_rows=7)
    assert pq.ParquetFile(parts).num_row_groups == math.ceil(40 / 7)
    assert (summary.rows, summary.scalars, summary.histograms) == (40, 17, 23)
    a, b = pd.read_parquet(whole), pd.read_parquet(parts)
    assert a.drop(columns=["limits", "counts"]).equals(b.drop(columns=["limits", "counts"]))
    for name in ("limits", "counts"):
        assert same_arrays(a[name], b[name]) and a[name].notna().sum() == 23


def test_memory_holds_one_chunk_not_the_sweep(tmp_path: Path) -> None:
    """8 runs of 30 histograms of 1,500 buckets (~6 MB of bucket arrays in a frame): the
    export in chunks of 6,000 buckets peaks at no more for the 8 runs than for one, and at
    a fraction of what the frame holds."""
    values = np.random.default_rng(0).normal(size=3000)
    histogram = ef.histo_of("w", values, bins=1500)
    for run in range(8):
        events = [ef.summary_event(step, [histogram] * 3) for step in range(10)]
        ef.write_events(tmp_path / f"run{run}" / "events.out.tfevents.1", events)

    def peak(action: Callable[[], object]) -> int:
        tracemalloc.start()
        action()
        _, high = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        return high

    def export_peak(path: Path) -> int:
        with open(tmp_path / "out.jsonl", "wb") as stream:
            return peak(lambda: export([str(path)], stream, "jsonl", chunk_buckets=6_000))

    one_run = export_peak(tmp_path / "run0")  # modules imported before, as for the rest
    sweep = export_peak(tmp_path)
    frame = peak(lambda: gradcheck.frame(str(tmp_path)))
    assert frame > 6e6
    assert sweep < 1.2 * one_run and sweep < frame / 2, (one_run, sweep, frame)


# --- the command ----------------------------------------------------------------------------


def test_stdout_is_json_lines_by_default_and_csv_on_request() -> None:
    status, out, stderr = run_export(str(WRITERS / "pytorch"), "-o", "-")
    assert status == ExitStatus.OK and stderr == ""
    assert len(out.splitlines()) == 7 and json.loads(out.splitlines()[0])["tag"] == "fc.weight"
    status, out, _ = run_export(str(WRITERS / "pytorch"), "--format", "csv")
    assert out.startswith(b'"run","dir_name","format","file","tag",')
    assert len(out.splitlines()) == 8


def test_format_flag_wins_over_the_ending(tmp_path: Path) -> None:
    path = tmp_path / "table.txt"
    status, _, stderr = run_export(str(WRITERS / "pytorch"), "-o", str(path))
    assert status == ExitStatus.INPUT_ERROR and not path.exists()
    assert "cannot tell the format of" in stderr and "--format" in stderr
    assert run_export(str(WRITERS / "pytorch"), "-o", str(path), "--format", "csv")[0] == 0
    assert path.read_text().startswith('"run"')


def test_parquet_is_refused_on_a_terminal_and_written_to_a_pipe() -> None:
    status, out, stderr = run_export(
        str(WRITERS / "pytorch"), "--format", "parquet", env=Env(stdout_isatty=True)
    )
    assert status == ExitStatus.INPUT_ERROR and out == b""
    assert "parquet is binary: write it to a file" in stderr
    status, out, _ = run_export(str(WRITERS / "pytorch"), "--format", "parquet")
    assert status == ExitStatus.OK and len(pd.read_parquet(io.BytesIO(out))) == 7


def test_a_failed_export_leaves_the_file_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gradcheck.export import jsonl

    path = tmp_path / "table.jsonl"
    path.write_text("before\n")

    def interrupted(self: object, table: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(jsonl.JsonLinesWriter, "write", interrupted)
    status, _, stderr = run_export(str(WRITERS), "-o", str(path))
    assert status == ExitStatus.INTERRUPTED and "interrupted" in stderr
    assert path.read_text() == "before\n" and os.listdir(tmp_path) == ["table.jsonl"]


def test_missing_path_and_unwritable_file_are_status_2(tmp_path: Path) -> None:
    status, _, stderr = run_export(str(tmp_path / "missing"), "-o", str(tmp_path / "t.csv"))
    assert status == ExitStatus.INPUT_ERROR and "does not exist" in stderr
    assert not (tmp_path / "t.csv").exists()
    status, _, stderr = run_export(str(WRITERS), "-o", str(tmp_path / "no" / "t.csv"))
    assert status == ExitStatus.INPUT_ERROR
    assert stderr.startswith(f"gradcheck: error: cannot write {tmp_path / 'no' / 't.csv'}: ")


def test_a_log_without_values_is_an_empty_table_and_a_warning(tmp_path: Path) -> None:
    ef.write_events(tmp_path / "run" / "events.out.tfevents.1", [ef.file_version()])
    for format_name in FORMATS:
        path = tmp_path / f"empty.{format_name}"
        status, _, stderr = run_export(str(tmp_path / "run"), "-o", str(path))
        assert status == ExitStatus.OK
        assert "no scalar or histogram in 1 run: the table is empty" in stderr
        assert "wrote 0 rows (0 scalars, 0 histograms) of 1 run" in stderr
        table = read_back(path)
        assert table.empty and list(table.columns) == list(TABLE_COLUMNS)


def test_damage_is_said_on_stderr_and_the_rest_exported(tmp_path: Path) -> None:
    path = tmp_path / "run" / "events.out.tfevents.1"
    ef.write_events(path, [ef.summary_event(s, [ef.simple_scalar("x", s)]) for s in range(3)])
    path.write_bytes(path.read_bytes()[:-5])
    status, out, stderr = run_export(str(tmp_path))
    assert status == ExitStatus.OK
    assert [json.loads(line)["step"] for line in out.splitlines()] == [0, 1]
    assert stderr.startswith(f"gradcheck: warning: {path}: incomplete final record, at byte ")


class GoneAfter(io.BytesIO):
    """A pipe whose reader goes away after ``limit`` bytes (``| head -c``)."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def write(self, data: bytes) -> int:  # type: ignore[override]
        if self.tell() + len(data) > self.limit:
            raise BrokenPipeError(32, "Broken pipe")
        return super().write(data)


@pytest.mark.parametrize("format_name", FORMATS)
def test_a_reader_gone_from_the_pipe_leaves_the_stream_to_its_owner(format_name: str) -> None:
    """The writers never close the stream they were given, even when a write fails and they
    are collected (pyarrow's writer closes its sink then): stdout must stay open to be
    flushed at exit."""
    stream = GoneAfter(2_000)
    with pytest.raises(BrokenPipeError):
        export([str(WRITERS)], stream, format_name)
    gc.collect()
    assert not stream.closed and len(stream.getvalue()) <= 2_000
