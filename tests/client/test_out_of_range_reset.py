"""A fetch position the partition no longer has (DeleteRecords or retention moved its log
start past it) is reset by auto.offset.reset and said on the log, as Java's consumer logs
"Fetch position ... is out of range ... resetting offset" (a mirror skipped the records
silently); with auto.offset.reset=none the error names the position."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from kafkactl.client.consumer import Consumer
from kafkactl.client.kafka_client import KafkaClient
from kafkactl.client.records_admin import delete_records
from kafkactl.protocol.errors import OffsetOutOfRangeError
from tests.polling import wait_until

TP = ("oor", 0)


def _topic_with_start_at_5(bootstrap: str) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic("oor", 1, 1)]).values():
        f.result(30)
    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(10):
        p.produce("oor", value=b"v%d" % i)
    assert p.flush(30) == 0
    client = KafkaClient(bootstrap)
    try:
        results = delete_records(client, {TP: 5}, timeout_s=30)
    finally:
        client.close()
    assert [r.low_watermark for r in results.values()] == [5]


def _offsets(consumer: Consumer, until: int) -> list[int]:
    got: list[int] = []

    def step() -> bool:
        for records in consumer.poll(200).values():
            got.extend(r.offset for r in records)
        return bool(got) and got[-1] >= until

    wait_until(step, 30, f"records up to offset {until}")
    return got


def test_an_out_of_range_position_is_reset_and_said(
        broker_factory: Any, caplog: pytest.LogCaptureFixture) -> None:
    b = broker_factory().bootstrap
    _topic_with_start_at_5(b)
    consumer = Consumer(bootstrap_servers=b, auto_offset_reset="earliest")
    try:
        consumer.assign([TP])
        consumer.seek(TP, 2)  # a committed position from before the DeleteRecords
        with caplog.at_level(logging.WARNING, logger="kafkactl.client.consumer"):
            assert _offsets(consumer, 9) == [5, 6, 7, 8, 9]
        said = [r.getMessage() for r in caplog.records if "out of range" in r.getMessage()]
        assert said == ["fetch position 2 is out of range for oor-0 (deleted by retention or "
                        "DeleteRecords, or past the end): resetting to the earliest offset "
                        "(auto.offset.reset)"]
    finally:
        consumer.close()


def test_with_reset_none_the_error_names_the_position(broker_factory: Any) -> None:
    b = broker_factory().bootstrap
    _topic_with_start_at_5(b)
    consumer = Consumer(bootstrap_servers=b, auto_offset_reset="none")
    try:
        consumer.assign([TP])
        consumer.seek(TP, 2)
        with pytest.raises(OffsetOutOfRangeError,
                           match="fetch position 2 is out of range for oor-0 and "
                                 "auto.offset.reset=none"):
            wait_until(lambda: bool(consumer.poll(200)), 30, "an answer")
    finally:
        consumer.close()
