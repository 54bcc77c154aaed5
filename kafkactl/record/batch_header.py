"""The magic-2 record batch header: its one layout, a view of it, and in-place edits.

Layout (big-endian; seed 003 and notes section 6)::

    0  baseOffset int64         8  batchLength int32    12 partitionLeaderEpoch int32
    16 magic int8 (=2)          17 crc uint32 (CRC-32C over attributes..end)
    21 attributes int16         23 lastOffsetDelta int32  27 baseTimestamp int64
    35 maxTimestamp int64       43 producerId int64       51 producerEpoch int16
    53 baseSequence int32       57 recordCount int32      61 records...

`HEADER_FIELDS` is the one definition: the field offsets, `BATCH_HEADER` (the whole
header in one unpack) and `header_struct(...)` (any subset of fields, still one unpack)
are all derived from it. Every layer that reads or writes a v2 header (the reader, the
builder, the broker's validator, the log's append and recovery) uses these names.
"""

from __future__ import annotations

import struct
from enum import IntEnum
from typing import NamedTuple

from kafkactl.record.crc import crc32c
from kafkactl.record.errors import CorruptRecordError, InvalidRecordError

Buf = bytes | bytearray | memoryview

# (field, struct code) in header order: the v2 batch header, one field per line
HEADER_FIELDS: tuple[tuple[str, str], ...] = (
    ("base_offset", "q"),
    ("batch_length", "i"),
    ("partition_leader_epoch", "i"),
    ("magic", "b"),
    ("crc", "I"),
    ("attributes", "h"),
    ("last_offset_delta", "i"),
    ("base_timestamp", "q"),
    ("max_timestamp", "q"),
    ("producer_id", "q"),
    ("producer_epoch", "h"),
    ("base_sequence", "i"),
    ("record_count", "i"),
)


def _field_offsets() -> dict[str, int]:
    offsets, pos = {}, 0
    for name, code in HEADER_FIELDS:
        offsets[name] = pos
        pos += struct.calcsize(">" + code)
    offsets["records"] = pos
    return offsets


FIELD_OFFSETS: dict[str, int] = _field_offsets()

BASE_OFFSET_OFFSET = FIELD_OFFSETS["base_offset"]  # 0
LENGTH_OFFSET = FIELD_OFFSETS["batch_length"]  # 8
PARTITION_LEADER_EPOCH_OFFSET = FIELD_OFFSETS["partition_leader_epoch"]  # 12
MAGIC_OFFSET = FIELD_OFFSETS["magic"]  # 16
CRC_OFFSET = FIELD_OFFSETS["crc"]  # 17
ATTRIBUTES_OFFSET = FIELD_OFFSETS["attributes"]  # 21
LAST_OFFSET_DELTA_OFFSET = FIELD_OFFSETS["last_offset_delta"]  # 23
BASE_TIMESTAMP_OFFSET = FIELD_OFFSETS["base_timestamp"]  # 27
MAX_TIMESTAMP_OFFSET = FIELD_OFFSETS["max_timestamp"]  # 35
PRODUCER_ID_OFFSET = FIELD_OFFSETS["producer_id"]  # 43
PRODUCER_EPOCH_OFFSET = FIELD_OFFSETS["producer_epoch"]  # 51
BASE_SEQUENCE_OFFSET = FIELD_OFFSETS["base_sequence"]  # 53
RECORDS_COUNT_OFFSET = FIELD_OFFSETS["record_count"]  # 57
RECORDS_OFFSET = FIELD_OFFSETS["records"]  # 61
RECORD_BATCH_OVERHEAD = RECORDS_OFFSET
LOG_OVERHEAD = LENGTH_OFFSET + 4  # baseOffset + batchLength (offset + size for magic 0/1)

NO_TIMESTAMP = -1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
CURRENT_MAGIC = 2

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_FLAG = 0x10
CONTROL_FLAG = 0x20
DELETE_HORIZON_FLAG = 0x40


def header_struct(*names: str, relative: bool = False) -> struct.Struct:
    """A Struct that unpacks just the named header fields (in header order), skipping the
    others with pad bytes: e.g. ("base_offset", "batch_length", "magic") -> ">qi4xb".
    With `relative` it starts at the first named field rather than at the batch start."""
    codes = dict(HEADER_FIELDS)
    fmt, pos = ">", FIELD_OFFSETS[names[0]] if relative else 0
    for name in names:
        start = FIELD_OFFSETS[name]
        if start < pos:
            raise ValueError(f"header field {name!r} is out of order")
        if start > pos:
            fmt += f"{start - pos}x"
        fmt += codes[name]
        pos = start + struct.calcsize(">" + codes[name])
    return struct.Struct(fmt)


BATCH_HEADER = header_struct(*(name for name, _code in HEADER_FIELDS))  # all 61 bytes
_AFTER_CRC = header_struct(*(name for name, _code in HEADER_FIELDS[5:]), relative=True)
_BEFORE_CRC = header_struct(*(name for name, _code in HEADER_FIELDS[:5]))
assert BATCH_HEADER.size == RECORD_BATCH_OVERHEAD == 61
assert _AFTER_CRC.size == RECORD_BATCH_OVERHEAD - ATTRIBUTES_OFFSET

