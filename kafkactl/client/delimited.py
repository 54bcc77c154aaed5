"""Delimited input: a byte stream (stdin, a file, a pipe) split into records on a delimiter,
a chunk of records at a time, as LineProducer takes them: lists of records
(`read_records`), or, for a one-byte delimiter, `Block`s of whole records left in the
buffer they were read into (`read_blocks`), which the compiled line encoder turns into
records without a Python object per line.

With a `Limit`, a record longer than any the producer can send is not held: once longer
than `Limit.longest` its bytes go on to `Limit.spill` as they are read (--failed-file keeps
it whole), or are dropped, and the reader yields a `LongRecord` in its place (a chunk of
its own): its length, where its bytes went, and what the producer's size check needs to
know of it (where the first key separator is, its first and last bytes). So a 300 MB line
costs a read buffer, not 300 MB, and is refused like any record too large.
"""

from __future__ import annotations

import os
import select
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO

# Read size: big enough that a call per chunk costs nothing, small enough that a chunk's
# records are still in the CPU caches while they are encoded (4 MiB chunks cost ~25% more
# CPU per line than 256 KiB ones: bench/lines.py).
CHUNK = 256 << 10


def read_chunks(stream: IO[bytes]) -> Iterator[bytes]:
    """Chunks of up to CHUNK bytes as they arrive: a slow writer (`tail -f file |`) gets
    each line sent as soon as it is read, while a fast one (`seq 1 1e7 |`, a file) still
    fills whole chunks: after a short read, more is taken only while the descriptor has
    bytes ready. A descriptor in non-blocking mode (O_NONBLOCK, set on a pipe shared with
    a supervisor or a sibling: the flag is the open file's, not ours to change) is read to
    its end all the same: read1's b"" is then "nothing yet" as much as the end, so what
    follows is read with os.read, which tells them apart, waiting for bytes in select."""
    read1 = getattr(stream, "read1", None)
    try:
        fd: int | None = stream.fileno()
    except (OSError, ValueError, AttributeError):
        fd = None
    if read1 is None or fd is None:
        while chunk := stream.read(CHUNK):  # (None: O_NONBLOCK's "nothing yet")
            yield chunk
        if fd is not None and not _blocking(fd):
            yield from _read_nonblocking(fd)
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
    # b"": the end of the input, or with O_NONBLOCK perhaps only no bytes yet (checked
    # once, here: the loop above costs nothing more for the usual blocking descriptor)
    if not _blocking(fd):
        yield from _read_nonblocking(fd)


def _blocking(fd: int) -> bool:
    try:
        return os.get_blocking(fd)
    except OSError:
        return True


def _read_nonblocking(fd: int) -> Iterator[bytes]:
    """The rest of a non-blocking descriptor, to its end (read() gives b""), in chunks as
    read_chunks makes them; waiting in select while it has no bytes (EAGAIN). The
    BufferedReader before it holds nothing more: its read1 gave b"" (it gives what it holds
    first)."""
    eof = False
    while not eof:
        try:
            chunk = os.read(fd, CHUNK)
        except BlockingIOError:
            select.select([fd], [], [])
            continue
        if not chunk:
            return
        parts = [chunk]
        size = len(chunk)
        while size < CHUNK:
            try:
                more = os.read(fd, CHUNK - size)
            except BlockingIOError:
                break
            if not more:
                eof = True
                break
            parts.append(more)
            size += len(more)
        yield chunk if len(parts) == 1 else b"".join(parts)


@dataclass(frozen=True)
class Limit:
    """A record longer than `longest` bytes is never held whole: its bytes go to `spill`
    (dropped without one). Of such a record the reader notes where the first
    `separator` is, and keeps its first and last `ends` bytes."""

    longest: int
    spill: IO[bytes] | None = None
    separator: bytes | None = None
    ends: int = 0


class LongRecord:
    """A record longer than its reader's Limit.longest, in place of its bytes: `length`
    bytes (its delimiter not counted), at offset `spilled` of the Limit's spill (-1:
    dropped); `separator_at`, where the first key separator begins (-1: none, or none
    asked); `head` and `tail`, its first and last bytes (Limit.ends of each). A chunk of
    one record (len() 1)."""

    __slots__ = ("length", "spilled", "separator_at", "head", "tail")

    def __init__(self, length: int, spilled: int, separator_at: int, head: bytes,
                 tail: bytes) -> None:
        self.length = length
        self.spilled = spilled
        self.separator_at = separator_at
        self.head = head
        self.tail = tail

    def __len__(self) -> int:
        return 1

    def records(self) -> list[LongRecord]:
        return [self]

    def __repr__(self) -> str:
        return f"LongRecord({self.length} bytes)"


