"""The log formats of ``gradcheck.sources`` on hand-made files: what each reads, how a run is
found and named, and what damage costs (only the damaged part, with a warning)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from gradcheck import sources
from gradcheck.events.discover import discover
from gradcheck.events.reader import read_run
from gradcheck.events.wire import message_fields
from gradcheck.model import Damage, FileInfo, HistogramRecord, Run, ScalarRecord
from gradcheck.pipeline import analyze
from gradcheck.series.reduce import reduce_records
from tests.support import eventfiles as ef
from tests.support import source_files as sf
from tests.support.as_event_file import write_as_event_file


def scalars(run: Run) -> dict[str, list[tuple[int, float]]]:
    found: dict[str, list[tuple[int, float]]] = {}
    for record in read_run(run):
        if isinstance(record, ScalarRecord):
            found.setdefault(record.tag, []).append((record.step, record.value))
    return found


def damages(run: Run) -> list[Damage]:
    return [record for record in read_run(run) if isinstance(record, Damage)]


def only_run(path: Path) -> Run:
    (run,) = discover([str(path)])
    return run


# --------------------------------------------------------------------------------------------
# HF Trainer
# --------------------------------------------------------------------------------------------


def test_hf_output_dir_is_one_run_and_each_step_is_read_once(tmp_path: Path) -> None:
    out = tmp_path / "out"
    sf.trainer_state(out / "checkpoint-5" / "trainer_state.json", sf.hf_entries(range(1, 6)))
    sf.trainer_state(out / "checkpoint-10" / "trainer_state.json", sf.hf_entries(range(1, 11)))
    sf.trainer_state(out / "trainer_state.json", sf.hf_entries(range(1, 13)))
    run = only_run(tmp_path)
    assert (run.path, run.format) == (str(out), "hf-trainer")
    assert run.files[0] == str(out / "trainer_state.json")  # the newest state first
    found = scalars(run)
    assert [step for step, _ in found["grad_norm"]] == list(range(1, 13))
    assert set(found) == {"epoch", "grad_norm", "learning_rate", "loss"}
    assert not damages(run)


def test_hf_half_written_state_costs_its_cut_entries_and_a_checkpoint_fills_in(
    tmp_path: Path,
) -> None:
    out = tmp_path / "out"
    sf.trainer_state(out / "checkpoint-8" / "trainer_state.json", sf.hf_entries(range(1, 9)))
    newest = sf.trainer_state(out / "trainer_state.json", sf.hf_entries(range(1, 13)))
    text = newest.read_text()
    cut = text.index('"step": 7')  # inside entry 7: entries 1-6 are whole
    newest.write_text(text[:cut])
    run = only_run(tmp_path)
    steps = [step for step, _ in scalars(run)["grad_norm"]]
    assert steps == list(range(1, 9))  # 1-6 from the cut file, 7-8 from checkpoint-8, once
    (damage,) = damages(run)
    assert damage.kind == "incomplete_tail" and damage.file == str(newest)
    assert "half-written log_history" in damage.message


def test_hf_damaged_entry_costs_that_entry(tmp_path: Path) -> None:
    state = sf.trainer_state(tmp_path / "trainer_state.json", sf.hf_entries(range(1, 6)))
    text = state.read_text()
    at = text.index('"grad_norm"', text.index('"step": 2'))  # entry 3's first key
    state.write_text(text[:at] + "#garbage#" + text[at + 3 :])
    run = only_run(tmp_path)
    assert [step for step, _ in scalars(run)["loss"]] == [1, 2, 4, 5]
    (damage,) = damages(run)
    assert damage.kind == "undecodable" and "that entry lost" in damage.message


def test_hf_nan_grad_norm_is_read_as_nan_and_judged(tmp_path: Path) -> None:
    entries = sf.hf_entries(range(1, 21))
    for entry in entries[14:]:
        entry["grad_norm"] = float("nan")
    sf.trainer_state(tmp_path / "out" / "trainer_state.json", entries)
    (report,) = analyze([str(tmp_path)], jobs=1).runs
    (row,) = report.layers
    assert (row.name, row.verdict, row.first_bad_step) == ("(global gradient norm)", "nan", 15)


def test_hf_checkpoint_given_is_a_run_of_its_own(tmp_path: Path) -> None:
    sf.trainer_state(tmp_path / "checkpoint-5" / "trainer_state.json", sf.hf_entries(range(1, 6)))
    run = only_run(tmp_path / "checkpoint-5")
    assert run.path == str(tmp_path / "checkpoint-5") and len(scalars(run)["loss"]) == 5


# --------------------------------------------------------------------------------------------
# Lightning CSVLogger
# --------------------------------------------------------------------------------------------

CSV_COLUMNS = ["epoch", "grad_2.0_norm/fc.weight", "grad_2.0_norm_total", "step", "train_loss"]


def test_lightning_cells_are_scalars_at_their_rows_step(tmp_path: Path) -> None:
    path = sf.metrics_csv(
        tmp_path / "lightning_logs" / "version_0" / "metrics.csv", CSV_COLUMNS,
        [[0, 0.5, 0.6, 0, 2.0], [0, None, None, 1, 1.9], [0, 0.4, "nan", 2, None]],
    )  # fmt: skip
    run = only_run(tmp_path)
    assert (run.path, run.format, run.files) == (str(path.parent), "lightning-csv", (str(path),))
    found = scalars(run)
    assert found["grad_2.0_norm/fc.weight"] == [(0, 0.5), (2, 0.4)]
    assert found["train_loss"] == [(0, 2.0), (1, 1.9)]
    assert math.isnan(found["grad_2.0_norm_total"][1][1])
    assert "step" not in found and not damages(run)


def test_lightning_half_written_and_damaged_rows_cost_those_rows(tmp_path: Path) -> None:
    path = sf.metrics_csv(
        tmp_path / "metrics.csv", CSV_COLUMNS,
        [[0, 0.5, 0.6, 0, 2.0], [0, 0.5, 0.6, 1], [0, 0.5, "x", 2, 1.8], [0, 0.5, 0.6, 3, 1.7]],
    )  # fmt: skip
    path.write_bytes(path.read_bytes() + b"0,0.5,0.6,4,1.")  # a row being written
    run = only_run(tmp_path)
    assert [step for step, _ in scalars(run)["train_loss"]] == [0, 2, 3]
    kinds = [(damage.kind, damage.message.split(",")[0]) for damage in damages(run)]
    assert kinds == [
        ("undecodable", "damaged row"),  # 4 cells for 5 columns
        ("undecodable", "'grad_2.0_norm_total' at byte 97 is 'x'"),
        ("incomplete_tail", "half-written last row"),
    ]


def test_a_metrics_csv_without_a_step_column_is_not_a_lightning_run(tmp_path: Path) -> None:
    sf.metrics_csv(tmp_path / "metrics.csv", ["epoch", "loss"], [[0, 1.0]])
    with pytest.raises(Exception, match="no event file found"):
        discover([str(tmp_path)])


# --------------------------------------------------------------------------------------------
# MLflow file store
# --------------------------------------------------------------------------------------------


def test_mlflow_file_store_runs_are_named_by_experiment_and_run_name(tmp_path: Path) -> None:
    store = tmp_path / "mlruns"
    experiment = ("3", "my exp")
    metrics = {"loss": [(1000, 2.0, 0), (1001, 1.5, 1)], "grad_norm/fc1.weight": [(1000, 0.5, 0)]}
    sf.mlflow_run(store, experiment, "a" * 32, "twin", metrics, start=1)
    sf.mlflow_run(store, experiment, "b" * 32, "twin", metrics, start=2)
    sf.mlflow_run(store, experiment, "c" * 32, "solo", metrics, start=3)
    sf.mlflow_run(store, experiment, "d" * 32, "gone", metrics, deleted=True)
    runs = discover([str(tmp_path)])
    names = [run.path for run in runs]
    assert names == [
        str(store / "my exp" / "twin (aaaaaaaa)"),
        str(store / "my exp" / "twin (bbbbbbbb)"),
        str(store / "my exp" / "solo"),
    ]
    found = scalars(runs[2])
    assert found == {"loss": [(0, 2.0), (1, 1.5)], "grad_norm/fc1.weight": [(0, 0.5)]}
    timed = [r for r in read_run(runs[2]) if isinstance(r, ScalarRecord)]
    assert [r.tag for r in timed] == ["grad_norm/fc1.weight", "loss", "loss"]  # time order
    assert timed[0].wall_time == 1.0


def test_mlflow_damaged_line_costs_that_value(tmp_path: Path) -> None:
    run_dir = sf.mlflow_run(
        tmp_path / "mlruns", ("1", "e"), "f" * 32, "r",
        {"loss": [(1, 2.0, 0), (2, 1.0, 1), (3, 0.5, 2)]},
    )  # fmt: skip
    metric = run_dir / "metrics" / "loss"
    lines = metric.read_text().splitlines(keepends=True)
    metric.write_text(lines[0] + "2 one 1\n" + lines[2] + "4 0.2")
    run = only_run(tmp_path)
    assert scalars(run)["loss"] == [(0, 2.0), (2, 0.5)]
    assert [d.kind for d in damages(run)] == ["undecodable", "incomplete_tail"]


# --------------------------------------------------------------------------------------------
# MLflow SQLite store
# --------------------------------------------------------------------------------------------


def test_mlflow_sqlite_rows_in_logging_order_with_nan_and_infinity(tmp_path: Path) -> None:
    big = 1.7976931348623157e308
    database = sf.mlflow_database(
        tmp_path / "mlflow.db",
        [
            ("r1", "bright-fox", "active", [("loss", 2.0, 1000, 0, 0), ("loss", 0.0, 1001, 1, 1),
                                            ("gn", big, 1002, 2, 0), ("gn", -big, 1003, 3, 0)]),
            ("r2", "dead", "deleted", [("loss", 1.0, 1000, 0, 0)]),
        ],
    )  # fmt: skip
    (run,) = discover([str(tmp_path)])
    assert (run.path, run.format, run.key) == (
        str(database / "exp" / "bright-fox"),
        "mlflow-sqlite",
        "r1",
    )
    found = scalars(run)
    assert found["loss"][0] == (0, 2.0) and math.isnan(found["loss"][1][1])
    assert found["gn"] == [(2, math.inf), (3, -math.inf)]
    assert discover([str(database)]) == [run]  # the database named on its own


def test_a_sqlite_database_of_another_schema_is_not_mlflow(tmp_path: Path) -> None:
    import sqlite3

    with sqlite3.connect(tmp_path / "other.db") as connection:
        connection.execute("CREATE TABLE t (x)")
    connection.close()
    with pytest.raises(Exception, match="no event file found"):
        discover([str(tmp_path)])


def test_mlflow_sqlite_damage_keeps_the_rows_read_before_it(tmp_path: Path) -> None:
    rows = [("loss", float(i), 1000 + i, i, 0) for i in range(20000)]
    database = sf.mlflow_database(tmp_path / "mlflow.db", [("r1", "long", "active", rows)])
    data = bytearray(database.read_bytes())
    page = 4096
    start, stop = (len(data) * 4 // 10 // page) * page, (len(data) * 6 // 10 // page) * page
    data[start:stop] = b"\xff" * (stop - start)  # pages in the middle of the metrics
    database.write_bytes(bytes(data))
    runs = discover([str(tmp_path)])
    assert len(runs) == 1
    records = list(read_run(runs[0]))
    values = [r for r in records if isinstance(r, ScalarRecord)]
    lost = [r for r in records if isinstance(r, Damage)]
    assert 0 < len(values) < 20000 and [d.kind for d in lost] == ["unreadable"]
    assert "SQLite stopped after" in lost[0].message


# --------------------------------------------------------------------------------------------
# W&B run files
# --------------------------------------------------------------------------------------------

BINS = [-1.0, 0.0, 1.0]


def wandb_run(tmp_path: Path, rows: list[dict[tuple[str, ...], object]]) -> Path:
    directory = tmp_path / "wandb" / "offline-run-20260101_000000-abc"
    payloads = [sf.run_record("abc", "tiny")] + [
        sf.history_record(row, n) for n, row in enumerate(rows)
    ]
    sf.wandb_file(directory / "run-abc.wandb", payloads)
    return directory


def test_wandb_histograms_and_scalars_at_their_steps(tmp_path: Path) -> None:
    watched = {"gradients/fc.weight": ([1, 3], BINS), "parameters/fc.weight": ([2, 2], BINS)}
    rows = [sf.watched_row(step, watched, loss=1.0 / (step + 1)) for step in range(3)]
    directory = wandb_run(tmp_path, rows)
    run = only_run(tmp_path)
    assert (run.path, run.format) == (str(directory), "wandb")
    records = list(read_run(run))
    histograms = [r for r in records if isinstance(r, HistogramRecord)]
    assert [(h.tag, h.step) for h in histograms[:2]] == [
        ("gradients/fc.weight", 0),
        ("parameters/fc.weight", 0),
    ]
    first = histograms[0]
    assert first.encoding == "tensor" and first.wall_time == 1000.0
    assert first.left.tolist() == [-1.0, 0.0] and first.right.tolist() == [0.0, 1.0]
    assert first.counts.tolist() == [1.0, 3.0]
    assert scalars(run)["loss"] == [(0, 1.0), (1, 0.5), (2, 1.0 / 3)]
    assert [r.records for r in records if isinstance(r, FileInfo)] == [4]


def test_wandb_elements_dropped_as_non_finite_are_counted(tmp_path: Path) -> None:
    rows = [sf.watched_row(s, {"gradients/fc.weight": ([1, 3], BINS)}) for s in range(4)]
    rows.append(sf.watched_row(4, {"gradients/fc.weight": ([1, 2], BINS)}))  # 1 of 4 was NaN
    wandb_run(tmp_path, rows)
    run = only_run(tmp_path)
    last = [r for r in read_run(run) if isinstance(r, HistogramRecord)][-1]
    assert (last.encoding, last.num, last.min, last.max) == ("histo", 4.0, -1.0, 1.0)
    assert last.sum is not None and math.isnan(last.sum)
    series = reduce_records(read_run(run)).histograms[("gradients/fc.weight", 0)]
    assert series.column("nonfinite_share").tolist() == [0, 0, 0, 0, 0.25]
    (report,) = analyze([str(tmp_path)], jobs=1).runs
    (layer,) = report.layers
    assert (layer.verdict, layer.first_bad_step) == ("nan", 4)
    # the same numbers in an event file: the same verdict
    write_as_event_file(read_run(run), tmp_path / "tb" / "events.out.tfevents.1.x")
    (again,) = analyze([str(tmp_path / "tb")], jobs=1).runs
    assert [(row.name, row.verdict, row.first_bad_step) for row in again.layers] == [
        ("fc.weight", "nan", 4)
    ]


def test_wandb_record_across_blocks_and_old_style_histogram_objects(tmp_path: Path) -> None:
    counts = list(range(1, 6001))  # ~160 KB of JSON: the record spans five blocks
    bins = np.linspace(-1, 1, 6001).tolist()
    row = {
        ("_step",): 0,
        ("gradients/big",): {"_type": "histogram", "values": counts, "bins": bins},
    }
    rows = [sf.watched_row(0, {}, loss=1.0), row]
    wandb_run(tmp_path, [rows[0]] * 3 + [row])
    (histogram,) = [r for r in read_run(only_run(tmp_path)) if isinstance(r, HistogramRecord)]
    assert histogram.tag == "gradients/big" and histogram.counts.sum() == sum(counts)


def test_wandb_damaged_block_and_cut_file_cost_only_their_records(tmp_path: Path) -> None:
    filler = {("_step",): 0, ("note",): "x" * 20000}
    rows = [{**filler, ("_step",): step, ("loss",): float(step)} for step in range(6)]
    directory = wandb_run(tmp_path, rows)
    path = directory / "run-abc.wandb"
    offsets = sf.wandb_file(path, [sf.history_record(row) for row in rows])
    data = bytearray(path.read_bytes())
    data[offsets[2] + 20] ^= 0xFF  # a payload byte of the third record: its CRC fails
    path.write_bytes(bytes(data[:-100]))  # and the last record is cut short
    run = only_run(tmp_path)
    assert [step for step, _ in scalars(run)["loss"]] == [0, 1, 3, 4]
    kinds = [d.kind for d in damages(run)]
    assert kinds == ["bad_payload_crc", "incomplete_tail"]


def test_a_file_that_is_not_a_wandb_file_is_passed_over(tmp_path: Path) -> None:
    (tmp_path / "run-x.wandb").write_bytes(b"not a W&B file")
    with pytest.raises(Exception, match="no event file found"):
        discover([str(tmp_path)])


def test_message_fields_walks_every_wire_type() -> None:
    payload = sf.field(1, 150) + sf.field(2, b"abc") + b"\x19" + (7).to_bytes(8, "little")
    payload += b"\x25" + (9).to_bytes(4, "little")
    assert message_fields(payload) == [(1, 150), (2, b"abc"), (3, 7), (4, 9)]
    for bad in (b"\x12\x05ab", b"\x0b", b"\x08"):  # cut, a group, a truncated varint
        with pytest.raises(ValueError):
            message_fields(bad)


# --------------------------------------------------------------------------------------------
# Discovery over a directory of every format
# --------------------------------------------------------------------------------------------


def test_discovery_finds_every_format_in_one_tree_in_walk_order(tmp_path: Path) -> None:
    ef.write_events(
        tmp_path / "a_tb" / "events.out.tfevents.1.host",
        [ef.file_version(), ef.summary_event(0, [ef.simple_scalar("loss", 1.0)])],
    )
    sf.trainer_state(
        tmp_path / "b_hf" / "checkpoint-2" / "trainer_state.json", sf.hf_entries([1, 2])
    )
    lightning = tmp_path / "c_pl" / "lightning_logs" / "version_0"
    sf.metrics_csv(lightning / "metrics.csv", CSV_COLUMNS, [[0, 0.5, 0.6, 0, 2.0]])
    ef.write_events(lightning / "events.out.tfevents.2.host", [ef.file_version()])  # two loggers
    sf.mlflow_run(tmp_path / "d_ml" / "mlruns", ("1", "e"), "a" * 32, "r", {"loss": [(1, 1.0, 0)]})
    sf.mlflow_database(
        tmp_path / "d_ml" / "mlflow.db", [("r1", "s", "active", [("loss", 1.0, 1, 0, 0)])]
    )
    wandb_run(tmp_path / "e_wb", [sf.watched_row(0, {}, loss=1.0)])
    (tmp_path / "e_wb" / "wandb" / "latest-run").symlink_to(
        tmp_path / "e_wb" / "wandb" / "offline-run-20260101_000000-abc"
    )
    runs = discover([str(tmp_path)])
    found = [(run.format, Path(run.path).relative_to(tmp_path).as_posix()) for run in runs]
    assert found == [
        ("tensorboard", "a_tb"),
        ("hf-trainer", "b_hf"),
        ("tensorboard", "c_pl/lightning_logs/version_0"),
        ("lightning-csv", "c_pl/lightning_logs/version_0/metrics.csv"),  # apart from the TB run
        ("mlflow-sqlite", "d_ml/mlflow.db/exp/s"),
        ("mlflow-files", "d_ml/mlruns/e/r"),
        ("wandb", "e_wb/wandb/offline-run-20260101_000000-abc"),  # once: latest-run not followed
    ]
    assert sources.label(runs[1]) == "HF Trainer trainer_state.json"


def test_files_named_are_read_by_their_format(tmp_path: Path) -> None:
    state = sf.trainer_state(tmp_path / "out" / "trainer_state.json", sf.hf_entries([1, 2]))
    directory = wandb_run(tmp_path, [sf.watched_row(0, {}, loss=1.0)])
    assert [run.format for run in discover([str(state), str(directory / "run-abc.wandb")])] == [
        "hf-trainer",
        "wandb",
    ]


def test_watch_reads_a_source_run_again_when_its_file_changes(tmp_path: Path) -> None:
    from gradcheck.engine.follow import Follower

    path = sf.metrics_csv(tmp_path / "metrics.csv", CSV_COLUMNS, [[0, 0.5, 0.6, 0, 2.0]])
    follower = Follower([str(tmp_path)])
    first = follower.poll()
    assert first.changed == {str(tmp_path)} and first.parts[0][0].values_read == 4
    assert not follower.poll().changed  # nothing new
    sf.metrics_csv(path, CSV_COLUMNS, [[0, 0.5, 0.6, 0, 2.0], [0, 0.5, 0.6, 1, 1.9]])
    again = follower.poll()
    assert again.changed == {str(tmp_path)} and again.parts[0][0].values_read == 8


def test_a_log_with_nothing_readable_is_an_input_error_that_says_why(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from gradcheck.cli import cli

    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "trainer_state.json").write_text('{"log_history": 5}')
    result = CliRunner().invoke(cli, ["analyze", str(tmp_path)])
    assert result.exit_code == 2
    assert "trainer_state.json: no log_history list" in result.output
    empty = sf.metrics_csv(tmp_path / "pl" / "metrics.csv", ["epoch", "step", "loss"], [])
    result = CliRunner().invoke(cli, ["analyze", str(empty)])
    assert result.exit_code == 2 and "no value logged yet (Lightning CSVLogger" in result.output
