from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from kafkactl.record.batch import (
    RecordBatch,
    RecordBatchBuilder,
    TimestampType,
    set_base_offset,
    set_log_append_time,
    set_partition_leader_epoch,
)
from kafkactl.record.codecs import Compression
from kafkactl.record.errors import CorruptRecordError, InvalidRecordError
from tests.hypothesis_profiles import examples

large = st.builds(lambda n, s: (s * n)[:n], st.integers(8000, 40000),
                  st.binary(min_size=1, max_size=8))
maybe_bytes = st.none() | st.binary(max_size=64) | large
headers = st.lists(
    st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=16)), max_size=3
)
record = st.tuples(
    st.integers(0, 2**41), maybe_bytes, maybe_bytes, headers
)
RECORD_SETTINGS = settings(max_examples=examples(60), deadline=None,
                           suppress_health_check=[HealthCheck.too_slow])


def _b(m: memoryview | None) -> bytes | None:
    return None if m is None else bytes(m)


@RECORD_SETTINGS
@given(
    st.lists(record, min_size=1, max_size=12), st.sampled_from(list(Compression)),
    st.integers(0, 2**40), st.booleans(),
)
def test_roundtrip_every_codec(records, codec, base_offset, transactional) -> None:
    b = RecordBatchBuilder(compression=codec, base_offset=base_offset, producer_id=7,
                           producer_epoch=3, base_sequence=11,
                           is_transactional=transactional)
    for ts, k, v, h in records:
        b.append(ts, k, v, h)
    assert b.record_count == len(records)
    data = b.build()
    batch = RecordBatch(data)
    assert batch.is_valid()
    assert batch.compression == codec
    assert batch.is_transactional == transactional and not batch.is_control
    assert batch.base_offset == base_offset
    assert batch.last_offset == base_offset + len(records) - 1
    assert batch.record_count == len(records)
    assert batch.max_timestamp == max(r[0] for r in records)
    assert batch.first_timestamp == records[0][0]
    assert batch.last_sequence == 11 + len(records) - 1
    got = list(batch)
    assert [(r.offset, r.timestamp, _b(r.key), _b(r.value)) for r in got] == [
        (base_offset + i, ts, k, v) for i, (ts, k, v, _h) in enumerate(records)
    ]
    assert [[(hk, _b(hv)) for hk, hv in r.headers] for r in got] == [r[3] for r in records]
    # kafka-python, an independent implementation, reads the same batch
    theirs = DefaultRecordBatch(data)
    assert theirs.validate_crc()
    assert [(r.offset, r.key, r.value) for r in theirs] == [
        (base_offset + i, k, v) for i, (_ts, k, v, _h) in enumerate(records)
    ]


@RECORD_SETTINGS
@given(st.lists(record, min_size=1, max_size=8), st.sampled_from([0, 1, 2, 3]))
def test_reads_what_kafka_python_writes(records, codec) -> None:
    kb = DefaultRecordBatchBuilder(2, codec, False, -1, -1, -1, 1 << 30)
    for i, (ts, k, v, h) in enumerate(records):
        kb.append(i, ts, k, v, [(hk, hv) for hk, hv in h])
    data = bytes(kb.build())
    batch = RecordBatch(data)
    assert batch.is_valid()
    assert [(r.offset, r.timestamp, _b(r.key), _b(r.value)) for r in batch] == [
        (i, ts, k, v) for i, (ts, k, v, _h) in enumerate(records)
    ]


def test_uncompressed_values_are_views_of_the_callers_buffer() -> None:
    b = RecordBatchBuilder()
    b.append(1, b"k", b"hello")
    buf = bytearray(b.build())
    [rec] = list(RecordBatch(memoryview(buf)))
    assert isinstance(rec.value, memoryview)
    buf[-2] ^= 0xFF  # change the last value byte in the caller's buffer
    assert bytes(rec.value) != b"hello"


def test_empty_and_null_values_differ() -> None:
    b = RecordBatchBuilder()
    b.append(1, b"", b"")
    b.append(1, None, None)
    r1, r2 = list(RecordBatch(b.build()))
    assert bytes(r1.key) == b"" and bytes(r1.value) == b""
    assert r2.key is None and r2.value is None


def test_in_place_edits() -> None:
    b = RecordBatchBuilder()
    b.append(1000, b"k", b"v")
    b.append(2000, b"k", b"v")
    buf = bytearray(b"junk" + b.build())
    set_base_offset(buf, 4, 42)
    set_partition_leader_epoch(buf, 4, 9)
    batch = RecordBatch(buf, 4)
    assert batch.is_valid() and batch.base_offset == 42 and batch.partition_leader_epoch == 9
    set_log_append_time(buf, 4, 5555)
    batch = RecordBatch(buf, 4)
    assert batch.is_valid()
    assert batch.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert batch.max_timestamp == 5555
    assert [r.timestamp for r in batch] == [5555, 5555]
    assert [r.offset for r in batch] == [42, 43]
    with pytest.raises(InvalidRecordError):
        set_base_offset(memoryview(bytes(buf)), 4, 1)


def test_every_flipped_bit_is_detected() -> None:
    b = RecordBatchBuilder()
    b.append(1, b"key", b"value" * 3)
    data = b.build()
    for i in range(21 * 8, len(data) * 8):  # everything the CRC covers
        buf = bytearray(data)
        buf[i // 8] ^= 1 << (i % 8)
        assert not RecordBatch(buf).is_valid()


def test_truncated_batch_is_not_valid_and_iteration_raises() -> None:
    b = RecordBatchBuilder()
    b.append(1, b"key", b"value")
    data = b.build()
    assert not RecordBatch(data[:-1]).is_valid()
    with pytest.raises(CorruptRecordError):
        list(RecordBatch(data[:-1]))
    with pytest.raises(CorruptRecordError):
        RecordBatch(data[:60])


def test_corrupt_record_length_raises_not_crashes() -> None:
    b = RecordBatchBuilder()
    b.append(1, b"key", b"value")
    buf = bytearray(b.build())
    buf[61] = 0x7E  # record length 63, past the end
    with pytest.raises(CorruptRecordError):
        list(RecordBatch(buf))


def test_append_at_keeps_gaps() -> None:
    b = RecordBatchBuilder(base_offset=10)
    b.append_at(0, 1, None, b"a")
    b.append_at(5, 2, None, b"b")
    b.append(3, None, b"c")
    batch = RecordBatch(b.build())
    assert [r.offset for r in batch] == [10, 15, 16]
    assert batch.last_offset == 16 and batch.record_count == 3
    with pytest.raises(InvalidRecordError):
        b.append_at(6, 1, None, None)
