"""Damaged data in a fetch response, client side, with hand-built responses: the complete
valid batches before the damage are handed out by every read path (records, poll, lines:
per record, whole batches, the compiled kernel), then the error names the partition and
the first offset not read, the one after the last complete batch. A batch header that
cannot be framed (a zero-filled hole in the log, a size below the minimum) is damage; a
response that ends inside a batch (cut at the fetch size limit) is not and stays silent.
Committed (consumed) offsets never pass a record that was not handed out."""

from __future__ import annotations

import struct
from collections.abc import Iterator

import pytest

from kafkactl.cli.consume import compile_batch_format, compile_format, compile_kernel_format
from kafkactl.client import fetcher
from kafkactl.client.consumer import Consumer
from kafkactl.client.fetcher import PartitionFetch
from kafkactl.client.topic_reader import Piece, TopicReader
from kafkactl.record.batch import RecordBatchBuilder
from kafkactl.record.errors import CorruptRecordError

TP = ("t", 0)


def _batch(base: int, n: int = 5, *, producer_id: int = -1, control: bool = False) -> bytes:
    b = RecordBatchBuilder(base_offset=base, producer_id=producer_id,
                           producer_epoch=0 if producer_id >= 0 else -1,
                           base_sequence=0 if producer_id >= 0 and not control else -1,
                           is_transactional=producer_id >= 0, is_control=control)
    if control:  # an ABORT marker
        b.append(1_000, b"\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x00")
        return b.build()
    for i in range(n):
        b.append(1_000 + i, b"k%d" % (base + i), b"v%d" % (base + i) + b"x" * 40)
    return b.build()


GOOD = _batch(10) + _batch(15)  # offsets 10..19
HOLE = bytes(300)  # a zero-filled hole: "message size 0 ... smaller than the minimum"
AFTER = _batch(20)  # written after the hole: unreachable


def _small_header(base: int) -> bytes:
    """A magic-2 batch header whose size (10) is below the batch header's."""
    return struct.pack(">qiib", base, 10, 0, 2) + bytes(60)


def _fetch(records: bytes, offset: int = 10, aborted: list[tuple[int, int]] | None = None
           ) -> PartitionFetch:
    return PartitionFetch("t", 0, 0, 100, 100, 0, memoryview(records), offset, aborted)


def _offsets(pf: PartitionFetch, check_crcs: bool = True) -> tuple[list[int], Exception | None]:
    got: list[int] = []
    try:
        for r in pf.records_iter(check_crcs):
            got.append(r.offset)
    except CorruptRecordError as e:
        return got, e
    return got, None


@pytest.mark.parametrize("damage, why", [
    (HOLE + AFTER, "message size 0 at position"),
    (_small_header(20) + AFTER, "record batch size 10 at position"),
    (struct.pack(">qiib", 20, 500, 0, 7) + bytes(600), "invalid magic 7"),
])
def test_batches_before_a_header_that_cannot_be_framed_are_handed_out(
        damage: bytes, why: str) -> None:
    pf = _fetch(GOOD + damage)
    assert pf.next_offset() == 20 and pf.damage_offset == 20
    for check_crcs in (True, False):
        got, err = _offsets(_fetch(GOOD + damage), check_crcs)
        assert got == list(range(10, 20))
        assert isinstance(err, fetcher.UnframableFetchError)
        assert (err.topic, err.partition, err.offset) == ("t", 0, 20)
        assert str(err).startswith("t-0: the data at offset 20 cannot be read: ")
        assert why in str(err)


def test_damage_names_the_offset_after_the_last_complete_batch() -> None:
    # from the middle of a batch, and past trailing batches that print nothing (markers)
    got, err = _offsets(_fetch(GOOD + HOLE, offset=12))
    assert got == list(range(12, 20)) and isinstance(err, fetcher.CorruptFetchError)
    assert err.offset == 20
    data = _batch(10, producer_id=7) + _batch(15, control=True) + HOLE
    for aborted in (None, [(7, 10)]):  # read_uncommitted, read_committed
        got, err = _offsets(_fetch(data, aborted=aborted))
        assert got == ([] if aborted else list(range(10, 15)))
        assert isinstance(err, fetcher.UnframableFetchError) and err.offset == 16


