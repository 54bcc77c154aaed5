"""The client library against a real `kafkactl serve` subprocess."""

from __future__ import annotations

import threading

import pytest

from kafkactl.client.admin import AdminClient
from kafkactl.client.consumer import Consumer, SimpleConsumer, TopicFilter
from kafkactl.client.errors import NoBrokersAvailable, UnknownTopicError
from kafkactl.client.kafka_client import KafkaClient, parse_bootstrap
from kafkactl.client.partitioner import murmur2_partition
from kafkactl.client.producer import Producer
from tests.conftest import BrokerProcess


@pytest.fixture
def broker(module_broker: BrokerProcess) -> BrokerProcess:
    """Tests given `broker` here only use topics of their own: one broker for the module (the
    restart test has its own)."""
    return module_broker

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def read_all(bootstrap: str, topic: str) -> list:
    with Consumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest") as c:
        tps = sorted(c.assignment())
        ends = c.end_offsets(tps)
        c.seek_to_beginning()
        out = []
        while any(c.position(tp) < ends[tp] for tp in tps):
            for pf in c.poll_fetches(2.0):
                out.extend(pf.records_iter())
        return out


@pytest.mark.parametrize("codec", CODECS)
def test_produce_consume_every_codec(broker, codec: str) -> None:
    topic = f"rt-{codec}"
    with Producer(broker.bootstrap, compression_type=codec, linger_ms=1) as p:
        futs = [p.send(topic, b"v%d" % i, key=b"k%d" % (i % 3),
                       headers=[("h", b"x"), ("n", None)], timestamp_ms=1700000000000 + i)
                for i in range(200)]
        futs.append(p.send(topic, None, key=b"tomb"))
        p.flush()
        metas = [f.result(10) for f in futs]
    assert all(m.offset >= 0 for m in metas)
    recs = read_all(broker.bootstrap, topic)
    assert len(recs) == 201
    by_value = {None if r.value is None else bytes(r.value): r for r in recs}
    r = by_value[b"v7"]
    assert bytes(r.key) == b"k1" and r.timestamp == 1700000000007
    assert [(k, None if v is None else bytes(v)) for k, v in r.headers] == [("h", b"x"),
                                                                             ("n", None)]
    assert bytes(by_value[None].key) == b"tomb"


def test_murmur2_partition_matches_java_formula_on_broker(broker) -> None:
    with AdminClient(broker.bootstrap) as a:
        assert a.create_topics({"keyed": (5, 1, {})})["keyed"] is None
    keys = [b"key-%d" % i for i in range(50)]
    with Producer(broker.bootstrap) as p:
        metas = [p.send("keyed", b"v", key=k).result(10) for k in keys]
    for k, m in zip(keys, metas, strict=True):
        assert m.partition == murmur2_partition(k, 5)


def test_send_values_bulk_and_batch_callbacks(broker) -> None:
    acked = []
    with Producer(broker.bootstrap, batch_size=4096) as p:
        p.add_batch_callback(lambda b, off, err: acked.append((b.record_count, off, err)))
        p.send_values("bulk", [b"%05d" % i for i in range(5000)], partition=0)
        p.flush()
    assert sum(n for n, _, e in acked if e is None) == 5000
    assert len(acked) > 1
    values = [bytes(r.value) for r in read_all(broker.bootstrap, "bulk")]
    assert values == [b"%05d" % i for i in range(5000)]


def test_simple_consumer_fetch_and_offsets(broker) -> None:
    with Producer(broker.bootstrap) as p:
        for i in range(10):
            p.send("simple", b"%d" % i, partition=0, timestamp_ms=1000 * (i + 1))
    sc = SimpleConsumer(broker.bootstrap)
    try:
        assert sc.offsets_before("simple", 0, -2) == 0
        assert sc.offsets_before("simple", 0, -1) == 10
        assert sc.offsets_before("simple", 0, 5000) == 4
        fetched = sc.fetch({("simple", 0): 3})
        values = [bytes(r.value) for pf in fetched for r in pf.records_iter()]
        assert values[0] == b"3" and values[-1] == b"9"
    finally:
        sc.close()


