"""RecordWriter writes a poll's pieces as they are (writev of their slices, no join): every
byte in order through a pipe that takes a little at a time, and `_write_range` cuts the
pieces taken as one at any offset and length, more pieces than one writev takes too."""

from __future__ import annotations

import os
import sys
import threading

import pytest

from kafkactl.cli._record_writer import RecordWriter, _write_range
from kafkactl.client.topic_reader import Piece, plain_lines
from kafkactl.record.batch import RecordBatch
from kafkactl.record.builder import RecordBatchBuilder

TP = ("t", 0)


def _piece(values: list[bytes], base: int) -> Piece:
    b = RecordBatchBuilder(base_offset=base)
    for v in values:
        b.append(0, None, v)
    batch = RecordBatch(memoryview(b.build()))
    found = plain_lines(batch, base, None, None)
    assert found is not None
    return Piece(found[0], found[1], TP, batch.last_offset + 1, batch, base)


@pytest.mark.parametrize("count", [1, 2, 700])
@pytest.mark.parametrize("cut", [(0, 1), (0, 10**9), (3, 5), (999, 4096), (12_345, 70_000)])
def test_write_range_writes_the_bytes_of_the_pieces_joined(count: int,
                                                           cut: tuple[int, int]) -> None:
    parts = [memoryview(b"%05d|" % i * (i % 7) + b"\n") for i in range(count)]
    joined = b"".join(parts)
    off, limit = cut
    if off >= len(joined):
        off = len(joined) // 2
    r, w = os.pipe()
    try:
        os.set_blocking(w, False)
        written = _write_range(w, parts, off, limit)
        got = os.read(r, 1 << 20) if written else b""
    finally:
        os.close(r)
        os.close(w)
    assert 0 < written <= limit
    assert got == joined[off:off + written]


def test_a_poll_through_a_slow_pipe_arrives_whole_and_counted() -> None:
    pieces = [_piece([b"rec %d-%d %s" % (p, i, b"x" * (i % 50)) for i in range(300)],
                     base=1000 * p) for p in range(40)]
    want = b"".join(p.data for p in pieces)
    r, w = os.pipe()
    got = bytearray()

    def read() -> None:
        while True:
            chunk = os.read(r, 777)
            if not chunk:
                return
            got.extend(chunk)

    t = threading.Thread(target=read)
    t.start()
    saved = os.dup(sys.stdout.fileno())
    try:
        os.dup2(w, sys.stdout.fileno())
        writer = RecordWriter({})
        assert writer.write(pieces) == 0
        writer.close()  # its own description of the pipe: the reader sees the end
    finally:
        os.dup2(saved, sys.stdout.fileno())
        os.close(saved)
        os.close(w)
        t.join(30)
        os.close(r)
    assert bytes(got) == want
    assert writer.records == 40 * 300 and writer.consumed == {TP: 39 * 1000 + 300}
