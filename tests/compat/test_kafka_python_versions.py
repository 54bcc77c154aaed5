"""kafka-python pinned to old protocol generations (its `api_version`), so that it speaks
the request versions of those Kafka releases: Produce v0-v2 (message sets of magic 0/1,
gzip wrappers), Fetch v0-v4, ListOffsets v0/v1, the group and offset APIs of each era.
For each: produce with acks=1, consume in a group, commit, read back the committed offset,
the log start/end offsets and (0.10.1+) an offset by timestamp."""

from __future__ import annotations

import time

import pytest

from tests.conftest import BrokerProcess

API_VERSIONS = [(0, 8, 2), (0, 9), (0, 10), (0, 11), (1, 0), (2, 0)]
COUNT = 20
# every case joins a group of its own: no 3 s wait for more members on each first join
MODULE_BROKER_OVERRIDES = {"group.initial.rebalance.delay.ms": "0"}


@pytest.fixture
def broker(module_broker: BrokerProcess) -> BrokerProcess:
    """Every case uses a topic and group of its own: one broker for the module."""
    return module_broker


@pytest.mark.parametrize("compression", [None, "gzip"])
@pytest.mark.parametrize("api_version", API_VERSIONS, ids=lambda v: ".".join(map(str, v)))
def test_produce_fetch_offsets_at_old_api_version(broker, api_version, compression) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    topic = "kp-" + "-".join(map(str, api_version)) + f"-{compression or 'none'}"
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, api_version=api_version,
                             compression_type=compression, linger_ms=20, acks=1)
    try:
        futures = [producer.send(topic, key=b"k%d" % (i % 3), value=b"v%d" % i)
                   for i in range(COUNT)]
        producer.flush(20)
        offsets = [f.get(20).offset for f in futures]
    finally:
        producer.close(5)
    assert offsets == list(range(COUNT))

    consumer = KafkaConsumer(topic, bootstrap_servers=broker.bootstrap,
                             api_version=api_version, group_id=f"g-{topic}",
                             auto_offset_reset="earliest", enable_auto_commit=False)
    values: list[bytes] = []
    try:
        deadline = time.monotonic() + 60  # a hang detector
        while len(values) < COUNT and time.monotonic() < deadline:
            for records in consumer.poll(500).values():
                values += [r.value for r in records]
        assert values == [b"v%d" % i for i in range(COUNT)]
        consumer.commit()
        tp = TopicPartition(topic, 0)
        assert consumer.committed(tp) == COUNT
        assert consumer.beginning_offsets([tp])[tp] == 0
        assert consumer.end_offsets([tp])[tp] == COUNT
        if api_version >= (0, 10, 1):
            found = consumer.offsets_for_times({tp: 0})[tp]
            assert found is not None and found.offset == 0
    finally:
        consumer.close()
