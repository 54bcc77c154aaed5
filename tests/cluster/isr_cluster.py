"""Helpers for the ISR-change tests: three real brokers on a ZooKeeper, each with its own
metrics port (the leader's own view of its ISR shows in its under-replicated gauge and its
isrshrinks/isrexpands counters), the partition state znode as the controller wrote it,
and an acks=all produce to one partition."""

from __future__ import annotations

import http.client
import json
import uuid
from dataclasses import dataclass
from typing import Any

from kafkactl.cluster import zk_paths
from tests.cluster.cluster_helpers import Cluster, metadata
from tests.cluster.zk import ZooKeeperServer
from tests.conftest import free_port
from tests.polling import wait_until


@dataclass
class MeteredCluster(Cluster):
    metrics_ports: dict[int, int]

    def metric(self, broker: int, name: str) -> float:
        """One unlabelled sample of broker `broker`'s /metrics (NaN when absent)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.metrics_ports[broker],
                                          timeout=10)
        try:
            conn.request("GET", "/metrics")
            text = conn.getresponse().read().decode()
        finally:
            conn.close()
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == name:
                return float(value)
        return float("nan")

    def roles(self) -> tuple[int, int, int]:
        """(controller, a leader, a third broker) of the three, all different."""
        controller = wait_until(lambda: c if (c := self.controller()) in self.brokers
                                else None, 30, "every broker naming the controller")
        leader, other = sorted(b for b in self.brokers if b != controller)
        return controller, leader, other


def start_metered_cluster(broker_factory: Any, zookeeper: ZooKeeperServer,
                          **overrides: str) -> MeteredCluster:
    chroot = f"/c-{uuid.uuid4().hex[:8]}"
    connect = zookeeper.connect + chroot
    ports = {i: free_port() for i in (1, 2, 3)}
    brokers = {i: broker_factory(zookeeper_connect=connect, broker_id=str(i),
                                 metrics_listen=f"127.0.0.1:{ports[i]}", **overrides)
               for i in (1, 2, 3)}
    cluster = MeteredCluster(connect, chroot, brokers, ports)
    wait_until(lambda: cluster.controller() in brokers and all(
        len(metadata(b.port, [])["brokers"]) == 3 for b in cluster.live()), 30, "a cluster")
    return cluster


def partition_state(zk: Any, chroot: str, topic: str, partition: int
                    ) -> tuple[dict[str, Any], int]:
    """(the partition state znode's JSON, its version: the partition epoch)."""
    data, stat = zk.get(chroot + zk_paths.partition_state(topic, partition))
    return json.loads(data), int(stat.version)


def produce_acks_all(bootstrap: str, topic: str, partition: int, values: list[bytes]
                     ) -> list[str]:
    """acks=all produce of `values` to one partition: the delivery errors (none: all
    acknowledged)."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "message.timeout.ms": 30000})
    errors: list[str] = []
    for v in values:
        producer.produce(topic, v, partition=partition,
                         on_delivery=lambda err, _m: err is not None and errors.append(
                             str(err)))
    assert producer.flush(60) == 0
    return errors