_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_INT16 = struct.Struct(">h")


class TimestampType(IntEnum):
    NO_TIMESTAMP_TYPE = -1
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1

    @property
    def java_name(self) -> str:
        """`CreateTime`, `LogAppendTime` or `NoTimestampType` (Kafka's display names)."""
        return {-1: "NoTimestampType", 0: "CreateTime", 1: "LogAppendTime"}[int(self)]


class RecordBatchHeader(NamedTuple):
    """The 61-byte header of one magic-2 batch, read with one unpack (no records decoded)."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @classmethod
    def read(cls, buf: Buf, position: int = 0) -> RecordBatchHeader:
        """The header at `position`; CorruptRecordError when fewer than 61 bytes are left."""
        if position < 0 or position + RECORD_BATCH_OVERHEAD > len(buf):
            raise CorruptRecordError(
                f"record batch header at position {position} is truncated "
                f"({len(buf) - position} of {RECORD_BATCH_OVERHEAD} bytes)")
        return cls._make(BATCH_HEADER.unpack_from(buf, position))

    @property
    def size(self) -> int:
        return LOG_OVERHEAD + self.batch_length

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> TimestampType:
        return (TimestampType.LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_MASK
                else TimestampType.CREATE_TIME)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG)


def pack_header(records: bytes | bytearray | memoryview, *, attributes: int,
                last_offset_delta: int, base_timestamp: int, max_timestamp: int,
                producer_id: int, producer_epoch: int, base_sequence: int, record_count: int,
                base_offset: int, partition_leader_epoch: int) -> bytes:
    """The 61 header bytes of a batch whose (already compressed) records section is
    `records`, with the CRC-32C over attributes..end."""
    tail = _AFTER_CRC.pack(attributes, last_offset_delta, base_timestamp, max_timestamp,
                           producer_id, producer_epoch, base_sequence, record_count)
    crc = crc32c(records, crc32c(tail))
    head = _BEFORE_CRC.pack(base_offset,
                            RECORD_BATCH_OVERHEAD - LOG_OVERHEAD + len(records),
                            partition_leader_epoch, CURRENT_MAGIC, crc)
    return head + tail


# -- in-place header edits (bytearray or writable memoryview) --

def _check_writable(buf: bytearray | memoryview, pos: int) -> None:
    if isinstance(buf, memoryview) and buf.readonly:
        raise InvalidRecordError("the batch buffer is read-only")
    if pos < 0 or pos + RECORD_BATCH_OVERHEAD > len(buf):
        raise CorruptRecordError(f"no record batch header at position {pos}")


def set_base_offset(buf: bytearray | memoryview, pos: int, offset: int) -> None:
    """Stamp the base offset (not covered by the CRC, so no recompute)."""
    _check_writable(buf, pos)
    _INT64.pack_into(buf, pos + BASE_OFFSET_OFFSET, offset)


def set_partition_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    """Stamp the partition leader epoch (not covered by the CRC)."""
    _check_writable(buf, pos)
    _INT32.pack_into(buf, pos + PARTITION_LEADER_EPOCH_OFFSET, epoch)


def set_log_append_time(buf: bytearray | memoryview, pos: int, timestamp: int) -> None:
    """Switch the batch to LogAppendTime at `timestamp`: attribute bit 3, max timestamp,
    and a new CRC-32C."""
    _check_writable(buf, pos)
    (attrs,) = _INT16.unpack_from(buf, pos + ATTRIBUTES_OFFSET)
    _INT16.pack_into(buf, pos + ATTRIBUTES_OFFSET, attrs | TIMESTAMP_TYPE_MASK)
    _INT64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, timestamp)
    restamp_crc(buf, pos)


def set_producer_state(buf: bytearray | memoryview, pos: int, producer_id: int,
                       producer_epoch: int, base_sequence: int) -> None:
    """Re-stamp an idempotent batch with a new producer id, epoch and base sequence (the
    producer does this after an epoch reset) and recompute the CRC-32C they are under."""
    _check_writable(buf, pos)
    _INT64.pack_into(buf, pos + PRODUCER_ID_OFFSET, producer_id)
    _INT16.pack_into(buf, pos + PRODUCER_EPOCH_OFFSET, producer_epoch)
    _INT32.pack_into(buf, pos + BASE_SEQUENCE_OFFSET, base_sequence)
    restamp_crc(buf, pos)


def restamp_crc(buf: bytearray | memoryview, pos: int) -> None:
    """Recompute the CRC-32C of the batch at `pos` after a field under it changed."""
    (length,) = _INT32.unpack_from(buf, pos + LENGTH_OFFSET)
    end = pos + LOG_OVERHEAD + length
    if end > len(buf):
        raise CorruptRecordError(f"record batch at position {pos} is truncated")
    _UINT32.pack_into(buf, pos + CRC_OFFSET, crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET:end]))
