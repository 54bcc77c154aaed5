"""Legacy message sets, magic 0 (Kafka 0.8-0.9) and magic 1 (0.10), per seed 003.

One entry on disk / on the wire::

    offset int64, size int32,                       <- log overhead (12 bytes)
    crc uint32 (CRC-32 over magic..value), magic int8, attributes int8,
    [timestamp int64, magic 1 only], key length int32 (-1 = null), key,
    value length int32 (-1 = null), value

Attributes: bits 0-2 the codec, bit 3 (magic 1) the timestamp type. A compressed entry is a
*wrapper* whose value is a compressed inner message set. The wrapper's offset is the absolute
offset of the last inner message. Magic 1 inner offsets are relative (0..n-1) and resolve as
``AO = wrapper_offset + (IO - IO_of_last_inner)``; magic 0 inner offsets are absolute.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from kafkactl.record.batch import LOG_OVERHEAD, Record, TimestampType
from kafkactl.record.codecs import Compression, compress, decompress
from kafkactl.record.crc import crc32
from kafkactl.record.errors import CorruptRecordError, InvalidRecordError

__all__ = [
    "LegacyBatch", "LegacyEntry", "LegacyMessage", "MESSAGE_OVERHEAD_V0", "MESSAGE_OVERHEAD_V1",
    "build_message_set", "encode_message",
]

MESSAGE_OVERHEAD_V0 = 14  # crc + magic + attributes + key length + value length
MESSAGE_OVERHEAD_V1 = 22  # + timestamp
CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
_ENTRY_HEAD = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")

Buf = bytes | bytearray | memoryview
LegacyInput = tuple[int | None, bytes | None, bytes | None]  # (timestamp, key, value)


def _min_size(magic: int) -> int:
    return MESSAGE_OVERHEAD_V0 if magic == 0 else MESSAGE_OVERHEAD_V1


@dataclass(slots=True)
class LegacyMessage:
    """One parsed magic 0/1 message (without its offset/size log overhead)."""

    crc: int
    magic: int
    attributes: int
    timestamp: int  # -1 for magic 0
    key: memoryview | None
    value: memoryview | None
    raw: memoryview  # crc..value, for CRC checks

    @property
    def compression(self) -> Compression:
        """The codec of attributes bits 0-2; 5-7 name none (CorruptRecordError, as Kafka's
        CompressionType.forId refuses them), so no caller meets a bare ValueError."""
        return Compression.of_attributes(self.attributes, "a magic %d message", self.magic)

    @property
    def timestamp_type(self) -> TimestampType:
        if self.magic == 0:
            return TimestampType.NO_TIMESTAMP_TYPE
        if self.attributes & TIMESTAMP_TYPE_MASK:
            return TimestampType.LOG_APPEND_TIME
        return TimestampType.CREATE_TIME

    def compute_crc(self) -> int:
        return crc32(self.raw[4:])

    def is_valid(self) -> bool:
        return self.compute_crc() == self.crc

    @classmethod
    def parse(cls, buf: Buf, position: int, size: int) -> LegacyMessage:
        """Parse the `size` bytes of a message starting (at its CRC) at `position`."""
        mv = buf if isinstance(buf, memoryview) else memoryview(buf)
        end = position + size
        if end > len(mv):
            raise CorruptRecordError(f"message at position {position} is truncated")
        if size < MESSAGE_OVERHEAD_V0:
            raise CorruptRecordError(
                f"message at position {position} is {size} bytes, less than the "
                f"{MESSAGE_OVERHEAD_V0}-byte minimum"
            )
        crc, magic, attributes = struct.unpack_from(">Ibb", mv, position)
        if magic not in (0, 1):
            raise CorruptRecordError(f"invalid magic {magic} at position {position + 4}")
        if size < _min_size(magic):
            raise CorruptRecordError(f"magic {magic} message at position {position} too short")
        pos = position + 6
        timestamp = -1
        if magic == 1:
            (timestamp,) = _INT64.unpack_from(mv, pos)
            pos += 8
        key, pos = _read_bytes(mv, pos, end)
        value, pos = _read_bytes(mv, pos, end)
        if pos != end:
            raise CorruptRecordError(
                f"message at position {position} declares {size} bytes but uses {pos - position}"
            )
        return cls(crc, magic, attributes, timestamp, key, value, mv[position:end])


def _read_bytes(mv: memoryview, pos: int, end: int) -> tuple[memoryview | None, int]:
    if pos + 4 > end:
        raise CorruptRecordError(f"length field at position {pos} is truncated")
    (n,) = _INT32.unpack_from(mv, pos)
    pos += 4
    if n < 0:
        return None, pos
    if pos + n > end:
        raise CorruptRecordError(f"{n}-byte field at position {pos} overruns its message")
    return mv[pos:pos + n], pos + n


def encode_message(
    magic: int, offset: int, key: bytes | None, value: bytes | None, *,
    timestamp: int | None = None, attributes: int = 0,
) -> bytes:
    """One complete entry (log overhead + message) with its CRC-32."""
    if magic not in (0, 1):
        raise InvalidRecordError(f"legacy messages have magic 0 or 1, not {magic}")
    parts = [struct.pack(">bb", magic, attributes)]
    if magic == 1:
        parts.append(_INT64.pack(-1 if timestamp is None else timestamp))
    for field in (key, value):
        if field is None:
            parts.append(b"\xff\xff\xff\xff")
        else:
            parts.append(_INT32.pack(len(field)))
            parts.append(bytes(field))
    body = b"".join(parts)
    crc = crc32(body)
    return struct.pack(">qiI", offset, len(body) + 4, crc) + body


def build_message_set(
    magic: int, records: Iterable[LegacyInput], compression: int = Compression.NONE,
    base_offset: int = 0, timestamp_type: int = TimestampType.CREATE_TIME,
    *, log_append_time: int | None = None,
) -> bytes:
    """A message set of `(timestamp, key, value)` records, offsets from `base_offset`.

    Compressed: one wrapper carrying the last offset; inner offsets relative for magic 1,
    absolute for magic 0. A magic-1 wrapper's timestamp is the max inner timestamp
    (CreateTime) or `log_append_time` (LogAppendTime).
    """
    codec = Compression(compression)
    recs = list(records)
    if codec == Compression.NONE:
        attrs = TIMESTAMP_TYPE_MASK if (magic == 1 and timestamp_type == 1) else 0
        out = []
        for i, (ts, key, value) in enumerate(recs):
            if magic == 1 and timestamp_type == 1 and log_append_time is not None:
                ts = log_append_time
            out.append(encode_message(magic, base_offset + i, key, value,
                                      timestamp=ts, attributes=attrs))
        return b"".join(out)
    if not recs:
        return b""
    inner = []
    for i, (ts, key, value) in enumerate(recs):
        inner_offset = i if magic == 1 else base_offset + i
        inner.append(encode_message(magic, inner_offset, key, value, timestamp=ts))
    payload = compress(codec, b"".join(inner), legacy_lz4_checksum=(magic == 0))
    attrs = int(codec)
    wrapper_ts = None
    if magic == 1:
        if timestamp_type == TimestampType.LOG_APPEND_TIME:
            attrs |= TIMESTAMP_TYPE_MASK
            wrapper_ts = log_append_time if log_append_time is not None else max(
                (ts for ts, _k, _v in recs if ts is not None), default=-1)
        else:
            wrapper_ts = max((ts for ts, _k, _v in recs if ts is not None), default=-1)
    return encode_message(magic, base_offset + len(recs) - 1, None, payload,
                          timestamp=wrapper_ts, attributes=attrs)


class LegacyEntry:
    """One shallow entry at `position`: `offset`, `size` (after the log overhead), `message`."""

    __slots__ = ("_buf", "message", "offset", "position", "size")

    def __init__(self, buf: Buf, position: int = 0) -> None:
        mv = buf if isinstance(buf, memoryview) else memoryview(buf)
        if position + LOG_OVERHEAD > len(mv):
            raise CorruptRecordError(f"message log overhead at position {position} is truncated")
        self._buf = mv
        self.position = position
        self.offset, self.size = struct.unpack_from(">qi", mv, position)
        self.message = LegacyMessage.parse(mv, position + LOG_OVERHEAD, self.size)

    def inner_entries(self) -> Iterator[tuple[int, LegacyMessage]]:
        """`(absolute offset, message)` of each message this entry stands for: itself when
        uncompressed, else the decompressed inner messages with offsets resolved."""
        msg = self.message
        if msg.compression == Compression.NONE:
            yield self.offset, msg
            return
        if msg.value is None:
            raise CorruptRecordError(f"compressed wrapper at {self.position} has a null value")
        data = memoryview(decompress(msg.compression, msg.value,
                                     legacy_lz4_checksum=(msg.magic == 0)))
        inner: list[tuple[int, LegacyMessage]] = []
        pos = 0
        while pos < len(data):
            if pos + LOG_OVERHEAD > len(data):
                raise CorruptRecordError("truncated inner message set")
            off, size = struct.unpack_from(">qi", data, pos)
            m = LegacyMessage.parse(data, pos + LOG_OVERHEAD, size)
            if m.compression != Compression.NONE:
                raise CorruptRecordError("nested compressed message inside a wrapper")
            inner.append((off, m))
            pos += LOG_OVERHEAD + size
        if not inner:
            raise CorruptRecordError(f"compressed wrapper at {self.position} holds no messages")
        if msg.magic > 0:
            last_inner = inner[-1][0]
            inner = [(self.offset + (io - last_inner), m) for io, m in inner]
        yield from inner


class LegacyBatch:
    """A magic 0/1 shallow entry seen through the RecordBatch interface (memory_records)."""

    __slots__ = ("_base_offset", "_count", "entry", "position")

    def __init__(self, buf: Buf, position: int = 0) -> None:
        self.entry = LegacyEntry(buf, position)
        self.position = position
        self._base_offset: int | None = None
        self._count: int | None = None

    @property
    def magic(self) -> int:
        return self.entry.message.magic

    @property
    def size(self) -> int:
        return LOG_OVERHEAD + self.entry.size

    @property
    def last_offset(self) -> int:
        return self.entry.offset

    @property
    def next_offset(self) -> int:
        return self.entry.offset + 1

    def _inner(self) -> None:
        offsets = [off for off, _m in self.entry.inner_entries()]
        self._base_offset = offsets[0]
        self._count = len(offsets)

    @property
    def base_offset(self) -> int:
        if self.compression == Compression.NONE:
            return self.entry.offset
        if self._base_offset is None:
            self._inner()
        return self._base_offset  # type: ignore[return-value]

    @property
    def record_count(self) -> int:
        if self.compression == Compression.NONE:
            return 1
        if self._count is None:
            self._inner()
        return self._count  # type: ignore[return-value]

    @property
    def crc(self) -> int:
        return self.entry.message.crc

    @property
    def compression(self) -> Compression:
        return self.entry.message.compression

    @property
    def timestamp_type(self) -> TimestampType:
        return self.entry.message.timestamp_type

    @property
    def max_timestamp(self) -> int:
        return self.entry.message.timestamp

    def compute_crc(self) -> int:
        return self.entry.message.compute_crc()

    def is_valid(self) -> bool:
        return self.entry.message.is_valid()

    def iter_messages(self) -> Iterator[tuple[int, LegacyMessage]]:
        return self.entry.inner_entries()

    def __iter__(self) -> Iterator[Record]:
        wrapper = self.entry.message
        log_append = wrapper.magic == 1 and wrapper.attributes & TIMESTAMP_TYPE_MASK
        for off, m in self.entry.inner_entries():
            ts = wrapper.timestamp if log_append else m.timestamp
            yield Record(off, ts, m.key, m.value, [], m.attributes)

    def __repr__(self) -> str:
        return (f"LegacyBatch(magic={self.magic}, offset={self.last_offset}, "
                f"size={self.size}, position={self.position})")
