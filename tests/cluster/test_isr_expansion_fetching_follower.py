"""Only the follower that fetches is considered for joining the ISR (Kafka's
Partition.updateFollowerFetchState -> maybeExpandIsr(followerReplica)). A follower frozen
with its ZooKeeper session alive (SIGSTOP: a GC pause, a hung disk) leaves the ISR of an
idle partition and stays out while the other follower keeps fetching; it rejoins once it
fetches again. It used to be put back by the other follower's next fetch (its last known
log end still reached the idle partition's high watermark), every few seconds: the ISR
flapped and the under-replicated count read 0 most of the time.

Real ZooKeeper and three real brokers. Every write of the partition's state znode is
recorded by a watch (a missed one still shows as a jump of the znode version, the
partition epoch); the other follower's fetches are witnessed by acks=all writes to a
partition of another topic it follows from the same leader (one Fetch carries both)."""

from __future__ import annotations

import json
import signal
import threading
import time
from typing import Any

from kafkactl.cluster import zk_paths
from tests.cluster.isr_cluster import partition_state, produce_acks_all, start_metered_cluster
from tests.cluster.test_config_changes import create_topic
from tests.cluster.zk import ZooKeeperServer
from tests.polling import wait_until

LAG_MS = 1000
ROUNDS = 5  # acks=all writes to witness-0, each after a fetch by the other follower
URP = "kafka_server_replicamanager_underreplicatedpartitions"
SHRINKS = "kafka_server_replicamanager_isrshrinks_total"
EXPANDS = "kafka_server_replicamanager_isrexpands_total"


class StateHistory:
    """(version, ISR) of every write of a partition state znode a DataWatch sees."""

    def __init__(self, zk: Any, path: str) -> None:
        from kazoo.recipe.watchers import DataWatch

        self._lock = threading.Lock()
        self._seen: list[tuple[int, list[int]]] = []
        DataWatch(zk, path, self._changed)

    def _changed(self, data: bytes | None, stat: Any) -> None:
        if data is not None:
            with self._lock:
                self._seen.append((int(stat.version), sorted(json.loads(data)["isr"])))

    def seen(self) -> list[tuple[int, list[int]]]:
        with self._lock:
            return list(self._seen)


def test_a_frozen_follower_is_not_put_back_by_another_followers_fetches(
        broker_factory: Any, own_zookeeper: ZooKeeperServer) -> None:
    from kazoo.client import KazooClient

    cluster = start_metered_cluster(
        broker_factory, own_zookeeper, zookeeper_session_timeout_ms="60000",
        replica_lag_time_max_ms=str(LAG_MS), replica_fetch_backoff_ms="100",
        replica_fetch_wait_max_ms="200")
    controller, leader, frozen = cluster.roles()
    # idle-0: the idle partition; witness-0: the fetching follower's witness
    create_topic(cluster, "idle", {0: [leader, frozen, controller]})
    create_topic(cluster, "witness", {0: [leader, controller]})
    watcher = KazooClient(hosts=cluster.zookeeper_connect)
    watcher.start(timeout=15)
    proc = cluster.brokers[frozen].proc
    assert proc is not None
    try:
        wait_until(lambda: len(partition_state(watcher, "", "idle", 0)[0]["isr"]) == 3, 30,
                   "the full ISR")
        # every follower has fetched up to the log end: the frozen one's last known log
        # end stays at the high watermark of the now idle partition
        assert produce_acks_all(cluster.bootstrap, "idle", 0, [b"one"]) == []
        history = StateHistory(watcher, zk_paths.partition_state("idle", 0))
        proc.send_signal(signal.SIGSTOP)
        try:
            shrunk = wait_until(lambda: next((v for v, isr in history.seen()
                                              if frozen not in isr), None), 30,
                                "the frozen follower out of the ISR")
            witness_fetches(cluster.bootstrap)
            after = [(v, isr) for v, isr in history.seen() if v >= shrunk]
            assert after == [(shrunk, sorted([leader, controller]))], after
            assert partition_state(watcher, "", "idle", 0)[1] == shrunk
            # the leader's own view: one committed shrink, no expansion, one short
            assert [cluster.metric(leader, m) for m in (SHRINKS, EXPANDS, URP)] == [1, 0, 1]
        finally:
            proc.send_signal(signal.SIGCONT)
        wait_until(lambda: history.seen()[-1] == (shrunk + 1, [1, 2, 3]), 30,
                   "the follower back in the ISR once it fetches")
        assert cluster.metric(leader, EXPANDS) == 1
    finally:
        watcher.stop()
        watcher.close()


def witness_fetches(bootstrap: str) -> None:
    """acks=all writes to witness-0, one at a time, until ROUNDS of them are acknowledged
    over several lag periods: each is acknowledged only once the other follower has
    fetched after it was sent (and that Fetch carried idle-0 too)."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "message.timeout.ms": 30000})
    acked: list[int] = []
    start = time.monotonic()

    def done() -> bool:
        producer.produce("witness", b"tick", partition=0,
                         on_delivery=lambda err, _m: err is None and acked.append(1))
        producer.flush(30)
        return len(acked) >= ROUNDS and time.monotonic() - start > 4 * LAG_MS / 1000
    wait_until(done, 60, "the other follower fetching for several lag periods",
               interval=0.2)
