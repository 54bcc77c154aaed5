"""Compression codecs of Kafka's record formats (attributes bits 0-2).

Compression applies to a whole records section (v2) or a whole inner message set (v0/v1),
never to one record. Formats, matching what the Java client and librdkafka write and read:

- GZIP (1): a gzip stream (any number of members is read).
- SNAPPY (2): written with the xerial framing the Java client uses (8-byte magic
  ``\\x82SNAPPY\\x00``, int32 version 1, int32 compatible version 1, then blocks of int32
  length + raw snappy); read both that framing and a bare raw snappy block (librdkafka).
- LZ4 (3): the LZ4 frame format with independent 64 KiB blocks (as Java's
  KafkaLZ4BlockOutputStream). Magic 0 messages from Kafka 0.8/0.9 carry a frame header
  checksum computed over the magic bytes too (KAFKA-3160); `legacy_lz4_checksum=True`
  reads (and writes) that broken form.
- ZSTD (4): zstd frames (content size optional; several frames are read back to back).
"""

from __future__ import annotations

import io
import struct
import zlib
from enum import IntEnum

from kafkactl.record.errors import CorruptRecordError, InvalidRecordError, RecordTooLargeError

__all__ = ["Compression", "compress", "decompress"]


class Compression(IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @property
    def java_name(self) -> str:
        """The name Kafka's `compression.type` and DumpLogSegments use (`none`, `gzip`...)."""
        return self.name.lower()

    @classmethod
    def from_name(cls, name: str) -> Compression:
        try:
            return cls[name.strip().upper()]
        except KeyError:
            raise InvalidRecordError(
                f"unknown compression type {name!r} (expected none, gzip, snappy, lz4 or zstd)"
            ) from None

    @classmethod
    def of_attributes(cls, attributes: int, where: str, *args: object) -> Compression:
        """The codec in attributes bits 0-2; 5-7 name none: CorruptRecordError naming
        `where % args` (as Kafka's CompressionType.forId refuses them), never a bare
        ValueError. The message is formatted only then: this runs for every batch read."""
        codec = attributes & 0x07
        if codec > cls.ZSTD:
            raise CorruptRecordError(f"unknown compression type id {codec} in the attributes "
                                     f"of {where % args if args else where}")
        return _BY_ID[codec]


_BY_ID = tuple(Compression)  # by id 0-4: no enum lookup per batch

XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024
_LZ4_MAGIC = b"\x04\x22\x4d\x18"


def compress(
    codec: int, data: bytes | bytearray | memoryview, *, legacy_lz4_checksum: bool = False
) -> bytes:
    """Compress a records section with `codec` (a `Compression` value)."""
    codec = _codec(codec)
    if codec == Compression.NONE:
        return bytes(data)
    if codec == Compression.GZIP:
        import gzip  # the codec libraries are imported when first used (start-up)

        return gzip.compress(bytes(data), compresslevel=6, mtime=0)
    if codec == Compression.SNAPPY:
        return _xerial_compress(data)
    if codec == Compression.LZ4:
        import lz4.frame

        out = lz4.frame.compress(
            bytes(data), block_size=lz4.frame.BLOCKSIZE_MAX64KB, block_linked=False,
            content_checksum=False, store_size=False,
        )
        return _lz4_set_header_checksum(out, legacy=True) if legacy_lz4_checksum else out
    import zstandard

    return zstandard.ZstdCompressor(level=3).compress(bytes(data))


def decompress(
    codec: int, data: bytes | bytearray | memoryview, *, legacy_lz4_checksum: bool = False,
    max_size: int | None = None,
) -> bytes:
    """Decompress a records section. Bad input raises `CorruptRecordError`; output beyond
    `max_size` bytes raises `RecordTooLargeError` without producing it (a broker decompresses
    what any client sends: a few KiB of gzip must not become gigabytes in memory)."""
    codec = _codec(codec)
    try:
        if codec == Compression.NONE:
            out = bytes(data)
        elif codec == Compression.GZIP:
            out = _gunzip(bytes(data), max_size)
        elif codec == Compression.SNAPPY:
            if bytes(data[:8]) == XERIAL_MAGIC:
                out = _xerial_decompress(memoryview(data))
            else:
                import snappy

                out = snappy.uncompress(bytes(data))  # snappy expands ~21x at most
        elif codec == Compression.LZ4:
            import lz4.frame

            frame = bytes(data)
            if legacy_lz4_checksum:
                frame = _lz4_set_header_checksum(frame, legacy=False)
            bound = _lz4_bound(frame)
            if max_size is None or (bound is not None and bound <= max_size):
                out = lz4.frame.decompress(frame)
            else:  # streamed, so that a bomb stops at max_size
                out = lz4.frame.LZ4FrameFile(io.BytesIO(frame)).read(max_size + 1)
        else:
            import zstandard

            reader = zstandard.ZstdDecompressor().stream_reader(
                io.BytesIO(bytes(data)), read_across_frames=True
            )
            if max_size is None:
                out = reader.read()
            else:  # in chunks: read(n) would allocate n bytes up front
                chunks: list[bytes] = []
                total = 0
                while total <= max_size:
                    chunk = reader.read(min(max_size + 1 - total, 1 << 20))
                    if not chunk:
                        break
                    chunks.append(chunk)
                    total += len(chunk)
                out = b"".join(chunks)
    except (CorruptRecordError, RecordTooLargeError):
        raise
    except Exception as e:  # each library has its own error types
        raise CorruptRecordError(f"cannot decompress {codec.java_name} data: {e}") from e
    if max_size is not None and len(out) > max_size:
        raise RecordTooLargeError(
            f"{codec.java_name} records decompress to more than {max_size} bytes")
    return out


def _gunzip(data: bytes, max_size: int | None) -> bytes:
    """Every gzip member (or zlib stream) in `data`, stopping past `max_size` bytes."""
    out: list[bytes] = []
    total = 0
    while True:
        d = zlib.decompressobj(wbits=47)  # gzip or zlib, auto-detected
        chunk = d.decompress(data, 0 if max_size is None else max_size + 1 - total)
        out.append(chunk)
        total += len(chunk)
        if max_size is not None and total > max_size:
            raise RecordTooLargeError(f"gzip records decompress to more than {max_size} bytes")
        if not d.eof:
            raise CorruptRecordError("cannot decompress gzip data: truncated stream")
        data = d.unused_data
        if data[:2] != b"\x1f\x8b":  # no further member (Java's GZIPInputStream ignores
            return b"".join(out)      # what follows the last one, as this does)


def _codec(codec: int) -> Compression:
    try:
        return Compression(codec)
    except ValueError:
        raise InvalidRecordError(f"unknown compression codec id {codec}") from None


def _xerial_compress(data: bytes | bytearray | memoryview) -> bytes:
    import snappy

    mv = memoryview(data)
    parts = [_XERIAL_HEADER]
    for start in range(0, len(mv), _XERIAL_BLOCK):
        block = snappy.compress(bytes(mv[start:start + _XERIAL_BLOCK]))
        parts.append(struct.pack(">i", len(block)))
        parts.append(block)
    return b"".join(parts)


def _xerial_decompress(mv: memoryview) -> bytes:
    import snappy

    if len(mv) < 16:
        raise CorruptRecordError("xerial snappy header truncated")
    pos = 16
    out = []
    while pos < len(mv):
        if pos + 4 > len(mv):
            raise CorruptRecordError(f"xerial snappy block length truncated at {pos}")
        (n,) = struct.unpack_from(">i", mv, pos)
        pos += 4
        if n < 0 or pos + n > len(mv):
            raise CorruptRecordError(f"xerial snappy block of {n} bytes overruns the data")
        out.append(snappy.uncompress(bytes(mv[pos:pos + n])))
        pos += n
    return b"".join(out)


_LZ4_BLOCK_MAX = {4: 64 << 10, 5: 256 << 10, 6: 1 << 20, 7: 4 << 20}


def _lz4_bound(frame: bytes) -> int | None:
    """The most bytes the LZ4 frames in `frame` can decompress to (blocks x block maximum),
    from the block headers alone; None when the frames cannot be walked."""
    pos, total, end = 0, 0, len(frame)
    while pos < end:
        if frame[pos:pos + 4] != _LZ4_MAGIC or pos + 7 > end:
            return None
        flg, bd = frame[pos + 4], frame[pos + 5]
        block_max = _LZ4_BLOCK_MAX.get((bd >> 4) & 0x07)
        if block_max is None:
            return None
        pos += 7 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)
        while True:
            if pos + 4 > end:
                return None
            size = int.from_bytes(frame[pos:pos + 4], "little")
            pos += 4
            if size == 0:
                pos += 4 if flg & 0x04 else 0  # content checksum
                break
            pos += (size & 0x7FFFFFFF) + (4 if flg & 0x10 else 0)
            total += block_max
    return total


