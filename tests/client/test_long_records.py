"""Records longer than the producer can ever send are not held by the line reader: a
delimited.LongRecord stands in for each, its bytes streamed to the spill (--failed-file) or
dropped. Proven against the general path (the reader without a Limit), byte for byte:
records one below, at and one above the limit and far above it, delimiters of one and
more bytes split across reads at every offset, binary records; and the size the producer
is told for a LongRecord is the one send() counts for the same record."""

from __future__ import annotations

import io
import itertools
import random
from collections.abc import Iterator

import pytest

from kafkactl.client.delimited import (
    Block,
    Limit,
    LongRecord,
    read_blocks,
    read_records,
)
from kafkactl.client.line_producer import LineProducer, null_fields
from kafkactl.client.producer import RECORD_OVERHEAD, RecordSizeError


class Pieces(io.RawIOBase):
    """A stream whose reads return `sizes` bytes in turn (cycling): the chunks the reader
    sees, so a delimiter or a record can be split anywhere."""

    def __init__(self, data: bytes, sizes: list[int]) -> None:
        self.data = data
        self.at = 0
        self.sizes = itertools.cycle(sizes)

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        size = min(n if n >= 0 else len(self.data), next(self.sizes))
        piece = self.data[self.at:self.at + size]
        self.at += len(piece)
        return piece


def expand(chunks: Iterator[list[bytes] | Block | LongRecord], spill: io.BytesIO | None,
           limit: Limit) -> list[bytes]:
    """The records as the general path gives them: a LongRecord's from the spill (its
    notes checked against its bytes)."""
    out: list[bytes] = []
    for chunk in chunks:
        if isinstance(chunk, LongRecord):
            assert chunk.length > limit.longest
            assert spill is not None and chunk.spilled >= 0
            raw = spill.getvalue()[chunk.spilled:chunk.spilled + chunk.length]
            assert len(raw) == chunk.length
            if limit.separator is not None:
                assert chunk.separator_at == raw.find(limit.separator)
            assert chunk.head == raw[:limit.ends]
            assert chunk.tail == (raw[len(raw) - limit.ends:] if limit.ends else b"")
            out.append(raw)
        elif isinstance(chunk, Block):
            out.extend(chunk.records())
        else:
            out.extend(chunk)
    return out


LONGEST = 40