def test_damage_at_the_fetch_offset() -> None:
    pf = _fetch(HOLE + AFTER)
    got, err = _offsets(pf)
    assert got == [] and isinstance(err, fetcher.UnframableFetchError) and err.offset == 10
    assert pf.damaged and pf.damage_offset == 10
    with pytest.raises(CorruptRecordError, match="t-0: the data at offset 10 cannot be read"):
        pf.next_offset()  # no position to go on from: an error, not an empty fetch


@pytest.mark.parametrize("tail", [
    _batch(20)[:-7],  # a batch cut short: the broker's size limit
    _batch(20)[:30],  # its header cut short
    _batch(20)[:12],  # less than a header
    bytes(16),  # zeros too short to be a header: the response ends there
], ids=["cut-batch", "cut-header", "less-than-a-header", "short-zeros"])
def test_a_partial_last_batch_is_not_damage(tail: bytes) -> None:
    pf = _fetch(GOOD + tail)
    assert _offsets(pf) == (list(range(10, 20)), None)
    assert pf.next_offset() == 20
    assert not pf.damaged and pf.damage_offset is None


def test_a_crc_mismatch_names_its_offset() -> None:
    bad = bytearray(GOOD + _batch(20))
    bad[len(GOOD) - 3] ^= 1  # inside the second batch's last record
    got, err = _offsets(_fetch(bytes(bad)))
    assert got == list(range(10, 15)) and isinstance(err, fetcher.CorruptFetchError)
    assert err.offset == 15 and "CRC mismatch in batch at offset 15" in str(err)
    got, err = _offsets(_fetch(bytes(bad)), check_crcs=False)  # read unchecked
    assert got == list(range(10, 25)) and err is None


# -- the consumer ------------------------------------------------------------------------------

@pytest.fixture
def consumer() -> Iterator[Consumer]:
    c = Consumer(bootstrap_servers="127.0.0.1:9", max_partition_fetch_bytes=1 << 20)
    c.assign([TP])
    c.positions[TP] = 10
    yield c
    c.close()


def _answers(consumer: Consumer, *answers: bytes) -> None:
    """poll_fetches hands out `answers` (each at the consumer's position), one a poll."""
    todo = list(answers)

    def poll_fetches(timeout: float = 1.0) -> list[PartitionFetch]:
        out: list[PartitionFetch] = []
        if todo:
            consumer._handle(_fetch(todo.pop(0), consumer.positions[TP]), out)
        return out

    consumer.poll_fetches = poll_fetches  # type: ignore[method-assign]


def test_handle_keeps_the_batches_before_the_damage(consumer: Consumer) -> None:
    out: list[PartitionFetch] = []
    consumer._handle(_fetch(GOOD + HOLE + AFTER), out)
    assert len(out) == 1 and consumer.positions[TP] == 20
    out = []
    consumer._handle(_fetch(HOLE + AFTER, 20), out)  # damage at the position: the caller
    assert len(out) == 1 and consumer.positions[TP] == 20  # reads it, and raises there
    consumer._handle(_fetch(GOOD[:-7], 20), [])  # a cut batch: no progress, no error


def test_poll_returns_the_records_before_the_damage_then_raises(consumer: Consumer) -> None:
    _answers(consumer, GOOD + HOLE + AFTER, HOLE + AFTER)
    got = consumer.poll()
    assert [r.offset for r in got[TP]] == list(range(10, 20))
    assert consumer.consumed[TP] == 20 and consumer.positions[TP] == 20
    with pytest.raises(CorruptRecordError, match="t-0: the data at offset 20 ") as e:
        consumer.poll()
    assert isinstance(e.value, fetcher.UnframableFetchError) and e.value.offset == 20
    with pytest.raises(CorruptRecordError) as e:  # fetched again: the same place
        consumer.poll()
    assert isinstance(e.value, fetcher.UnframableFetchError) and e.value.offset == 20
    assert consumer.consumed[TP] == 20


