"""Record batch, magic 2 (Kafka 0.11+): a zero-copy reader of batches and their records.

The header layout and the in-place header edits are in record.batch_header, the builder
in record.builder; both are re-exported here, where most callers import them from.

A record: length varint, attributes int8, timestampDelta varlong, offsetDelta varint,
key (varint length, -1 = null), value (same), header count varint, headers (varint-length
string key, varint-length value, -1 = null).
"""

from __future__ import annotations

from collections.abc import Iterator

from kafkactl.record.batch_header import (
    ATTRIBUTES_OFFSET,
    BASE_OFFSET_OFFSET,
    BASE_SEQUENCE_OFFSET,
    BASE_TIMESTAMP_OFFSET,
    BATCH_HEADER,
    COMPRESSION_MASK,
    CONTROL_FLAG,
    CRC_OFFSET,
    CURRENT_MAGIC,
    DELETE_HORIZON_FLAG,
    LAST_OFFSET_DELTA_OFFSET,
    LENGTH_OFFSET,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAX_TIMESTAMP_OFFSET,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    PARTITION_LEADER_EPOCH_OFFSET,
    PRODUCER_EPOCH_OFFSET,
    PRODUCER_ID_OFFSET,
    RECORD_BATCH_OVERHEAD,
    RECORDS_COUNT_OFFSET,
    RECORDS_OFFSET,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG,
    TimestampType,
    set_base_offset,
    set_log_append_time,
    set_partition_leader_epoch,
    set_producer_state,
)
from kafkactl.record.builder import RecordBatchBuilder, assemble_batch, encode_record
from kafkactl.record.codecs import Compression, decompress
from kafkactl.record.crc import crc32c
from kafkactl.record.errors import CorruptRecordError
from kafkactl.record.varint import decode_varint, decode_varlong

__all__ = [
    "ATTRIBUTES_OFFSET", "BASE_OFFSET_OFFSET", "BASE_SEQUENCE_OFFSET", "BASE_TIMESTAMP_OFFSET",
    "BATCH_HEADER", "COMPRESSION_MASK", "CONTROL_FLAG", "CRC_OFFSET", "CURRENT_MAGIC",
    "DELETE_HORIZON_FLAG", "LAST_OFFSET_DELTA_OFFSET", "LENGTH_OFFSET", "LOG_OVERHEAD",
    "MAGIC_OFFSET", "MAX_TIMESTAMP_OFFSET", "NO_PRODUCER_EPOCH", "NO_PRODUCER_ID",
    "NO_SEQUENCE", "NO_TIMESTAMP", "PARTITION_LEADER_EPOCH_OFFSET", "PRODUCER_EPOCH_OFFSET",
    "PRODUCER_ID_OFFSET", "RECORDS_COUNT_OFFSET", "RECORDS_OFFSET", "RECORD_BATCH_OVERHEAD",
    "Record", "RecordBatch", "RecordBatchBuilder", "TIMESTAMP_TYPE_MASK",
    "TRANSACTIONAL_FLAG", "TimestampType", "assemble_batch", "encode_record",
    "header_key_bytes", "header_key_text",
    "set_base_offset", "set_log_append_time", "set_partition_leader_epoch",
    "set_producer_state",
]

Buf = bytes | bytearray | memoryview


class Record:
    """One record. For uncompressed batches `key`/`value` are slices of the caller's buffer.
    A header key is its UTF-8 text; bytes of it that are not UTF-8 (Kafka takes any) are
    surrogateescape's U+DC80..U+DCFF, so `key.encode("utf-8", "surrogateescape")` is the
    key's bytes (header_key_bytes)."""

    __slots__ = ("attributes", "headers", "key", "offset", "timestamp", "value")

    def __init__(
        self, offset: int, timestamp: int, key: memoryview | None, value: memoryview | None,
        headers: list[tuple[str, memoryview | None]], attributes: int = 0,
    ) -> None:
        self.offset = offset
        self.timestamp = timestamp
        self.key = key
        self.value = value
        self.headers = headers
        self.attributes = attributes

    def __repr__(self) -> str:
        k = None if self.key is None else bytes(self.key)
        v = None if self.value is None else bytes(self.value)
        return f"Record(offset={self.offset}, timestamp={self.timestamp}, key={k!r}, value={v!r})"


