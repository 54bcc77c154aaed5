"""max.poll.records (Java's consumer's): a poll hands out at most that many records, across
partitions; the rest of a fetched chunk waits in the consumer for the next polls (no
refetch), and a partition's position is the offset after the last record handed out.

PartitionFetch.split at its edges (a chunk of N-1, N and N+1 records against a limit of
N), then Consumer.poll_fetches over scripted fetch answers of several partitions (a fake
leader: no broker), every read path (records, poll, lines: per record, whole batches, the
kernel) against the same path without the limit: the same records in the same order, no
poll above the limit, positions exactly after what was handed out."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkactl.cli._record_writer import _record_boundary, _records_within
from kafkactl.cli.consume import compile_batch_format, compile_format, compile_kernel_format
from kafkactl.client.consumer import Consumer
from kafkactl.client.fetcher import PartitionFetch, TopicPartition
from kafkactl.client.topic_reader import Piece, TopicReader
from kafkactl.record.batch import RecordBatchBuilder
from kafkactl.record.codecs import Compression
from tests.hypothesis_profiles import examples

T = "t"


@dataclass(frozen=True)
class Spec:
    """One batch of a log: `deltas` the offset deltas of its records (gaps: compaction),
    `span` its offsets (last_offset_delta + 1), or a control batch (a marker)."""

    deltas: tuple[int, ...] = ()
    span: int = 1
    control: bool = False
    producer_id: int = -1
    compression: Compression = Compression.NONE


def build(specs: list[Spec], base: int = 0) -> tuple[bytes, list[int]]:
    """The batches of `specs` from offset `base`, and the offsets of their records (what a
    reader hands out: control batches hold none)."""
    out = b""
    offsets: list[int] = []
    for s in specs:
        pid = s.producer_id
        b = RecordBatchBuilder(base_offset=base, producer_id=pid,
                               producer_epoch=0 if pid >= 0 else -1,
                               base_sequence=0 if pid >= 0 and not s.control else -1,
                               is_transactional=pid >= 0, is_control=s.control,
                               compression=s.compression)
        if s.control:  # a COMMIT marker
            b.append(1_000, b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00")
            out += b.build()
            base += 1
            continue
        for d in s.deltas:
            b.append_at(d, 1_000 + d, b"k%d" % (base + d), b"v%d" % (base + d))
            offsets.append(base + d)
        data = bytearray(b.build())
        if s.deltas and s.deltas[-1] != s.span - 1:  # compaction kept the batch's last delta
            _set_last_delta(data, s.span - 1)
        out += bytes(data)
        base += s.span
    return out, offsets


def _set_last_delta(data: bytearray, delta: int) -> None:
    from kafkactl.record.crc import crc32c

    data[23:27] = delta.to_bytes(4, "big")
    data[17:21] = crc32c(bytes(data[21:])).to_bytes(4, "big")


def contiguous(n: int) -> Spec:
    return Spec(tuple(range(n)), n)


def chunk(data: bytes, offset: int, tp: TopicPartition = (T, 0)) -> PartitionFetch:
    return PartitionFetch(tp[0], tp[1], 0, 10_000, 10_000, 0, memoryview(data), offset)


def offsets_of(pf: PartitionFetch) -> list[int]:
    return [r.offset for r in pf.records_iter()]


def split_all(pf: PartitionFetch, limit: int) -> list[PartitionFetch]:
    """`pf` handed out `limit` records at a time, as the consumer's polls do."""
    heads: list[PartitionFetch] = []
    rest: PartitionFetch | None = pf
    while rest is not None:
        head, after, n = rest.split(limit)
        assert n == len(offsets_of(head)) <= limit
        if after is not None:
            assert n == limit and after.fetch_offset == head.next_offset()
            assert head.end_offset == head.next_offset()
        heads.append(head)
        rest = after
    return heads


# -- PartitionFetch.split --------------------------------------------------------------------

