"""Requests that any broker may answer (Metadata first of all) on a 3-broker ZooKeeper
cluster whose lowest-id broker hangs: paused (SIGSTOP) and still registered (its ZooKeeper
session outlives the test), so it takes connections and never answers.

As Kafka's NetworkClient.leastLoadedNode picks: a live connection with nothing in flight
(the bootstrap one included) first, so a command given a healthy broker with -b never asks
the hung one (`topics describe` and `produce` used to go to the lowest-id broker of the
metadata and fail after their whole timeout); a broker that did not answer in time is in
reconnect backoff and the request is asked of another within the caller's timeout, each
attempt given half of what is left while another broker can be tried.

No assertion on durations: each command is given its own timeout (the hung broker is asked
at most once per command, for half of it) and must succeed through the healthy brokers."""

from __future__ import annotations

import json
import signal
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from kafkactl.client.kafka_client import KafkaClient
from tests import zygote
from tests.cluster.cluster_helpers import Cluster, metadata
from tests.cluster.test_config_changes import create_topic
from tests.conftest import BrokerProcess
from tests.polling import wait_until

# the paused broker keeps its session, so stays registered, for the whole test
SESSION_TIMEOUT_MS = 120000
TOPIC = "s3"
# broker 1 (the lowest id, the one paused) leads partition 2 only; partition 0, led by
# broker 2, has no replica on it (acks=all needs no answer from it)
ASSIGNMENT = {0: [2, 3], 1: [3, 2], 2: [1, 2]}
LEADERS = {0: 2, 1: 3, 2: 1}


@pytest.fixture
def cluster(broker_factory: Any, zookeeper: Any) -> Cluster:
    connect = zookeeper.connect + f"/c-{uuid.uuid4().hex[:8]}"
    brokers = {i: broker_factory(zookeeper_connect=connect, broker_id=str(i),
                                 zookeeper_session_timeout_ms=str(SESSION_TIMEOUT_MS))
               for i in (1, 2, 3)}
    c = Cluster(connect, "", brokers)
    wait_until(lambda: c.controller() in brokers and all(
        len(metadata(b.port, [])["brokers"]) == 3 for b in c.live()), 30, "a cluster")
    create_topic(c, TOPIC, ASSIGNMENT)
    c.wait_for_leaders(TOPIC, 3, expect=lambda leaders: leaders == LEADERS)
    return c


@contextmanager
def paused(broker: BrokerProcess) -> Iterator[None]:
    """`broker` stopped (SIGSTOP) for the block: it still holds its listening socket (the
    kernel completes connections to it) and its ZooKeeper registration."""
    assert broker.proc is not None
    broker.proc.send_signal(signal.SIGSTOP)
    try:
        yield
    finally:
        broker.proc.send_signal(signal.SIGCONT)


def describe(bootstrap: str) -> dict[str, Any]:
    r = zygote.run(["topics", "describe", "-t", TOPIC, "--json", "-b", bootstrap],
                   text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    docs: list[dict[str, Any]] = json.loads(r.stdout)
    assert [d["topic"] for d in docs] == [TOPIC], docs
    return docs[0]


def check_described(doc: dict[str, Any]) -> None:
    assert doc["partition_count"] == 3, doc
    assert {p["partition"]: p["leader"] for p in doc["partitions"]} == LEADERS, doc
    assert {p["partition"]: p["replicas"] for p in doc["partitions"]} == ASSIGNMENT, doc


def test_describe_through_a_healthy_bootstrap(cluster: Cluster) -> None:
    """-b a healthy broker: the metadata (all of it, then the topic's) and the topic's
    configs are asked of the bootstrap connection, never of the hung lowest-id broker."""
    with paused(cluster.brokers[1]):
        check_described(describe(cluster.brokers[2].bootstrap))


def test_describe_with_the_hung_broker_first_in_bootstrap(cluster: Cluster) -> None:
    """-b hung,healthy: the hung bootstrap server is given half of the metadata request's
    time, then the healthy one answers; the hung broker, in backoff, is not asked again."""
    with paused(cluster.brokers[1]):
        check_described(describe(
            f"{cluster.brokers[1].bootstrap},{cluster.brokers[2].bootstrap}"))


def test_produce_to_a_partition_led_by_a_healthy_broker(cluster: Cluster) -> None:
    healthy = cluster.brokers[2].bootstrap
    values = [f"v{i}" for i in range(10)]
    with paused(cluster.brokers[1]):
        r = zygote.run(["produce", "-t", TOPIC, "-p", "0", "-b", healthy],
                       input="".join(f"{v}\n" for v in values), text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        c = zygote.run(["consume", "-t", TOPIC, "-p", "0", "-o", "beginning", "-e",
                        "-b", healthy], text=True, timeout=120)
        assert c.returncode == 0, c.stderr
    assert c.stdout.splitlines() == values, (c.stdout, c.stderr)


def test_metadata_retried_on_another_broker(cluster: Cluster) -> None:
    """The client's only live connection is to the broker that then hangs: its Metadata
    request gets half of the time, times out, and another broker answers within the
    call's timeout; the hung one is in backoff and the next request does not go to it."""
    hung = cluster.brokers[1]
    client = KafkaClient(hung.bootstrap)
    try:
        client.refresh_metadata([])
        assert sorted(client.cluster.brokers) == [1, 2, 3]
        client.connection(1)  # the bootstrap connection, now broker 1's
        assert [c.node_id for c in client.connections()] == [1]
        with paused(hung):
            md = client.refresh_metadata([TOPIC])
            assert {p: m.leader for p, m in md.topics[TOPIC].partitions.items()} == LEADERS
            assert 1 not in {c.node_id for c in client.connections()}
            # the next requests go to the broker that answered, at once
            assert client.any_connection().node_id in (2, 3)
            client.refresh_metadata([TOPIC])
    finally:
        client.close()
