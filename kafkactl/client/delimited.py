"""Delimited input: a byte stream (stdin, a file, a pipe) split into records on a delimiter,
a chunk of records at a time, as LineProducer takes them: lists of records
(`read_records`), or, for a one-byte delimiter, `Block`s of whole records left in the
buffer they were read into (`read_blocks`), which the compiled line encoder turns into
records without a Python object per line."""

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


class Block:
    """Whole records of the input where they were read: data[start:end], each record
    followed by the one-byte delimiter (the input's unterminated last record is given
    one). `len()` is the number of records (counted when asked: the producer's encoder
    counts them as it goes)."""

    __slots__ = ("data", "start", "end", "delimiter", "_count")

    def __init__(self, data: bytes, start: int, end: int, delimiter: bytes) -> None:
        self.data = data
        self.start = start
        self.end = end
        self.delimiter = delimiter
        self._count = -1

    def __len__(self) -> int:
        if self._count < 0:
            self._count = self.data.count(self.delimiter, self.start, self.end)
        return self._count

    def records(self) -> list[bytes]:
        """The records, as read_records gives them."""
        parts = self.data[self.start:self.end].split(self.delimiter)
        parts.pop()  # after the last delimiter: nothing
        return parts


def read_blocks(stream: IO[bytes], delimiter: bytes) -> Iterator[Block]:
    """The records of `stream` (as read_records gives them) in Blocks: each chunk read is
    one block of its whole records, without a copy; a record begun in an earlier chunk is
    a block of its own. One-byte delimiters only (a longer one could straddle chunks)."""
    if len(delimiter) != 1:
        raise ValueError("read_blocks takes a one-byte delimiter (read_records any)")
    pending: list[bytes] = []  # the start of a record that began in an earlier chunk
    for chunk in read_chunks(stream):
        last = chunk.rfind(delimiter)
        if last < 0:
            pending.append(chunk)  # a huge record: join once, not once per chunk
            continue
        start = 0
        if pending:
            start = chunk.find(delimiter) + 1
            pending.append(chunk[:start])
            head = b"".join(pending)
            yield Block(head, 0, len(head), delimiter)
        pending = [chunk[last + 1:]] if last + 1 < len(chunk) else []
        if start <= last:
            yield Block(chunk, start, last + 1, delimiter)
    if pending:
        rest = b"".join((*pending, delimiter))
        yield Block(rest, 0, len(rest), delimiter)