@pytest.mark.parametrize("n", [4, 5, 6])  # N-1, N, N+1 records against a limit of 5
@pytest.mark.parametrize("shape", ["one batch", "one record a batch", "after a marker"])
def test_split_at_the_edges(n: int, shape: str) -> None:
    specs = {"one batch": [contiguous(n)],
             "one record a batch": [contiguous(1)] * n,
             "after a marker": [Spec(control=True), contiguous(n), Spec(control=True)]}[shape]
    data, offsets = build(specs, 100)
    pf = chunk(data, 100)
    head, rest, taken = pf.split(5)
    assert taken == min(n, 5)
    assert offsets_of(head) == offsets[:5]
    if n <= 5:
        assert head is pf and rest is None  # all of it: the chunk as it is
        return
    assert rest is not None and offsets_of(rest) == offsets[5:]
    assert head.next_offset() == rest.fetch_offset == offsets[4] + 1
    assert rest.next_offset() == pf.next_offset()  # past the trailing marker too


def test_a_poll_that_takes_a_whole_batch_leaves_the_markers_after_it() -> None:
    """The limit reached at a batch's end: the markers after it and the next batch are the
    next poll's (Java's position: the last record's offset + 1)."""
    data, _ = build([contiguous(3), Spec(control=True), contiguous(2)])
    head, rest, taken = chunk(data, 0).split(3)
    assert taken == 3 and head.next_offset() == 3
    assert rest is not None and rest.fetch_offset == 3 and offsets_of(rest) == [4, 5]
    data, _ = build([contiguous(3), Spec(control=True)])  # nothing after the markers
    head, rest, taken = chunk(data, 0).split(3)
    assert rest is None and head.next_offset() == 4


def test_split_counts_records_not_offsets() -> None:
    """Compaction gaps (and a batch whose last records were removed) and control batches:
    the limit counts records handed out."""
    specs = [Spec((0, 3, 7), 10), Spec(control=True), Spec((2, 4), 8), contiguous(3)]
    data, offsets = build(specs, 50)
    assert offsets == [50, 53, 57, 63, 65, 69, 70, 71]
    for limit in range(1, 10):
        heads = split_all(chunk(data, 50), limit)
        assert [o for h in heads for o in offsets_of(h)] == offsets
        assert heads[-1].next_offset() == 72
    head, rest, _ = chunk(data, 50).split(5)  # up to 65: the rest of that batch is empty
    assert head.next_offset() == 66 and rest is not None
    assert offsets_of(rest) == [69, 70, 71]


def test_split_of_a_read_committed_chunk_keeps_the_aborted_filter() -> None:
    """Producer 7's transaction aborted (its batches dropped), producer 8's committed: a
    rest starting after the abort marker must not take 8's batches for aborted ones."""
    specs = [Spec(tuple(range(3)), 3, producer_id=7), Spec(control=True, producer_id=7),
             Spec(tuple(range(4)), 4, producer_id=8), Spec(control=True, producer_id=8)]
    data, _ = build(specs)
    # markers written as COMMIT by build(): make producer 7's an ABORT
    data = _as_abort(data, 3)
    pf = PartitionFetch(T, 0, 0, 9, 9, 0, memoryview(data), 0, [(7, 0)])
    assert offsets_of(pf) == [4, 5, 6, 7]
    heads = split_all(pf, 1)
    assert [o for h in heads for o in offsets_of(h)] == [4, 5, 6, 7]
    assert heads[-1].next_offset() == 9


def _as_abort(data: bytes, offset: int) -> bytes:
    """The control batch at `offset` rewritten as an ABORT marker."""
    from kafkactl.record.memory_records import iter_batches

    for b in iter_batches(data):
        if b.base_offset == offset:
            rebuilt = RecordBatchBuilder(base_offset=offset, producer_id=b.producer_id,
                                         producer_epoch=0, is_transactional=True,
                                         is_control=True)
            rebuilt.append(1_000, b"\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x00")
            return data[:b.position] + rebuilt.build() + data[b.position + b.size:]
    raise AssertionError(offset)


