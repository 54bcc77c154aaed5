"""Record batch, magic 2 (Kafka 0.11+): a zero-copy reader, a builder, in-place header edits.

Layout (big-endian; seed 003 and notes section 6)::

    0  baseOffset int64         8  batchLength int32    12 partitionLeaderEpoch int32
    16 magic int8 (=2)          17 crc uint32 (CRC-32C over attributes..end)
    21 attributes int16         23 lastOffsetDelta int32  27 baseTimestamp int64
    35 maxTimestamp int64       43 producerId int64       51 producerEpoch int16
    53 baseSequence int32       57 recordCount int32      61 records...

A record: length varint, attributes int8, timestampDelta varlong, offsetDelta varint,
key (varint length, -1 = null), value (same), header count varint, headers (varint-length
string key, varint-length value, -1 = null).
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterable, Iterator, Sequence
from enum import IntEnum

from kafkactl.record.codecs import Compression, compress, decompress
from kafkactl.record.crc import crc32c
from kafkactl.record.errors import CorruptRecordError, InvalidRecordError
from kafkactl.record.varint import (
    _UNSIGNED_CACHE,
    decode_varint,
    decode_varlong,
    encode_varint,
    encode_varlong,
)

__all__ = [
    "ATTRIBUTES_OFFSET", "BASE_OFFSET_OFFSET", "BASE_SEQUENCE_OFFSET", "BASE_TIMESTAMP_OFFSET",
    "BATCH_HEADER",
    "CRC_OFFSET", "LAST_OFFSET_DELTA_OFFSET", "LENGTH_OFFSET", "LOG_OVERHEAD", "MAGIC_OFFSET",
    "MAX_TIMESTAMP_OFFSET", "NO_PRODUCER_EPOCH", "NO_PRODUCER_ID", "NO_SEQUENCE",
    "NO_TIMESTAMP", "PARTITION_LEADER_EPOCH_OFFSET", "PRODUCER_EPOCH_OFFSET",
    "PRODUCER_ID_OFFSET", "RECORDS_COUNT_OFFSET", "RECORDS_OFFSET", "RECORD_BATCH_OVERHEAD",
    "Record", "RecordBatch", "RecordBatchBuilder", "TimestampType", "set_base_offset",
    "set_log_append_time", "set_partition_leader_epoch",
]

BASE_OFFSET_OFFSET = 0
LENGTH_OFFSET = 8
PARTITION_LEADER_EPOCH_OFFSET = 12
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
LAST_OFFSET_DELTA_OFFSET = 23
BASE_TIMESTAMP_OFFSET = 27
MAX_TIMESTAMP_OFFSET = 35
PRODUCER_ID_OFFSET = 43
PRODUCER_EPOCH_OFFSET = 51
BASE_SEQUENCE_OFFSET = 53
RECORDS_COUNT_OFFSET = 57
RECORDS_OFFSET = 61
RECORD_BATCH_OVERHEAD = 61
LOG_OVERHEAD = 12  # baseOffset + batchLength (offset + size for magic 0/1)

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

_HEADER = struct.Struct(">qiibIhiqqqhii")  # the whole 61-byte header
BATCH_HEADER = _HEADER  # public: the broker's validator unpacks a header in one call
_AFTER_CRC = struct.Struct(">hiqqqhii")  # attributes..recordCount (40 bytes)
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_INT16 = struct.Struct(">h")

Buf = bytes | bytearray | memoryview


class TimestampType(IntEnum):
    NO_TIMESTAMP_TYPE = -1
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1

    @property
    def java_name(self) -> str:
        """`CreateTime`, `LogAppendTime` or `NoTimestampType` (Kafka's display names)."""
        return {-1: "NoTimestampType", 0: "CreateTime", 1: "LogAppendTime"}[int(self)]


class Record:
    """One record. For uncompressed batches `key`/`value` are slices of the caller's buffer."""

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
        ) = _HEADER.unpack_from(mv, position)

    # -- header-derived properties --
    @property
    def size(self) -> int:
        return LOG_OVERHEAD + self.batch_length

    @property
    def compression(self) -> Compression:
        return Compression(self.attributes & COMPRESSION_MASK)

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
        try:
            hkey = str(mv[pos:pos + hklen], "utf-8")
        except UnicodeDecodeError as e:
            raise CorruptRecordError(f"header key is not UTF-8: {e}") from None
        pos += hklen
        hvlen, pos = dv(mv, pos)
        if hvlen < 0:
            hval = None
        else:
            hval = mv[pos:pos + hvlen]
            pos += hvlen
        headers.append((hkey, hval))
    return headers, pos


# (offset delta << 24 | value length) -> encoded record prefix, for append_values
_BULK_PREFIX_CACHE: dict[int, bytes] = {}


