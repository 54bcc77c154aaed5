"""The one v2 header definition (record.batch_header) and the one stamping function
(record.stamp.stamp_batches), fuzzed: stamping then reading back through RecordBatch gives
the stamped fields and a valid CRC, the summary agrees with what was stamped, and the
header view agrees with RecordBatch field by field."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkactl.record.batch import RecordBatch, RecordBatchBuilder, TimestampType
from kafkactl.record.batch_header import (
    BATCH_HEADER,
    FIELD_OFFSETS,
    HEADER_FIELDS,
    NO_TIMESTAMP,
    RECORD_BATCH_OVERHEAD,
    RecordBatchHeader,
    header_struct,
)
from kafkactl.record.codecs import Compression
from kafkactl.record.errors import CorruptRecordError, OffsetOrderError, UnstampableBatchError
from kafkactl.record.legacy import build_message_set
from kafkactl.record.memory_records import iter_batches
from kafkactl.record.stamp import stamp_batches
from tests.hypothesis_profiles import examples

batch_shape = st.tuples(
    st.integers(1, 8),  # records
    st.integers(0, 2**41),  # first timestamp
    st.sampled_from([Compression.NONE, Compression.GZIP, Compression.LZ4]),
    st.integers(-1, 2**40),  # producer id
    st.integers(-1, 2**15 - 1),  # producer epoch
    st.integers(-1, 2**31 - 1),  # base sequence
    st.booleans(),  # built as LogAppendTime
)


def build(shape: tuple[int, int, Compression, int, int, int, bool]) -> bytes:
    count, ts, codec, pid, epoch, seq, log_append = shape
    b = RecordBatchBuilder(
        compression=codec, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
        timestamp_type=(TimestampType.LOG_APPEND_TIME if log_append
                        else TimestampType.CREATE_TIME))
    for i in range(count):
        b.append(ts + (i * 7) % 5, b"k%d" % i, b"v" * i)
    return b.build()


def test_the_layout_is_kafkas() -> None:
    assert BATCH_HEADER.format == ">qiibIhiqqqhii" and BATCH_HEADER.size == 61
    assert [FIELD_OFFSETS[n] for n, _c in HEADER_FIELDS] == [
        0, 8, 12, 16, 17, 21, 23, 27, 35, 43, 51, 53, 57]
    assert header_struct("base_offset", "batch_length", "magic").format == ">qi4xb"
    assert header_struct("attributes", "record_count", relative=True).format == ">h34xi"
    with pytest.raises(ValueError):
        header_struct("magic", "base_offset")


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(batch_shape, min_size=1, max_size=5), st.integers(0, 2**50),
       st.none() | st.integers(0, 2**31 - 1), st.none() | st.integers(0, 2**42))
def test_stamping_reads_back_through_record_batch(shapes, next_offset: int,
                                                  leader_epoch: int | None,
                                                  log_append_time: int | None) -> None:
    originals = [build(s) for s in shapes]
    buf = bytearray(b"".join(originals))
    summary = stamp_batches(buf, next_offset, leader_epoch, log_append_time)
    batches = list(iter_batches(buf))
    assert len(batches) == len(originals) == len(summary.batches)
    offset = next_offset
    for raw, batch, stamped in zip(originals, batches, summary.batches, strict=True):
        before = RecordBatch(raw)
        assert isinstance(batch, RecordBatch) and batch.is_valid()
        assert batch.base_offset == stamped.base_offset == offset
        assert batch.last_offset == stamped.last_offset == offset + before.last_offset_delta
        assert batch.partition_leader_epoch == (
            before.partition_leader_epoch if leader_epoch is None else leader_epoch)
        assert stamped.size == batch.size == len(raw)
        assert stamped.record_count == batch.record_count == before.record_count
        assert (stamped.producer_id, stamped.producer_epoch, stamped.base_sequence) == (
            before.producer_id, before.producer_epoch, before.base_sequence)
        if log_append_time is None:
            assert batch.max_timestamp == before.max_timestamp
            assert batch.attributes == before.attributes
            assert bytes(buf[batch.position + 17:batch.position + batch.size]) == raw[17:]
        else:
            assert batch.timestamp_type == TimestampType.LOG_APPEND_TIME
            assert batch.max_timestamp == stamped.max_timestamp == log_append_time
            assert [r.timestamp for r in batch] == [log_append_time] * batch.record_count
        assert [r.offset for r in batch] == list(range(offset, batch.last_offset + 1))
        offset = batch.last_offset + 1
    assert summary.first_offset == next_offset and summary.last_offset == offset - 1
    assert summary.num_records == sum(b.record_count for b in batches)
    assert summary.valid_bytes == len(buf)
    assert summary.log_append_time == (-1 if log_append_time is None else log_append_time)
    stamped_ts = [b.max_timestamp for b in summary.batches]
    assert summary.max_timestamp == max([NO_TIMESTAMP, *stamped_ts])
    if summary.max_timestamp > NO_TIMESTAMP:
        first_max = stamped_ts.index(summary.max_timestamp)
        assert summary.offset_of_max_timestamp == summary.batches[first_max].last_offset
    else:
        assert summary.offset_of_max_timestamp == summary.first_offset


@settings(max_examples=examples(40), deadline=None)
@given(st.lists(batch_shape, min_size=1, max_size=4), st.integers(0, 2**40))
def test_preassigned_offsets_are_kept_or_refused(shapes, start: int) -> None:
    buf = bytearray()
    offset = start
    for shape in shapes:
        raw = bytearray(build(shape))
        struct.pack_into(">q", raw, 0, offset)
        buf += raw
        offset += shape[0] + 3  # gaps between batches are fine for a follower
    before = bytes(buf)
    summary = stamp_batches(memoryview(before), start, None, assign_offsets=False)
    assert summary.first_offset == start
    assert [b.base_offset for b in summary.batches] == [
        b.base_offset for b in iter_batches(before)]
    with pytest.raises(OffsetOrderError):
        stamp_batches(memoryview(before), start + 1, None, assign_offsets=False)


@settings(max_examples=examples(60), deadline=None)
@given(batch_shape, st.integers(0, 2**50), st.integers(-1, 2**31 - 1), st.data())
def test_the_view_agrees_with_record_batch(shape, base_offset: int, epoch: int,
                                           data: st.DataObject) -> None:
    raw = bytearray(build(shape))
    stamp_batches(raw, base_offset, epoch)
    pad = data.draw(st.integers(0, 40))
    buf = bytes(pad) + bytes(raw)
    view, batch = RecordBatchHeader.read(buf, pad), RecordBatch(buf, pad)
    for name, _code in HEADER_FIELDS:
        got = getattr(batch, "first_timestamp" if name == "base_timestamp" else name)
        assert getattr(view, name) == got, name
    assert (view.size, view.last_offset, view.compression, view.timestamp_type,
            view.is_transactional, view.is_control) == (
        batch.size, batch.last_offset, batch.compression, batch.timestamp_type,
        batch.is_transactional, batch.is_control)
    with pytest.raises(CorruptRecordError):
        RecordBatchHeader.read(buf[:pad + RECORD_BATCH_OVERHEAD - 1], pad)


def test_old_formats_and_bad_buffers() -> None:
    v1 = bytearray(build_message_set(1, [(5, b"k", b"v"), (6, None, b"w")]))
    summary = stamp_batches(v1, 40, 3)
    assert [(b.base_offset, b.last_offset, b.record_count) for b in summary.batches] == [
        (40, 40, 1), (41, 41, 1)]
    assert [b.producer_id for b in summary.batches] == [-1, -1]
    with pytest.raises(UnstampableBatchError, match="LogAppendTime needs magic-2"):
        stamp_batches(bytearray(v1), 0, 0, 123)
    raw = build((2, 10, Compression.NONE, -1, -1, -1, False))
    with pytest.raises(UnstampableBatchError, match="Truncated batch header"):
        stamp_batches(bytearray(raw[:20]), 0, 0)
    with pytest.raises(UnstampableBatchError, match="Malformed batch"):
        stamp_batches(bytearray(raw[:-1]), 0, 0)
    bad = bytearray(raw)
    bad[16] = 7
    with pytest.raises(UnstampableBatchError, match="Unknown magic 7"):
        stamp_batches(bad, 0, 0)