def test_damage_ends_the_count() -> None:
    """A header that cannot be framed after the records: the chunk holds the records before
    it (reading raises there), and a cut before it leaves the damage to the next poll."""
    data, _ = build([contiguous(4)])
    pf = chunk(data + bytes(300), 0)
    head, rest, taken = pf.split(10)
    assert head is pf and rest is None and taken == 4
    head, rest, taken = chunk(data + bytes(300), 0).split(3)
    assert taken == 3 and offsets_of(head) == [0, 1, 2]
    assert rest is not None and rest.damage_offset == 4
    with pytest.raises(Exception, match="cannot be read"):
        offsets_of(rest)


@st.composite
def logs(draw: st.DrawFn) -> tuple[list[Spec], int]:
    specs = []
    for _ in range(draw(st.integers(1, 6))):
        if draw(st.integers(0, 5)) == 0:
            specs.append(Spec(control=True))
            continue
        span = draw(st.integers(1, 12))
        if draw(st.booleans()):
            deltas = tuple(range(span))
        else:
            deltas = tuple(sorted(draw(st.sets(st.integers(0, span - 1), max_size=span))))
        specs.append(Spec(deltas, span, compression=draw(st.sampled_from(
            [Compression.NONE, Compression.NONE, Compression.GZIP]))))
    return specs, draw(st.integers(0, 80))


@settings(max_examples=examples(300), deadline=None)
@given(logs(), st.integers(1, 20))
def test_split_hands_out_the_general_paths_records(log: tuple[list[Spec], int],
                                                   limit: int) -> None:
    specs, skip = log
    data, _ = build(specs, 1_000)
    end = chunk(data, 1_000).next_offset()
    start = 1_000 + skip % (end - 1_000)
    whole = chunk(data, start)
    heads = split_all(chunk(data, start), limit)
    assert [o for h in heads for o in offsets_of(h)] == offsets_of(whole)
    assert heads[-1].next_offset() == whole.next_offset()
    for h in heads[:-1]:
        assert len(offsets_of(h)) == limit


# -- the consumer, over scripted fetch answers ----------------------------------------------

@dataclass
class FakeLeader:
    """Each partition's log; a fetch answers at most `batches` batches from the one that
    holds the position (as a broker answers up to its size limits)."""

    logs: dict[TopicPartition, bytes]
    batches: int = 2
    fetched: list[tuple[TopicPartition, int]] = field(default_factory=list)

    def answer(self, positions: dict[TopicPartition, int]) -> dict[str, Any]:
        from kafkactl.record.memory_records import iter_batches

        parts = []
        for tp, pos in positions.items():
            self.fetched.append((tp, pos))
            data = self.logs[tp]
            got = [b for b in iter_batches(data) if b.last_offset >= pos][:self.batches]
            records = data[got[0].position:got[-1].position + got[-1].size] if got else b""
            end = max((b.last_offset + 1 for b in iter_batches(data)), default=0)
            parts.append((tp, records, end))
        return {"responses": [{"topic": tp[0], "partitions": [{
            "partition_index": tp[1], "error_code": 0, "high_watermark": end,
            "last_stable_offset": end, "log_start_offset": 0, "records": records,
            "aborted_transactions": None}]} for tp, records, end in parts]}


class _Done:
    done = True
    error = None

    def __init__(self, response: dict[str, Any]) -> None:
        self.response = response


class _Conn:
    def close(self) -> None:
        pass


