"""A record sent without a timestamp gets the time it was sent (Kafka's KafkaProducer.doSend:
`record.timestamp() == null ? nowMs : record.timestamp()`; librdkafka stamps each message at
its produce call), never the timestamp of an earlier record of its batch; explicit
timestamps are kept exactly, older ones after newer ones too (a negative timestamp delta).

Against a real broker the records are read back with their batches: the general path
(Producer.send) and the bulk paths (send_values, send_key_values, send_lines: one reading
of the clock per call) across a linger. Without a broker, the bulk paths against the
general encoder at batch.size's edges with explicit and unstamped records mixed, under a
clock the test sets (producer_batch.now_ms)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kafkactl.client import producer_batch
from kafkactl.client.accumulator import RecordAccumulator
from kafkactl.client.admin import AdminClient
from kafkactl.client.consumer import Consumer
from kafkactl.client.producer import Producer
from kafkactl.client.producer_batch import ProducerBatch
from kafkactl.record.batch import RecordBatch
from tests.conftest import BrokerProcess
from tests.polling import wait_until

OLD = 1_700_000_000_000  # 2023: long before any clock reading of this test
OLDER = 1_600_000_000_000
LINGER_MS = 600_000  # nothing is sent before flush(): the records share batches if they can


def now_ms() -> int:
    return int(time.time() * 1000)


def next_ms(after: int) -> int:
    """Wait for the clock to pass `after` (a condition, not a sleep); the new reading."""
    return wait_until(lambda: (t := now_ms()) > after and t, 10, "the next millisecond",
                      interval=0.0005)


def read_back(bootstrap: str, topic: str) -> list[tuple[int, int, int, int, Any]]:
    """(batch base offset, batch first timestamp, batch max timestamp, record timestamp,
    value) of every record of partition 0, in offset order."""
    with Consumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest") as c:
        tp = sorted(c.assignment())[0]
        end = c.end_offsets([tp])[tp]
        c.seek_to_beginning()
        out: dict[int, tuple[int, int, int, int, Any]] = {}
        while c.position(tp) < end:
            for pf in c.poll_fetches(2.0):
                for b in pf.batches():
                    for r in pf.batch_records(b):
                        out[r.offset] = (b.base_offset, b.first_timestamp, b.max_timestamp,
                                         r.timestamp,
                                         None if r.value is None else bytes(r.value))
        assert sorted(out) == list(range(end))
        return [out[o] for o in range(end)]


def offset_for_time(bootstrap: str, topic: str, ts: int) -> int | None:
    with Consumer(topic, bootstrap_servers=bootstrap) as c:
        tp = sorted(c.assignment())[0]
        got = c.offsets_for_times({tp: ts})[tp]
        return None if got is None else got[0]


@pytest.fixture
def broker(module_broker: BrokerProcess) -> BrokerProcess:
    return module_broker  # each test has topics of its own


def make_topic(bootstrap: str, name: str) -> None:
    with AdminClient(bootstrap) as admin:
        assert admin.create_topics({name: (1, 1, {})}) == {name: None}


# -- the general path: Producer.send -----------------------------------------------------------

def test_none_after_an_explicit_old_timestamp_gets_now(broker: BrokerProcess) -> None:
    """The tester's case: an explicit 2023 timestamp, then a record without one, in one
    batch; then an older explicit one (a negative delta from the batch's) and a newer."""
    topic = "ts-none-after-old"
    make_topic(broker.bootstrap, topic)
    with Producer(broker.bootstrap, linger_ms=LINGER_MS) as p:
        f0 = p.send(topic, b"explicit-2023", partition=0, timestamp_ms=OLD)
        before = now_ms()
        f1 = p.send(topic, b"no-timestamp", partition=0)
        after = now_ms()
        f2 = p.send(topic, b"explicit-2020", partition=0, timestamp_ms=OLDER)
        f3 = p.send(topic, b"explicit-2023+5", partition=0, timestamp_ms=OLD + 5)
        p.flush()
        metas = [f.result(30) for f in (f0, f1, f2, f3)]
    rows = read_back(broker.bootstrap, topic)
    assert [r[4] for r in rows] == [b"explicit-2023", b"no-timestamp", b"explicit-2020",
                                    b"explicit-2023+5"]
    stamped = rows[1][3]
    assert before <= stamped <= after, (
        f"a record sent without a timestamp got {stamped}, not the time it was sent "
        f"({before}..{after}); the batch's first record has {OLD}")
    assert [r[3] for r in rows] == [OLD, stamped, OLDER, OLD + 5]  # explicit ones exactly
    assert {r[0] for r in rows} == {0}, "one batch"
    assert rows[0][1:3] == (OLD, stamped), "batch timestamp: the first record's; max: the max"
    assert [m.timestamp for m in metas] == [OLD, stamped, OLDER, OLD + 5]
    # the broker's time index has the batch's max timestamp
    assert offset_for_time(broker.bootstrap, topic, before) == 1
    assert offset_for_time(broker.bootstrap, topic, OLD + 6) == 1


def test_records_sent_across_a_linger_get_their_own_times(broker: BrokerProcess) -> None:
    topic = "ts-across-linger"
    make_topic(broker.bootstrap, topic)
    brackets = []
    with Producer(broker.bootstrap, linger_ms=LINGER_MS) as p:
        t = now_ms()
        for i in range(4):
            t = next_ms(t)
            p.send(topic, b"r%d" % i, partition=0)
            brackets.append((t, now_ms()))
            t = brackets[-1][1]
        p.flush()
    rows = read_back(broker.bootstrap, topic)
    assert {r[0] for r in rows} == {0}, "one batch"
    stamps = [r[3] for r in rows]
    for ts, (lo, hi) in zip(stamps, brackets, strict=True):
        assert lo <= ts <= hi, (stamps, brackets)
    assert stamps == sorted(set(stamps)), f"not increasing: {stamps}"
    assert rows[0][1:3] == (stamps[0], stamps[-1])


# -- the bulk paths: one reading of the clock per call -------------------------------------------

BulkSend = Callable[[Producer, str, list[bytes]], None]
BULK: dict[str, BulkSend] = {
    "values": lambda p, t, vs: p.send_values(t, vs, partition=0),
    "key_values": lambda p, t, vs: p.send_key_values(t, [b"k"] * len(vs), vs, partition=0),
    "lines": lambda p, t, vs: (None, p.send_lines(t, b"\n".join(vs) + b"\n", 0,
                                                  len(b"\n".join(vs)) + 1, b"\n",
                                                  partition=0))[0],
}


def bulk_rows(bootstrap: str, topic: str, path: str) -> tuple[list[Any], list[Any]]:
    """An explicit old record, then three bulk calls at three milliseconds into one
    linger; the rows read back and each call's clock bracket."""
    make_topic(bootstrap, topic)
    send = BULK[path]
    calls = [[b"a%d" % i for i in range(3)], [b"b0"], [b"c%d" % i for i in range(500)]]
    brackets = []
    with Producer(bootstrap, linger_ms=LINGER_MS) as p:
        p.send(topic, b"explicit", partition=0, timestamp_ms=OLD)
        t = now_ms()
        for values in calls:
            t = next_ms(t)
            send(p, topic, values)
            brackets.append((t, now_ms(), values))
            t = brackets[-1][1]
        p.flush()
    rows = read_back(bootstrap, topic)
    assert rows[0][3:] == (OLD, b"explicit")
    assert [r[4] for r in rows[1:]] == [v for _, _, vs in brackets for v in vs]
    return rows, brackets


@pytest.mark.parametrize("path", list(BULK))
def test_bulk_records_never_take_an_explicit_timestamp(broker: BrokerProcess,
                                                       path: str) -> None:
    """Bulk records after a record sent with an old timestamp (one linger, one batch were
    they allowed to share it): stamped by their own call's clock reading, in a batch of
    their own; later calls' records no earlier (each its own call's: see below)."""
    rows, brackets = bulk_rows(broker.bootstrap, f"ts-bulk-{path.replace('_', '-')}", path)
    first_lo, first_hi, _ = brackets[0]
    assert rows[1][0] != rows[0][0], "the bulk records began a batch of their own"
    at, last = 1, first_lo
    for lo, hi, values in brackets:
        got = rows[at:at + len(values)]
        stamps = {r[3] for r in got}
        assert len(stamps) == 1, f"one reading of the clock per call: {stamps}"
        ts = stamps.pop()
        assert last <= ts <= hi and ts != OLD, (path, ts, lo, hi)
        last = ts
        at += len(values)
    assert first_lo <= rows[1][3] <= first_hi
    for base, first, mx, _, _ in rows:  # each batch: its first record's and the max
        mine = [r[3] for r in rows if r[0] == base]
        assert (first, mx) == (mine[0], max(mine))


@pytest.mark.parametrize("path", list(BULK))
def test_bulk_calls_across_a_linger_get_their_own_times(broker: BrokerProcess,
                                                        path: str) -> None:
    """Three bulk calls at three milliseconds into one batch: each call's records have
    that call's clock reading (the bulk encoders' timestamp delta from the batch's), the
    batch timestamp is the first call's, its max timestamp the last call's."""
    rows, brackets = bulk_rows(broker.bootstrap, f"ts-bulk-own-{path.replace('_', '-')}",
                               path)
    at = 1
    for lo, hi, values in brackets:
        assert all(lo <= r[3] <= hi for r in rows[at:at + len(values)]), (lo, hi)
        at += len(values)
    assert len({r[0] for r in rows[1:]}) == 1, "the bulk calls shared one batch"
    stamps = [r[3] for r in rows[1:]]
    assert rows[1][1:3] == (stamps[0], stamps[-1]) and stamps[0] < stamps[-1]


# -- the bulk encoders against the general encoder, at batch.size's edges -------------------------

class Clock:
    def __init__(self, t: int) -> None:
        self.t = t

    def __call__(self) -> int:
        return self.t


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[Clock]:
    c = Clock(OLD + 1000)
    monkeypatch.setattr(producer_batch, "now_ms", c)
    yield c


def reference(rows: list[tuple[int, bytes | None, bytes | None]]) -> bytes:
    """The general encoder's batch of these (timestamp, key, value) records."""
    b = ProducerBatch("t", 0, 1 << 31, None)
    for ts, k, v in rows:
        assert b.append(ts, k, v) is not None
    return bytes(b.build())


def decoded(batch: ProducerBatch) -> list[tuple[int, bytes | None, bytes | None]]:
    data = bytes(batch.build())
    rb = RecordBatch(memoryview(data))
    assert rb.is_valid()
    return [(r.timestamp, None if r.key is None else bytes(r.key),
             None if r.value is None else bytes(r.value)) for r in rb]


@pytest.mark.parametrize("path", ["values", "key_values", "values-lines", "key_values-lines"])
@pytest.mark.parametrize("n", [1, 2, 100])
@pytest.mark.parametrize("slack", [-1, 0, 1])
def test_bulk_paths_match_the_general_path_at_the_edges(clock: Clock, path: str, n: int,
                                                        slack: int) -> None:
    """Calls at one millisecond fill batch.size (exactly n records, one byte less, one
    more); calls at later milliseconds, and records with explicit timestamps (older,
    newer, at the clock) are mixed in, on two partitions. Every batch is the general
    encoder's batch of its records byte for byte; explicit timestamps are kept; a bulk
    record has its own call's clock reading (the encoders write it as the timestamp delta
    from the batch's: 0, 1 and 71 ms, a two-byte varint), in a batch a bulk call began or
    one an explicit timestamp began at that millisecond; never an earlier record's
    explicit timestamp."""
    keyed = path.startswith("key_values")
    lines = path.endswith("lines")
    unit = [(b"k%d" % (i % 3) if keyed else None, b"v%03d" % i) for i in range(3 * n + 5)]
    size = len(reference([(clock.t, k, v) for k, v in unit[:n]])) + slack
    acc = RecordAccumulator(batch_size=size, linger_ms=1e9, buffer_memory=1 << 34)
    sent: dict[int, list[tuple[int | None, int, bytes | None, bytes | None]]] = {
        0: [], 1: [], 2: []}

    def call(p: int, records: list[tuple[bytes | None, bytes]]) -> None:
        """A bulk call at the clock; records as (explicit or None, clock, key, value)."""
        keys, values = [k for k, _ in records], [v for _, v in records]
        if path.startswith("values") and not lines:
            acc.append_values("t", p, values)
        elif not lines:
            acc.append_key_values("t", p, keys, values)
        else:
            data = b"".join((b"" if k is None else k + b":") + v + b"\n" for k, v in records)
            assert acc.append_lines("t", p, data, 0, len(data), b"\n",
                                    b":" if keyed else None) == len(records)
        sent[p].extend((None, clock.t, k, v) for k, v in records)

    def explicit(p: int, ts: int, value: bytes) -> None:
        acc.append("t", p, ts, None, value)
        sent[p].append((ts, clock.t, None, value))

    call(0, unit)  # fills batches at one millisecond
    clock.t += 1
    call(0, unit[:2])  # a later millisecond: the last batch's reading, or a new batch's
    clock.t += 70  # a two-byte delta, were it written
    call(0, unit[:n])
    if not lines:  # (lines and other records never share a batch)
        explicit(0, OLDER, b"older")  # a negative delta, in a bulk-begun batch
        call(0, unit[:1])
        explicit(1, OLD, b"old")  # a batch begun by an explicit timestamp
        call(1, unit[:2])  # not into it: a batch of its own, at this call's clock
        explicit(1, clock.t + 5, b"newer")
        clock.t += 1
        explicit(1, clock.t, b"at-the-clock")  # at the clock: bulk records may join it
        call(1, unit[:n])
        explicit(1, OLD, b"old-again")
        clock.t += 3
        call(1, unit[:3])
        explicit(2, clock.t, b"now")  # begins a batch at the clock: bulk records join it
        call(2, unit[:2])
        clock.t += 1
        call(2, unit[:2])  # a millisecond later: not into it

    for p in (0, 1, 2):
        batches = list(acc.batches.get(("t", p), ()))
        got = [r for b in batches for r in decoded(b)]
        assert [(k, v) for k, v in ((r[1], r[2]) for r in got)] == \
            [(k, v) for _, _, k, v in sent[p]]
        at = 0
        for b in batches:
            rows = decoded(b)
            assert bytes(b.build()) == reference(rows)
            assert (b.base_timestamp, b.max_timestamp) == (rows[0][0], max(r[0] for r in rows))
            assert b.size <= size or b.record_count == 1
            mine = sent[p][at:at + len(rows)]
            first_explicit, first_clock = mine[0][0], mine[0][1]
            for (ts, _, _), (explicit_ts, at_clock, _, _) in zip(rows, mine, strict=True):
                if explicit_ts is not None:
                    assert ts == explicit_ts
                elif first_explicit is None:  # a batch a bulk call began: its own reading
                    assert ts == at_clock and first_clock <= at_clock
                else:  # a batch an explicit timestamp began: only at that millisecond
                    assert ts == at_clock == first_explicit
            at += len(rows)
        assert at == len(sent[p])
    first = list(acc.batches[("t", 0)])[0].record_count
    assert first == (n if slack >= 0 else max(n - 1, 1))
