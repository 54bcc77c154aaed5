"""kafkajs (Node) against the broker: admin, idempotent produce, group consume.

kafkajs is installed by scripts/install_test_clients.sh (pinned there); without node or
kafkajs these tests skip and say why. Each test runs one small script from
tests/compat/node/, which prints a JSON line of what kafkajs saw.
"""

from __future__ import annotations

from tests.compat.node_client import run_node


def test_kafkajs_admin_topics(broker) -> None:
    (out,) = run_node("admin.js", broker.bootstrap)
    assert out["ok"], out
    assert out["created"] is True and out["createdAgain"] is False
    assert out["badConfig"] == ["INVALID_CONFIG"]
    assert out["listed"] == ["js-a", "js-b"]
    assert out["partitions"] == 3 and out["retention"] == "60000"
    assert out["afterDelete"] == ["js-a"] and out["cluster"] == 1


def test_kafkajs_idempotent_produce_and_group_consume(broker) -> None:
    (out,) = run_node("produce_consume.js", broker.bootstrap, "js-pc", "50", timeout=120)
    assert out["ok"], out
    assert out["acked"] == 5  # one ack per send() of 10 messages
    assert sorted(out["consumed"], key=lambda v: int(v[1:])) == [f"v{i}" for i in range(50)]
    assert out["committed"] == 50 and out["groupState"] == "Empty"
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=broker.bootstrap)
    try:
        tp = TopicPartition("js-pc", 0)
        assert c.end_offsets([tp])[tp] == 50  # nothing duplicated by the idempotent producer
    finally:
        c.close()