class RecordBatchBuilder:
    """Builds one magic-2 batch. Records are encoded as they are appended (one bytes each)."""

    def __init__(
        self, compression: int = Compression.NONE,
        timestamp_type: int = TimestampType.CREATE_TIME,
        producer_id: int = NO_PRODUCER_ID, producer_epoch: int = NO_PRODUCER_EPOCH,
        base_sequence: int = NO_SEQUENCE, is_transactional: bool = False,
        is_control: bool = False, base_offset: int = 0, partition_leader_epoch: int = -1,
    ) -> None:
        self.compression = Compression(compression)
        self.timestamp_type = TimestampType(timestamp_type)
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.is_transactional = is_transactional
        self.is_control = is_control
        self.base_offset = base_offset
        self.partition_leader_epoch = partition_leader_epoch
        self._records: list[bytes] = []  # encoded records (or runs of them)
        self._count = 0
        self._size = 0
        self._base_ts: int | None = None
        self._max_ts = NO_TIMESTAMP
        self._last_delta = -1

    @property
    def record_count(self) -> int:
        return self._count

    def append(
        self, timestamp: int | None, key: bytes | None, value: bytes | None,
        headers: Iterable[tuple[str, bytes | None]] = (),
    ) -> int:
        """Encode one record at the next offset delta; returns that delta."""
        delta = self._last_delta + 1
        if timestamp is None:
            timestamp = int(time.time() * 1000)
        base_ts = self._base_ts
        if base_ts is None:
            base_ts = self._base_ts = timestamp
        if timestamp > self._max_ts:
            self._max_ts = timestamp
        rec = encode_record(delta, timestamp - base_ts, key, value, headers)
        self._records.append(rec)
        self._count += 1
        self._size += len(rec)
        self._last_delta = delta
        return delta

    def append_values(self, values: Sequence[bytes], timestamp: int | None = None) -> None:
        """Append many records with a null key, no headers and one shared timestamp.

        The bulk path of line-oriented producers: each record's prefix (length, attributes,
        timestamp delta 0, offset delta, null key, value length) depends only on its offset
        delta and value length, so it is cached and a record costs one lookup and three
        list items. Falls back to `append` when the shared timestamp is not the batch's
        base timestamp or a value is None.
        """
        if timestamp is None:
            timestamp = int(time.time() * 1000)
        if self._base_ts is None:
            self._base_ts = timestamp
        if timestamp != self._base_ts or None in values:
            for v in values:
                self.append(timestamp, None, v)
            return
        if timestamp > self._max_ts:
            self._max_ts = timestamp
        cache = _UNSIGNED_CACHE
        prefixes = _BULK_PREFIX_CACHE
        parts: list[bytes] = []
        extend = parts.extend
        start = self._last_delta + 1
        delta = start - 1
        for delta, v in enumerate(values, start):
            n = len(v)
            k = (delta << 24) | n
            pre = prefixes.get(k)
            if pre is None:
                off = cache[delta << 1] if delta < 8192 else encode_varint(delta)
                vl = cache[n << 1] if n < 8192 else encode_varint(n)
                size = 4 + len(off) + len(vl) + n
                pre = b"".join((encode_varint(size), b"\x00\x00", off, b"\x01", vl))
                if delta < 4096 and n < (1 << 24) and len(prefixes) < 1 << 18:
                    prefixes[k] = pre
            extend((pre, v, b"\x00"))
        chunk = b"".join(parts)
        self._records.append(chunk)
        self._count += delta - start + 1
        self._size += len(chunk)
        self._last_delta = delta

    def append_at(
        self, offset_delta: int, timestamp: int | None, key: bytes | None,
        value: bytes | None, headers: Iterable[tuple[str, bytes | None]] = (),
    ) -> int:
        """Append with an explicit offset delta (gaps allowed, as after compaction);
        deltas must increase."""
        if offset_delta <= self._last_delta:
            raise InvalidRecordError(
                f"offset delta {offset_delta} does not follow {self._last_delta}"
            )
        self._last_delta = offset_delta - 1
        return self.append(timestamp, key, value, headers)

    def size_in_bytes(self) -> int:
        """Size of the batch built now, before compression."""
        return RECORD_BATCH_OVERHEAD + self._size

    def estimated_size_after_append(self, key: bytes | None, value: bytes | None) -> int:
        return self.size_in_bytes() + 21 + (len(key) if key else 0) + (len(value) if value else 0)

    def _attributes(self) -> int:
        attrs = int(self.compression)
        if self.timestamp_type == TimestampType.LOG_APPEND_TIME:
            attrs |= TIMESTAMP_TYPE_MASK
        if self.is_transactional:
            attrs |= TRANSACTIONAL_FLAG
        if self.is_control:
            attrs |= CONTROL_FLAG
        return attrs

    def build(self) -> bytes:
        """The complete batch (header + records, compressed if asked) with its CRC."""
        records = b"".join(self._records)
        if self.compression != Compression.NONE:
            records = compress(self.compression, records)
        return assemble_batch(
            records, attributes=self._attributes(), last_offset_delta=max(self._last_delta, 0),
            base_timestamp=self._base_ts if self._base_ts is not None else NO_TIMESTAMP,
            max_timestamp=self._max_ts, producer_id=self.producer_id,
            producer_epoch=self.producer_epoch, base_sequence=self.base_sequence,
            record_count=self._count, base_offset=self.base_offset,
            partition_leader_epoch=self.partition_leader_epoch)


