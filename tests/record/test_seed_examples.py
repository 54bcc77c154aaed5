"""Byte-exact agreement with the examples of seed 003 (Kafka's message format history)."""

from __future__ import annotations

import struct

from kafkactl.record.batch import RecordBatch, RecordBatchBuilder
from kafkactl.record.legacy import LegacyEntry, build_message_set
from kafkactl.record.memory_records import iter_batches


def test_v0_message_key_value_is_34_bytes_with_seed_crc() -> None:
    data = build_message_set(0, [(None, b"key", b"value")])
    assert len(data) == 34
    entry = LegacyEntry(data)
    assert entry.message.crc == 592888119
    assert entry.message.is_valid()
    assert entry.offset == 0 and entry.size == 22
    assert bytes(entry.message.key) == b"key" and bytes(entry.message.value) == b"value"


def test_v0_message_null_key_is_31_bytes() -> None:
    data = build_message_set(0, [(None, None, b"value")])
    assert len(data) == 31
    # the key length field is -1
    assert struct.unpack_from(">i", data, 18)[0] == -1
    assert LegacyEntry(data).message.key is None


def test_v0_log_file_of_both_messages_is_65_bytes() -> None:
    log = build_message_set(0, [(None, b"key", b"value")]) + build_message_set(
        0, [(None, None, b"value")], base_offset=1
    )
    assert len(log) == 65
    assert [b.last_offset for b in iter_batches(log)] == [0, 1]


def test_v1_message_is_42_bytes() -> None:
    data = build_message_set(1, [(1524709879130, b"key", b"value")])
    assert len(data) == 42
    msg = LegacyEntry(data).message
    assert msg.magic == 1 and msg.timestamp == 1524709879130 and msg.is_valid()


def test_v2_single_record_batch_is_76_bytes_with_seed_crc() -> None:
    b = RecordBatchBuilder(partition_leader_epoch=0)
    b.append(1524709879130, b"key", b"value")
    data = b.build()
    assert len(data) == 76
    batch = RecordBatch(data)
    assert batch.crc == 2857248333
    assert batch.is_valid()
    assert (batch.base_offset, batch.last_offset, batch.size, batch.magic) == (0, 0, 76, 2)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (-1, -1, -1)
    assert batch.last_sequence == -1
    assert batch.first_timestamp == batch.max_timestamp == 1524709879130
    [rec] = list(batch)
    assert rec.offset == 0 and rec.timestamp == 1524709879130
    assert bytes(rec.key) == b"key" and bytes(rec.value) == b"value" and rec.headers == []
    # the record itself: length varint 14 (zigzag 28) then 14 bytes
    assert data[61] == 28 and len(data) - 62 == 14


def test_v2_null_key_batch_is_73_bytes() -> None:
    b = RecordBatchBuilder(partition_leader_epoch=0)
    b.append(1524709879130, None, b"value")
    assert len(b.build()) == 73


def test_v2_ten_records_of_six_bytes_is_191_bytes() -> None:
    # seed 003: ten key=null records with 6-byte values take 191 bytes in one batch
    b = RecordBatchBuilder(base_offset=2, partition_leader_epoch=0)
    for i in range(10):
        b.append(1524712213771 + i, None, b"abcdef")
    data = b.build()
    assert len(data) == 191
    batch = RecordBatch(data)
    assert (batch.base_offset, batch.last_offset, batch.record_count) == (2, 11, 10)
