"""TopicReader against a real broker: start offsets, end conditions, records and lines (the
batch fast path and the per-record render agree)."""

from __future__ import annotations

import pytest

from kafkactl.client.admin import AdminClient
from kafkactl.client.consumer import Consumer
from kafkactl.client.fetcher import EARLIEST, ConsumerRecord
from kafkactl.client.producer import Producer
from kafkactl.client.topic_reader import StartOffset, TopicReader, plain_renderer
from tests.conftest import BrokerProcess


@pytest.fixture(scope="module")
def topic(_module_broker_process: BrokerProcess) -> str:
    """`reader`: 2 partitions; partition 0 holds k0..k49 (keys, a null every 10th value),
    partition 1 holds one record with a header."""
    with AdminClient(_module_broker_process.bootstrap) as admin:
        assert admin.create_topics({"reader": (2, 1, {})})["reader"] is None
    with Producer(_module_broker_process.bootstrap, linger_ms=1) as p:
        futs = [p.send("reader", None if i % 10 == 9 else b"v%d" % i, key=b"k%d" % i,
                       partition=0) for i in range(50)]
        futs.append(p.send("reader", b"h", partition=1, headers=[("a", b"b")]))
        p.flush()
        for f in futs:
            f.result(10)
    return "reader"


def reader(bootstrap: str, topic: str, start: StartOffset, **kw: object) -> TopicReader:
    r = TopicReader(Consumer(topic, bootstrap_servers=bootstrap), **kw)  # type: ignore[arg-type]
    r.seek(start)
    return r


def test_records_to_the_end(module_broker: BrokerProcess, topic: str) -> None:
    r = reader(module_broker.bootstrap, topic, StartOffset("earliest", EARLIEST),
               until_end=True)
    try:
        got = list(r.records())
    finally:
        r.consumer.close()
    assert r.partitions == [(topic, 0), (topic, 1)]
    assert sorted((x.partition, x.offset) for x in got) == (
        [(0, o) for o in range(50)] + [(1, 0)])
    assert all(isinstance(x, ConsumerRecord) for x in got)


def test_records_count_and_relative_start(module_broker: BrokerProcess, topic: str) -> None:
    r = reader(module_broker.bootstrap, topic, StartOffset("relative", -5), max_records=3)
    try:
        got = list(r.records())
    finally:
        r.consumer.close()
    assert len(got) == 3 and r.remaining == 0


def test_lines_fast_path_matches_render(module_broker: BrokerProcess, topic: str) -> None:
    def read(start: StartOffset, sep: bytes | None, fast: bool, limit: int | None
             ) -> bytes:
        everything = 51 if start.value == 0 else 50 - start.value  # partition 1 ends at 1
        r = reader(module_broker.bootstrap, topic, start, until_end=True, max_records=limit)
        try:
            pieces = (r.lines(key_separator=sep) if fast
                      else r.lines(plain_renderer(sep)))
            out = [p for chunk in pieces for p in chunk]
        finally:
            r.consumer.close()
        assert sum(p.records for p in out) == (limit if limit is not None else everything)
        return b"".join(p.data for p in out)

    for start in (StartOffset("absolute", 0), StartOffset("absolute", 7)):
        for sep in (None, b"\t"):
            for limit in (None, 12):
                fast = read(start, sep, True, limit)
                assert fast == read(start, sep, False, limit)
    r = TopicReader(Consumer(topic, bootstrap_servers=module_broker.bootstrap, partitions=[0]),
                    max_records=10)
    r.seek(StartOffset("earliest", EARLIEST))
    try:
        lines = b"".join(p.data for chunk in r.lines(key_separator=b"=") for p in chunk)
    finally:
        r.consumer.close()
    assert lines.splitlines() == [b"k%d=v%d" % (i, i) for i in range(9)] + [b"k9="]


def test_unknown_start_kind(module_broker: BrokerProcess, topic: str) -> None:
    with Consumer(topic, bootstrap_servers=module_broker.bootstrap) as c, \
            pytest.raises(ValueError, match="start offset kind"):
        TopicReader(c).seek(StartOffset("middle", 0))


@pytest.mark.parametrize("plain", [True, False])
@pytest.mark.parametrize("limit", [1, 9, 10, 11, 49, 50])
def test_stopping_at_max_records_leaves_the_rest_unread(module_broker: BrokerProcess,
                                                       topic: str, plain: bool,
                                                       limit: int) -> None:
    """A reader stopped by max_records inside a fetched chunk puts the consumer back after
    the last record it returned (a group then commits exactly what was read), for the
    batch fast path and the per-record render, at and around batch edges."""
    r = reader(module_broker.bootstrap, topic, StartOffset("earliest", EARLIEST),
               max_records=limit)
    try:
        if plain:
            got = sum(p.records for piece in r.lines() for p in piece)
        else:
            got = sum(1 for _ in r.records())
        assert got == limit
        positions = {tp: r.consumer.position(tp) for tp in r.partitions}
        assert sum(positions.values()) == limit  # nothing past the records returned
    finally:
        r.consumer.close()
