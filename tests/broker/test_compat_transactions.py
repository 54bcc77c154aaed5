"""Transactional producers of every client library commit and abort on a standalone
broker (issue 32; before it, issue 12.3 made them fail at once): aiokafka, kafka-python,
librdkafka (confluent-kafka) and kafkajs. What each one's transactions left is read from
the data dir: the committed values, then the markers (tests/broker/txn_helpers.py)."""

from __future__ import annotations

import asyncio

import pytest

from tests.compat.node_client import run_node
from tests.conftest import BrokerProcess
from tests.polling import wait_until

from .txn_helpers import committed_values, data_values, wait_markers
from .wire import Wire


@pytest.fixture
def broker(module_broker: BrokerProcess) -> BrokerProcess:
    """Tests given `broker` here only use topics and transactional ids of their own."""
    return module_broker


def _topic(broker: BrokerProcess, name: str) -> str:
    with Wire(broker.bootstrap) as w:
        assert w.create_topic(name)["error_code"] == 0
    return name


def _check(broker: BrokerProcess, topic: str, committed: list[bytes], aborted: list[bytes],
           ends: list[str]) -> None:
    d = broker.data_dir
    got = wait_markers(d, topic, len(ends), 20)
    assert [m[0] for m in got] == ends
    assert committed_values(d, topic) == committed
    assert sorted(v or b"" for v in data_values(d, topic) if v not in committed) == \
        sorted(aborted)


def test_aiokafka_transactions(broker: BrokerProcess) -> None:
    from aiokafka import AIOKafkaProducer

    topic = _topic(broker, "compat-txn-aiokafka")

    async def main() -> None:
        p = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="aio-t")
        await p.start()
        try:
            async with p.transaction():
                await p.send_and_wait(topic, b"aio-c0")
                await p.send_and_wait(topic, b"aio-c1")
            await p.begin_transaction()
            await p.send_and_wait(topic, b"aio-a0")
            await p.abort_transaction()
        finally:
            await p.stop()

    asyncio.run(asyncio.wait_for(main(), 60))
    _check(broker, topic, [b"aio-c0", b"aio-c1"], [b"aio-a0"], ["COMMIT", "ABORT"])

    async def read(level: str) -> list[bytes]:
        from aiokafka import AIOKafkaConsumer, TopicPartition

        c = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, isolation_level=level,
                             enable_auto_commit=False)
        await c.start()
        try:
            tp = TopicPartition(topic, 0)
            c.assign([tp])
            await c.seek_to_beginning(tp)
            end = (await c.end_offsets([tp]))[tp]
            got: list[bytes] = []
            while await c.position(tp) < end:
                for msgs in (await c.getmany(tp, timeout_ms=500)).values():
                    got.extend(m.value for m in msgs)
            return got
        finally:
            await c.stop()

    assert asyncio.run(asyncio.wait_for(read("read_committed"), 60)) == [b"aio-c0", b"aio-c1"]
    assert asyncio.run(asyncio.wait_for(read("read_uncommitted"), 60)) == \
        [b"aio-c0", b"aio-c1", b"aio-a0"]


def test_kafka_python_transactions(broker: BrokerProcess) -> None:
    from kafka import KafkaProducer

    topic = _topic(broker, "compat-txn-kafka-python")
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="kp-t",
                      max_block_ms=30000)
    try:
        p.init_transactions()
        p.begin_transaction()
        p.send(topic, b"kp-c0")
        p.send(topic, b"kp-c1")
        p.commit_transaction()
        p.begin_transaction()
        p.send(topic, b"kp-a0").get(30)
        p.abort_transaction()
    finally:
        p.close(timeout=5)
    _check(broker, topic, [b"kp-c0", b"kp-c1"], [b"kp-a0"], ["COMMIT", "ABORT"])
    for level, want in (("read_committed", [b"kp-c0", b"kp-c1"]),
                        ("read_uncommitted", [b"kp-c0", b"kp-c1", b"kp-a0"])):
        assert _kafka_python_read(broker, topic, level) == want, level


def _kafka_python_read(broker: BrokerProcess, topic: str, level: str) -> list[bytes]:
    """Partition 0 from its start to its end (the LSO for read_committed)."""
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, isolation_level=level,
                      enable_auto_commit=False)
    tp = TopicPartition(topic, 0)
    c.assign([tp])
    c.seek_to_beginning(tp)
    end = c.end_offsets([tp])[tp]
    got: list[bytes] = []

    def read_to_end() -> bool:
        for records in c.poll(timeout_ms=500).values():
            got.extend(r.value for r in records)
        return bool(c.position(tp) >= end)

    try:
        wait_until(read_to_end, 30, f"{topic} read to its end ({level})")
    finally:
        c.close()
    return got


def test_librdkafka_transactions(broker: BrokerProcess) -> None:
    from confluent_kafka import Producer

    topic = _topic(broker, "compat-txn-librdkafka")
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "rd-t"})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, b"rd-c0")
    p.produce(topic, b"rd-c1")
    p.commit_transaction(30)
    p.begin_transaction()
    p.produce(topic, b"rd-a0")
    p.flush(30)
    p.abort_transaction(30)
    _check(broker, topic, [b"rd-c0", b"rd-c1"], [b"rd-a0"], ["COMMIT", "ABORT"])


def test_kafkajs_transactions(broker: BrokerProcess) -> None:
    topic = _topic(broker, "compat-txn-kafkajs")
    (out,) = run_node("transactional_commit.js", broker.bootstrap, topic, timeout=60)
    assert out["ok"] is True, out
    _check(broker, topic, [b"k-c0", b"k-c1"], [b"k-a0"], ["COMMIT", "ABORT"])


def test_kcat_transactions_and_read_committed(broker: BrokerProcess) -> None:
    """kcat -P -X transactional.id=... makes its whole input one transaction; kcat -C with
    -X isolation.level=read_committed skips an aborted one (librdkafka 2.0's Fetch)."""
    import subprocess

    from confluent_kafka import Producer

    topic = _topic(broker, "compat-txn-kcat")
    r = subprocess.run(["kcat", "-P", "-b", broker.bootstrap, "-t", topic, "-X",
                        "transactional.id=kcat-t"], input="k0\nk1\nk2\n", capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0 and "Transaction successfully committed" in r.stderr, r.stderr
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "kcat-abort"})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, b"aborted")
    p.flush(30)
    p.abort_transaction(30)
    p.begin_transaction()
    p.produce(topic, b"k3")
    p.commit_transaction(30)
    _check(broker, topic, [b"k0", b"k1", b"k2", b"k3"], [b"aborted"],
           ["COMMIT", "ABORT", "COMMIT"])

    def kcat(level: str) -> list[str]:
        out = subprocess.run(["kcat", "-C", "-b", broker.bootstrap, "-t", topic, "-e", "-q",
                              "-X", f"isolation.level={level}"], capture_output=True,
                             text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        return out.stdout.split()

    assert kcat("read_committed") == ["k0", "k1", "k2", "k3"]
    assert kcat("read_uncommitted") == ["k0", "k1", "k2", "aborted", "k3"]
