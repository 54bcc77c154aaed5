"""RecordWriter's accounting of pieces the compiled kernel rendered (Piece.ends, where each
record ends): a write cut one byte before, at and one after every record's end counts the
records wholly written and marks the offset after the last of them, also where records hold
newlines of their own or end with none (-f '%R%s', -J); a record boundary is found from
every byte. End to end: `consume -G -f '%s'` (no newline) cut by a reader that reads N
bytes commits exactly the records in those bytes.

The kernel's bytes and ends are proven equal to the per-record render in
tests/record/test_render_kernel.py; here only the writer's use of them."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest

from kafkactl.cli._record_writer import RecordWriter, _record_boundary
from kafkactl.client.record_format import KernelFormat
from kafkactl.client.topic_reader import Piece
from kafkactl.record import _accel
from kafkactl.record.batch import RecordBatch
from kafkactl.record.builder import RecordBatchBuilder
from tests.groups.helpers import FAST, offsets_show

pytestmark = pytest.mark.skipif(_accel.kernels is None, reason=f"pure Python: {_accel.REASON}")

TP = ("t", 0)


def _piece(values: list[bytes], form: KernelFormat | None, start: int = 100,
           base: int = 100) -> Piece:
    b = RecordBatchBuilder(base_offset=base)
    for v in values:
        b.append(0, None, v)
    batch = RecordBatch(memoryview(b.build()))
    assert form is not None
    found = form.render(batch, start, "t", 0)
    assert found is not None
    return Piece(found[0], found[1], TP, batch.last_offset + 1, batch, start, found[2])


def _accounted(pieces: list[Piece], written: int) -> tuple[int, dict[tuple[str, int], int]]:
    w = RecordWriter({})
    w._account(pieces, written)
    return w.records, w.consumed


FORMS = {
    "plain": lambda: KernelFormat.plain(None),
    "no newline": lambda: KernelFormat.compile([b"", b""], [b"s"]),
    "%R%s": lambda: KernelFormat.compile([b"", b"", b""], [b"R", b"s"]),
    "-J": lambda: KernelFormat.json(lambda t, p: 1),
}


@pytest.mark.parametrize("form", FORMS)
def test_cuts_around_each_record_end(form: str) -> None:
    values = [b"1", b"two\nlines", b"", b"\n\n", b"4444"]
    piece = _piece(values, FORMS[form]())
    ends = list(piece.ends)
    assert ends[-1] == len(piece.data) and len(ends) == len(values)
    for end in ends:
        for cut in (end - 1, end, end + 1):  # an empty record ends where the one before it
            if 0 <= cut <= len(piece.data):
                k = sum(1 for e in ends if e <= cut)
                assert _accounted([piece], cut) == (k, {TP: 100 + k} if k else {}), cut
    assert _accounted([piece], 0) == (0, {})  # the first record is "1": never empty


def test_a_record_with_its_own_newline_counts_exactly() -> None:
    piece = _piece([b"x", b"two\nlines", b"z"], KernelFormat.plain(None))
    assert piece.data == b"x\ntwo\nlines\nz\n"
    assert _accounted([piece], 2) == (1, {TP: 101})  # the newline reference counted none
    assert _accounted([piece], 6) == (1, {TP: 101})  # inside the second record
    assert _accounted([piece], 12) == (2, {TP: 102})


def test_a_piece_started_inside_its_batch() -> None:
    piece = _piece([b"a", b"b", b"c", b"d"], KernelFormat.compile([b"", b""], [b"s"]),
                   start=102)
    assert piece.data == b"cd" and list(piece.ends) == [1, 2]
    assert _accounted([piece], 1) == (1, {TP: 103})
    assert _accounted([piece, Piece(b"e\n", 1, ("u", 0), 8)], 3) == (2, {TP: 104})


@pytest.mark.parametrize("form", FORMS)
def test_record_boundary_from_every_byte(form: str) -> None:
    single = Piece(b"a=1\n", 1, TP, 6)
    piece = _piece([b"1", b"2\n2", b"", b"333"], FORMS[form]())
    pieces = [single, piece]
    ends = [0, 4, *(4 + e for e in piece.ends)]
    for off in range(4 + len(piece.data)):
        assert _record_boundary(pieces, off) == min(e for e in ends if e >= off), off


def test_head_c_commits_the_records_in_the_bytes_read(broker_factory: Any) -> None:
    """`consume -G g -f '%s' | head -c 1000` with 3-byte records and no separator: the
    summary counts the records written (the pipe took far more than the reader read), and
    the group commits only the 333 records wholly inside the 1,000 bytes the reader took:
    the next run starts at the first record not wholly read."""
    b = broker_factory(**FAST)
    r = subprocess.run([sys.executable, "-m", "kafkactl", "produce", "-t", "packed", "-q",
                        "-b", b.bootstrap], input=b"".join(b"%03d\n" % (i % 1000)
                                                          for i in range(200_000)),
                       capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr
    p = subprocess.Popen([sys.executable, "-m", "kafkactl", "consume", "-t", "packed", "-G",
                          "g", "--from-beginning", "-f", "%s", "-b", b.bootstrap],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout is not None and p.stderr is not None
    got = b""
    while len(got) < 1000:  # exactly 1,000 bytes out of the pipe (no read-ahead buffer)
        chunk = os.read(p.stdout.fileno(), 1000 - len(got))
        assert chunk, p.stderr.read().decode()
        got += chunk
    p.stdout.close()
    err = p.stderr.read().decode()
    assert p.wait(60) == 0, err
    assert got == b"".join(b"%03d" % i for i in range(334))[:1000]
    printed = int(err.rsplit("Processed a total of ", 1)[1].split()[0].replace(",", ""))
    assert 333 < printed < 200_000  # the pipe took more than the reader read
    committed = offsets_show(b.bootstrap, "g")[("packed", 0)]
    assert int(committed["current_offset"]) == 333
    nxt = subprocess.run([sys.executable, "-m", "kafkactl", "consume", "-t", "packed", "-G",
                          "g", "-c", "1", "-q", "-b", b.bootstrap], capture_output=True,
                         timeout=60)
    assert nxt.stdout == b"333\n"