def encode_record(offset_delta: int, timestamp_delta: int, key: bytes | None,
                  value: bytes | None, headers: Iterable[tuple[str, bytes | None]] = ()
                  ) -> bytes:
    """One v2 record, length prefix included (the one record encoder: RecordBatchBuilder
    and the client's ProducerBatch both call it)."""
    cache = _UNSIGNED_CACHE
    # zigzag of small non-negative n is 2n: index the unsigned cache directly
    ts_enc = (cache[timestamp_delta << 1] if 0 <= timestamp_delta < 8192
              else encode_varlong(timestamp_delta))
    off_enc = cache[offset_delta << 1] if offset_delta < 8192 else encode_varint(offset_delta)
    if key is None:
        klen = b"\x01"
        key = b""
    else:
        n = len(key)
        klen = cache[n << 1] if n < 8192 else encode_varint(n)
    if value is None:
        vlen = b"\x01"
        value = b""
    else:
        n = len(value)
        vlen = cache[n << 1] if n < 8192 else encode_varint(n)
    hdr = _encode_headers(headers) if headers else b"\x00"
    body = b"".join((b"\x00", ts_enc, off_enc, klen, key, vlen, value, hdr))
    n = len(body)
    return (cache[n << 1] if n < 8192 else encode_varint(n)) + body


_BEFORE_CRC = struct.Struct(">qiibI")  # base offset, batch length, leader epoch, magic, crc


def assemble_batch(records: bytes, *, attributes: int, last_offset_delta: int,
                   base_timestamp: int, max_timestamp: int, producer_id: int,
                   producer_epoch: int, base_sequence: int, record_count: int,
                   base_offset: int = 0, partition_leader_epoch: int = -1) -> bytes:
    """A complete magic-2 batch around an (already compressed) records section, with its
    CRC-32C (which covers everything after the CRC field)."""
    tail = _AFTER_CRC.pack(attributes, last_offset_delta, base_timestamp, max_timestamp,
                           producer_id, producer_epoch, base_sequence, record_count)
    crc = crc32c(records, crc32c(tail))
    head = _BEFORE_CRC.pack(base_offset, RECORD_BATCH_OVERHEAD - LOG_OVERHEAD + len(records),
                            partition_leader_epoch, CURRENT_MAGIC, crc)
    return b"".join((head, tail, records))


def _encode_headers(headers: Iterable[tuple[str, bytes | None]]) -> bytes:
    cache = _UNSIGNED_CACHE
    parts = []
    n = 0
    for hkey, hval in headers:
        kb = hkey.encode("utf-8") if isinstance(hkey, str) else bytes(hkey)
        k = len(kb)
        parts.append(cache[k << 1] if k < 8192 else encode_varint(k))
        parts.append(kb)
        if hval is None:
            parts.append(b"\x01")
        else:
            v = len(hval)
            parts.append(cache[v << 1] if v < 8192 else encode_varint(v))
            parts.append(hval if isinstance(hval, bytes) else bytes(hval))
        n += 1
    return (cache[n << 1] if n < 8192 else encode_varint(n)) + b"".join(parts)


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
    _restamp_crc(buf, pos)



def set_producer_state(buf: bytearray | memoryview, pos: int, producer_id: int,
                       producer_epoch: int, base_sequence: int) -> None:
    """Re-stamp an idempotent batch with a new producer id, epoch and base sequence (the
    producer does this after an epoch reset) and recompute the CRC-32C they are under."""
    _check_writable(buf, pos)
    _INT64.pack_into(buf, pos + PRODUCER_ID_OFFSET, producer_id)
    _INT16.pack_into(buf, pos + PRODUCER_EPOCH_OFFSET, producer_epoch)
    _INT32.pack_into(buf, pos + BASE_SEQUENCE_OFFSET, base_sequence)
    _restamp_crc(buf, pos)


def _restamp_crc(buf: bytearray | memoryview, pos: int) -> None:
    """Recompute the CRC-32C of the batch at `pos` after a field under it changed."""
    (length,) = _INT32.unpack_from(buf, pos + LENGTH_OFFSET)
    end = pos + LOG_OVERHEAD + length
    if end > len(buf):
        raise CorruptRecordError(f"record batch at position {pos} is truncated")
    _UINT32.pack_into(buf, pos + CRC_OFFSET, crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET:end]))