class _Streaming:
    """The long record being read: its bytes go to the spill as they come, except the
    last len(delimiter) - 1, which may be the start of a delimiter split across reads."""

    def __init__(self, limit: Limit, delimiter: bytes, start: bytes) -> None:
        self.limit = limit
        self.spill = limit.spill
        self.delimiter = delimiter
        self.length = 0
        self.spilled = self.spill.tell() if self.spill is not None else -1
        self.separator_at = -1
        self.sep_edge = b""  # the record's last len(separator) - 1 bytes, while not found
        self.head = b""
        self.tail = b""
        k = len(delimiter) - 1
        self.carry = start[len(start) - k:] if k else b""  # (no delimiter in `start`)
        self._add(start[:len(start) - k] if k else start)

    def _add(self, piece: bytes) -> None:
        if not piece:
            return
        limit = self.limit
        if self.spill is not None:
            self.spill.write(piece)
        sep = limit.separator
        if sep is not None and self.separator_at < 0:
            edge = self.sep_edge + piece[:len(sep) - 1]
            i = edge.find(sep) if self.sep_edge else -1
            if i < 0:
                i = piece.find(sep)
                if i >= 0:
                    i += len(self.sep_edge)
            if i >= 0:
                self.separator_at = self.length - len(self.sep_edge) + i
            elif len(sep) > 1:
                self.sep_edge = (self.sep_edge + piece)[-(len(sep) - 1):] \
                    if len(piece) < len(sep) else piece[len(piece) - len(sep) + 1:]
        ends = limit.ends
        if ends:
            if len(self.head) < ends:
                self.head += piece[:ends - len(self.head)]
            self.tail = (self.tail + piece)[-ends:] if len(piece) < ends \
                else piece[len(piece) - ends:]
        self.length += len(piece)

    def feed(self, chunk: bytes) -> bytes | None:
        """Take the next bytes read: None while the record goes on; at its end, what of
        `chunk` follows its delimiter."""
        d = self.delimiter
        carry = self.carry
        if carry:  # a delimiter begun in the bytes held back
            i = (carry + chunk[:len(d) - 1]).find(d)
            if i >= 0:
                self._add(carry[:i])
                self.carry = b""
                return chunk[i + len(d) - len(carry):]
        i = chunk.find(d)
        if i >= 0:
            self._add(carry)
            self._add(chunk[:i])
            self.carry = b""
            return chunk[i + len(d):]
        k = len(d) - 1
        if not k:
            self._add(chunk)
            return None
        if len(chunk) >= k:
            self._add(carry)
            self._add(chunk[:len(chunk) - k])
            self.carry = chunk[len(chunk) - k:]
        else:
            both = carry + chunk
            self._add(both[:len(both) - k])
            self.carry = both[len(both) - k:]
        return None

    def end(self) -> LongRecord:
        """The record, once its delimiter (or the end of the input) came."""
        self._add(self.carry)
        self.carry = b""
        return LongRecord(self.length, self.spilled, self.separator_at, self.head,
                          self.tail)


def read_records(stream: IO[bytes], delimiter: bytes, limit: Limit | None = None,
                 ) -> Iterator[list[bytes] | LongRecord]:
    """Yield lists of records split on `delimiter` (a trailing delimiter ends the last one;
    an unterminated last record is still a record); with a `limit`, a LongRecord (a chunk
    of its own) in place of each record longer than limit.longest."""
    pending: list[bytes] = []  # the start of a record longer than the chunks so far
    size = 0  # its length so far
    # (the last len(delimiter) - 1 bytes of an unfinished record may begin its delimiter)
    longest = limit.longest + len(delimiter) - 1 if limit is not None else -1
    streaming: _Streaming | None = None
    single = len(delimiter) == 1  # a longer delimiter may straddle two chunks
    for chunk in read_chunks(stream):
        if streaming is not None:
            after = streaming.feed(chunk)
            if after is None:
                continue
            yield streaming.end()
            streaming = None
            if not after:
                continue
            chunk = after
        if single and pending and delimiter not in chunk:
            pending.append(chunk)  # a huge record: join once, not once per chunk
            size += len(chunk)
            if 0 <= longest < size:
                assert limit is not None
                streaming = _Streaming(limit, delimiter, b"".join(pending))
                pending, size = [], 0
            continue
        data = b"".join((*pending, chunk)) if pending else chunk
        parts = data.split(delimiter)
        rest = parts.pop()
        pending = [rest] if rest else []
        size = len(rest)
        if parts:
            yield parts
        if 0 <= longest < size:
            assert limit is not None
            streaming = _Streaming(limit, delimiter, rest)
            pending, size = [], 0
    if streaming is not None:
        yield streaming.end()
    elif pending:
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


def read_blocks(stream: IO[bytes], delimiter: bytes, limit: Limit | None = None,
                ) -> Iterator[Block | LongRecord]:
    """The records of `stream` (as read_records gives them) in Blocks: each chunk read is
    one block of its whole records, without a copy; a record begun in an earlier chunk is
    a block of its own (with a `limit`, a LongRecord when longer than limit.longest).
    One-byte delimiters only (a longer one could straddle chunks)."""
    if len(delimiter) != 1:
        raise ValueError("read_blocks takes a one-byte delimiter (read_records any)")
    pending: list[bytes] = []  # the start of a record that began in an earlier chunk
    size = 0  # its length so far
    longest = limit.longest if limit is not None else -1
    streaming: _Streaming | None = None
    for chunk in read_chunks(stream):
        if streaming is not None:
            after = streaming.feed(chunk)
            if after is None:
                continue
            yield streaming.end()
            streaming = None
            if not after:
                continue
            chunk = after
        last = chunk.rfind(delimiter)
        if last < 0:
            pending.append(chunk)  # a huge record: join once, not once per chunk
            size += len(chunk)
            if 0 <= longest < size:
                assert limit is not None
                streaming = _Streaming(limit, delimiter, b"".join(pending))
                pending, size = [], 0
            continue
        start = 0
        if pending:
            start = chunk.find(delimiter) + 1
            pending.append(chunk[:start])
            head = b"".join(pending)
            yield Block(head, 0, len(head), delimiter)
        if last + 1 < len(chunk):
            pending = [chunk[last + 1:]]
            size = len(chunk) - last - 1
        else:
            pending, size = [], 0
        if start <= last:
            yield Block(chunk, start, last + 1, delimiter)
    if streaming is not None:
        yield streaming.end()
    elif pending:
        rest = b"".join((*pending, delimiter))
        yield Block(rest, 0, len(rest), delimiter)
