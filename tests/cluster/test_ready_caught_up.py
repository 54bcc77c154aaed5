"""/ready on a 3-broker cluster (issue 34): a restarted broker is ready only once it is
caught up, i.e. every partition it follows has it back in its ISR. The leader it must
catch up from is paused (SIGSTOP, well within its ZooKeeper session) while the broker
restarts, so the broker cannot catch up: /ready says 503 and why, whatever the machine's
speed; once the leader runs again the broker rejoins the ISR and /ready says 200."""

from __future__ import annotations

import http.client
import json
import signal
import uuid
from typing import Any

from tests.broker.test_metrics import status
from tests.cluster.cluster_helpers import Cluster, metadata
from tests.cluster.test_config_changes import create_topic
from tests.cluster.zk import ZooKeeperServer
from tests.conftest import free_port
from tests.polling import wait_until

SESSION_TIMEOUT_MS = 30000  # the paused leader keeps its session (and its leadership)


def ready(port: int) -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", "/ready")
        r = conn.getresponse()
        return r.status, r.read().decode()
    finally:
        conn.close()


def isr_in_zk(zk: Any, chroot: str, topic: str, partition: int) -> list[int]:
    data, _ = zk.get(f"{chroot}/brokers/topics/{topic}/partitions/{partition}/state")
    return list(json.loads(data)["isr"])


def test_a_restarted_broker_is_ready_only_once_back_in_the_isr(
        broker_factory: Any, zookeeper: ZooKeeperServer, zk: Any) -> None:
    chroot = f"/c-{uuid.uuid4().hex[:8]}"
    connect = zookeeper.connect + chroot
    ports = {i: free_port() for i in (1, 2, 3)}
    brokers = {i: broker_factory(
        zookeeper_connect=connect, broker_id=str(i),
        zookeeper_session_timeout_ms=str(SESSION_TIMEOUT_MS), replica_fetch_backoff_ms="100",
        replica_fetch_wait_max_ms="200", metrics_listen=f"127.0.0.1:{ports[i]}")
        for i in (1, 2, 3)}
    cluster = Cluster(connect, chroot, brokers)
    wait_until(lambda: cluster.controller() in brokers and all(
        len(metadata(b.port, [])["brokers"]) == 3 for b in cluster.live()), 30, "a cluster")
    for i in brokers:
        wait_until(lambda i=i: status(ports[i], "/ready") == 200, 30, f"broker {i} ready")
    controller = cluster.controller()
    follower = 3 if controller != 3 else 2
    leader = next(i for i in (1, 2, 3) if i not in (controller, follower))
    create_topic(cluster, "followed", {0: [leader, follower, controller],
                                       1: [leader, controller, follower]})
    wait_until(lambda: all(isr_in_zk(zk, chroot, "followed", p).count(follower)
                           for p in (0, 1)), 30, "the follower in both ISRs")

    brokers[follower].stop()
    wait_until(lambda: all(follower not in isr_in_zk(zk, chroot, "followed", p)
                           for p in (0, 1)), 30, "the stopped follower out of the ISRs")
    leader_proc = brokers[leader].proc
    assert leader_proc is not None
    leader_proc.send_signal(signal.SIGSTOP)
    try:
        brokers[follower].start()
        # started and registered, but its leader does not answer: not caught up
        code, text = wait_until(
            lambda: (lambda r: r if "catching up" in r[1] else None)(ready(ports[follower])),
            20, "/ready saying the broker is catching up")
        assert code == 503 and "followed-0" in text and "followed-1" in text, text
        assert status(ports[follower], "/health") == 200  # alive all along
    finally:
        leader_proc.send_signal(signal.SIGCONT)
    wait_until(lambda: ready(ports[follower])[0] == 200, 60, "/ready 200 once caught up")
    for p in (0, 1):  # 200 only when back in every ISR it belongs to
        assert follower in isr_in_zk(zk, chroot, "followed", p)
    for i in brokers:
        assert ready(ports[i])[0] == 200
