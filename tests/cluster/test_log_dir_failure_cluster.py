"""A log dir that fails while a cluster broker runs (KIP-112 at runtime, Kafka's
handleLogDirFailure): a real tmpfs as one of broker 2's log.dirs fills up. The first write
that fails there (a produce to a partition it leads, a follower's append of the leader's
records) takes the dir offline on that broker and tells the controller through
/log_dir_event_notification; the controller moves the leadership of the replicas there to
the other in-sync replica and takes them out of the ISRs (offline replicas), so acks=all
producers go on with nothing acknowledged lost, and the partitions in the other dir keep
both replicas. Freed and restarted, the broker recovers the dir and its replicas rejoin.
A broker whose every log dir fails stops with status 1, as Kafka halts, and its leaders
move at once."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.broker.test_disk_full import fill_disk, free_disk, tmpfs  # noqa: F401
from tests.cluster.cluster_helpers import SESSION_TIMEOUT_MS, Cluster, metadata
from tests.cluster.test_config_changes import create_topic
from tests.cluster.test_offline_log_dir_cluster import _partitions, replicas_moved
from tests.cluster.test_ready_caught_up import ready
from tests.cluster.zk import ZooKeeperServer
from tests.conftest import free_port
from tests.polling import wait_until

pytest.importorskip("confluent_kafka")

PARTITIONS = 4
VALUE = b"v" * 200


def _produce(bootstrap: str, values: dict[int, list[bytes]]) -> None:
    """acks=all, idempotent; every record delivered (retried past the failover)."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                  "message.timeout.ms": 60000, "enable.idempotence": True})
    failed: list[str] = []

    def report(err: Any, _msg: Any) -> None:
        if err is not None:
            failed.append(str(err))

    for partition, vs in values.items():
        for v in vs:
            p.produce("t", v, partition=partition, on_delivery=report)
    assert p.flush(90) == 0
    assert not failed, failed[:5]


