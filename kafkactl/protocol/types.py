"""Kafka protocol primitive types, sans-IO.

Readers take ``(buf, pos)`` (``buf`` a memoryview / bytes) and return ``(value, new_pos)``;
writers append to a ``bytearray``. Lengths are checked against the buffer so a bad frame
raises :class:`~kafkactl.protocol.errors.ProtocolDecodeError`, never ``IndexError``.

Covered: int8/16/32/64, uint16, uint32, float64, bool (as struct formats, FIXED_FORMATS,
that the compiler merges), unsigned varints (compact lengths, tags), string / nullable
string / compact (nullable) string, bytes / nullable / compact bytes, records (a zero-copy
``memoryview``), uuid, arrays and compact arrays (length prefixes), and tagged-field
sections. :class:`FileRegion` stands for a records field whose
bytes stay in a file until the network layer ``os.sendfile``\\ s them.
"""

from __future__ import annotations

import struct
import uuid
from typing import Any, NamedTuple

from kafkactl.protocol.errors import ProtocolDecodeError, ProtocolEncodeError
from kafkactl.record.varint import (
    _CACHE_LIMIT,
    _UNSIGNED_CACHE,
    encode_uvarint,
)

INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")

# struct format char per fixed-width primitive (used to merge runs of fixed fields)
FIXED_FORMATS: dict[str, str] = {
    "int8": "b", "int16": "h", "int32": "i", "int64": "q",
    "uint16": "H", "uint32": "I", "float64": "d", "bool": "?",
}

ZERO_UUID = uuid.UUID(int=0)


class FileRegion(NamedTuple):
    """``length`` bytes at ``position`` of the open file ``fd``, to be sent with sendfile."""

    fd: int
    position: int
    length: int


# ---------------------------------------------------------------------------- varints
def read_uvarint(buf: Any, pos: int) -> tuple[int, int]:
    """Unsigned varint (at most 5 bytes, uint32)."""
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    result = b & 0x7F
    shift = 7
    pos += 1
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            if result > 0xFFFFFFFF:
                raise ProtocolDecodeError("unsigned varint out of range")
            return result, pos
        shift += 7
        if shift > 28:
            raise ProtocolDecodeError("unsigned varint longer than 5 bytes")


def uvarint_bytes(n: int) -> bytes:
    """record.varint's encoder (one varint implementation, cached for small values), with
    the protocol's error type."""
    if 0 <= n < _CACHE_LIMIT:
        return _UNSIGNED_CACHE[n]
    try:
        return encode_uvarint(n)
    except ValueError as e:
        raise ProtocolEncodeError(str(e)) from None


# ------------------------------------------------------------------- length prefixes
def _check_span(buf: Any, pos: int, n: int, what: str) -> int:
    end = pos + n
    if end > len(buf):
        raise ProtocolDecodeError(
            f"{what} of {n} bytes at position {pos} runs past the end of a "
            f"{len(buf)}-byte buffer"
        )
    return end


def read_length(buf: Any, pos: int, compact: bool, wide: bool) -> tuple[int, int]:
    """A length prefix: int16 (strings) / int32 (bytes, arrays) or compact uvarint-1.

    Returns -1 for null.
    """
    if compact:
        n, pos = read_uvarint(buf, pos)
        return n - 1, pos
    if wide:
        return INT32.unpack_from(buf, pos)[0], pos + 4
    return INT16.unpack_from(buf, pos)[0], pos + 2


def write_length(out: bytearray, n: int, compact: bool, wide: bool) -> None:
    if compact:
        out += uvarint_bytes(n + 1)
    elif wide:
        out += INT32.pack(n)
    else:
        out += INT16.pack(n)


def read_string(
    buf: Any, pos: int, *, compact: bool = False, nullable: bool = False
) -> tuple[str | None, int]:
    n, pos = read_length(buf, pos, compact, False)
    if n < 0:
        if n == -1 and nullable:
            return None, pos
        raise ProtocolDecodeError(f"invalid string length {n} at position {pos}")
    end = _check_span(buf, pos, n, "string")
    try:
        return str(buf[pos:end], "utf-8"), end
    except UnicodeDecodeError as exc:
        raise ProtocolDecodeError(f"string at position {pos} is not valid UTF-8") from exc


def write_string(
    out: bytearray, value: str | None, *, compact: bool = False, nullable: bool = False
) -> None:
    if value is None:
        if not nullable:
            raise ProtocolEncodeError("null string in a non-nullable field")
        write_length(out, -1, compact, False)
        return
    data = value.encode("utf-8")
    if not compact and len(data) > 0x7FFF:
        raise ProtocolEncodeError(f"string of {len(data)} bytes is longer than 32767")
    write_length(out, len(data), compact, False)
    out += data


def read_bytes(
    buf: Any, pos: int, *, compact: bool = False, nullable: bool = False, view: bool = False
) -> tuple[bytes | memoryview | None, int]:
    """bytes (a copy) or, with ``view=True`` (records), a zero-copy memoryview slice."""
    n, pos = read_length(buf, pos, compact, True)
    if n < 0:
        if n == -1 and nullable:
            return None, pos
        raise ProtocolDecodeError(f"invalid bytes length {n} at position {pos}")
    end = _check_span(buf, pos, n, "bytes")
    if view:
        mv = buf if isinstance(buf, memoryview) else memoryview(buf)
        return mv[pos:end], end
    return bytes(buf[pos:end]), end


def write_bytes(
    out: bytearray, value: Any, *, compact: bool = False, nullable: bool = False
) -> None:
    if value is None:
        if not nullable:
            raise ProtocolEncodeError("null bytes in a non-nullable field")
        write_length(out, -1, compact, True)
        return
    write_length(out, len(value), compact, True)
    out += value


def read_uuid(buf: Any, pos: int) -> tuple[uuid.UUID, int]:
    end = _check_span(buf, pos, 16, "uuid")
    raw = bytes(buf[pos:end])
    return (ZERO_UUID if raw == bytes(16) else uuid.UUID(bytes=raw)), end


def uuid_bytes(value: Any) -> bytes:
    if isinstance(value, uuid.UUID):
        return value.bytes
    if isinstance(value, bytes | bytearray) and len(value) == 16:
        return bytes(value)
    raise ProtocolEncodeError(f"not a uuid: {value!r}")


def read_array_length(
    buf: Any, pos: int, *, compact: bool = False, nullable: bool = False, min_item: int = 1
) -> tuple[int, int]:
    """An array count (-1 = null when nullable); the count is checked against the bytes left
    (each element takes at least ``min_item`` bytes), so 2**31 elements cannot be asked for."""
    n, pos = read_length(buf, pos, compact, True)
    if n < 0:
        if n == -1 and nullable:
            return -1, pos
        raise ProtocolDecodeError(f"invalid array length {n} at position {pos}")
    if min_item and n * min_item > len(buf) - pos:
        raise ProtocolDecodeError(
            f"array of {n} elements at position {pos} cannot fit in the "
            f"{len(buf) - pos} bytes left"
        )
    return n, pos


def skip_tagged_fields(buf: Any, pos: int) -> int:
    """Skip a tagged-field section whose tags are all unknown."""
    count, pos = read_uvarint(buf, pos)
    for _ in range(count):
        _tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        pos = _check_span(buf, pos, size, "tagged field")
    return pos
