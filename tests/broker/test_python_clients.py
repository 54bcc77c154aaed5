"""kafka-python, confluent-kafka and aiokafka with their default settings against a live broker:
keys, null keys/values, headers, 1 MB values, idempotent producers."""

from __future__ import annotations

import asyncio
import os

import pytest

from tests.conftest import BrokerProcess

from ._aiokafka import import_aiokafka
from .wire import Wire


@pytest.fixture
def broker(module_broker: BrokerProcess) -> BrokerProcess:
    """Tests here only use topics of their own: one broker for the module."""
    return module_broker

BIG = 1_000_000


def _expected(n: int) -> list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]]:
    out: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]] = []
    for i in range(n):
        key = None if i % 3 == 0 else f"key-{i}".encode()
        value = None if i % 7 == 5 and key is not None else f"value-{i}".encode()
        headers = [("h", f"{i}".encode())] if i % 2 else []
        out.append((key, value, headers))
    return out


def test_kafka_python_roundtrip(broker) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, max_request_size=2_000_000)
    records = _expected(200)
    futures = [producer.send("kp", key=k, value=v, headers=h) for k, v, h in records]
    big = os.urandom(BIG)
    futures.append(producer.send("kp", value=big))
    producer.flush()
    offsets = [f.get(timeout=10).offset for f in futures]
    assert offsets == list(range(201))
    producer.close()

    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, consumer_timeout_ms=5000,
                             max_partition_fetch_bytes=2_000_000)
    tp = TopicPartition("kp", 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    got = []
    for msg in consumer:
        got.append(msg)
        if len(got) == 201:
            break
    consumer.close()
    assert [(m.key, m.value, list(m.headers)) for m in got[:200]] == records
    assert got[200].value == big
    assert [m.offset for m in got] == list(range(201))


def test_confluent_idempotent_roundtrip(broker) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True,
                         "linger.ms": 5, "message.max.bytes": 2_000_000})
    errors: list[object] = []
    delivered: list[int] = []

    def cb(err: object, msg: object) -> None:
        if err is not None:
            errors.append(err)
        else:
            delivered.append(msg.offset())  # type: ignore[attr-defined]

    records = _expected(1000)
    for k, v, h in records:
        producer.produce("ck", key=k, value=v, headers=h or None, on_delivery=cb)
    big = os.urandom(BIG)
    producer.produce("ck", value=big, on_delivery=cb)
    assert producer.flush(30) == 0
    assert not errors
    assert sorted(delivered) == list(range(1001))

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused",
                         "enable.partition.eof": True, "fetch.message.max.bytes": 2_000_000})
    consumer.assign([TopicPartition("ck", 0, 0)])
    got = []
    while True:
        msg = consumer.poll(10)
        assert msg is not None, "timed out"
        if msg.error():
            assert msg.error().code() == -191  # _PARTITION_EOF
            if len(got) >= 1001:
                break
            continue
        got.append(msg)
    consumer.close()
    assert [(m.key(), m.value(), list(m.headers() or [])) for m in got[:1000]] == records
    assert got[1000].value() == big


def test_aiokafka_roundtrip(broker) -> None:
    aiokafka = import_aiokafka()
    AIOKafkaConsumer, AIOKafkaProducer = aiokafka.AIOKafkaConsumer, aiokafka.AIOKafkaProducer
    TopicPartition = aiokafka.TopicPartition

    records = _expected(300)

    async def run() -> list[object]:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap,
                                    max_request_size=2_000_000)
        await producer.start()
        try:
            for k, v, h in records:
                await producer.send("ak", key=k, value=v, headers=h)
            await producer.send_and_wait("ak", value=b"x" * BIG)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap,
                                    max_partition_fetch_bytes=2_000_000)
        await consumer.start()
        try:
            tp = TopicPartition("ak", 0)
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            got: list[object] = []
            while len(got) < 301:
                batch = await asyncio.wait_for(consumer.getmany(timeout_ms=1000), 10)
                for msgs in batch.values():
                    got.extend(msgs)
            return got
        finally:
            await consumer.stop()

    got = asyncio.run(run())
    assert [(m.key, m.value, list(m.headers)) for m in got[:300]] == records  # type: ignore[attr-defined]
    assert got[300].value == b"x" * BIG  # type: ignore[attr-defined]


def test_aiokafka_idempotent_producer(broker) -> None:
    AIOKafkaProducer = import_aiokafka().AIOKafkaProducer

    async def run() -> list[int]:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=True)
        await producer.start()
        try:
            return [(await producer.send_and_wait("aid", value=b"v%d" % i)).offset
                    for i in range(10)]
        finally:
            await producer.stop()

    assert asyncio.run(run()) == list(range(10))


@pytest.mark.parametrize("api_version", [(0, 10, 0), (0, 9)])
def test_kafka_python_old_message_formats(broker, api_version: tuple[int, ...]) -> None:
    """Produce v0-2 (magic 0/1 message sets) is up-converted; Fetch v0-3 is down-converted."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    topic = "old-" + "-".join(map(str, api_version))
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, api_version=api_version)
    futures = [producer.send(topic, key=b"k%d" % i, value=b"v%d" % i) for i in range(20)]
    producer.flush()
    assert [f.get(timeout=10).offset for f in futures] == list(range(20))
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, api_version=api_version,
                             consumer_timeout_ms=30000)  # a hang detector
    consumer.assign([TopicPartition(topic, 0)])
    consumer.seek(TopicPartition(topic, 0), 0)
    got = []
    for m in consumer:
        got.append((m.offset, m.key, m.value))
        if len(got) == 20:
            break
    consumer.close()
    assert got == [(i, b"k%d" % i, b"v%d" % i) for i in range(20)]
    with Wire(broker.bootstrap) as w:  # and nothing past them
        assert w.fetch(topic, 0)["high_watermark"] == 20
