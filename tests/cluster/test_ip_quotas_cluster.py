"""IP connection rate quotas (KIP-612) in a ZooKeeper cluster: set through one broker, they
are written where Kafka keeps them (/config/ips/<ip>, /config/ips/<default>) with a
/config/changes notification (entity_path ips/<ip>), and another broker describes and
enforces them; a removal reaches it the same way, and a broker that was down reads them
when it starts. Enforcement is counted (see
tests/broker/test_ip_quotas.py): rate 1 over the default 11 windows of 1 s accepts 10
connections of a burst from that address and refuses the rest."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from kafkactl.cluster import zk_paths
from tests.broker.test_ip_quotas import RATE, alter, answered, burst, describe
from tests.cluster.cluster_helpers import Cluster, start_cluster
from tests.cluster.zk import ZooKeeperServer
from tests.polling import wait_until

ALL_IPS = [{"entity_type": "ip", "match_type": 2, "match": None}]


@pytest.fixture
def cluster(broker_factory: Any, zookeeper: ZooKeeperServer) -> Cluster:
    return start_cluster(broker_factory, zookeeper, (1, 2))


@pytest.fixture
def czk(cluster: Cluster) -> Iterator[Any]:
    from kazoo.client import KazooClient

    client = KazooClient(hosts=cluster.zookeeper_connect)
    client.start(timeout=15)
    yield client
    client.stop()
    client.close()


def _notified(czk: Any, entity_path: str) -> bool:
    for child in czk.get_children(zk_paths.CONFIG_CHANGES):
        data, _ = czk.get(f"{zk_paths.CONFIG_CHANGES}/{child}")
        if json.loads(data).get("entity_path") == entity_path:
            return True
    return False


def test_an_ip_quota_set_through_one_broker_is_enforced_by_another(
        cluster: Cluster, czk: Any) -> None:
    one, two = cluster.brokers[1], cluster.brokers[2]
    assert alter(one.port, [("ip", "127.0.0.2")], RATE, 1) == (0, None)
    assert alter(one.port, [("ip", None)], RATE, 1000) == (0, None)

    config = json.loads(czk.get("/config/ips/127.0.0.2")[0])
    assert config == {"version": 1, "config": {RATE: "1"}}
    assert json.loads(czk.get("/config/ips/<default>")[0])["config"] == {RATE: "1000"}
    assert _notified(czk, "ips/127.0.0.2") and _notified(czk, "ips/<default>")

    want = {"ip=127.0.0.2": {RATE: 1.0}, "ip=<default>": {RATE: 1000.0}}
    wait_until(lambda: describe(two.port, ALL_IPS)[2] == want, 10,
               "the other broker applying the ip quotas")
    # the other broker enforces it: 10 connections of the burst, then refused
    assert burst(two.port, "127.0.0.2", 13) == [True] * 10 + [False] * 3
    assert all(burst(two.port, "127.0.0.3", 20))  # the default's 1000: far off

    # removed through the other broker: gone from ZooKeeper's config and from the first
    # broker's view, whose connections from that address are then limited by the default
    assert alter(two.port, [("ip", "127.0.0.2")], RATE, None) == (0, None)
    assert json.loads(czk.get("/config/ips/127.0.0.2")[0])["config"] == {}
    wait_until(lambda: describe(one.port, ALL_IPS)[2] == {"ip=<default>": {RATE: 1000.0}},
               10, "the first broker applying the removal")
    assert all(burst(one.port, "127.0.0.2", 15))
    assert answered(two.port, "127.0.0.2")

    # a broker down meanwhile reads the ip quotas from ZooKeeper when it starts
    two.stop()
    assert alter(one.port, [("ip", "127.0.0.5")], RATE, 0) == (0, None)
    two.start()
    assert describe(two.port, ALL_IPS)[2] == {"ip=127.0.0.5": {RATE: 0.0},
                                              "ip=<default>": {RATE: 1000.0}}
    assert not answered(two.port, "127.0.0.5")
