"""A fault schedule on three real brokers and a ZooKeeper of the test's own, with idempotent
acks=all producers writing all along: a leader killed, the controller killed, a leader
paused (SIGSTOP) past the session timeout, ZooKeeper away past the session timeout, two of
the three brokers killed. Which fault comes when is drawn from a fixed seed (the same order
every run; FAULT_SEED changes it). Afterwards: every acknowledged record is there exactly
once and in order per partition, the replicas agree (`kafkactl cluster verify-replicas`),
and every partition has a leader within 30 s of the last fault's end."""

from __future__ import annotations

import json
import os
import random
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from kafkactl.cluster import zk_paths
from tests import zygote
from tests.cluster.cluster_helpers import SESSION_TIMEOUT_MS, Cluster, leaders, start_cluster
from tests.cluster.zk import ZooKeeperServer
from tests.polling import wait_until

TOPIC = "faults"
PARTITIONS = 3
FAULT_SEED = int(os.environ.get("FAULT_SEED", "31"))
SESSION_S = SESSION_TIMEOUT_MS / 1000


class Writers:
    """Two idempotent acks=all producers (librdkafka), each writing its own sequence
    numbers round-robin over the partitions until stopped; what each got acknowledged."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.acked: dict[str, list[tuple[int, int]]] = {"a": [], "b": []}
        self.failed: list[str] = []
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._run, args=(w,), daemon=True)
                        for w in self.acked]

    def start(self) -> None:
        for t in self.threads:
            t.start()

    def _run(self, writer: str) -> None:
        from confluent_kafka import Producer

        p = Producer({"bootstrap.servers": self.bootstrap, "enable.idempotence": True,
                      "acks": "all", "linger.ms": 5, "message.timeout.ms": 300000})

        def done(err: Any, msg: Any) -> None:
            if err is not None:
                self.failed.append(str(err))
            else:
                self.acked[writer].append((msg.partition(), int(msg.value().split(b"-")[1])))
        n = 0
        while not self.stop.is_set():
            try:
                p.produce(TOPIC, f"{writer}-{n}".encode(), partition=n % PARTITIONS,
                          on_delivery=done)
                n += 1
            except BufferError:
                p.poll(0.05)
            p.poll(0)
            if n % 20 == 0:
                time.sleep(0.01)  # about 2,000 records/s: a steady stream, not a flood
        p.flush(300)

    def finish(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(320)

    def wait_progress(self, what: str) -> None:
        before = sum(len(v) for v in self.acked.values())
        wait_until(lambda: sum(len(v) for v in self.acked.values()) > before + 200, 90,
                   f"acknowledged writes after {what}")


def _leader_of(cluster: Cluster, partition: int) -> int:
    return wait_until(lambda: leaders(cluster.live()[0].port, TOPIC).get(partition, -1)
                      if leaders(cluster.live()[0].port, TOPIC).get(partition, -1) >= 0
                      else None, 60, "a leader")


def _full_isr(cluster: Cluster) -> None:
    from tests.cluster.test_replication import full_isr

    full_isr(cluster, TOPIC, PARTITIONS, timeout=90)


def _kill_leader(cluster: Cluster, zk: ZooKeeperServer) -> None:
    controller = cluster.controller()
    victim = next((b for b in leaders(cluster.live()[0].port, TOPIC).values()
                   if b != controller), _leader_of(cluster, 0))
    cluster.brokers[victim].kill()
    wait_until(lambda: victim not in leaders(cluster.live()[0].port, TOPIC).values(),
               SESSION_S + 30, "the partitions it led moved")
    cluster.brokers[victim].start()


def _kill_controller(cluster: Cluster, zk: ZooKeeperServer) -> None:
    victim = wait_until(lambda: c if (c := cluster.controller()) > 0 else None, 30,
                        "a controller")
    cluster.brokers[victim].kill()
    wait_until(lambda: cluster.controller() not in (-1, victim), SESSION_S + 30,
               "a new controller")
    cluster.brokers[victim].start()


def _pause_leader(cluster: Cluster, zk: ZooKeeperServer) -> None:
    victim = _leader_of(cluster, 1)
    proc = cluster.brokers[victim].proc
    assert proc is not None
    proc.send_signal(signal.SIGSTOP)
    try:
        wait_until(lambda: victim not in leaders(
            next(b for i, b in cluster.brokers.items() if i != victim).port, TOPIC).values(),
            SESSION_S + 30, "leadership moved off the paused broker")
    finally:
        proc.send_signal(signal.SIGCONT)


def _zookeeper_away(cluster: Cluster, zk: ZooKeeperServer) -> None:
    """Away past the session timeout: the brokers are paused while the restarted server
    expires their sessions, so every session is certain to expire."""
    from kazoo.client import KazooClient

    zk.stop()
    procs = [b.proc for b in cluster.live()]
    for proc in procs:
        assert proc is not None
        proc.send_signal(signal.SIGSTOP)
    watcher = KazooClient(hosts=cluster.zookeeper_connect)
    try:
        zk.start()
        watcher.start(timeout=30)
        wait_until(lambda: not watcher.get_children(zk_paths.BROKER_IDS), 60,
                   "every broker's session expired")
    finally:
        for proc in procs:
            assert proc is not None
            proc.send_signal(signal.SIGCONT)
        watcher.stop()
        watcher.close()


def _two_of_three_down(cluster: Cluster, zk: ZooKeeperServer) -> None:
    survivor = wait_until(lambda: c if (c := cluster.controller()) > 0 else None, 30,
                          "a controller")
    down = [i for i in cluster.brokers if i != survivor]
    for i in down:
        cluster.brokers[i].kill()
    time.sleep(SESSION_S + 1)  # writes stall (min.insync.replicas=2): the producers wait
    for i in down:
        cluster.brokers[i].start()


FAULTS: dict[str, Callable[[Cluster, ZooKeeperServer], None]] = {
    "leader killed": _kill_leader,
    "controller killed": _kill_controller,
    "leader paused past the session timeout": _pause_leader,
    "ZooKeeper away past the session timeout": _zookeeper_away,
    "two of three brokers killed": _two_of_three_down,
}


def schedule(seed: int) -> list[str]:
    """The faults in the seed's order (each once)."""
    names = sorted(FAULTS)
    random.Random(seed).shuffle(names)
    return names


