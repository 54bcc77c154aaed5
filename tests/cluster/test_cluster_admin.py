"""Cluster admin on three real brokers and a real ZooKeeper: partitions added to a topic
(CreatePartitions) get leaders and serve records, and DeleteTopics through a client library
removes the topic from every broker and from ZooKeeper."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from tests import zygote
from tests.cluster.cluster_helpers import Cluster, metadata, start_cluster
from tests.polling import wait_until


def kafkactl(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return zygote.run(list(args), text=True, timeout=timeout)


@pytest.fixture
def cluster(broker_factory, zookeeper) -> Cluster:  # type: ignore[no-untyped-def]
    return start_cluster(broker_factory, zookeeper)


def kcat_leaders(bootstrap: str, topic: str) -> dict[int, int]:
    """partition -> leader as kcat -L -J reports it ({} on any error)."""
    r = subprocess.run(["kcat", "-L", "-J", "-b", bootstrap, "-t", topic, "-m", "5"],
                       capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        return {}
    for t in json.loads(r.stdout).get("topics", []):
        if t["topic"] == topic and not t.get("error"):
            return {p["partition"]: p["leader"] for p in t["partitions"]}
    return {}


def confluent_leaders(bootstrap: str, topic: str) -> dict[int, int]:
    from confluent_kafka.admin import AdminClient

    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    t = md.topics.get(topic)
    if t is None or t.error is not None:
        return {}
    return {p: part.leader for p, part in t.partitions.items()}


def all_led(count: int) -> Any:
    return lambda got: len(got) == count and all(lead >= 0 for lead in got.values())


def test_added_partitions_get_leaders_and_serve_records(cluster: Cluster) -> None:
    """`topics alter --partitions 8` on a 3-broker cluster: kcat and confluent-kafka see
    eight partitions with leaders within 10 s, and records go to and come back from the new
    partitions."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    r = kafkactl("topics", "create", "-b", cluster.bootstrap, "-t", "grow",
                 "--partitions", "2", "--replication-factor", "3")
    assert r.returncode == 0, r.stderr
    cluster.wait_for_leaders("grow", 2)
    r = kafkactl("topics", "alter", "-b", cluster.brokers[2].bootstrap, "-t", "grow",
                 "--partitions", "8")
    assert r.returncode == 0, r.stderr
    for b in cluster.brokers.values():
        wait_until(lambda b=b: all_led(8)(kcat_leaders(b.bootstrap, "grow")), 10,
                   f"kcat sees 8 led partitions through broker {b.port}")
    wait_until(lambda: all_led(8)(confluent_leaders(cluster.bootstrap, "grow")), 10,
               "confluent-kafka sees 8 led partitions")
    cluster.wait_for_leaders("grow", 8, timeout=10)

    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                         "enable.idempotence": True})
    failed: list[Any] = []
    for p in range(8):
        for i in range(5):
            producer.produce("grow", f"p{p}-{i}".encode(), partition=p,
                             on_delivery=lambda err, _m: err is not None and failed.append(err))
    assert producer.flush(30) == 0
    assert failed == []

    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "grow-reader",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition("grow", p, 0) for p in range(8)])
    got: set[str] = set()
    try:
        def read_all() -> bool:
            m = consumer.poll(0.5)
            if m is not None and m.error() is None:
                got.add(m.value().decode())
            return len(got) == 40
        wait_until(read_all, 30, "every record back from the 8 partitions", interval=0)
    finally:
        consumer.close()
    assert got == {f"p{p}-{i}" for p in range(8) for i in range(5)}


def test_delete_topics_through_a_client_library(cluster: Cluster, zk: Any) -> None:
    """DeleteTopics with confluent-kafka's AdminClient: every broker stops listing the
    topic and its znodes are gone."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("doomed", 4, 2)])["doomed"].result(30)
    cluster.wait_for_leaders("doomed", 4)
    admin.delete_topics(["doomed"], operation_timeout=30)["doomed"].result(30)
    # every topic listed (a Metadata request naming the topic could auto-create it again)
    wait_until(lambda: all("doomed" not in {t["name"] for t in metadata(b.port)["topics"]}
                           for b in cluster.live()), 15, "no broker lists the deleted topic")
    wait_until(lambda: zk.exists(f"{cluster.chroot}/brokers/topics/doomed") is None and
               zk.exists(f"{cluster.chroot}/admin/delete_topics/doomed") is None,
               15, "the topic's znodes gone")
