"""ZooKeeper away past the session timeout, on a real ZooKeeper and three real brokers:
every broker's session expires (the brokers are paused while the restarted server expires
their sessions, so the expiry is certain, not a matter of reconnect timing), then the
brokers carry on. A new controller is elected only once its own broker has registered
again (so it never sees "0 live brokers" and shrinks every ISR), and within 30 s every
partition has a leader and every acknowledged record is there."""

from __future__ import annotations

import json
import signal
from typing import Any

from kafkactl.cluster import zk_paths
from tests.cluster.cluster_helpers import Cluster, leaders, start_cluster
from tests.cluster.zk import ZooKeeperServer
from tests.polling import wait_until

PARTITIONS = 6
ROUNDS = 2


def produce(cluster: Cluster, values: list[str]) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                         "enable.idempotence": True})
    failed: list[Any] = []
    for i, v in enumerate(values):
        producer.produce("outage", v.encode(), partition=i % PARTITIONS,
                         on_delivery=lambda err, _m: err is not None and failed.append(err))
    assert producer.flush(60) == 0
    assert failed == []


def consume_all(cluster: Cluster, expected: int) -> list[str]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "outage-check",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition("outage", p, 0) for p in range(PARTITIONS)])
    got: list[str] = []
    try:
        def done() -> bool:
            m = consumer.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value().decode())
            return len(got) >= expected
        wait_until(done, 60, f"{expected} records back", interval=0)
    finally:
        consumer.close()
    return got


def zk_leaders(zk: Any) -> dict[int, int]:
    """partition -> leader in ZooKeeper's partition states, counting only registered
    brokers (-1 otherwise, or when a state is missing)."""
    live = {int(b) for b in zk.get_children(zk_paths.BROKER_IDS)}
    out = {}
    for p in range(PARTITIONS):
        path = zk_paths.partition_state("outage", p)
        leader = json.loads(zk.get(path)[0])["leader"] if zk.exists(path) else -1
        out[p] = leader if leader in live else -1
    return out


def controller_epoch(zk: Any) -> int:
    return int(zk.get(zk_paths.CONTROLLER_EPOCH)[0]) if zk.exists(
        zk_paths.CONTROLLER_EPOCH) else 0


def test_zookeeper_away_past_the_session_timeout_leaves_no_partition_leaderless(
        broker_factory: Any, own_zookeeper: ZooKeeperServer) -> None:
    from kazoo.client import KazooClient

    from tests import zygote

    cluster = start_cluster(broker_factory, own_zookeeper)
    r = zygote.run(["topics", "create", "-b", cluster.bootstrap, "-t", "outage",
                    "--partitions", str(PARTITIONS), "--replication-factor", "3"],
                   text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    cluster.wait_for_leaders("outage", PARTITIONS)
    watcher = KazooClient(hosts=cluster.zookeeper_connect)
    watcher.start(timeout=15)
    acked: list[str] = []
    try:
        for round_ in range(ROUNDS):
            batch = [f"r{round_}-{i}" for i in range(600)]
            produce(cluster, batch)
            acked += batch
            epoch_before = controller_epoch(watcher)

            own_zookeeper.stop()
            procs = [b.proc for b in cluster.live()]
            for proc in procs:
                assert proc is not None
                proc.send_signal(signal.SIGSTOP)
            try:
                own_zookeeper.start()
                # the restarted server expires the paused brokers' sessions
                wait_until(lambda: watcher.connected and
                           not watcher.get_children(zk_paths.BROKER_IDS) and
                           watcher.exists(zk_paths.CONTROLLER) is None, 30,
                           "every broker's session expired")
            finally:
                for proc in procs:
                    assert proc is not None
                    proc.send_signal(signal.SIGCONT)
            wait_until(lambda e=epoch_before: controller_epoch(watcher) > e and
                       watcher.exists(zk_paths.CONTROLLER) is not None, 30,
                       "a new controller")
            # Kafka's order: the winner had registered again before it stood for election
            data, stat = watcher.get(zk_paths.CONTROLLER)
            holder = json.loads(data)["brokerid"]
            registered = watcher.exists(zk_paths.broker(holder))
            assert registered is not None and registered.czxid < stat.czxid, \
                f"broker {holder} became controller before it registered again"
            # within 30 s: every partition led by a registered broker, and every broker
            # saying so
            def settled() -> bool:
                now = zk_leaders(watcher)
                return all(v >= 0 for v in now.values()) and all(
                    leaders(b.port, "outage") == now for b in cluster.live())
            wait_until(settled, 30, "every partition led by a live broker, on every broker")
    finally:
        watcher.stop()
        watcher.close()
    batch = [f"after-{i}" for i in range(60)]
    produce(cluster, batch)
    acked += batch
    got = consume_all(cluster, len(acked))
    assert sorted(set(got)) == sorted(acked)
    assert len(got) == len(acked)
