"""The few header fields the log needs from a batch, for every magic, without decoding.

In every format the 8-byte offset comes first, then a 4-byte size and the magic byte at
position 16. For magic 2 the offset is the batch's base offset and the last offset is
base + lastOffsetDelta; for magic 0/1 the shallow entry's offset is its last offset (a
compressed wrapper carries the offset of its last inner message). The v2 fields are read
with record.batch_header's layout.
"""

from __future__ import annotations

import os
import struct
from typing import NamedTuple

from kafkactl.record.batch_header import (
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    RECORD_BATCH_OVERHEAD,
    header_struct,
)

HEADER_READ_SIZE = RECORD_BATCH_OVERHEAD  # enough for the v2 header and the v1 timestamp
_OVERHEAD = struct.Struct(">qi")
_INT64 = struct.Struct(">q")
# magic 2 fields the log needs, in one unpack
V2_FIELDS = header_struct("base_offset", "batch_length", "magic", "last_offset_delta",
                          "max_timestamp", "record_count")
_V1_TIMESTAMP_OFFSET = 18  # offset(8) size(4) crc(4) magic(1) attributes(1)


class BatchHeader(NamedTuple):
    position: int
    size: int  # LOG_OVERHEAD + length
    magic: int
    base_offset: int  # the shallow offset for magic 0/1 (the LAST offset of a wrapper)
    last_offset: int
    max_timestamp: int  # -1 for magic 0
    record_count: int  # -1 when unknown without decompressing (legacy wrappers)


def parse_header(
    buf: bytes | bytearray | memoryview, pos: int, file_pos: int
) -> BatchHeader | None:
    """Header of the batch at `pos` in `buf` (reporting `file_pos`), or None when too short."""
    avail = len(buf) - pos
    if avail < LOG_OVERHEAD + 5:
        return None
    offset, length = _OVERHEAD.unpack_from(buf, pos)
    magic = buf[pos + MAGIC_OFFSET]
    size = LOG_OVERHEAD + length
    if magic == 2:
        if avail < RECORD_BATCH_OVERHEAD:
            return None
        _o, _l, _m, delta, ts, count = V2_FIELDS.unpack_from(buf, pos)
        return BatchHeader(file_pos, size, 2, offset, offset + delta, ts, count)
    if magic == 1:
        if avail < _V1_TIMESTAMP_OFFSET + 8:
            return None
        ts = _INT64.unpack_from(buf, pos + _V1_TIMESTAMP_OFFSET)[0]
        count = 1 if buf[pos + 17] & 0x07 == 0 else -1
        return BatchHeader(file_pos, size, 1, offset, offset, ts, count)
    count = 1 if buf[pos + 17] & 0x07 == 0 else -1
    return BatchHeader(file_pos, size, magic, offset, offset, -1, count)


def read_header(fd: int, position: int) -> BatchHeader | None:
    """Header of the batch at `position` of a file (pread), or None at/after the end."""
    data = os.pread(fd, HEADER_READ_SIZE, position)
    return parse_header(data, 0, position)