def _inputs(delimiter: bytes) -> list[bytes]:
    """Records around LONGEST (one below, at, one above), far above it, empty, binary,
    holding the delimiter's first bytes, with and without a final delimiter."""
    rng = random.Random(len(delimiter))
    alphabet = bytes(b for b in range(256) if b not in delimiter) + delimiter[:-1]
    cases = []
    for sizes in ([LONGEST - 1, LONGEST, LONGEST + 1], [LONGEST + 1, 0, 3 * LONGEST],
                  [500, 1, LONGEST + 2, 0], [7 * LONGEST]):
        records = []
        for n in sizes:
            record = bytes(rng.choice(alphabet) for _ in range(n))
            if n > 2 and len(delimiter) > 1:  # a delimiter begun, not finished, inside
                record = record[:n // 2] + delimiter[:-1] + record[n // 2 + len(delimiter) - 1:]
            assert delimiter not in record
            records.append(record)
        data = delimiter.join(records)
        cases += [data + delimiter, data]
    return cases


DELIMITERS = [b"\n", b"\x00", b"\r\n", b"\xff\xfe\x00", b"<|>"]


@pytest.mark.parametrize("delimiter", DELIMITERS)
@pytest.mark.parametrize("spilled", [True, False])
def test_long_records_against_the_general_path(delimiter: bytes, spilled: bool) -> None:
    for data, step in itertools.product(_inputs(delimiter), [1, 2, 3, 7, 39, 40, 41, 4096]):
        want = [r for c in read_records(io.BytesIO(data), delimiter) for r in c]
        for sizes in ([step], [step, 1], [1, step, 2]):
            spill = io.BytesIO() if spilled else None
            limit = Limit(LONGEST, spill, b"\x01" if step % 2 else None, ends=3)
            got = list(read_records(Pieces(data, sizes), delimiter, limit))  # type: ignore[arg-type]
            longs = [c for c in got if isinstance(c, LongRecord)]
            if spilled:
                assert expand(iter(got), spill, limit) == want, (data, sizes)
            else:
                assert all(c.spilled == -1 for c in longs)
            # a record is held whole only when it came whole in a read or two
            held = [r for c in got if not isinstance(c, LongRecord) for r in c]
            assert all(len(r) <= LONGEST + 2 * max(sizes) + len(delimiter) for r in held)
            assert sum(len(c) for c in got) == len(want)
            if len(delimiter) == 1:
                spill = io.BytesIO() if spilled else None
                limit = Limit(LONGEST, spill, None, ends=0)
                blocks = list(read_blocks(Pieces(data, sizes), delimiter, limit))  # type: ignore[arg-type]
                if spilled:
                    assert expand(iter(blocks), spill, limit) == want, (data, sizes)
                assert sum(len(c) for c in blocks) == len(want)


def test_a_record_far_longer_than_the_limit_is_streamed_not_held() -> None:
    """Each read of a 3 MB record after the first LONGEST bytes goes to the spill: no
    chunk the reader yields holds more than a read's worth of it."""
    record = bytes(b for b in range(256) if b != 10) * 12_000
    spill = io.BytesIO()
    got = list(read_blocks(Pieces(b"a\n" + record + b"\nz\n", [65536]), b"\n",
                           Limit(1000, spill)))  # type: ignore[arg-type]
    assert [type(c) for c in got] == [Block, LongRecord, Block]
    long = got[1]
    assert isinstance(long, LongRecord) and long.length == len(record)
    assert spill.getvalue() == record


class FakeProducer:
    """What LineProducer.limit and long_size ask of a producer."""

    sync = False

    def __init__(self, max_request_size: int, buffer_memory: int) -> None:
        self.max_request_size = max_request_size
        self.buffer_memory = buffer_memory

    def add_batch_callback(self, _callback: object) -> None:
        pass

    def record_too_large(self, size: int) -> RecordSizeError | None:
        limit = min(self.max_request_size, self.buffer_memory)
        return (RecordSizeError(size, "max.request.size", limit)
                if size + RECORD_OVERHEAD > limit else None)


def send_size(raw: bytes, ksep: bytes | None, nulls: frozenset[bytes]) -> int:
    """The size send() counts, from the record as the record-by-record path splits it."""
    key: bytes | None = None
    value: bytes | None = raw
    if ksep is not None:
        k, sep, v = raw.partition(ksep)
        if sep:
            key, value = k, v
    if value in nulls:
        value = None
    if key in nulls:
        key = None
    return (len(key) if key else 0) + (len(value) if value else 0)


@pytest.mark.parametrize("ksep", [None, b":", b"::="])
@pytest.mark.parametrize("null_empty,marker", [(False, None), (True, None), (False, b"NUL"),
                                               (True, b"NULLNULL")])
def test_long_size_is_what_send_counts(ksep: bytes | None, null_empty: bool,
                                       marker: bytes | None) -> None:
    """Every record longer than limit() is refused by the producer whatever its key, and
    the size LineProducer tells for its LongRecord is send()'s, for records one below, at
    and above the limit, with the separator and null spellings at their ends."""
    producer = FakeProducer(300, 10_000)
    lp = LineProducer(producer, "t", key_separator=ksep,  # type: ignore[arg-type]
                      null_empty=null_empty, null_marker=marker)
    nulls = null_fields(null_empty, marker)
    rng = random.Random(5)
    for n in range(190, 320):
        for _ in range(12):
            raw = bytearray(rng.choice(b"abc:=NUL") for _ in range(n))
            if ksep is not None and rng.random() < 0.5:  # a key or value that is null
                spelling = rng.choice(sorted(nulls) or [b""])
                at = rng.choice([0, n - len(spelling) - len(ksep)])
                if at >= 0:
                    raw[at:at + len(spelling) + len(ksep)] = (
                        spelling + ksep if at == 0 else ksep + spelling)
            raw = bytes(raw)
            limit = lp.limit(io.BytesIO())
            size = send_size(raw, ksep, nulls)
            if len(raw) > limit.longest:
                assert producer.record_too_large(size) is not None, raw
            chunks = list(read_records(Pieces(raw, [17]), b"\n", limit))  # type: ignore[arg-type]
            long = [c for c in chunks if isinstance(c, LongRecord)]
            if long:
                assert lp.long_size(long[0]) == size, raw
    assert lp.limit().longest >= 300 - RECORD_OVERHEAD