# --- LZ4 frame header checksum (xxHash32, second byte), for the legacy magic-0 form ---

_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32(data: bytes, seed: int = 0) -> int:
    """xxHash32 (used only on the few bytes of an LZ4 frame descriptor)."""
    n = len(data)
    pos = 0
    if n >= 16:
        v = [(seed + _P1 + _P2) & _M32, (seed + _P2) & _M32, seed & _M32, (seed - _P1) & _M32]
        while pos + 16 <= n:
            for i in range(4):
                (lane,) = struct.unpack_from("<I", data, pos)
                v[i] = (_rotl((v[i] + lane * _P2) & _M32, 13) * _P1) & _M32
                pos += 4
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M32
    else:
        h = (seed + _P5) & _M32
    h = (h + n) & _M32
    while pos + 4 <= n:
        (lane,) = struct.unpack_from("<I", data, pos)
        h = (_rotl((h + lane * _P3) & _M32, 17) * _P4) & _M32
        pos += 4
    while pos < n:
        h = (_rotl((h + data[pos] * _P5) & _M32, 11) * _P1) & _M32
        pos += 1
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    h ^= h >> 16
    return h


def _lz4_set_header_checksum(frame: bytes, *, legacy: bool) -> bytes:
    """Rewrite the frame descriptor's HC byte: the broken Kafka 0.8 form (over the magic too)
    when `legacy`, else the standard one (over FLG..content size)."""
    if len(frame) < 7 or frame[:4] != _LZ4_MAGIC:
        raise CorruptRecordError("not an LZ4 frame (bad magic)")
    flg = frame[4]
    hc_pos = 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)
    if hc_pos >= len(frame):
        raise CorruptRecordError("LZ4 frame descriptor truncated")
    covered = frame[0:hc_pos] if legacy else frame[4:hc_pos]
    hc = (xxh32(covered) >> 8) & 0xFF
    return frame[:hc_pos] + bytes([hc]) + frame[hc_pos + 1:]