def test_consumer_seek_pattern_and_reset(broker) -> None:
    with Producer(broker.bootstrap) as p:
        for t in ("app.a", "app.b", "other"):
            p.send(t, b"x-" + t.encode(), partition=0)
    assert TopicFilter(pattern=r"app\..*", exclude=r".*\.b").matches("app.a")
    with Consumer(bootstrap_servers=broker.bootstrap, pattern=r"app\..*",
                  exclude=r".*\.b", auto_offset_reset="earliest") as c:
        assert c.assignment() == {("app.a", 0)}
        recs = []
        while not recs:
            recs = [r for pf in c.poll_fetches(2.0) for r in pf.records_iter()]
        assert bytes(recs[0].value) == b"x-app.a"
        c.seek(("app.a", 0), 999)  # out of range -> auto.offset.reset=earliest
        recs = []
        while not recs:
            recs = [r for pf in c.poll_fetches(2.0) for r in pf.records_iter()]
        assert recs[0].offset == 0


def test_unknown_topic_and_no_broker(broker) -> None:
    c = KafkaClient(broker.bootstrap)
    with pytest.raises(UnknownTopicError):
        c.ensure_topics(["does-not-exist"], allow_auto_create=False)
    c.close()
    with pytest.raises(NoBrokersAvailable, match="no broker answered"):
        KafkaClient("127.0.0.1:1", connect_timeout_ms=500).bootstrap()
    assert parse_bootstrap("a:1, b") == [("a", 1), ("b", 9092)]
    with pytest.raises(ValueError):
        parse_bootstrap("a:notaport")


def test_an_explicit_partition_is_checked_on_every_send(broker) -> None:
    """Not only on the topic's first send: a partition past the topic's count is refused at
    send(), each bulk path too, and one the topic has grown to is taken."""
    b = broker.bootstrap
    with AdminClient(b) as admin:
        assert admin.create_topics({"grows": (2, 1, {})}) == {"grows": None}
    with Producer(b, linger_ms=0) as p:
        p.send("grows", b"first", partition=1).result(30)
        for send in (lambda: p.send("grows", b"x", partition=2),
                     lambda: p.send("grows", b"x", partition=-1),
                     lambda: p.send_values("grows", [b"x"], partition=2),
                     lambda: p.send_key_values("grows", [b"k"], [b"x"], partition=2),
                     lambda: p.send_lines("grows", b"x\n", 0, 2, b"\n", partition=2)):
            with pytest.raises(ValueError, match="partitions 0..1; partition"):
                send()
        with AdminClient(b) as admin:
            assert admin.create_partitions({"grows": 3}) == {"grows": None}
        p.client.refresh_metadata(["grows"])
        assert p.send("grows", b"third", partition=2).result(30).partition == 2
    assert sorted(bytes(r.value) for r in read_all(b, "grows")) == [b"first", b"third"]


def test_broker_restart_mid_produce_loses_and_duplicates_nothing(broker_factory) -> None:
    """Idempotent producer: kill -9 the broker while records are in flight, restart it;
    every acknowledged record is there exactly once, and all records end up acknowledged."""
    broker = broker_factory()  # killed and restarted: not the shared one
    total = 30000
    acked: list[int] = []
    errors: list[BaseException] = []
    p = Producer(broker.bootstrap, batch_size=2048, linger_ms=0, retry_backoff_ms=100,
                 delivery_timeout_ms=60000)

    def cb(meta, err) -> None:
        (errors.append(err) if err else acked.append(1))

    def restart() -> None:
        broker.kill()
        broker.start()

    t = None
    for i in range(total):
        p.send("restart", b"%06d" % i, partition=0, on_delivery=cb)
        if i == total // 3:
            t = threading.Thread(target=restart)
            t.start()
    assert t is not None
    t.join()
    assert p.flush(90)
    p.close()
    assert not errors, errors[:3]
    assert len(acked) == total
    values = [bytes(r.value) for r in read_all(broker.bootstrap, "restart")]
    assert len(values) == len(set(values)) == total
    assert values == sorted(values)  # no reordering either