def test_the_schedule_is_the_same_for_a_seed() -> None:
    assert schedule(FAULT_SEED) == schedule(FAULT_SEED)
    assert sorted(schedule(FAULT_SEED)) == sorted(FAULTS)


def test_fault_schedule_loses_and_duplicates_nothing(broker_factory: Any,
                                                    own_zookeeper: ZooKeeperServer) -> None:
    pytest.importorskip("confluent_kafka")
    cluster = start_cluster(broker_factory, own_zookeeper,
                            replica_lag_time_max_ms="4000")
    r = zygote.run(["topics", "create", "-b", cluster.bootstrap, "-t", TOPIC, "--partitions",
                    str(PARTITIONS), "--replication-factor", "3", "--config",
                    "min.insync.replicas=2"], text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    _full_isr(cluster)
    writers = Writers(cluster.bootstrap)
    writers.start()
    done: list[str] = []
    try:
        writers.wait_progress("the start")
        for name in schedule(FAULT_SEED):
            FAULTS[name](cluster, own_zookeeper)
            done.append(name)
            ended = time.monotonic()
            # every partition led again within 30 s of the fault's end, on every broker
            cluster.wait_for_leaders(TOPIC, PARTITIONS, timeout=30)
            assert time.monotonic() - ended <= 30
            _full_isr(cluster)
            writers.wait_progress(name)
    finally:
        writers.finish()
    assert done == schedule(FAULT_SEED)
    assert writers.failed == []
    # read everything back: each writer's records per partition exactly once, in order
    from confluent_kafka import Consumer, TopicPartition

    expected = sum(len(v) for v in writers.acked.values())
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "faults-check",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    got: list[tuple[int, str, int]] = []
    try:
        def read() -> bool:
            m = consumer.poll(0.5)
            if m is not None and m.error() is None:
                w, n = m.value().decode().split("-")
                got.append((m.partition(), w, int(n)))
            return len(got) >= expected
        wait_until(read, 120, f"{expected} records back", interval=0)
        quiet = time.monotonic() + 2  # anything more would be a duplicate
        while time.monotonic() < quiet:
            read()
    finally:
        consumer.close()
    stored = got
    assert len(stored) == len(set(stored)), "a record is stored twice"
    for writer, acked in writers.acked.items():
        for p in range(PARTITIONS):
            mine = [n for q, w, n in stored if q == p and w == writer]
            assert mine == sorted(mine), f"{writer}'s records on partition {p} out of order"
            assert {n for q, n in acked if q == p} <= set(mine), \
                f"acknowledged records of {writer} on partition {p} are missing"
    r = zygote.run(["cluster", "verify-replicas", "-t", TOPIC, "--json", "-b",
                    cluster.bootstrap], text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    rows = json.loads(r.stdout)
    assert len(rows) == PARTITIONS
    assert all(row["compared"] and row["diverged_at"] is None and not row["errors"]
               for row in rows), rows
