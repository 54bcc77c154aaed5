"""A deleted topic's per-topic metrics go with it (Kafka's BrokerTopicStats.removeMetrics,
called when the last local partition of the topic is deleted): after `topics delete` its
`brokertopicmetrics_*_total{topic=}` series are no longer scraped, `top --metrics` no longer
lists it, and a topic created again under the name counts from zero; the all-topics totals
keep what the deleted topic counted. Against a standalone broker and a one-broker ZooKeeper
cluster (StopReplica with delete)."""

from __future__ import annotations

import json
from typing import Any

from tests import zygote
from tests.broker.test_metrics import sample, scrape
from tests.cluster.cluster_helpers import SESSION_TIMEOUT_MS, metadata
from tests.cluster.conftest import zookeeper  # noqa: F401 - the fixture
from tests.conftest import BrokerProcess, free_port
from tests.polling import wait_until

IN = "kafka_server_brokertopicmetrics_messagesin_total"
BYTES_IN = "kafka_server_brokertopicmetrics_bytesin_total"
BYTES_OUT = "kafka_server_brokertopicmetrics_bytesout_total"


def kafkactl(*args: str) -> None:
    r = zygote.run(list(args), text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


def produce(bootstrap: str, topic: str, n: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(n):
        producer.produce(topic, f"r{i}".encode(), partition=0)
    assert producer.flush(30) == 0


def consume(bootstrap: str, topic: str, n: int) -> None:
    """Read `n` records of partition 0 (bytes out)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{topic}",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got: list[Any] = []
    wait_until(lambda: got.extend(m for m in [consumer.poll(0.2)] if m is not None
                                  and m.error() is None) or len(got) >= n, 60, f"{n} records")
    consumer.close()


def deleted_topic_metrics_go(broker: BrokerProcess, port: int, bootstrap: str) -> None:
    produce(bootstrap, "gone", 5)
    consume(bootstrap, "gone", 5)
    produce(bootstrap, "kept", 1)
    samples = scrape(port)
    assert sample(samples, IN, topic="gone") == 5
    out_before = sample(samples, BYTES_OUT)
    assert out_before and sample(samples, BYTES_OUT, topic="gone") == out_before
    total_in = sample(samples, IN)
    assert total_in == 6
    kafkactl("topics", "delete", "-t", "gone", "-b", bootstrap)

    def gone() -> bool:
        s = scrape(port)
        return all(sample(s, name, topic="gone") is None for name in (IN, BYTES_IN, BYTES_OUT))

    wait_until(gone, 60, "the deleted topic's per-topic series to go")
    samples = scrape(port)
    assert sample(samples, IN, topic="kept") == 1  # other topics keep theirs
    assert sample(samples, IN) == total_in  # the all-topics totals do not go down
    assert sample(samples, BYTES_OUT) == out_before
    r = zygote.run(["top", "--once", "--json", "--interval", "0.1", "--metrics",
                    f"127.0.0.1:{port}"], text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "gone" not in [t["topic"] for t in json.loads(r.stdout)["topics"]]

    # created again under the same name: it counts from zero
    wait_until(lambda: zygote.run(["topics", "create", "-t", "gone", "-b", bootstrap],
                                  text=True, timeout=120).returncode == 0,
               60, "the topic created again (once its deletion is complete)")
    produce(bootstrap, "gone", 2)
    samples = scrape(port)
    assert sample(samples, IN, topic="gone") == 2, broker.log()[-2000:]
    assert sample(samples, IN) == total_in + 2


def test_standalone_broker_drops_a_deleted_topics_metrics(broker_factory: Any) -> None:
    port = free_port()
    b = broker_factory(extra_args=["--metrics", f"127.0.0.1:{port}"])
    deleted_topic_metrics_go(b, port, b.bootstrap)


def test_cluster_broker_drops_a_deleted_topics_metrics(
        broker_factory: Any, zookeeper: Any) -> None:  # noqa: F811 - the imported fixture
    import uuid

    port = free_port()
    b = broker_factory(zookeeper_connect=zookeeper.connect + f"/c-{uuid.uuid4().hex[:8]}",
                       broker_id="1", zookeeper_session_timeout_ms=str(SESSION_TIMEOUT_MS),
                       metrics_listen=f"127.0.0.1:{port}")
    wait_until(lambda: metadata(b.port, [])["controller_id"] == 1, 30, "a controller")
    deleted_topic_metrics_go(b, port, b.bootstrap)