def fake_consumer(leader: FakeLeader, limit: int | None) -> Consumer:
    """A Consumer of leader's partitions from offset 0 whose fetches the fake answers: one
    Fetch in flight for all partitions, as a single leader's would be."""
    c = Consumer(bootstrap_servers="127.0.0.1:9", max_poll_records=limit)
    c.assign(leader.logs)
    for tp in leader.logs:
        c.positions[tp] = 0

    def send_fetches() -> None:
        busy = set(c._buffered)
        for _conn, _req, pos in c._in_flight.values():
            busy.update(pos)
        todo = {tp: off for tp, off in c.positions.items() if tp not in busy}
        if todo and not c._in_flight:
            c._in_flight[0] = (_Conn(), _Done(leader.answer(todo)), todo)

    ends = {tp: chunk(data, 0, tp).next_offset() for tp, data in leader.logs.items()}
    c._send_fetches = send_fetches  # type: ignore[method-assign]
    c.client.poll = lambda timeout=0: None  # type: ignore[method-assign]
    c.available_offsets = (  # type: ignore[method-assign]
        lambda requests: {tp: (ends[tp], -1) for tp in requests})  # (the log ends)
    return c


def three_partitions() -> dict[TopicPartition, bytes]:
    """Partition 0: 4 + 5 + 1 records; 1: 7 with a gap and a marker; 2: 2 records."""
    return {(T, 0): build([contiguous(4), contiguous(5), contiguous(1)])[0],
            (T, 1): build([Spec((0, 1, 3, 5), 6), Spec(control=True), contiguous(3)])[0],
            (T, 2): build([contiguous(2)])[0]}


def drain(c: Consumer, polls: int = 200) -> Iterator[list[PartitionFetch]]:
    for _ in range(polls):
        if c.at_end():
            return
        yield c.poll_fetches(0.01)
    raise AssertionError("the consumer never got to the end")


@pytest.mark.parametrize("limit", [1, 2, 3, 4, 5, 9, 10, 11, None])
def test_polls_hand_out_at_most_the_limit_in_order(limit: int | None) -> None:
    leader = FakeLeader(three_partitions())
    reference = {tp: offsets_of(chunk(data, 0, tp)) for tp, data in leader.logs.items()}
    c = fake_consumer(leader, limit)
    got: dict[TopicPartition, list[int]] = {tp: [] for tp in leader.logs}
    try:
        for chunks in drain(c):
            n = 0
            for pf in chunks:
                tp = (pf.topic, pf.partition)
                offs = offsets_of(pf)
                n += len(offs)
                got[tp] += offs
                assert c.positions[tp] == pf.next_offset()  # after what was handed out
                if tp in c._buffered:
                    assert c._buffered[tp].fetch_offset == c.positions[tp]
            assert limit is None or n <= limit
            for tp, rest in c._buffered.items():  # not handed out: not passed
                assert c.positions[tp] == rest.fetch_offset
    finally:
        c.close()
    assert got == reference
    # no refetch: each partition fetched once from each place it got to (before its end,
    # where fetches wait for more)
    ends = {tp: chunk(data, 0, tp).next_offset() for tp, data in leader.logs.items()}
    before_end = [(tp, pos) for tp, pos in leader.fetched if pos < ends[tp]]
    assert len(set(before_end)) == len(before_end)


def test_the_rest_is_handed_out_before_the_partition_is_fetched_again() -> None:
    leader = FakeLeader({(T, 0): build([contiguous(10)])[0]})
    c = fake_consumer(leader, 3)
    try:
        sizes = [sum(len(offsets_of(pf)) for pf in chunks) for chunks in drain(c)]
    finally:
        c.close()
    assert sizes == [3, 3, 3, 1]
    assert leader.fetched[:1] == [((T, 0), 0)]
    assert ((T, 0), 3) not in leader.fetched  # the rest came from the first answer


