"""The transactional sink fences only its own attempts' transactions: ids
`PREFIX-PARTITION-ATTEMPT`. A transaction open under another id that merely starts with
the prefix (another producer's `orders-mirror`, another job's `orders-nightly-0-0`) is
left alone and commits, as Kafka fences only an id's own earlier instances (KIP-98); an
attempt of the prefix left open (`orders-3-1`) is fenced. Real broker, real
confluent-kafka producers; no Spark session needed (the driver's sweep is called as the
writer calls it)."""

from __future__ import annotations

from typing import Any

import pytest

from kafkactl.spark.txn_write import TxnTarget, fence_leftovers, is_attempt_of


@pytest.mark.parametrize("tid, mine", [
    ("orders-0-0", True), ("orders-12-3", True), ("orders-3-1", True),
    ("orders-mirror", False), ("orders-nightly-0-0", False), ("orders-1", False),
    ("orders-1-", False), ("orders--1-0", False), ("orders-1-0-0", False),
    ("orders", False), ("ordersx-1-0", False), ("orders-١-0", False), ("other-1-0", False),
])
def test_is_attempt_of_at_the_edges(tid: str, mine: bool) -> None:
    assert is_attempt_of("orders", tid) is mine


def _open_transaction(bootstrap: str, tid: str, topic: str) -> Any:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(10):
        p.produce(topic, value=f"{tid}-{i}".encode())
    assert p.flush(30) == 0
    return p


def test_only_the_prefix_attempts_are_fenced(broker: Any) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for f in admin.create_topics([NewTopic("sinkab", 1, 1)]).values():
        f.result(30)
    others = [_open_transaction(broker.bootstrap, tid, "sinkab")
              for tid in ("orders-mirror", "orders-nightly-0-0")]
    straggler = _open_transaction(broker.bootstrap, "orders-3-1", "sinkab")
    fenced = fence_leftovers(TxnTarget(broker.bootstrap, "orders", 60000))
    assert fenced == ["orders-3-1"]
    for p in others:
        p.commit_transaction(30)  # not fenced: commits
    with pytest.raises(KafkaException):
        straggler.commit_transaction(30)
