"""Protobuf-style varints with zigzag, as Kafka's record format v2 uses them (seed 003).

- `encode_uvarint` / `decode_uvarint`: unsigned LEB128, at most 5 bytes (uint32).
- `encode_varint` / `decode_varint`: zigzag int32 (-1 -> 1, 1 -> 2, -2 -> 3...), <= 5 bytes.
- `encode_varlong` / `decode_varlong`: zigzag int64, at most 10 bytes.
- `encode_uvarlong` / `decode_uvarlong`: unsigned 64-bit.

Decoders take `(buf, pos)` and return `(value, new_pos)`. Over-long encodings (more bytes
than the type allows), values out of range and truncated input raise `CorruptRecordError`.
"""

from __future__ import annotations

from collections.abc import Sequence

from kafkactl.record.errors import CorruptRecordError

__all__ = [
    "decode_uvarint", "decode_uvarlong", "decode_varint", "decode_varlong",
    "encode_uvarint", "encode_uvarlong", "encode_varint", "encode_varlong", "size_of_varint",
    "size_of_varlong",
]

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
UINT32_MAX, UINT64_MAX = (1 << 32) - 1, (1 << 64) - 1

Buffer = bytes | bytearray | memoryview | Sequence[int]


def _encode_unsigned(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


# Encodings of the small values the builder writes all the time (lengths, deltas).
# Built from the 1/2/3-byte forms directly: a general encode per entry costs ~30 ms at import.
_CACHE_LIMIT = 1 << 15
_UNSIGNED_CACHE: tuple[bytes, ...] = (
    tuple(bytes((n,)) for n in range(0x80))
    + tuple(bytes((n & 0x7F | 0x80, n >> 7)) for n in range(0x80, 1 << 14))
    + tuple(bytes((n & 0x7F | 0x80, (n >> 7) & 0x7F | 0x80, n >> 14))
            for n in range(1 << 14, _CACHE_LIMIT))
)


def encode_uvarint(n: int) -> bytes:
    """Unsigned varint of 0 <= n <= 2**32-1."""
    if 0 <= n < _CACHE_LIMIT:
        return _UNSIGNED_CACHE[n]
    if not 0 <= n <= UINT32_MAX:
        raise ValueError(f"unsigned varint out of range: {n}")
    return _encode_unsigned(n)


def encode_uvarlong(n: int) -> bytes:
    """Unsigned varint of 0 <= n <= 2**64-1."""
    if 0 <= n < _CACHE_LIMIT:
        return _UNSIGNED_CACHE[n]
    if not 0 <= n <= UINT64_MAX:
        raise ValueError(f"unsigned varlong out of range: {n}")
    return _encode_unsigned(n)


def encode_varint(n: int) -> bytes:
    """Zigzag varint of a signed 32-bit int."""
    if not INT32_MIN <= n <= INT32_MAX:
        raise ValueError(f"varint out of int32 range: {n}")
    z = (n << 1) ^ (n >> 31)
    if z < _CACHE_LIMIT:
        return _UNSIGNED_CACHE[z]
    return _encode_unsigned(z & UINT32_MAX)


def encode_varlong(n: int) -> bytes:
    """Zigzag varint of a signed 64-bit int."""
    if not INT64_MIN <= n <= INT64_MAX:
        raise ValueError(f"varlong out of int64 range: {n}")
    z = (n << 1) ^ (n >> 63)
    if z < _CACHE_LIMIT:
        return _UNSIGNED_CACHE[z]
    return _encode_unsigned(z & UINT64_MAX)


def size_of_varint(n: int) -> int:
    return len(encode_varint(n))


def size_of_varlong(n: int) -> int:
    return len(encode_varlong(n))


def _decode_unsigned(buf: Buffer, pos: int, max_bytes: int, what: str) -> tuple[int, int]:
    result = 0
    shift = 0
    limit = 7 * max_bytes
    p = pos
    try:
        while True:
            b = buf[p]
            p += 1
            result |= (b & 0x7F) << shift
            if b < 0x80:
                return result, p
            shift += 7
            if shift >= limit:
                raise CorruptRecordError(
                    f"{what} longer than {max_bytes} bytes at position {pos}"
                )
    except IndexError:
        raise CorruptRecordError(f"truncated {what} at position {pos}") from None


def decode_uvarint(buf: Buffer, pos: int = 0) -> tuple[int, int]:
    """Decode an unsigned 32-bit varint at `pos` -> (value, new_pos)."""
    value, new_pos = _decode_unsigned(buf, pos, 5, "varint")
    if value > UINT32_MAX:
        raise CorruptRecordError(f"varint out of 32-bit range at position {pos}")
    return value, new_pos


def decode_uvarlong(buf: Buffer, pos: int = 0) -> tuple[int, int]:
    """Decode an unsigned 64-bit varint at `pos` -> (value, new_pos)."""
    value, new_pos = _decode_unsigned(buf, pos, 10, "varlong")
    if value > UINT64_MAX:
        raise CorruptRecordError(f"varlong out of 64-bit range at position {pos}")
    return value, new_pos


def decode_varint(buf: Buffer, pos: int = 0) -> tuple[int, int]:
    """Decode a zigzag int32 at `pos` -> (value, new_pos)."""
    try:
        b = buf[pos]
        if b < 0x80:
            return (b >> 1) ^ -(b & 1), pos + 1
        c = buf[pos + 1]
        if c < 0x80:
            z = (b & 0x7F) | (c << 7)
            return (z >> 1) ^ -(z & 1), pos + 2
    except IndexError:
        raise CorruptRecordError(f"truncated varint at position {pos}") from None
    z, new_pos = decode_uvarint(buf, pos)
    return (z >> 1) ^ -(z & 1), new_pos


def decode_varlong(buf: Buffer, pos: int = 0) -> tuple[int, int]:
    """Decode a zigzag int64 at `pos` -> (value, new_pos)."""
    try:
        b = buf[pos]
        if b < 0x80:
            return (b >> 1) ^ -(b & 1), pos + 1
        c = buf[pos + 1]
        if c < 0x80:
            z = (b & 0x7F) | (c << 7)
            return (z >> 1) ^ -(z & 1), pos + 2
    except IndexError:
        raise CorruptRecordError(f"truncated varlong at position {pos}") from None
    z, new_pos = decode_uvarlong(buf, pos)
    return (z >> 1) ^ -(z & 1), new_pos