def test_poll_and_iteration_count_only_what_they_hand_out() -> None:
    """poll(): at most the limit; the consumed offset (what a group commits) passes the
    records returned (and markers after them), never the next record."""
    leader = FakeLeader(three_partitions())
    reference = {tp: offsets_of(chunk(data, 0, tp)) for tp, data in leader.logs.items()}
    c = fake_consumer(leader, 4)
    seen: dict[TopicPartition, list[int]] = {tp: [] for tp in leader.logs}
    try:
        while not c.at_end():
            polled = c.poll(10)
            assert sum(len(v) for v in polled.values()) <= 4
            for tp, recs in polled.items():
                seen[tp] += [r.offset for r in recs]
                following = reference[tp][len(seen[tp]):]
                assert seen[tp][-1] < c.consumed[tp] <= (following or [1 << 62])[0]
    finally:
        c.close()
    assert seen == reference


def test_a_seek_voids_the_rest() -> None:
    leader = FakeLeader({(T, 0): build([contiguous(10)])[0]})
    c = fake_consumer(leader, 3)
    try:
        first = c.poll_fetches(0.01)
        assert offsets_of(first[0]) == [0, 1, 2] and c._buffered
        c.seek((T, 0), 1)  # back: read again from there
        again = [o for chunks in drain(c) for pf in chunks for o in offsets_of(pf)]
    finally:
        c.close()
    assert again == list(range(1, 10))


def _formats() -> list[tuple[str, dict[str, Any]]]:
    fmt = "%p %o %k %s\n"
    forms: list[tuple[str, dict[str, Any]]] = [
        ("plain", {}),
        ("plain keyed", {"key_separator": b"\t"}),
        ("per record", {"render": compile_format(fmt)}),
        ("batch", {"render": compile_format(fmt), "batch_format": compile_batch_format(fmt)}),
    ]
    kernel = compile_kernel_format(fmt)
    if kernel is not None:
        forms.append(("kernel", {"render": compile_format(fmt), "kernel_format": kernel}))
    return forms


def read_lines(leader: FakeLeader, limit: int | None, kw: dict[str, Any],
               max_records: int | None = None) -> tuple[list[list[Piece]], Consumer]:
    c = fake_consumer(leader, limit)
    reader = TopicReader(c, until_end=True, max_records=max_records, poll_timeout=0.01)
    try:
        return [list(pieces) for pieces in reader.lines(**kw)], c
    finally:
        c.close()


def long_batches() -> dict[TopicPartition, bytes]:
    """Batches larger than the limits: parts of one batch go out over several polls."""
    return {(T, 0): build([contiguous(23), contiguous(17), Spec(control=True),
                           contiguous(9)])[0],
            (T, 1): build([Spec(tuple(range(0, 30, 2)), 30), contiguous(12)])[0]}


@pytest.mark.parametrize("form, kw", _formats(), ids=[f for f, _ in _formats()])
@pytest.mark.parametrize("limit", [1, 7, 16, 17, 18, 500])
def test_lines_are_the_general_paths_lines(form: str, kw: dict[str, Any], limit: int) -> None:
    reference, _ = read_lines(FakeLeader(long_batches()), None, kw)
    polls, c = read_lines(FakeLeader(long_batches()), limit, kw)
    assert (b"".join(p.data for poll in polls for p in poll)
            == b"".join(p.data for poll in reference for p in poll))
    for poll in polls:
        assert sum(p.records for p in poll) <= limit
    # each piece's offsets: in order, the consumed offsets they give end where the log does
    last: dict[TopicPartition, int] = {}
    for poll in polls:
        for p in poll:
            assert p.first_offset >= last.get(p.tp, 0)
            last[p.tp] = p.next_offset
    assert last == {(T, 0): 50, (T, 1): 42}
    assert c.positions == {(T, 0): 50, (T, 1): 42}


