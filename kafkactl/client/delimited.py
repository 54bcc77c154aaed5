"""Delimited input: a byte stream (stdin, a file, a pipe) split into records on a delimiter,
a chunk of records at a time, as LineProducer takes them."""

from __future__ import annotations

import select
from collections.abc import Iterator
from typing import IO

# Read size: big enough that a call per chunk costs nothing, small enough that a chunk's
# records are still in the CPU caches while they are encoded (4 MiB chunks cost ~25% more
# CPU per line than 256 KiB ones: bench/lines.py).
CHUNK = 256 << 10


def read_chunks(stream: IO[bytes]) -> Iterator[bytes]:
    """Chunks of up to CHUNK bytes as they arrive: a slow writer (`tail -f file |`) gets
    each line sent as soon as it is read, while a fast one (`seq 1 1e7 |`, a file) still
    fills whole chunks: after a short read, more is taken only while the descriptor has
    bytes ready."""
    read1 = getattr(stream, "read1", None)
    try:
        fd: int | None = stream.fileno()
    except (OSError, ValueError, AttributeError):
        fd = None
    if read1 is None or fd is None:
        while chunk := stream.read(CHUNK):
            yield chunk
        return
    while chunk := read1(CHUNK):
        if len(chunk) < CHUNK:
            parts = [chunk]
            size = len(chunk)
            while size < CHUNK and select.select([fd], [], [], 0)[0]:
                more = read1(CHUNK - size)
                if not more:
                    break
                parts.append(more)
                size += len(more)
            if len(parts) > 1:
                chunk = b"".join(parts)
        yield chunk


def read_records(stream: IO[bytes], delimiter: bytes) -> Iterator[list[bytes]]:
    """Yield lists of records split on `delimiter` (a trailing delimiter ends the last one;
    an unterminated last record is still a record)."""
    pending: list[bytes] = []  # the start of a record longer than the chunks so far
    single = len(delimiter) == 1  # a longer delimiter may straddle two chunks
    for chunk in read_chunks(stream):
        if single and pending and delimiter not in chunk:
            pending.append(chunk)  # a huge record: join once, not once per chunk
            continue
        data = b"".join((*pending, chunk)) if pending else chunk
        parts = data.split(delimiter)
        rest = parts.pop()
        pending = [rest] if rest else []
        if parts:
            yield parts
    if pending:
        yield [b"".join(pending)]