class RecordBatch:
    """A zero-copy view of one magic-2 batch at `position` in `buf`.

    The 61-byte header must be inside `buf`; the records are read lazily by `__iter__`.
    """

    __slots__ = (
        "_buf", "attributes", "base_offset", "base_sequence", "batch_length", "crc",
        "first_timestamp", "last_offset_delta", "magic", "max_timestamp",
        "partition_leader_epoch", "position", "producer_epoch", "producer_id", "record_count",
    )

    def __init__(self, buf: Buf, position: int = 0) -> None:
        mv = buf if isinstance(buf, memoryview) else memoryview(buf)
        if position < 0 or position + RECORD_BATCH_OVERHEAD > len(mv):
            raise CorruptRecordError(
                f"record batch header at position {position} is truncated "
                f"({len(mv) - position} of {RECORD_BATCH_OVERHEAD} bytes)"
            )
        self._buf = mv
        self.position = position
        (
            self.base_offset, self.batch_length, self.partition_leader_epoch, self.magic,
            self.crc, self.attributes, self.last_offset_delta, self.first_timestamp,
            self.max_timestamp, self.producer_id, self.producer_epoch, self.base_sequence,
            self.record_count,
        ) = BATCH_HEADER.unpack_from(mv, position)

    # -- header-derived properties --
    @property
    def size(self) -> int:
        return LOG_OVERHEAD + self.batch_length

    @property
    def compression(self) -> Compression:
        """The codec of attributes bits 0-2; 5-7 name none: CorruptRecordError."""
        return Compression.of_attributes(self.attributes,
                                         "the record batch at position %d", self.position)

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

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_FLAG)

    @property
    def delete_horizon_ms(self) -> int | None:
        """With the delete-horizon bit, the base timestamp is the delete horizon (KIP-534)."""
        return self.first_timestamp if self.has_delete_horizon else None

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return _add_sequence(self.base_sequence, self.last_offset_delta)

    def is_in_buffer(self) -> bool:
        return self.batch_length >= 0 and self.position + self.size <= len(self._buf)

    def compute_crc(self) -> int:
        """CRC-32C over attributes..end of the batch, as it should be stored."""
        start = self.position + ATTRIBUTES_OFFSET
        end = self.position + self.size
        if end > len(self._buf):
            raise CorruptRecordError(
                f"record batch at position {self.position} is truncated: "
                f"{self.size} bytes declared, {len(self._buf) - self.position} present"
            )
        return crc32c(self._buf[start:end])

    def is_valid(self) -> bool:
        """Size >= 61, entirely inside the buffer, magic 2 and a matching CRC-32C."""
        return (
            self.size >= RECORD_BATCH_OVERHEAD
            and self.magic == CURRENT_MAGIC
            and self.is_in_buffer()
            and self.compute_crc() == self.crc
        )

    def ensure_valid(self) -> None:
        if self.size < RECORD_BATCH_OVERHEAD:
            raise CorruptRecordError(
                f"record batch at position {self.position} is {self.size} bytes, "
                f"less than the {RECORD_BATCH_OVERHEAD}-byte header"
            )
        if not self.is_in_buffer():
            self.compute_crc()  # raises the truncation error
        computed = self.compute_crc()
        if computed != self.crc:
            raise CorruptRecordError(
                f"record batch at position {self.position} is corrupt: stored crc {self.crc} "
                f"!= computed crc {computed}"
            )

    def records_section(self) -> memoryview:
        """The (possibly compressed) bytes after the header."""
        end = self.position + self.size
        if self.batch_length < RECORD_BATCH_OVERHEAD - LOG_OVERHEAD or end > len(self._buf):
            raise CorruptRecordError(f"record batch at position {self.position} is truncated")
        return self._buf[self.position + RECORDS_OFFSET:end]

    def __iter__(self) -> Iterator[Record]:
        section = self.records_section()
        codec = self.attributes & COMPRESSION_MASK
        if codec:
            section = memoryview(decompress(codec, section))
        log_append = self.attributes & TIMESTAMP_TYPE_MASK
        return _iter_records(
            section, self.record_count, self.base_offset, self.first_timestamp,
            self.max_timestamp if log_append else None,
        )

    def __len__(self) -> int:
        return self.record_count

    def __repr__(self) -> str:
        return (f"RecordBatch(base_offset={self.base_offset}, last_offset={self.last_offset}, "
                f"count={self.record_count}, size={self.size}, position={self.position})")