@pytest.mark.parametrize("limit", [3, 10])
def test_lines_with_max_records_too(limit: int) -> None:
    """-c K with max.poll.records: exactly K records, the group's consumed offsets after
    them (the reader rewinds what it fetched beyond)."""
    for k in (1, 9, 10, 11, 40):
        reference, _ = read_lines(FakeLeader(long_batches()), None, {}, max_records=k)
        polls, _c = read_lines(FakeLeader(long_batches()), limit, {}, max_records=k)
        got = [p for poll in polls for p in poll]
        assert sum(p.records for p in got) == k
        assert b"".join(p.data for p in got) == b"".join(p.data for poll in reference
                                                           for p in poll)


def test_a_cut_write_counts_the_records_of_a_sliced_piece() -> None:
    """The kernel's pieces of a batch handed out over several polls know where each record
    ends in their own bytes: a write cut short counts exactly the records inside it."""
    kernel = compile_kernel_format("%o %s\n")
    if kernel is None:
        pytest.skip("the compiled kernels are not in use")
    kw = {"render": compile_format("%o %s\n"), "kernel_format": kernel}
    polls, _ = read_lines(FakeLeader({(T, 0): build([contiguous(30)])[0]}), 7, kw)
    pieces = [p for poll in polls for p in poll]
    assert [p.records for p in pieces] == [7, 7, 7, 7, 2]
    for p in pieces:
        lines = bytes(p.data).splitlines(keepends=True)
        assert len(lines) == p.records == len(p.ends)
        ends = [sum(len(x) for x in lines[:i + 1]) for i in range(len(lines))]
        assert list(p.ends) == ends
        for n in range(len(p.data)):
            assert _records_within(p, n) == sum(1 for e in ends if e <= n)
            assert _record_boundary([p], n) == next(e for e in [0, *ends] if e >= n)
        for k in range(1, p.records + 1):
            assert p.offset_after(k) == int(lines[k - 1].split()[0]) + 1