def _read(bootstrap: str, partition: int, count: int) -> list[bytes]:
    """The partition's records from its start (at least `count`, 30 s at most)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex}",
                  "enable.auto.commit": False, "enable.partition.eof": True})
    c.assign([TopicPartition("t", partition, 0)])
    out: list[bytes] = []
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            eof = False
            for m in c.consume(1000, timeout=1.0):
                if m.error() is not None:
                    assert m.error().code() == -191, m.error()  # _PARTITION_EOF
                    eof = True
                    continue
                out.append(m.value())
            if eof and len(out) >= count:
                break
        return out
    finally:
        c.close()


def _values(tag: str) -> dict[int, list[bytes]]:
    return {p: [b"%s-%d-%04d-" % (tag.encode(), p, i) + VALUE for i in range(200)]
            for p in range(PARTITIONS)}


def _cluster(broker_factory: Any, zookeeper: ZooKeeperServer, dirs2: str,
             **extra2: str) -> Cluster:
    chroot = f"/c-{uuid.uuid4().hex[:8]}"
    connect = zookeeper.connect + chroot
    settings = {"zookeeper_connect": connect,
                "zookeeper_session_timeout_ms": str(SESSION_TIMEOUT_MS)}
    brokers = {1: broker_factory(broker_id="1", **settings),
               2: broker_factory(broker_id="2", log_dirs=dirs2, **settings, **extra2)}
    cluster = Cluster(connect, chroot, brokers)
    wait_until(lambda: cluster.controller() in brokers and all(
        len(metadata(b.port, [])["brokers"]) == 2 for b in cluster.live()), 30, "a cluster")
    return cluster


def test_a_log_dir_failing_at_runtime_moves_its_leaders_and_loses_nothing(
        broker_factory: Any, zookeeper: ZooKeeperServer, tmpfs: Path,  # noqa: F811
        tmp_path: Path) -> None:
    disk = tmp_path / "b2-disk"
    metrics_port = free_port()
    cluster = _cluster(broker_factory, zookeeper, f"{disk},{tmpfs}",
                       metrics_listen=f"127.0.0.1:{metrics_port}")
    brokers = cluster.brokers
    # broker 2 leads partitions 0 and 1 and follows 2 and 3; its least-loaded placement
    # puts two of them in the tmpfs: one it leads, one it follows
    create_topic(cluster, "t", {0: [2, 1], 1: [2, 1], 2: [1, 2], 3: [1, 2]})
    wait_until(lambda: all(sorted(p["isr_nodes"]) == [1, 2]
                           for p in _partitions(cluster).values()), 30, "full ISRs")
    lost = sorted(p for p in range(PARTITIONS) if (tmpfs / f"t-{p}").is_dir())
    kept = sorted(set(range(PARTITIONS)) - set(lost))
    assert lost == [1, 3] and kept == [0, 2], (lost, kept)
    before = _values("before")
    _produce(cluster.bootstrap, before)

    fill_disk(tmpfs)
    after = _values("after")
    _produce(cluster.bootstrap, after)  # acks=all: every one acknowledged, none lost

    parts = wait_until(lambda: replicas_moved(cluster, lost, kept), 30,
                       "the failed dir's replicas out of leadership and ISR")
    assert parts[0]["leader_id"] == 2  # the other dir's partitions stay led by broker 2
    for p in range(PARTITIONS):
        assert _read(cluster.bootstrap, p, 400) == before[p] + after[p]
    code, text = ready(metrics_port)
    assert code == 503 and f"offline after a storage error ({tmpfs})" in text, text
    assert "2 replica(s) there cannot rejoin their ISR until the broker restarts" in text
    log = brokers[2].log()
    assert f"Log dir {tmpfs} is offline after a storage error" in log, log[-3000:]
    assert "told the controller that log dir" in log
    assert "Stopping the broker" not in log
    # the dir's logs were not checkpointed, not closed cleanly, nothing made elsewhere
    assert not any((disk / f"t-{p}").exists() for p in lost)

    free_disk(tmpfs)
    assert brokers[2].stop() == 0
    assert not (tmpfs / ".kafka_cleanshutdown").exists()  # recovered at the next start
    brokers[2].start()
    wait_until(lambda: all(sorted(p["isr_nodes"]) == [1, 2] and not p["offline_replicas"]
                           for p in _partitions(cluster).values()), 60,
               "the repaired replicas back in the ISR")
    wait_until(lambda: ready(metrics_port)[0] == 200, 30, "/ready 200 once repaired")
    for p in range(PARTITIONS):
        assert _read(brokers[2].bootstrap, p, 400) == before[p] + after[p]


def test_a_broker_whose_every_log_dir_fails_stops_and_its_leaders_move(
        broker_factory: Any, zookeeper: ZooKeeperServer, tmpfs: Path) -> None:  # noqa: F811
    cluster = _cluster(broker_factory, zookeeper, str(tmpfs / "data"))
    brokers = cluster.brokers
    create_topic(cluster, "t", {p: [2, 1] for p in range(PARTITIONS)})
    wait_until(lambda: all(sorted(p["isr_nodes"]) == [1, 2]
                           for p in _partitions(cluster).values()), 30, "full ISRs")
    before = _values("before")
    _produce(cluster.bootstrap, before)

    fill_disk(tmpfs)
    after = _values("after")
    _produce(cluster.bootstrap, after)
    assert brokers[2].proc is not None
    assert brokers[2].proc.wait(30) == 1
    log = brokers[2].log()
    assert "Stopping the broker: the first log dir (it holds the broker's own files) is " \
        "offline." in log, log[-3000:]
    parts = _partitions(cluster)
    assert all(p["leader_id"] == 1 and p["isr_nodes"] == [1] for p in parts.values()), parts
    for p in range(PARTITIONS):
        assert _read(cluster.bootstrap, p, 400) == before[p] + after[p]
