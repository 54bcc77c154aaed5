"""RecordWriter's accounting at its edges: a write cut one byte before, at and one byte
after a record's end counts the records wholly written and marks the offset after the last
of them; a record holding newlines of its own makes a cut batch count nothing (printed
again, never skipped); a record boundary is found from any byte of a piece."""

from __future__ import annotations

import os
import threading
import time

from kafkactl.cli._record_writer import RecordWriter, _record_boundary
from kafkactl.client.topic_reader import Piece, plain_lines
from kafkactl.record.batch import RecordBatch
from kafkactl.record.builder import RecordBatchBuilder

TP = ("t", 0)


def _batch(values: list[bytes], base: int = 100) -> RecordBatch:
    b = RecordBatchBuilder(base_offset=base)
    for v in values:
        b.append(0, None, v)
    return RecordBatch(memoryview(b.build()))


def _piece(values: list[bytes], start: int = 100) -> Piece:
    batch = _batch(values)
    found = plain_lines(batch, start, None, None)
    assert found is not None
    return Piece(found[0], found[1], TP, batch.last_offset + 1, batch, start)


def _accounted(pieces: list[Piece], written: int) -> tuple[int, dict[tuple[str, int], int]]:
    w = RecordWriter({})
    w._account(pieces, written)
    return w.records, w.consumed


def test_cuts_around_each_record_end() -> None:
    values = [b"1", b"22", b"333", b"4444"]  # lines end at bytes 2, 5, 9, 14
    piece = _piece(values)
    ends = [2, 5, 9, 14]
    for k, end in enumerate(ends, start=1):
        assert _accounted([piece], end - 1) == (k - 1, {TP: 100 + k - 1} if k > 1 else {})
        assert _accounted([piece], end) == (k, {TP: 100 + k})
        if end + 1 <= len(piece.data):
            assert _accounted([piece], end + 1) == (k, {TP: 100 + k})
    assert _accounted([piece], 0) == (0, {})


def test_a_piece_started_inside_its_batch_counts_from_its_start() -> None:
    piece = _piece([b"a", b"b", b"c", b"d"], start=102)  # offsets 102, 103 printed
    assert piece.data == b"c\nd\n"
    assert _accounted([piece], 2) == (1, {TP: 103})
    assert _accounted([piece], 4) == (2, {TP: 104})


def test_a_record_with_its_own_newline_makes_a_cut_batch_count_nothing() -> None:
    piece = _piece([b"x", b"two\nlines", b"z"])
    assert piece.data.count(b"\n") == 4 and piece.records == 3
    assert _accounted([piece], 2) == (0, {})  # printed again next time, never skipped
    assert _accounted([piece], len(piece.data)) == (3, {TP: 103})  # whole: all of it


def test_single_record_pieces_and_boundaries() -> None:
    pieces = [Piece(b"a=1\n", 1, TP, 6), Piece(b"b=22\n", 1, TP, 7)]
    assert _accounted(pieces, 3) == (0, {})
    assert _accounted(pieces, 4) == (1, {TP: 6})
    assert _accounted(pieces, 8) == (1, {TP: 6})
    assert _accounted(pieces, 9) == (2, {TP: 7})
    assert [_record_boundary(pieces, off) for off in range(10)] == \
        [0, 4, 4, 4, 4, 9, 9, 9, 9, 9]
    batch = _piece([b"1", b"22", b"333"])  # "1\n22\n333\n"
    assert [_record_boundary([batch], off) for off in range(9)] == \
        [0, 2, 2, 5, 5, 5, 9, 9, 9]


def test_seq_and_yes_shaped_batches() -> None:
    seq = [str(i).encode() for i in range(1, 1001)]
    piece = _piece(seq)
    cut = piece.data.index(b"\n500\n") + 1  # just after "499\n"
    assert _accounted([piece], cut) == (499, {TP: 100 + 499})
    yes = [b"y"] * 1000
    piece = _piece(yes)
    assert _accounted([piece], 1999) == (999, {TP: 100 + 999})
    assert _accounted([piece], 2000) == (1000, {TP: 1100})


def _pipe_writer() -> tuple[RecordWriter, int, int]:
    """A writer on a pipe of its own, tracking what the reader takes (a group consumer)."""
    r, w = os.pipe()
    writer = RecordWriter({})
    writer.fd, writer.pipe, writer.unbounded, writer.track_reads = w, True, False, True
    return writer, r, w


def test_a_pipe_record_counts_once_the_reader_took_it_all() -> None:
    """Written is not read: a record is consumed once its last byte left the pipe, checked
    one byte below, at and one above each record's end, for batch lines and single-record
    pieces, and an empty piece (markers) only once all before it is read."""
    batch = _piece([b"1", b"22", b"333", b"4444"])  # ends at bytes 2, 5, 9, 14
    other = ("t", 1)
    single = Piece(b"x=1\n", 1, other, 8)
    tail = Piece(b"", 0, TP, 107)  # a commit marker after the batch (offsets 104-106)
    writer, r, w = _pipe_writer()
    try:
        assert writer.write([batch, single, tail]) == 0
        assert writer.records == 5 and writer.consumed == {}  # all written, nothing read
        ends = [(2, {TP: 101}), (5, {TP: 102}), (9, {TP: 103}),
                (14, {TP: 104}), (18, {TP: 107, other: 8})]
        taken = 0
        expected: dict[tuple[str, int], int] = {}
        for end, after in ends:
            for at in (end - 1, end, end + 1):
                if at > 18 or at < taken:
                    continue
                taken += len(os.read(r, at - taken))
                writer.settle()
                if at >= end:
                    expected = after
                assert writer.consumed == expected, (at, writer.consumed)
        assert not writer.pending
    finally:
        os.close(r)
        os.close(w)


def test_moved_partitions_and_a_gone_reader() -> None:
    """A rebalance drops what the pipe still holds of the partitions that moved away;
    drain() returns at once when the reader has gone, counting only what it took."""
    moved = ("t", 1)
    writer, r, w = _pipe_writer()
    try:
        writer.write([_piece([b"a", b"b"]), Piece(b"m\n", 1, moved, 5),
                      _piece([b"c"], start=102)])
        writer.assigned({TP})
        assert [p.piece.tp for p in writer.pending] == [TP, TP]
        assert os.read(r, 3) == b"a\nb"
        os.close(r)
        writer.drain()
        assert writer.consumed == {TP: 101}
    finally:
        os.close(w)


def test_drain_waits_for_a_reader_that_is_still_reading() -> None:
    """drain(): the reader goes on reading after the writer is done; the last commit waits
    for it, so that what it reads is not printed again by the next run."""
    writer, r, w = _pipe_writer()
    values = [b"%d" % i for i in range(1000)]
    got = bytearray()

    def read_slowly() -> None:
        while chunk := os.read(r, 100):
            got.extend(chunk)
            time.sleep(0.001)

    try:
        writer.write([_piece(values)])
        reader = threading.Thread(target=read_slowly)
        reader.start()
        writer.drain()
        os.close(w)
        w = -1
        reader.join(30)
        assert bytes(got) == b"".join(v + b"\n" for v in values)
        assert writer.consumed == {TP: 1100}
    finally:
        os.close(r)
        if w >= 0:
            os.close(w)
