"""`kafkactl delete-records` on a three-broker ZooKeeper cluster: each partition's
DeleteRecords goes to its leader only (the brokers' request counters say which broker was
asked), the answer waits for the followers (the low watermark is every replica's), and a
partition sent to a follower on stale metadata (NOT_LEADER_OR_FOLLOWER) is sent again to
its leader after a metadata refresh, as Kafka's AdminClient does."""

from __future__ import annotations

from typing import Any

import pytest

from kafkactl.client.kafka_client import KafkaClient
from kafkactl.client.records_admin import delete_records
from tests import zygote
from tests.broker.test_metrics import scrape
from tests.cli.test_delete_records import HEADER
from tests.cluster.cluster_helpers import Cluster, start_cluster
from tests.cluster.conftest import zookeeper  # noqa: F401 - the fixture, for the cluster
from tests.cluster.test_replication import OVERRIDES, full_isr
from tests.conftest import free_port

TOPIC = "purge-cluster"
PARTITIONS = 3
RECORDS = 10


def delete_records_requests(metrics_port: int) -> float:
    """DeleteRecords requests the broker handled (all versions)."""
    return sum(v for (name, labels), v in scrape(metrics_port).items()
               if name == "kafka_network_requestmetrics_requests_total"
               and dict(labels)["request"] == "DeleteRecords")


@pytest.fixture
def metered(broker_factory: Any, zookeeper: Any) -> tuple[Cluster, dict[int, int]]:  # noqa: F811
    """A cluster whose brokers each serve /metrics: broker id -> its metrics port."""
    ports: dict[int, int] = {}

    def factory(**settings: str) -> Any:
        port = ports[int(settings["broker_id"])] = free_port()
        return broker_factory(metrics_listen=f"127.0.0.1:{port}", **settings)

    return start_cluster(factory, zookeeper, **OVERRIDES), ports


def test_only_leaders_are_asked_and_a_stale_leader_is_retried(
        metered: tuple[Cluster, dict[int, int]]) -> None:
    from confluent_kafka import Producer

    cluster, ports = metered
    r = zygote.run(["topics", "create", "-b", cluster.bootstrap, "-t", TOPIC, "--partitions",
                    str(PARTITIONS), "--replication-factor", "2"], text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    state = full_isr(cluster, TOPIC, PARTITIONS, size=2)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for p in range(PARTITIONS):
        for i in range(RECORDS):
            producer.produce(TOPIC, f"v{i}".encode(), partition=p)
    assert producer.flush(60) == 0
    leader = {p: int(s["leader"]) for p, s in state.items()}  # type: ignore[call-overload]
    assert len(set(leader.values())) > 1, leader  # spread: one request per leader

    # bootstrapped from one broker only: each leader is asked, no follower is
    first = cluster.brokers[1].bootstrap
    r = zygote.run(["delete-records", "-t", TOPIC, "--before", "4", "-b", first], text=True,
                   timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines() == [*HEADER] + [
        f"partition: {TOPIC}-{p}\tlow_watermark: 4" for p in range(PARTITIONS)]
    asked = {b: delete_records_requests(port) for b, port in ports.items()}
    assert asked == {b: (1 if b in leader.values() else 0) for b in ports}, (asked, leader)

    # metadata that names a follower as partition 0's leader: the follower answers
    # NOT_LEADER_OR_FOLLOWER, the next round's metadata names the leader, which deletes
    follower = next(b for b in state[0]["replicas"] if b != leader[0])  # type: ignore[attr-defined]
    client = KafkaClient(first)
    real = client.refresh_metadata
    calls = []

    def stale_once(*args: Any, **kwargs: Any) -> Any:
        cluster_md = real(*args, **kwargs)
        calls.append(1)
        if len(calls) == 1:
            cluster_md.topics[TOPIC].partitions[0].leader = follower
        return cluster_md

    client.refresh_metadata = stale_once  # type: ignore[method-assign]
    try:
        results = delete_records(client, {(TOPIC, 0): 7}, timeout_s=30)
    finally:
        client.close()
    assert results[(TOPIC, 0)].error is None, results
    assert results[(TOPIC, 0)].low_watermark == 7
    assert len(calls) == 2
    after = {b: delete_records_requests(port) for b, port in ports.items()}
    assert after[follower] == asked[follower] + 1  # the stale one
    assert after[leader[0]] == asked[leader[0]] + 1
