"""Event payload decoding: both histogram encodings with every field, scalars, odd tensors."""

from __future__ import annotations

import math

import numpy as np
import pytest
from tensorboard.compat.proto import event_pb2, summary_pb2, types_pb2

from gradcheck.events.decode import Decoded, EventDecoder, UndecodableEvent, tensor_values
from gradcheck.model import Damage, HistogramRecord, ScalarRecord
from tests.support import eventfiles as ef


def decode(*events: event_pb2.Event) -> list[Decoded]:
    decoder = EventDecoder("run")
    return [decoder.decode(e.SerializeToString(), "file", 100 * i) for i, e in enumerate(events)]


def only(decoded: Decoded) -> HistogramRecord | ScalarRecord | Damage:
    (record,) = decoded.records
    return record


def test_histo_keeps_every_field_and_derives_left_edges() -> None:
    value = ef.histo(
        "dense/kernel",
        [-0.5, 0.0, 0.5, 1.0],
        [3, 0, 4, 1],
        min=-0.9,
        max=0.75,
        num=8,
        sum=1.25,
        sum_squares=2.5,
    )
    (decoded,) = decode(ef.summary_event(7, [value], wall_time=123.5))
    record = only(decoded)
    assert isinstance(record, HistogramRecord)
    assert (record.tag, record.step, record.wall_time, record.index) == (
        "dense/kernel",
        7,
        123.5,
        0,
    )
    assert (record.run, record.file, record.offset, record.encoding) == ("run", "file", 0, "histo")
    assert (record.min, record.max, record.num, record.sum) == (-0.9, 0.75, 8, 1.25)
    assert record.sum_squares == 2.5
    np.testing.assert_array_equal(record.left, [-0.9, -0.5, 0.0, 0.5])
    np.testing.assert_array_equal(record.right, [-0.5, 0.0, 0.5, 1.0])
    np.testing.assert_array_equal(record.counts, [3, 0, 4, 1])


def test_histo_sum_squares_gives_the_exact_norm() -> None:
    values = np.random.default_rng(0).normal(size=1000)
    record = only(decode(ef.summary_event(0, [ef.histo_of("w", values)]))[0])
    assert isinstance(record, HistogramRecord)
    assert math.sqrt(record.sum_squares) == pytest.approx(np.linalg.norm(values), rel=1e-12)
    assert record.counts.sum() == 1000


def test_histo_leading_empty_bucket_below_min_is_zero_width() -> None:
    # TF1 and PyTorch open with an empty bucket whose right edge is below min.
    value = ef.histo(
        "w", [-0.8, -0.5, 0.5], [0, 2, 1], min=-0.7, max=0.4, num=3, sum=0, sum_squares=1
    )
    record = only(decode(ef.summary_event(0, [value]))[0])
    assert isinstance(record, HistogramRecord)
    np.testing.assert_array_equal(record.left, [-0.8, -0.8, -0.5])


def test_histo_min_above_a_non_empty_first_bucket_is_treated_as_absent() -> None:
    value = ef.histo("w", [-2.0, -1.0], [1, 1], min=0, max=0, num=2, sum=-3, sum_squares=5)
    record = only(decode(ef.summary_event(0, [value]))[0])
    assert isinstance(record, HistogramRecord)
    assert record.left[0] == -np.inf
    assert record.left[1] == -2.0


def test_histo_non_finite_values_are_kept_as_written_by_pytorch() -> None:
    # torch/tensorboardX default bins on a tensor with NaN and Inf: non-finite min/max/sum and
    # num larger than the bucket total.
    value = ef.histo(
        "w", [-1.0, 0.0, 1.0], [0, 2, 1], min=math.nan, max=math.inf, num=5, sum=math.nan,
        sum_squares=2,
    )  # fmt: skip
    record = only(decode(ef.summary_event(0, [value]))[0])
    assert isinstance(record, HistogramRecord)
    assert math.isnan(record.min) and record.max == math.inf and math.isnan(record.sum)
    assert record.num == 5 and record.counts.sum() == 3
    assert record.left[0] == -1.0  # zero-width leading empty bucket; the NaN stays in min