def test_iterating_hands_out_the_records_before_the_damage(consumer: Consumer) -> None:
    _answers(consumer, GOOD + HOLE + AFTER)
    got: list[int] = []
    with pytest.raises(CorruptRecordError) as e:
        for r in consumer:
            got.append(r.offset)
    assert got == list(range(10, 20))
    assert isinstance(e.value, fetcher.UnframableFetchError) and e.value.offset == 20
    assert consumer.consumed[TP] == 20


def _formats() -> list[tuple[str, dict[str, object]]]:
    fmt = "%o %s\n"
    kernel = compile_kernel_format(fmt)
    forms: list[tuple[str, dict[str, object]]] = [
        ("plain", {}),
        ("per record", {"render": compile_format(fmt)}),
        ("batch", {"render": compile_format(fmt), "batch_format": compile_batch_format(fmt)}),
    ]
    if kernel is not None:
        forms.append(("kernel", {"render": compile_format(fmt), "kernel_format": kernel}))
    return forms


def _lines(consumer: Consumer, check_crcs: bool, kw: dict[str, object]
           ) -> tuple[list[Piece], Exception | None]:
    consumer.check_crcs = check_crcs
    reader = TopicReader(consumer)
    pieces: list[Piece] = []
    try:
        for chunk in reader.lines(**kw):  # type: ignore[arg-type]
            pieces.extend(chunk)
    except CorruptRecordError as e:
        return pieces, e
    return pieces, None


@pytest.mark.parametrize("form", [f for f, _ in _formats()])
@pytest.mark.parametrize("check_crcs", [True, False])
def test_lines_print_the_batches_before_the_damage(consumer: Consumer, form: str,
                                                   check_crcs: bool) -> None:
    kw = dict(_formats())[form]
    _answers(consumer, GOOD + HOLE + AFTER)
    pieces, err = _lines(consumer, check_crcs, kw)
    text = b"".join(p.data for p in pieces).splitlines()
    if form == "plain":
        assert text == [b"v%d" % o + b"x" * 40 for o in range(10, 20)]
    else:
        assert text == [b"%d v%d" % (o, o) + b"x" * 40 for o in range(10, 20)]
    assert isinstance(err, fetcher.CorruptFetchError) and err.offset == 20
    assert str(err) == ("t-0: the data at offset 20 cannot be read: message size 0 at "
                        f"position {len(GOOD)} is smaller than the minimum (the data is "
                        "damaged; nothing from offset 20 on is printed)")
    # what a group would commit: every record before the damage, never past it
    assert max(p.next_offset for p in pieces) == 20
    assert consumer.positions[TP] == 20


@pytest.mark.parametrize("form", [f for f, _ in _formats()])
def test_lines_unchecked_garbled_batch(consumer: Consumer, form: str) -> None:
    """check.crcs=false: a batch whose tail is zeros prints the records that decode, then
    names the first that does not."""
    second = bytearray(_batch(15))
    second[-60:] = bytes(60)  # the last record (offset 19) and part of the one before
    _answers(consumer, _batch(10) + bytes(second) + HOLE)
    pieces, err = _lines(consumer, False, dict(_formats())[form])
    assert isinstance(err, fetcher.CorruptFetchError)
    lines = b"".join(p.data for p in pieces).splitlines()
    assert len(lines) == err.offset - 10 and 15 <= err.offset < 20
    assert f"the record at offset {err.offset} (in the batch at offset 15)" in str(err)
    assert max(p.next_offset for p in pieces) == err.offset
    # checked, the same batch fails its CRC: nothing of it is printed
    consumer.positions[TP] = 10
    _answers(consumer, _batch(10) + bytes(second) + HOLE)
    pieces, err = _lines(consumer, True, dict(_formats())[form])
    assert len(b"".join(p.data for p in pieces).splitlines()) == 5
    assert isinstance(err, fetcher.CorruptFetchError) and err.offset == 15
    assert "the batch at offset 15 fails its CRC check" in str(err)
