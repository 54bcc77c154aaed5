"""Brokers and ZooKeeper outages: kazoo's retry policy (every ZooKeeper client kafkactl makes
reconnects about once a second, never after a wait that grows with the outage), then two real
brokers on a real ZooKeeper that goes away for 20 s: they keep trying about once a second
throughout (counted on a listener standing in for ZooKeeper on its port), a read-only
command meanwhile fails saying nothing was changed, and once ZooKeeper is back both brokers
are on it again and agree with it on the controller. kazoo's default policy (the wait doubles
up to an hour) tries twice at most in the outage's last 10 s."""

from __future__ import annotations

import json
import socket
import threading
import time
from typing import Any

from kafkactl.cluster import zk_paths
from kafkactl.cluster import zookeeper as zk_client
from tests import zygote
from tests.cluster.cluster_helpers import SESSION_TIMEOUT_MS, metadata, start_cluster
from tests.cluster.zk import ZooKeeperServer
from tests.polling import wait_until

OUTAGE_S = 20.0


def test_the_retry_policy_waits_about_a_second_however_long_the_outage() -> None:
    """Every wait between two attempts, however many failed before, is at most the max
    delay plus its jitter (kazoo's default would wait ~an hour after 40 failures)."""
    from kazoo.exceptions import ConnectionLoss

    waits: list[float] = []
    policy = zk_client.retry_policy()
    policy.sleep_func = waits.append
    failures = iter(range(40))

    def attempt() -> str:
        if next(failures, None) is not None:
            raise ConnectionLoss()
        return "connected"

    assert policy(attempt) == "connected"
    assert len(waits) == 40
    longest = zk_client.RETRY_MAX_DELAY_S * (1 + zk_client.RETRY_JITTER)
    assert max(waits) <= longest <= 1.5
    assert min(waits[10:]) >= zk_client.RETRY_MAX_DELAY_S * (1 - zk_client.RETRY_JITTER)


def test_every_client_gets_the_bounded_policy(zookeeper: ZooKeeperServer) -> None:
    """The one factory of kafkactl's ZooKeeper clients gives both of kazoo's policies
    (reconnecting, and the commands its recipes retry) the bounded wait."""
    from kazoo.retry import KazooRetry

    zk = zk_client.connect(zookeeper.connect + "/policy-check", timeout_s=15)
    try:
        for policy in (zk._conn_retry, zk._retry):
            assert isinstance(policy, KazooRetry)
            assert policy.max_delay == zk_client.RETRY_MAX_DELAY_S and policy.max_tries == -1
    finally:
        zk_client.close(zk)


class ConnectAttempts:
    """A listener on ZooKeeper's port while it is away: accepts and closes each connection
    (a client then tries again, as it does when refused), noting when it came."""

    def __init__(self, port: int) -> None:
        deadline = time.monotonic() + 10
        while True:
            try:
                self.server = socket.create_server(("127.0.0.1", port))
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        self.server.settimeout(0.2)
        self.times: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.times.append(time.monotonic())
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.server.close()


def test_brokers_retry_every_second_through_an_outage_and_are_back_at_once(
        broker_factory: Any, own_zookeeper: ZooKeeperServer) -> None:
    from kazoo.client import KazooClient

    cluster = start_cluster(broker_factory, own_zookeeper, ids=(1, 2))
    r = zygote.run(["topics", "create", "-b", cluster.bootstrap, "-t", "kept",
                    "--partitions", "1", "--replication-factor", "2"], text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    cluster.wait_for_leaders("kept", 1)

    own_zookeeper.stop()
    attempts = ConnectAttempts(own_zookeeper.port)
    away = time.monotonic()
    described: dict[str, Any] = {}

    def describe() -> None:  # a read-only command while ZooKeeper is away
        described["run"] = zygote.run(["configs", "describe", "-b", cluster.bootstrap,
                                       "--topic", "kept"], text=True, timeout=120)
    reader = threading.Thread(target=describe)
    reader.start()
    try:
        reader.join(120)
        time.sleep(max(0.0, away + OUTAGE_S - time.monotonic()))
        late = [t for t in attempts.times if t >= away + OUTAGE_S / 2]
    finally:
        attempts.close()
    # about once a second each, in the outage's last 10 s (kazoo's default: twice at most)
    assert len(late) >= 2 * 5, f"{len(late)} connection attempts in the last 10 s"
    r = described["run"]
    assert r.returncode != 0
    assert "ZooKeeper did not answer" in r.stderr and "nothing was changed" in r.stderr, \
        r.stderr
    assert "may still be made" not in r.stderr

    own_zookeeper.start()
    back = time.monotonic()
    watcher = KazooClient(hosts=cluster.zookeeper_connect)
    watcher.start(timeout=15)
    try:
        def on_zookeeper_again() -> bool:
            # once the sessions of brokers that did not come back have expired, each
            # broker registered is one that is connected
            if time.monotonic() - back < SESSION_TIMEOUT_MS / 1000 + 2:
                return False
            if sorted(watcher.get_children(zk_paths.BROKER_IDS)) != ["1", "2"]:
                return False
            if watcher.exists(zk_paths.CONTROLLER) is None:
                return False
            holder = json.loads(watcher.get(zk_paths.CONTROLLER)[0])["brokerid"]
            return all(metadata(b.port, [])["controller_id"] == holder
                       for b in cluster.live())
        wait_until(on_zookeeper_again, 15, "both brokers back on ZooKeeper, agreeing with it "
                   "on the controller")
    finally:
        watcher.stop()
        watcher.close()
