"""A pipe's room is its pages (16 by default), not its bytes: a write smaller than a page that
does not fit the page the last one left takes a page of its own, so a pipe fills up with
far less than its size when each write is a few KiB (a group member's poll of 500 short
lines). The writer must still never block inside a write, or a stop signal and a
rebalance would wait for the reader: waiting for room it asks stop() and gives up."""

from __future__ import annotations

import os
import sys
import threading

from kafkactl.cli._record_writer import RecordWriter
from kafkactl.client.topic_reader import Piece, plain_lines
from kafkactl.record.batch import RecordBatch
from kafkactl.record.builder import RecordBatchBuilder

TP = ("t", 0)


def _piece(base: int, n: int, size: int) -> Piece:
    b = RecordBatchBuilder(base_offset=base)
    for i in range(n):
        b.append(0, None, b"%0*d" % (size - 1, base + i))
    batch = RecordBatch(memoryview(b.build()))
    found = plain_lines(batch, base, None, None)
    assert found is not None
    return Piece(found[0], found[1], TP, batch.last_offset + 1, batch, base)


def test_small_writes_to_a_pipe_its_reader_does_not_read_never_block() -> None:
    r, w = os.pipe()
    saved = os.dup(sys.stdout.fileno())
    gave_up: list[int] = []
    t: threading.Thread | None = None
    try:
        os.dup2(w, sys.stdout.fileno())
        writer = RecordWriter({})

        def polls() -> None:  # 3,000-byte polls: each a page of its own, 16 fill the pipe
            for i in range(40):
                left = writer.write([_piece(100 * i, 100, 30)], stop=lambda: True)
                if left:
                    gave_up.append(i)
                    return

        t = threading.Thread(target=polls, daemon=True)
        t.start()
        t.join(60)
        blocked = t.is_alive()
    finally:
        os.dup2(saved, sys.stdout.fileno())
        os.close(saved)
        os.close(w)
        os.close(r)  # (a write blocked in the pipe ends with EPIPE)
        if t is not None:
            t.join(10)
    assert not blocked, "a write blocked on the full pipe instead of asking stop()"
    assert gave_up and gave_up[0] >= 10  # the pipe took ten polls or more first
    # (a write below PIPE_BUF goes in whole or not at all: the last poll wrote nothing)
    assert writer.records == 100 * gave_up[0]
    writer.close()
