"""`kafkactl transactions find-hanging --broker-id N` asks broker N for the producers of the
partitions it hosts, follower or leader, as kafka-transactions.sh does
(DescribeProducersOptions.brokerId): a replica's own view, not its leader's. Two real
brokers on a real ZooKeeper; which broker answered DescribeProducers is read from their
Prometheus endpoints (kafka_network_requestmetrics_requests_total)."""

from __future__ import annotations

import json
import re
import urllib.request
import uuid
from typing import Any

from kafkactl.protocol.api_keys import ApiKey
from tests import zygote
from tests.cluster.cluster_helpers import SESSION_TIMEOUT_MS, Cluster, metadata, request
from tests.cluster.conftest import zookeeper  # noqa: F401 - the fixture
from tests.cluster.zk import ZooKeeperServer
from tests.conftest import free_port
from tests.polling import wait_until

from .wire import Wire, batch

SERIES = re.compile(r'^kafka_network_requestmetrics_requests_total\{[^}]*'
                    r'request="DescribeProducers"[^}]*\} ([0-9.e+]+)$', re.M)


def describe_producers_served(metrics_port: int) -> int:
    """How many DescribeProducers requests the broker has answered."""
    url = f"http://127.0.0.1:{metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as r:
        text = r.read().decode()
    return int(sum(float(v) for v in SERIES.findall(text)))


def open_txn_on(port: int, topic: str) -> list[tuple[int, int]]:
    resp = request(port, ApiKey.DESCRIBE_PRODUCERS, 0, {
        "topics": [{"name": topic, "partition_indexes": [0]}]})
    entry = resp["topics"][0]["partitions"][0]
    assert entry["error_code"] == 0, entry
    return [(s["producer_id"], s["current_txn_start_offset"])
            for s in entry["active_producers"] if s["current_txn_start_offset"] >= 0]


def test_find_hanging_asks_the_broker_named(
        broker_factory: Any, zookeeper: ZooKeeperServer) -> None:  # noqa: F811
    connect = f"{zookeeper.connect}/c-{uuid.uuid4().hex[:8]}"
    ports = {1: free_port(), 2: free_port()}
    brokers = {i: broker_factory(
        zookeeper_connect=connect, broker_id=str(i),
        zookeeper_session_timeout_ms=str(SESSION_TIMEOUT_MS), replica_fetch_backoff_ms="100",
        transaction_partition_verification_enable="false",
        metrics_listen=f"127.0.0.1:{ports[i]}") for i in (1, 2)}
    cluster = Cluster(connect, "", brokers)
    wait_until(lambda: cluster.controller() in brokers and all(
        len(metadata(b.port, [])["brokers"]) == 2 for b in cluster.live()), 30, "a cluster")
    topic = "hang-followed"
    r = zygote.run(["topics", "create", "-t", topic, "--replica-assignment", "1:2",
                    "-b", cluster.bootstrap], text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    cluster.wait_for_leaders(topic, 1, expect=lambda leaders: leaders == {0: 1})
    leader, follower = cluster.brokers[1], cluster.brokers[2]

    with Wire(leader.bootstrap) as w:
        pid = w.request(ApiKey.INIT_PRODUCER_ID, 4, {
            "transactional_id": None, "transaction_timeout_ms": 60000, "producer_id": -1,
            "producer_epoch": -1})["producer_id"]
        resp = w.request(ApiKey.PRODUCE, 9, {
            "transactional_id": "tid-followed-ghost", "acks": -1, "timeout_ms": 10000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch(
                [b"ghost"], producer_id=pid, producer_epoch=0, base_sequence=0,
                is_transactional=True)}]}]})
        assert resp["responses"][0]["partition_responses"][0]["error_code"] == 0, resp
    wait_until(lambda: open_txn_on(follower.port, topic) == [(pid, 0)], 30,
               "the follower's open transaction")

    served = {i: describe_producers_served(ports[i]) for i in (1, 2)}
    r = zygote.run(["transactions", "find-hanging", "--broker-id", "2",
                    "--max-transaction-timeout", "0", "--json", "-b", cluster.bootstrap],
                   text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert [(h["topic"], h["partition"], h["producer_id"], h["current_txn_start_offset"])
            for h in json.loads(r.stdout)] == [(topic, 0, pid, 0)]
    wait_until(lambda: describe_producers_served(ports[2]) > served[2], 10,
               "broker 2 counting the DescribeProducers it answered")
    assert describe_producers_served(ports[1]) == served[1], \
        "the leader was asked, not broker 2"
