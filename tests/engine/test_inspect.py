"""The ``gradcheck inspect`` core: runs -> files -> tags, damage and notices, no printing."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gradcheck.errors import InputError
from gradcheck.inspect import FileSummary, TagSummary, inspect_paths, inspect_records
from gradcheck.model import Damage, FileInfo, HistogramRecord, Notice, ScalarRecord
from gradcheck.tags import TagRules
from tests.support.paths import CORPUS, TEST_DATA

WRITERS = TEST_DATA / "writers"


def histogram(tag: str, step: int, size: int, index: int = 0, file: str = "a") -> HistogramRecord:
    edges = np.array([0.0, 1.0])
    return HistogramRecord(
        "run", file, 0, tag, index, step, 1.0, "histo", edges[:1], edges[1:],
        np.array([float(size)]), 0.0, 1.0, float(size), 1.0, 1.0,
    )  # fmt: skip


def scalar(tag: str, step: int, file: str = "a") -> ScalarRecord:
    return ScalarRecord("run", file, 0, tag, step, 1.0, "simple_value", 0.5)


def test_records_are_summarised_per_run_file_and_tag() -> None:
    damage = Damage("run", "a", 120, "bad_payload_crc", 40, "bad payload CRC, at byte 120: ...")
    notice = Notice("run", "b", "restart", "dense/kernel", 1, "steps go back from 3 to 1")
    records = [
        histogram("dense/kernel", 0, 12),
        histogram("gradients/dense/kernel", 0, 12),
        scalar("loss", 0),
        damage,
        histogram("dense/kernel", 3, 12),
        histogram("layer1/outputs", 3, 64),
        histogram("layer1/outputs", 3, 32),
        FileInfo("run", "a", 1000, 9, 8, "TF1"),
        notice,
        histogram("dense/kernel", 1, 12, file="b"),
        FileInfo("run", "b", 10, 1, 1, None),
    ]
    report = inspect_records(records)
    (run,) = report.runs
    assert run.path == "run" and run.notices == (notice,) and run.steps == (0, 3)
    first, second = run.files
    assert (first.path, first.size, first.records, first.events, first.writer) == (
        "a", 1000, 9, 8, "TF1"
    )  # fmt: skip
    assert first.damages == (damage,) and report.damages == (damage,)
    assert first.tags == (
        summary("dense/kernel", "weight", (0, 3, 2), (12,), "dense/kernel"),
        summary("gradients/dense/kernel", "gradient", (0, 0, 1), (12,), "dense/kernel"),
        summary("loss", None, (0, 0, 1), ()),
        summary("layer1/outputs", "activation", (3, 3, 2), (32, 64), "layer1"),
    )
    only = summary("dense/kernel", "weight", (1, 1, 1), (12,), "dense/kernel")
    assert second == FileSummary("b", 10, 1, 1, None, (only,), ())


def summary(
    tag: str,
    role: str | None,
    steps_and_count: tuple[int, int, int],
    counts: tuple[int, ...],
    parameter: str | None = None,
) -> TagSummary:
    """The expected summary of an index-0 series of the hand-built records above."""
    kind = f"{role} histogram" if role else "scalar"
    encoding = "histo" if role else "simple_value"
    first, last, count = steps_and_count
    return TagSummary(tag, 0, tag, kind, role, encoding, first, last, count, counts, parameter)  # type: ignore[arg-type]


def test_collision_indexes_are_separate_series_with_distinct_names() -> None:
    records = [histogram("kernel/histogram", 0, n, index=i) for i, n in enumerate((50, 5000))]
    (file,) = inspect_records(records).runs[0].files
    assert [(t.name, t.element_counts) for t in file.tags] == [
        ("kernel/histogram", (50,)),
        ("kernel/histogram#1", (5000,)),
    ]


def test_user_tag_rules_decide_the_kind() -> None:
    rules = TagRules.from_patterns(grad=r"^g_(?P<name>.+)$")
    report = inspect_records([histogram("g_fc", 0, 3)], rules)
    assert report.runs[0].files[0].tags[0].kind == "gradient histogram"


def test_inspect_real_writer_files() -> None:
    report = inspect_paths([str(WRITERS / "keras_callback"), str(WRITERS / "pytorch")])
    assert [Path(run.path).name for run in report.runs] == ["train", "validation", "pytorch"]
    train = report.runs[0].files[0]
    histograms = {t.tag: t for t in train.tags if t.kind != "scalar"}
    assert {t: h.element_counts for t, h in histograms.items()} == {
        "sequential/hidden/kernel/histogram": (12,),
        "sequential/hidden/bias/histogram": (4,),
        "sequential/out/kernel/histogram": (4,),
        "sequential/out/bias/histogram": (1,),
    }
    assert all(h.kind == "weight histogram" and h.encoding == "tensor" for h in histograms.values())
    assert all((h.first_step, h.last_step, h.count) == (0, 1, 2) for h in histograms.values())
    pytorch = {t.tag: t for t in report.runs[2].files[0].tags}
    assert pytorch["fc.weight.grad"].kind == "gradient histogram"
    assert pytorch["fc.weight.grad"].element_counts == (5,)
    assert pytorch["loss"].kind == "scalar" and pytorch["loss"].count == 3
    assert report.damages == () and report.notices == ()


def test_inspect_missing_path_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError):
        inspect_paths([str(tmp_path / "absent")])


@pytest.mark.skipif(not CORPUS.is_dir(), reason="../shared/corpus is not present")
def test_inspect_the_corpus_reports_tails_and_collisions() -> None:
    report = inspect_paths([str(CORPUS / "runs")])
    assert sum(len(run.files) for run in report.runs) == 30
    tails = sorted(d.offset for d in report.damages if d.kind == "incomplete_tail")
    assert tails == [40, 183917, 2799186]
    collisions = [n for n in report.notices if n.kind == "tag_collision"]
    assert {n.tag for n in collisions} == {
        "kernel/histogram",
        "bias/histogram",
        "embeddings/histogram",
    }


def test_each_histogram_tag_says_which_parameter_it_pairs_under() -> None:
    records = [
        histogram("Gradients_dense_0/kernel:0", 0, 4),
        histogram("dense_0/kernel:0", 0, 4),
        histogram("kernel/histogram", 0, 50),
        histogram("kernel/histogram", 0, 5000, index=1),
        scalar("loss", 0),
    ]
    (file,) = inspect_records(records).runs[0].files
    assert {t.name: (t.role, t.parameter) for t in file.tags} == {
        "Gradients_dense_0/kernel:0": ("gradient", "dense_0/kernel"),
        "dense_0/kernel:0": ("weight", "dense_0/kernel"),
        "kernel/histogram": ("weight", "kernel"),
        "kernel/histogram#1": ("weight", "kernel#1"),
        "loss": (None, None),
    }


def test_wide_table_shows_the_parameter_column_narrow_does_not() -> None:
    from gradcheck.report.inspect_table import inspect_table
    from gradcheck.report.interface import Env

    report = inspect_records([histogram("Gradients_dense_0/kernel:0", 0, 4)])
    wide = inspect_table(report, Env(width=120))
    narrow = inspect_table(report, Env(width=80))
    assert "parameter" in wide and "dense_0/kernel " in wide
    assert "parameter" not in narrow
    assert max(len(line) for line in narrow.splitlines()) <= 80
    assert max(len(line) for line in wide.splitlines()) <= 120


def test_the_table_prints_long_tag_names_whole_when_piped() -> None:
    from gradcheck.report.inspect_table import inspect_table
    from gradcheck.report.interface import Env

    long_tag = "gradients/encoder.layers.11.self_attention.in_proj_weight.with.a.long.suffix"
    report = inspect_records([histogram(long_tag, 0, 10), histogram(long_tag, 1, 10)])
    piped = inspect_table(report, Env(stdout_isatty=False, width=80))
    assert long_tag in piped and "…" not in piped
    terminal = inspect_table(report, Env(stdout_isatty=True, no_color=True, width=80))
    assert long_tag not in terminal and "…" in terminal
    assert max(len(line) for line in terminal.splitlines()) <= 80
