"""send_offsets_to_transaction from kafka-python and aiokafka (each its own TxnOffsetCommit
version) against a real broker: the offsets become the group's committed offsets when the
transaction commits and never when it aborts."""

from __future__ import annotations

import asyncio
from typing import Any

from kafkactl.client.group import GroupAdmin
from kafkactl.client.kafka_client import KafkaClient
from tests.groups.helpers import FAST, create_topic

TOPIC = "txo-in"


def _committed(bootstrap: str, group: str) -> dict[int, int]:
    client = KafkaClient(bootstrap)
    try:
        got = GroupAdmin(client).fetch_offsets(group, [(TOPIC, 0), (TOPIC, 1)])
        return {p: off for (_t, p), off in got.items()}
    finally:
        client.close()


def test_kafka_python_send_offsets_to_transaction(broker_factory: Any) -> None:
    from kafka import KafkaProducer
    from kafka.structs import OffsetAndMetadata, TopicPartition

    b = broker_factory(**FAST).bootstrap
    create_topic(b, TOPIC, 2)
    p = KafkaProducer(bootstrap_servers=b, transactional_id="kp-offsets", max_block_ms=30000)
    try:
        p.init_transactions()
        p.begin_transaction()
        p.send(TOPIC, b"x")
        p.send_offsets_to_transaction(
            {TopicPartition(TOPIC, 0): OffsetAndMetadata(11, "", -1),
             TopicPartition(TOPIC, 1): OffsetAndMetadata(4, "", -1)}, "kp-group")
        p.commit_transaction()
        assert _committed(b, "kp-group") == {0: 11, 1: 4}
        p.begin_transaction()
        p.send_offsets_to_transaction(
            {TopicPartition(TOPIC, 0): OffsetAndMetadata(50, "", -1)}, "kp-group")
        p.abort_transaction()
        assert _committed(b, "kp-group") == {0: 11, 1: 4}
    finally:
        p.close(timeout=5)


def test_aiokafka_send_offsets_to_transaction(broker_factory: Any) -> None:
    from aiokafka import AIOKafkaProducer, TopicPartition

    b = broker_factory(**FAST).bootstrap
    create_topic(b, TOPIC, 2)

    async def main() -> None:
        p = AIOKafkaProducer(bootstrap_servers=b, transactional_id="aio-offsets")
        await p.start()
        try:
            async with p.transaction():
                await p.send_and_wait(TOPIC, b"x")
                await p.send_offsets_to_transaction({TopicPartition(TOPIC, 1): 8},
                                                    "aio-group")
            assert _committed(b, "aio-group") == {0: -1, 1: 8}
            await p.begin_transaction()
            await p.send_offsets_to_transaction({TopicPartition(TOPIC, 1): 99}, "aio-group")
            await p.abort_transaction()
            assert _committed(b, "aio-group") == {0: -1, 1: 8}
        finally:
            await p.stop()

    asyncio.run(asyncio.wait_for(main(), 90))
