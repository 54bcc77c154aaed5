"""Re-authentication between brokers (KIP-368), with real processes: a three-broker
ZooKeeper cluster whose inter-broker listener is SASL_PLAINTEXT with SCRAM-SHA-256 and a
short connections.max.reauth.ms. The brokers' own connections to each other (the replica
fetchers, the controller's channel, AlterPartition) re-authenticate before their sessions
end, as Kafka's do: over more than two session lifetimes of acks=all writes no broker
closes a connection for an expired session, the controller's requests after that (a new
topic) go through without failing, and the ISR stays whole."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafkactl.client.admin import AdminClient
from kafkactl.client.connection import BrokerConnection
from kafkactl.client.producer import Producer
from kafkactl.protocol.api_keys import ApiKey
from tests import zygote
from tests.cluster.zk import ZooKeeperServer
from tests.conftest import BrokerProcess, free_port
from tests.polling import wait_until

BROKER_USER, BROKER_PASSWORD = "broker", "broker-secret"
MECHANISM = "SCRAM-SHA-256"
JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
        f'username="{BROKER_USER}" password="{BROKER_PASSWORD}";')
LIFETIME_MS = 3000
EXPIRED = "SASL session expired"
CONTROLLER_FAILED = "controller request to broker"


@pytest.fixture
def reauth_cluster(zookeeper: ZooKeeperServer,
                   tmp_path: Path) -> Iterator[dict[int, tuple[BrokerProcess, int]]]:
    """broker id -> (its process, whose bootstrap is its SASL listener; the port of its
    PLAINTEXT listener, for the test's own clients)."""
    connect = f"{zookeeper.connect}/reauth-{uuid.uuid4().hex[:8]}"
    r = zygote.run(["users", "add", BROKER_USER, "--password", BROKER_PASSWORD,
                    "--mechanism", MECHANISM, "--zookeeper", connect], text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    brokers: dict[int, tuple[BrokerProcess, int]] = {}
    for i in (1, 2, 3):
        data = tmp_path / f"data-{i}"
        data.mkdir()
        port, plain = free_port(), free_port()
        brokers[i] = (BrokerProcess(data, port, {
            "listeners": f"SASL_PLAINTEXT://127.0.0.1:{port},PLAINTEXT://127.0.0.1:{plain}",
            "broker.id": str(i), "zookeeper.connect": connect,
            "zookeeper.session.timeout.ms": "3000",
            "inter.broker.listener.name": "SASL_PLAINTEXT",
            "sasl.enabled.mechanisms": MECHANISM,
            "sasl.mechanism.inter.broker.protocol": MECHANISM,
            "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": JAAS,
            "connections.max.reauth.ms": str(LIFETIME_MS),
            "offsets.topic.replication.factor": "3"}), plain)
    for b, _plain in brokers.values():
        b.start()
    yield brokers
    for b, _plain in brokers.values():
        b.kill()


def _metadata(port: int, topics: list[str]) -> dict[str, Any]:
    conn = BrokerConnection("127.0.0.1", port, request_timeout=10)
    try:
        conn.connect()
        return conn.request(ApiKey.METADATA, {"topics": [{"name": t} for t in topics],
                                              "allow_auto_topic_creation": False}, version=9)
    finally:
        conn.close()


def _fully_replicated(port: int, topic: str, partitions: int) -> bool:
    """Every partition of `topic` has a leader and all three replicas in its ISR."""
    try:
        md = _metadata(port, [topic])
    except Exception:
        return False
    parts = md["topics"][0]["partitions"] if md["topics"] else []
    return len(parts) == partitions and all(
        p["error_code"] == 0 and p["leader_id"] >= 0 and len(p["isr_nodes"]) == 3
        for p in parts)


def _full_log(b: BrokerProcess) -> str:
    path = b.log_path
    return path.read_text(errors="replace") if path and path.exists() else ""


def test_brokers_reauthenticate_with_each_other(
        reauth_cluster: dict[int, tuple[BrokerProcess, int]]) -> None:
    plain = reauth_cluster[1][1]
    bootstrap = f"127.0.0.1:{plain}"
    wait_until(lambda: len(_metadata(plain, [])["brokers"]) == 3, 60,
               "three brokers in the metadata")
    with AdminClient(bootstrap) as admin:
        errors = admin.create_topics({"r3": (3, 3, {"min.insync.replicas": "2"})})
        assert all(e is None for e in errors.values()), errors
    wait_until(lambda: _fully_replicated(plain, "r3", 3), 60, "r3 fully replicated")

    # acks=all writes for more than two session lifetimes of the inter-broker connections
    start, sent = time.monotonic(), 0
    with Producer(bootstrap, acks="all", linger_ms=0) as producer:
        while time.monotonic() - start <= 2 * LIFETIME_MS / 1000:
            producer.send("r3", b"v%d" % sent, None, partition=sent % 3)
            assert producer.flush(30), f"record {sent} not acknowledged"
            sent += 1
    # the controller's channel, opened at start and idle since: a new topic's requests
    with AdminClient(bootstrap) as admin:
        errors = admin.create_topics({"late": (2, 3, {})})
        assert all(e is None for e in errors.values()), errors
    wait_until(lambda: _fully_replicated(plain, "late", 2), 60, "late fully replicated")

    assert _fully_replicated(plain, "r3", 3)
    for broker_id, (b, _plain) in reauth_cluster.items():
        log = _full_log(b)
        assert EXPIRED not in log, f"broker {broker_id}:\n{log[-5000:]}"
        assert CONTROLLER_FAILED not in log, f"broker {broker_id}:\n{log[-5000:]}"
        assert "leaving the ISR" not in log, f"broker {broker_id}:\n{log[-5000:]}"
