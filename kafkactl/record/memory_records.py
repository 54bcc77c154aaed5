"""The magic-agnostic layer over a buffer of batches: iteration and the recovery scan.

`iter_batches` yields `RecordBatch` (magic 2) or `LegacyBatch` (one shallow magic 0/1
entry); both have `base_offset, last_offset, position, size, magic, is_valid(),
max_timestamp, timestamp_type, compression, record_count` and iterate `Record`s.

`scan` is the recovery / validation hot path: per batch it reads the header with one
`struct.unpack_from` and runs CRC-32C over a memoryview slice; it never decodes records of
magic-2 batches, so it runs at the speed of the CRC.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

from kafkactl.record.batch import RecordBatch
from kafkactl.record.batch_header import (
    ATTRIBUTES_OFFSET,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    RECORD_BATCH_OVERHEAD,
    header_struct,
)
from kafkactl.record.crc import crc32, crc32c
from kafkactl.record.errors import CorruptRecordError
from kafkactl.record.legacy import MESSAGE_OVERHEAD_V0, MESSAGE_OVERHEAD_V1, LegacyBatch

__all__ = ["AnyBatch", "LegacyBatch", "RecordBatch", "ScanResult", "iter_batches", "scan"]

AnyBatch = RecordBatch | LegacyBatch
Buf = bytes | bytearray | memoryview

# offset, size, magic: where the v2 header has them, and so does every older format
_OVERHEAD = header_struct("base_offset", "batch_length", "magic")
_V2_HEAD = header_struct("base_offset", "crc", "last_offset_delta", "max_timestamp")
# v0/v1: offset, size, crc, magic, attributes, [timestamp]
_V0_HEAD = struct.Struct(">qiIbb")
_V1_HEAD = struct.Struct(">qiIbbq")


def _header_error(mv: memoryview, pos: int) -> str | None:
    """Why the batch at `pos` cannot even be framed (None if its bytes are all present)."""
    remaining = len(mv) - pos
    if remaining < LOG_OVERHEAD + 5:
        return f"truncated batch header at position {pos} ({remaining} bytes left)"
    _off, size, magic = _OVERHEAD.unpack_from(mv, pos)
    if magic == 2:
        if size < RECORD_BATCH_OVERHEAD - LOG_OVERHEAD:
            return f"record batch size {size} at position {pos} is smaller than the header"
    elif magic in (0, 1):
        if size < (MESSAGE_OVERHEAD_V0 if magic == 0 else MESSAGE_OVERHEAD_V1):
            return f"message size {size} at position {pos} is smaller than the minimum"
    else:
        return f"invalid magic {magic} at position {pos + MAGIC_OFFSET}"
    if LOG_OVERHEAD + size > remaining:
        return (f"truncated batch at position {pos}: {LOG_OVERHEAD + size} bytes declared, "
                f"{remaining} present")
    return None


def iter_batches(buf: Buf, position: int = 0) -> Iterator[AnyBatch]:
    """Yield the batches from `position`; stops at a truncated tail.

    A header that cannot be framed (impossible size, unknown magic) raises
    `CorruptRecordError`; a CRC mismatch does not (check `is_valid()`).
    """
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    end = len(mv)
    pos = position
    while pos < end:
        if end - pos < LOG_OVERHEAD + 5:
            return
        _off, size, magic = _OVERHEAD.unpack_from(mv, pos)
        if size >= 0 and pos + LOG_OVERHEAD + size > end and magic in (0, 1, 2):
            return  # truncated tail
        err = _header_error(mv, pos)
        if err is not None:
            raise CorruptRecordError(err)
        batch: AnyBatch = RecordBatch(mv, pos) if magic == 2 else LegacyBatch(mv, pos)
        yield batch
        pos += LOG_OVERHEAD + size


@dataclass(slots=True)
class ScanResult:
    valid_bytes: int  # bytes from `position` up to the first invalid byte
    batch_count: int
    first_offset: int | None
    last_offset: int | None
    max_timestamp: int  # -1 when there is none
    offset_of_max_timestamp: int | None
    error: str | None = None  # why the scan stopped before the end of the buffer
    error_position: int | None = None  # absolute position of the first invalid byte

    @property
    def is_clean(self) -> bool:
        return self.error is None


# C901: the hot scan loop: size, magic, CRC and offset checks inlined
def scan(  # noqa: C901
        buf: Buf, position: int = 0, *, expected_offset: int | None = None) -> ScanResult:
    """Validate batches from `position` and stop at the first invalid byte.

    Checks that each batch fits in the buffer, has a known magic and a minimum size, a
    matching CRC (CRC-32C for magic 2, CRC-32 for magic 0/1) and offsets that increase:
    the first batch's base offset is >= `expected_offset` (when given) and each batch starts
    after the previous batch's last offset.
    """
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    end = len(mv)
    pos = position
    count = 0
    first: int | None = None
    prev_last = None if expected_offset is None else expected_offset - 1
    max_ts = -1
    max_ts_offset: int | None = None
    error: str | None = None
    v2 = _V2_HEAD.unpack_from
    c32c = crc32c
    while pos < end:
        if end - pos < LOG_OVERHEAD + 5:
            error = f"truncated batch header at position {pos} ({end - pos} bytes left)"
            break
        _o, size, magic = _OVERHEAD.unpack_from(mv, pos)
        if magic == 2 and size >= RECORD_BATCH_OVERHEAD - LOG_OVERHEAD:
            batch_end = pos + LOG_OVERHEAD + size
            if batch_end > end:
                error = (f"truncated batch at position {pos}: {LOG_OVERHEAD + size} bytes "
                         f"declared, {end - pos} present")
                break
            base, crc, last_delta, ts = v2(mv, pos)
            computed = c32c(mv[pos + ATTRIBUTES_OFFSET:batch_end])
            if computed != crc:
                error = (f"corrupt record batch at position {pos}: stored crc {crc} != "
                         f"computed crc {computed}")
                break
            if last_delta < 0:
                error = f"negative last offset delta {last_delta} at position {pos}"
                break
            last = base + last_delta
        elif magic in (0, 1):
            err = _header_error(mv, pos)
            if err is not None:
                error = err
                break
            batch_end = pos + LOG_OVERHEAD + size
            if magic == 0:
                last, _s, crc, _m, _a = _V0_HEAD.unpack_from(mv, pos)
                ts = -1
            else:
                last, _s, crc, _m, _a, ts = _V1_HEAD.unpack_from(mv, pos)
            computed = crc32(mv[pos + LOG_OVERHEAD + 4:batch_end])
            if computed != crc:
                error = (f"corrupt message at position {pos}: stored crc {crc} != "
                         f"computed crc {computed}")
                break
            base = last
            if _a & 0x07:  # compressed wrapper: its base is the first inner offset
                try:
                    base = LegacyBatch(mv, pos).base_offset
                except CorruptRecordError as e:
                    error = f"corrupt message at position {pos}: {e}"
                    break
        else:
            error = _header_error(mv, pos) or f"invalid batch at position {pos}"
            break
        if prev_last is not None and base <= prev_last:
            error = (f"offsets are not increasing at position {pos}: batch starts at {base} "
                     f"after offset {prev_last}")
            break
        if first is None:
            first = base
        if ts > max_ts:
            max_ts = ts
            max_ts_offset = last
        prev_last = last
        count += 1
        pos = batch_end
    return ScanResult(
        valid_bytes=pos - position, batch_count=count, first_offset=first,
        last_offset=prev_last if count else None, max_timestamp=max_ts,
        offset_of_max_timestamp=max_ts_offset, error=error,
        error_position=pos if error is not None else None,
    )