def _add_sequence(base: int, delta: int) -> int:
    s = base + delta
    return s - (1 << 31) if s > 0x7FFFFFFF else s


def _iter_records(
    mv: memoryview, count: int, base_offset: int, base_ts: int, log_append_ts: int | None
) -> Iterator[Record]:
    # Varints are inlined for the one-byte case (values -64..63), the common one for
    # attributes, deltas and short keys; longer ones go through decode_varint/varlong.
    pos = 0
    end = len(mv)
    dv = decode_varint
    for _ in range(count):
        if pos >= end:
            raise CorruptRecordError(f"records section ends before record {_} of {count}")
        b = mv[pos]
        if b < 0x80:
            length = (b >> 1) ^ -(b & 1)
            pos += 1
        else:
            length, pos = dv(mv, pos)
        start = pos
        rec_end = pos + length
        if length < 6 or rec_end > end:
            raise CorruptRecordError(f"record length {length} at {start} overruns the section")
        attributes = mv[pos]
        b = mv[pos + 1]
        if b < 0x80:
            ts_delta = (b >> 1) ^ -(b & 1)
            pos += 2
        else:
            ts_delta, pos = decode_varlong(mv, pos + 1)
        b = mv[pos]
        if b < 0x80:
            off_delta = (b >> 1) ^ -(b & 1)
            pos += 1
        else:
            off_delta, pos = dv(mv, pos)
        b = mv[pos]
        if b < 0x80:
            klen = (b >> 1) ^ -(b & 1)
            pos += 1
        else:
            klen, pos = dv(mv, pos)
        if klen < 0:
            key = None
        else:
            key = mv[pos:pos + klen]
            pos += klen
        vlen, pos = dv(mv, pos)
        if vlen < 0:
            value = None
        else:
            value = mv[pos:pos + vlen]
            pos += vlen
        if pos < rec_end and mv[pos] == 0:
            headers: list[tuple[str, memoryview | None]] = []
            pos += 1
        else:
            headers, pos = _decode_headers(mv, pos)
        if pos != rec_end:
            raise CorruptRecordError(
                f"record at {start} declares {length} bytes but its fields use {pos - start}"
            )
        yield Record(
            base_offset + off_delta,
            base_ts + ts_delta if log_append_ts is None else log_append_ts,
            key, value, headers, attributes,
        )
    if pos != end:
        raise CorruptRecordError(f"{end - pos} unexpected bytes after the last record")


def header_key_bytes(key: str) -> bytes:
    """A header key's bytes as the record holds them (see Record)."""
    return key.encode("utf-8", "surrogateescape")


def header_key_text(key: str) -> str:
    """A header key as Java's consumer reads it (Utils.utf8): bytes that are not UTF-8
    become U+FFFD, for output that must be text (Arrow strings, dump-log)."""
    return key.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _decode_headers(mv: memoryview, pos: int) -> tuple[list[tuple[str, memoryview | None]], int]:
    dv = decode_varint
    nh, pos = dv(mv, pos)
    if nh < 0:
        raise CorruptRecordError(f"negative header count {nh}")
    headers: list[tuple[str, memoryview | None]] = []
    for _h in range(nh):
        hklen, pos = dv(mv, pos)
        if hklen < 0:
            raise CorruptRecordError("null header key")
        if pos + hklen > len(mv):
            raise CorruptRecordError("header key overruns the record")
        # Kafka reads any bytes as the key (Utils.utf8: a lenient decode, never an error);
        # surrogateescape keeps bytes that are not UTF-8 as U+DC80..U+DCFF, so that
        # key.encode("utf-8", "surrogateescape") gives them back (builder.encode_headers)
        hkey = str(mv[pos:pos + hklen], "utf-8", "surrogateescape")
        pos += hklen
        hvlen, pos = dv(mv, pos)
        if hvlen < 0:
            hval = None
        else:
            hval = mv[pos:pos + hvlen]
            pos += hvlen
        headers.append((hkey, hval))
    return headers, pos
