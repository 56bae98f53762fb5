"""Hand-made files of the log formats in ``gradcheck.sources``, byte for byte as their
libraries lay them out (checked against the real libraries' files in
``test_sources_real.py``), for tests that need exact contents or damage in a chosen place.
"""

from __future__ import annotations

import json
import sqlite3
import struct
import zlib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

# --------------------------------------------------------------------------------------------
# HF Trainer, Lightning CSVLogger, MLflow
# --------------------------------------------------------------------------------------------


def trainer_state(path: Path, entries: Sequence[Mapping[str, object]]) -> Path:
    """A ``trainer_state.json`` as the Trainer writes it (indent 2, keys sorted)."""
    state = {"global_step": max((e["step"] for e in entries), default=0), "log_history": entries}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(state, indent=2, sort_keys=True) + "\n")
    return path


def hf_entries(steps: Iterable[int], grad_norm: float = 1.0) -> list[dict[str, object]]:
    return [
        {
            "epoch": step / 10,
            "grad_norm": grad_norm,
            "learning_rate": 1e-3,
            "loss": 2.0,
            "step": step,
        }
        for step in steps
    ]


def metrics_csv(path: Path, columns: Sequence[str], rows: Sequence[Sequence[object]]) -> Path:
    """A ``metrics.csv`` as ``CSVLogger`` writes it (``\\r\\n`` line ends, empty cells)."""
    lines = [",".join(columns)] + [
        ",".join("" if v is None else str(v) for v in row) for row in rows
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(("\r\n".join(lines) + "\r\n").encode())
    return path


def mlflow_run(
    store: Path,
    experiment: tuple[str, str],
    run_id: str,
    name: str,
    metrics: Mapping[str, Sequence[tuple[int, float, int]]],
    *,
    deleted: bool = False,
    start: int = 0,
) -> Path:
    """A run of MLflow's file store: ``metrics`` maps a key to ``(timestamp, value, step)``."""
    experiment_id, experiment_name = experiment
    experiment_dir = store / experiment_id
    experiment_dir.mkdir(parents=True, exist_ok=True)
    (experiment_dir / "meta.yaml").write_text(
        f"experiment_id: '{experiment_id}'\nlifecycle_stage: active\nname: {experiment_name}\n"
    )
    run_dir = experiment_dir / run_id
    (run_dir / "metrics").mkdir(parents=True)
    stage = "deleted" if deleted else "active"
    (run_dir / "meta.yaml").write_text(
        f"experiment_id: '{experiment_id}'\nlifecycle_stage: {stage}\nrun_id: {run_id}\n"
        f"run_name: {name}\nstart_time: {start}\nstatus: 3\ntags: []\n"
    )
    for key, values in metrics.items():
        file = run_dir / "metrics" / key
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text("".join(f"{t} {v!r} {s}\n" for t, v, s in values))
    return run_dir


MLFLOW_SCHEMA = """
CREATE TABLE experiments (experiment_id INTEGER NOT NULL PRIMARY KEY, name VARCHAR(256) NOT NULL,
    artifact_location VARCHAR(256), lifecycle_stage VARCHAR(32), creation_time BIGINT,
    last_update_time BIGINT);
CREATE TABLE runs (run_uuid VARCHAR(32) NOT NULL PRIMARY KEY, name VARCHAR(250),
    source_type VARCHAR(20), source_name VARCHAR(500), entry_point_name VARCHAR(50),
    user_id VARCHAR(256), status VARCHAR(9), start_time BIGINT, end_time BIGINT,
    source_version VARCHAR(50), lifecycle_stage VARCHAR(20), artifact_uri VARCHAR(200),
    experiment_id INTEGER, deleted_time BIGINT);
CREATE TABLE metrics ("key" VARCHAR(250) NOT NULL, value FLOAT NOT NULL,
    timestamp BIGINT NOT NULL, run_uuid VARCHAR(32) NOT NULL, step BIGINT DEFAULT '0' NOT NULL,
    is_nan BOOLEAN DEFAULT '0' NOT NULL,
    CONSTRAINT metric_pk PRIMARY KEY ("key", timestamp, step, run_uuid, value, is_nan));
"""
"""The tables of MLflow's SQLite store that gradcheck reads (their columns as MLflow 3
creates them)."""


def mlflow_database(
    path: Path,
    runs: Sequence[tuple[str, str, str, Sequence[tuple[str, float, int, int, int]]]],
    experiments: Mapping[int, str] | None = None,
) -> Path:
    """An MLflow SQLite store; ``runs``: ``(run id, name, lifecycle stage, metrics)`` in
    experiment 1, each metric ``(key, value, timestamp, step, is_nan)``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(path) as connection:
        connection.executescript(MLFLOW_SCHEMA)
        for number, name in (experiments or {1: "exp"}).items():
            connection.execute(
                "INSERT INTO experiments VALUES (?, ?, '', 'active', 0, 0)", (number, name)
            )
        for start, (run_id, name, stage, metrics) in enumerate(runs):
            connection.execute(
                "INSERT INTO runs (run_uuid, name, status, start_time, lifecycle_stage,"
                " experiment_id) VALUES (?, ?, 'FINISHED', ?, ?, 1)",
                (run_id, name, start, stage),
            )
            connection.executemany(
                "INSERT INTO metrics VALUES (?, ?, ?, ?, ?, ?)",
                [(key, value, time, run_id, step, nan) for key, value, time, step, nan in metrics],
            )
    connection.close()
    return path


# --------------------------------------------------------------------------------------------
# W&B: Record protobufs and the LevelDB-style framing
# --------------------------------------------------------------------------------------------


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def field(number: int, payload: bytes | str | int) -> bytes:
    """One protobuf field: an int as a varint, text and bytes length-delimited."""
    if isinstance(payload, int):
        return _varint(number << 3) + _varint(payload)
    data = payload.encode() if isinstance(payload, str) else payload
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def history_record(row: Mapping[tuple[str, ...], object], number: int = 1) -> bytes:
    """A ``wandb_internal.Record`` (``num`` 1, ``history`` 2) of one row: each path a
    ``HistoryItem`` (``key`` 1 for one part, else ``nested_key`` 2) with ``value_json`` 16."""
    items = b""
    for path, value in row.items():
        keys = field(1, path[0]) if len(path) == 1 else b"".join(field(2, part) for part in path)
        items += field(1, keys + field(16, json.dumps(value)))
    return field(1, number) + field(2, items)


def run_record(run_id: str, name: str) -> bytes:
    """A ``Record`` holding a ``RunRecord`` (field 17: ``run_id`` 1, ``display_name`` 8)."""
    return field(17, field(1, run_id) + field(8, name))


def watched_row(
    step: int, histograms: Mapping[str, tuple[Sequence[float], Sequence[float]]], **scalars: float
) -> dict[tuple[str, ...], object]:
    """A history row as ``wandb.watch`` + ``wandb.log`` leave it: ``histograms`` maps a tag
    to ``(counts, bins)``."""
    row: dict[tuple[str, ...], object] = {("_step",): step, ("_timestamp",): 1000.0 + step}
    for tag, (counts, bins) in histograms.items():
        row[(tag, "_type")] = "histogram"
        row[(tag, "values")] = list(counts)
        row[(tag, "bins")] = list(bins)
    for key, value in scalars.items():
        row[(key,)] = value
    return row


BLOCK = 32768


def wandb_file(path: Path, payloads: Iterable[bytes]) -> list[int]:
    """Frame ``payloads`` as W&B's datastore does (header, 32 KiB blocks, FULL or FIRST /
    MIDDLE / LAST fragments, zlib CRC-32 seeded with the type byte); each record's offset."""
    out = bytearray(struct.pack("<4sHB", b":W&B", 0xBEE1, 0))
    offsets = []
    for payload in payloads:
        left = BLOCK - len(out) % BLOCK
        if left < 7:
            out += b"\x00" * left
        offsets.append(len(out))
        rest, first = payload, True
        while True:
            room = BLOCK - len(out) % BLOCK - 7
            piece, rest = rest[:room], rest[room:]
            kind = (1 if first else 4) if not rest else (2 if first else 3)
            crc = zlib.crc32(piece, zlib.crc32(bytes((kind,))))
            out += struct.pack("<IHB", crc, len(piece), kind) + piece
            first = False
            if not rest:
                break
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(bytes(out))
    return offsets
