"""The highest producer id written in a log, from its batch headers (no decoding).

Used when the broker's `producer-id-block` file is missing or damaged: the next block must
start above every producer id the logs hold, or a new producer would get the id of an old
one and its first batches would be taken for duplicates and dropped.
"""

from __future__ import annotations

import os
from typing import Any

from kafkactl.record.batch_header import LOG_OVERHEAD, RECORD_BATCH_OVERHEAD, header_struct

_HEAD = header_struct("base_offset", "batch_length", "magic", "producer_id")
READ_SIZE = 16384  # small: with big batches only their headers are read


def max_producer_id(log: Any) -> int:
    """The highest producer id in the magic-2 batch headers of `log`'s segments, -1 when
    there is none. Reads the headers in 16 KiB chunks; stops at a torn tail."""
    best = -1
    unpack = _HEAD.unpack_from
    for seg in log.segments:
        size, fd = seg.size, seg.fd
        pos = 0
        chunk, chunk_pos = b"", 0
        while pos + RECORD_BATCH_OVERHEAD <= size:
            rel = pos - chunk_pos
            if rel + RECORD_BATCH_OVERHEAD > len(chunk):
                chunk, chunk_pos, rel = os.pread(fd, min(READ_SIZE, size - pos), pos), pos, 0
                if len(chunk) < RECORD_BATCH_OVERHEAD:
                    break
            _base, length, magic, pid = unpack(chunk, rel)
            if length <= 0:
                break
            if magic == 2 and pid > best:
                best = pid
            pos += LOG_OVERHEAD + length
    return best
