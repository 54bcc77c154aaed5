"""`kafkactl top` on a 3-broker ZooKeeper cluster where one broker is paused (SIGSTOP) and
resumed while it keeps its ZooKeeper session (still registered), with no traffic at all:

- each look waits for the brokers at most its timeout, all at once: the paused broker is
  shown not answering (protocol source and metrics endpoints alike) instead of the view
  waiting for it (the protocol source used to show it up, and freeze);
- rates are computed per broker (metrics) or per partition (protocol) and then summed, each
  only when in both looks: when the broker answers again its counters (its partitions' log
  end offsets) are not counted as new traffic (the metrics view showed thousands of msg/s);
- the metrics source's `partitions` counts partitions, not replicas (a 3-partition topic
  with replication factor 3 showed 9).

Live views (`top --json -i 0.3`) run throughout; the test waits for the documents that show
each step, never for a time."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from tests import zygote
from tests.cluster.cluster_helpers import Cluster, metadata
from tests.cluster.conftest import zookeeper  # noqa: F401 - the fixture
from tests.cluster.test_config_changes import create_topic
from tests.conftest import free_port
from tests.polling import wait_until

# the paused broker keeps its session, so stays registered, for the whole test
SESSION_TIMEOUT_MS = 60000
RECORDS = 10  # per partition


class LiveTop:
    """A `kafkactl top --json` live view; its documents collected as they come."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kafkactl", "top", "--json", "--interval", "0.3", *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.docs: list[dict[str, Any]] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.docs.append(json.loads(line))

    def wait_for(self, check: Callable[[dict[str, Any]], bool], what: str,
                 start: int = 0) -> int:
        """The index of the first document from `start` on that passes `check`."""
        def found() -> int | None:
            for i in range(start, len(self.docs)):
                if check(self.docs[i]):
                    return i + 1
            if self.proc.poll() is not None:
                raise AssertionError(self.proc.stderr.read() if self.proc.stderr else "")
            return None
        return wait_until(found, 60, what) - 1

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)


@pytest.fixture
def cluster(broker_factory: Any,
            zookeeper: Any) -> tuple[Cluster, dict[int, int]]:  # noqa: F811 - the fixture
    connect = zookeeper.connect + f"/c-{uuid.uuid4().hex[:8]}"
    ports = {i: free_port() for i in (1, 2, 3)}
    brokers = {i: broker_factory(
        zookeeper_connect=connect, broker_id=str(i),
        zookeeper_session_timeout_ms=str(SESSION_TIMEOUT_MS),
        metrics_listen=f"127.0.0.1:{ports[i]}") for i in (1, 2, 3)}
    cluster = Cluster(connect, "", brokers)
    wait_until(lambda: cluster.controller() in brokers and all(
        len(metadata(b.port, [])["brokers"]) == 3 for b in cluster.live()), 30, "a cluster")
    return cluster, ports


def produce(bootstrap: str, topic: str) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for p in range(3):
        for i in range(RECORDS):
            producer.produce(topic, f"r{i}".encode(), partition=p)
    assert producer.flush(30) == 0


def topic(doc: dict[str, Any], name: str) -> dict[str, Any]:
    found: dict[str, Any] = {t["topic"]: t for t in doc["topics"]}[name]
    return found


def once(*args: str) -> dict[str, Any]:
    r = zygote.run(["top", "--once", "--json", "--interval", "0.2", *args], text=True,
                   timeout=120)
    assert r.returncode == 0, r.stderr
    doc: dict[str, Any] = json.loads(r.stdout)
    return doc


@pytest.fixture
def spread(cluster: tuple[Cluster, dict[int, int]]) -> tuple[Cluster, dict[int, int], int]:
    """Topic spread (3 partitions, replication factor 3, broker b leading partition b - 1)
    with RECORDS records in each partition; the broker to pause (not the controller)."""
    c, ports = cluster
    create_topic(c, "spread", {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]})
    c.wait_for_leaders("spread", 3, expect=lambda leaders: leaders == {0: 1, 1: 2, 2: 3})
    produce(c.bootstrap, "spread")
    return c, ports, 3 if c.controller() != 3 else 2


def endpoints(ports: dict[int, int]) -> list[str]:
    return [a for i in (1, 2, 3) for a in ("--metrics", f"127.0.0.1:{ports[i]}")]


def test_partitions_are_counted_not_replicas(
        spread: tuple[Cluster, dict[int, int], int]) -> None:
    c, ports, _victim = spread
    assert topic(once(*endpoints(ports)), "spread")["partitions"] == 3
    assert topic(once("-b", c.bootstrap), "spread")["partitions"] == 3


def pause_and_resume(c: Cluster, victim: int, view: LiveTop,
                     entry: Callable[[dict[str, Any]], dict[str, Any]]) -> dict[str, Any]:
    """Pause `victim` until `view` shows it not answering, resume it; the first document
    that shows it answering again."""
    i = view.wait_for(lambda d: all(b["up"] for b in d["brokers"]) and any(
        t["topic"] == "spread" for t in d["topics"]), "a view with every broker up")
    paused = c.brokers[victim].proc
    assert paused is not None
    paused.send_signal(signal.SIGSTOP)
    try:
        i = view.wait_for(lambda d: not entry(d)["up"], f"broker {victim} not answering",
                          i + 1)
        silent = entry(view.docs[i])
        assert "did not answer" in silent["error"], silent
    finally:
        paused.send_signal(signal.SIGCONT)
    return view.docs[view.wait_for(lambda d: entry(d)["up"], f"broker {victim} back", i)]


def test_a_paused_broker_in_the_protocol_view(
        spread: tuple[Cluster, dict[int, int], int]) -> None:
    c, _ports, victim = spread
    view = LiveTop("-b", c.bootstrap)
    try:
        def broker(doc: dict[str, Any]) -> dict[str, Any]:
            found: dict[str, Any] = {b["id"]: b for b in doc["brokers"]}[victim]
            # registered all along: with its address, not down but silent
            assert found["host"] == "127.0.0.1", doc
            return found

        back = pause_and_resume(c, victim, view, broker)
    finally:
        view.stop()
    # nothing was produced: its partition's log end offset is no new traffic
    assert topic(back, "spread")["in_msgs_per_s"] == 0.0, back


def test_a_paused_broker_in_the_metrics_view(
        spread: tuple[Cluster, dict[int, int], int]) -> None:
    c, ports, victim = spread
    url = f"http://127.0.0.1:{ports[victim]}/metrics"
    view = LiveTop(*endpoints(ports))
    try:
        back = pause_and_resume(c, victim, view, lambda d: {
            b["endpoint"]: b for b in d["brokers"]}[url])
    finally:
        view.stop()
    # nothing was produced: its counters are no new traffic
    rates = topic(back, "spread")
    assert rates["in_msgs_per_s"] == 0.0 and rates["in_bytes_per_s"] == 0.0, back