def test_histo_with_mismatched_bucket_lists_is_a_damaged_value() -> None:
    value = ef.histo("w", [1.0, 2.0], [1], min=0, max=2, num=1, sum=1, sum_squares=1)
    damage = only(decode(ef.summary_event(4, [value]))[0])
    assert isinstance(damage, Damage)
    assert damage.kind == "undecodable" and "'w' at step 4" in damage.message


BUCKETS = np.array([[-1.0, 0.0, 2.0], [0.0, 1.0, 5.0], [1.0, 2.0, 1.0]])


@pytest.mark.parametrize("dtype", [types_pb2.DT_DOUBLE, types_pb2.DT_FLOAT, types_pb2.DT_HALF])
@pytest.mark.parametrize("as_content", [True, False])
def test_tensor_histogram_every_dtype_and_field(dtype: int, as_content: bool) -> None:
    value = ef.tensor_histogram("h", BUCKETS, dtype=dtype, as_content=as_content)
    record = only(decode(ef.summary_event(3, [value]))[0])
    assert isinstance(record, HistogramRecord)
    assert record.encoding == "tensor"
    assert record.left.dtype == np.float64
    np.testing.assert_array_equal(record.left, [-1, 0, 1])
    np.testing.assert_array_equal(record.right, [0, 1, 2])
    np.testing.assert_array_equal(record.counts, [2, 5, 1])
    assert record.sum is None and record.sum_squares is None and record.num is None


def test_plugin_name_is_remembered_from_the_first_value_of_a_tag() -> None:
    first = ef.summary_event(0, [ef.tensor_histogram("h", BUCKETS, first=True)])
    later = ef.summary_event(1, [ef.tensor_histogram("h", BUCKETS * 2, first=False)])
    unknown = ef.summary_event(1, [ef.tensor_histogram("never_announced", BUCKETS, first=False)])
    decoded = decode(first, later, unknown)
    assert [len(d.records) for d in decoded] == [1, 1, 0]
    record = decoded[1].records[0]
    assert isinstance(record, HistogramRecord)
    np.testing.assert_array_equal(record.counts, [4, 10, 2])


def test_empty_tensor_histograms_of_old_and_new_tensorboard() -> None:
    old = ef.tensor_histogram("old", np.zeros((0, 3)))  # tensorboard <= 2.7
    new = ef.tensor_histogram("new", np.zeros((30, 3)))  # >= 2.8: k rows of zeros
    old_record, new_record = decode(ef.summary_event(0, [old, new]))[0].records
    assert isinstance(old_record, HistogramRecord) and isinstance(new_record, HistogramRecord)
    assert old_record.counts.shape == (0,)
    assert new_record.counts.shape == (30,) and new_record.counts.sum() == 0


def test_constant_tensor_histograms_of_old_and_new_tensorboard() -> None:
    old = ef.tensor_histogram("old", np.array([[2.5, 3.5, 7.0]]))
    new = ef.tensor_histogram("new", ef.tf2_buckets(np.full(7, 3.0)))
    old_record, new_record = decode(ef.summary_event(0, [old, new]))[0].records
    assert isinstance(old_record, HistogramRecord) and isinstance(new_record, HistogramRecord)
    assert old_record.counts.tolist() == [7.0]
    assert (old_record.left[0], old_record.right[0]) == (2.5, 3.5)
    assert new_record.counts.sum() == 7 and (new_record.left == 3.0).all()


def test_nan_tensor_histogram_keeps_nan_edges_and_zero_counts() -> None:
    buckets = np.stack([np.full(30, np.nan), np.full(30, np.nan), np.zeros(30)], axis=1)
    record = only(decode(ef.summary_event(0, [ef.tensor_histogram("h", buckets)]))[0])
    assert isinstance(record, HistogramRecord)
    assert np.isnan(record.left).all() and record.counts.sum() == 0