def test_a_batch_handed_out_over_many_polls_is_decoded_and_checked_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Each part of a batch of 1000 records, handed out 7 at a time, goes on decoding
    where the part before stopped (poll, records, lines record by record), or slices the
    batch the kernel rendered once; its CRC is checked once: reading is linear in the
    batch, not quadratic."""
    from kafkactl.client.record_format import KernelFormat
    from kafkactl.record import batch as batch_module

    decoded: list[int] = []
    checked: list[int] = []
    rendered: list[int] = []
    iterate, is_valid = batch_module.RecordBatch.__iter__, batch_module.RecordBatch.is_valid

    def counting_iter(self: Any) -> Iterator[Any]:
        for r in iterate(self):
            decoded.append(r.offset)
            yield r

    def counting_is_valid(self: Any) -> bool:
        checked.append(self.base_offset)
        return bool(is_valid(self))

    monkeypatch.setattr(batch_module.RecordBatch, "__iter__", counting_iter)
    monkeypatch.setattr(batch_module.RecordBatch, "is_valid", counting_is_valid)
    log = {(T, 0): build([contiguous(1000)])[0]}

    def poll_all() -> int:
        c = fake_consumer(FakeLeader(log), 7)
        n = 0
        try:
            for _ in range(1000):
                if c.at_end():
                    return n
                n += sum(map(len, c.poll(10).values()))
        finally:
            c.close()
        raise AssertionError("the consumer never got to the end")

    def records() -> int:
        c = fake_consumer(FakeLeader(log), 7)
        try:
            return sum(1 for _ in TopicReader(c, until_end=True, poll_timeout=0.01).records())
        finally:
            c.close()

    def lines(**kw: Any) -> int:
        return sum(p.records for poll in read_lines(FakeLeader(log), 7, kw)[0] for p in poll)

    for read in (poll_all, records, lambda: lines(render=compile_format("%o %s\n"))):
        decoded.clear()
        checked.clear()
        assert read() == 1000
        assert sorted(decoded) == list(range(1000)), len(decoded)
        assert checked == [0]
    kernel = compile_kernel_format("%o %s\n")
    if kernel is None:
        return
    render = KernelFormat.render

    def counting_render(self: Any, b: Any, start: int, topic: str, partition: int) -> Any:
        rendered.append(start)
        return render(self, b, start, topic, partition)

    monkeypatch.setattr(KernelFormat, "render", counting_render)
    checked.clear()
    assert lines(render=compile_format("%o %s\n"), kernel_format=kernel) == 1000
    assert rendered == [0] and checked == [0]


# -- kafkactl consume, with what users pipe --------------------------------------------------

def _piped_inputs() -> dict[str, bytes]:
    """seq, yes, and log lines of many lengths (some empty)."""
    import random

    rng = random.Random(5)
    logs = b"".join(b"%s GET /%s %d\n" % (b"10.0.%d.%d" % (i % 7, i % 251),
                                          b"x" * rng.choice([0, 1, 9, 80, 400]), i)
                    if i % 97 else b"\n" for i in range(3000))
    return {"seq": b"".join(b"%d\n" % i for i in range(1, 5001)),
            "yes": b"y\n" * 4000, "logs": logs}


INPUTS = _piped_inputs()
FORMATS = {"plain": [], "keyed": ["-K", ":"], "format": ["-f", "%p %o %s\\n"], "json": ["-J"]}
CASES = ([(f"in-{name}", form) for name in INPUTS for form in FORMATS]
         + [("in-all", "format"), ("in-all", "json")])


@pytest.fixture(scope="module")
def piped(_module_broker_process: Any) -> str:
    """in-seq, in-yes, in-logs: one partition each, holding that input; in-all: three
    partitions, one input each (kafkactl produce: batches of thousands of records)."""
    from kafkactl.client.admin import AdminClient
    from tests import zygote

    bootstrap = _module_broker_process.bootstrap
    with AdminClient(bootstrap) as admin:
        topics = {f"in-{name}": (1, 1, {}) for name in INPUTS} | {"in-all": (3, 1, {})}
        assert all(e is None for e in admin.create_topics(topics).values())
    for i, (name, data) in enumerate(INPUTS.items()):
        for topic, p in ((f"in-{name}", 0), ("in-all", i)):
            r = zygote.run(["produce", "-t", topic, "-p", str(p), "-q", "-b", bootstrap],
                           input=data, timeout=120)
            assert r.returncode == 0, r.stderr
    return bootstrap


@pytest.mark.parametrize("topic, form", CASES, ids=[f"{t}-{f}" for t, f in CASES])
def test_consume_prints_the_same_at_the_limits_edges(piped: str, topic: str,
                                                     form: str) -> None:
    """One below, at and one above 500 (the -G default), and 1: `kafkactl consume` prints
    what it prints without a limit (partition by partition: the order of the partitions
    between polls may differ)."""
    from tests import zygote

    def consume(*extra: str) -> dict[bytes, list[bytes]]:
        r = zygote.run(["consume", "-t", topic, "--from-beginning", "-e", "-q", "-b", piped,
                        *FORMATS[form], *extra], timeout=120)
        assert r.returncode == 0, r.stderr
        return _by_partition(r.stdout, form)

    whole = consume()
    assert sum(map(len, whole.values())) == sum(
        len(data.splitlines()) for name, data in INPUTS.items() if topic in ("in-all",
                                                                             f"in-{name}"))
    for limit in ("1", "499", "500", "501"):
        assert consume("-X", f"max.poll.records={limit}") == whole, limit


def _by_partition(out: bytes, form: str) -> dict[bytes, list[bytes]]:
    """Each partition's output lines in order: -f's lines start with it, -J's objects name
    it; plain lines are of a topic of one partition."""
    import json

    got: dict[bytes, list[bytes]] = {}
    for line in out.splitlines():
        if form == "json":
            key = str(json.loads(line)["partition"]).encode()
        elif form == "format":
            key = line.split(b" ", 1)[0]
        else:
            key = b"0"
        got.setdefault(key, []).append(line)
    return got