def test_typed_field_shorter_than_shape_repeats_its_last_value() -> None:
    value = ef.tensor_histogram("h", BUCKETS, as_content=False)
    del value.tensor.double_val[:]
    value.tensor.double_val.append(0.0)  # TensorFlow's compact "all zeros" form
    record = only(decode(ef.summary_event(0, [value]))[0])
    assert isinstance(record, HistogramRecord)
    assert record.counts.tolist() == [0.0, 0.0, 0.0]
    value.tensor.ClearField("double_val")
    record = only(decode(ef.summary_event(0, [value]))[0])
    assert isinstance(record, HistogramRecord) and record.right.tolist() == [0.0, 0.0, 0.0]


def test_badly_shaped_histogram_tensors_are_damaged_values() -> None:
    wrong_shape = ef.tensor_histogram("a", np.zeros((4, 2)))
    wrong_bytes = ef.tensor_histogram("b", BUCKETS)
    wrong_bytes.tensor.tensor_content = wrong_bytes.tensor.tensor_content[:-8]
    int_tensor = ef.tensor_histogram("c", BUCKETS)
    int_tensor.tensor.dtype = types_pb2.DT_INT64
    records = decode(ef.summary_event(0, [wrong_shape, wrong_bytes, int_tensor]))[0].records
    assert all(isinstance(r, Damage) and r.kind == "undecodable" for r in records)
    messages = [r.message for r in records if isinstance(r, Damage)]
    assert "shape [4, 2]" in messages[0]
    assert "64 bytes does not hold shape [3, 3]" in messages[1]
    assert "DT_INT64" in messages[2]


@pytest.mark.parametrize("dtype", [types_pb2.DT_FLOAT, types_pb2.DT_DOUBLE, types_pb2.DT_HALF])
def test_scalars_simple_value_and_tensor(dtype: int) -> None:
    event = ef.summary_event(
        9, [ef.simple_scalar("loss", 0.25), ef.tensor_scalar("acc", 0.5, dtype=dtype)]
    )
    simple, tensor = decode(event)[0].records
    assert simple == ScalarRecord(
        "run", "file", 0, "loss", 9, event.wall_time, "simple_value", 0.25
    )
    assert isinstance(tensor, ScalarRecord)
    assert (tensor.encoding, tensor.value, tensor.tag) == ("tensor", 0.5, "acc")


def test_scalar_tensor_in_tensor_content() -> None:
    value = ef.tensor_value("lr", np.array(1e-3), plugin="scalars", dtype=types_pb2.DT_DOUBLE)
    record = only(decode(ef.summary_event(0, [value]))[0])
    assert isinstance(record, ScalarRecord) and record.value == 1e-3


def test_other_plugins_and_images_are_skipped() -> None:
    text = ef.tensor_value("notes", np.zeros(2), plugin="text")
    image = summary_pb2.Summary.Value(tag="img", image=summary_pb2.Summary.Image(height=1))
    assert decode(ef.summary_event(0, [text, image]))[0].records == []


def test_event_kinds_file_version_and_writer() -> None:
    version, writer, graph, bare = decode(
        ef.file_version(version="brain.Event:2"),
        ef.source_writer("tensorflow.core.util.events_writer"),
        ef.graph(),
        event_pb2.Event(wall_time=5.0),
    )
    assert (version.what, version.file_version) == ("file_version", "brain.Event:2")
    assert writer.writer == "tensorflow.core.util.events_writer"
    assert graph.what == "graph_def" and graph.records == []
    assert bare.what == ""


def test_graph_events_are_skipped_without_parsing() -> None:
    # A graph_def event followed by bytes that are not valid protobuf: parsing would fail.
    payload = ef.graph(size=50).SerializeToString() + b"\xff\xff\xff"
    assert EventDecoder("run").decode(payload, "f", 0).what == "graph_def"


def test_undecodable_payload_raises_the_internal_error() -> None:
    with pytest.raises(UndecodableEvent):
        EventDecoder("run").decode(b"\x0a\xff\xff\xff\xff\xff", "f", 0)


def test_tensor_values_is_read_only_view_of_content() -> None:
    value = ef.tensor_histogram("h", BUCKETS)
    array = tensor_values(value.tensor)
    assert isinstance(array, np.ndarray) and array.shape == (3, 3)
    assert not array.flags.writeable
