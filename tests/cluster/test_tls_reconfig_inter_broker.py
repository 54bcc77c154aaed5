"""A CA rollover on the TLS inter-broker listener of a ZooKeeper cluster, done as an
operator does it with dynamic broker configs, and no broker restarted but the one that gets
the new certificate: each broker's truststore becomes a bundle of the old and the new CA
(`kafkactl configs alter`), then broker 2 restarts with a certificate of the new CA. Broker
1's own connections to broker 2 (the controller's requests, its replica fetcher) must use
the new truststore, as Kafka's reconfigurable inter-broker channel builders do: broker 2
rejoins the ISR, and once it leads a partition broker 1 replicates from it."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kafkactl.protocol.api_keys import ApiKey
from tests import zygote
from tests.broker.security.certs import OPENSSL
from tests.broker.security.test_tls_reconfig_validation import Pki
from tests.cluster.cluster_helpers import SESSION_TIMEOUT_MS, metadata, request
from tests.cluster.zk import ZooKeeperServer
from tests.conftest import BrokerProcess, free_port
from tests.polling import wait_until

TOPIC = "rollover"


def partitions(port: int) -> dict[int, dict[str, Any]]:
    md = metadata(port, [TOPIC])
    t = md["topics"][0]
    return {} if t["error_code"] else {p["partition_index"]: p for p in t["partitions"]}


def high_watermark(port: int, partition: int) -> int:
    """The partition's high watermark as its leader on `port` answers ListOffsets latest."""
    resp = request(port, ApiKey.LIST_OFFSETS, 2, {
        "replica_id": -1, "isolation_level": 0, "topics": [{"name": TOPIC, "partitions": [
            {"partition_index": partition, "timestamp": -1}]}]})
    p = resp["topics"][0]["partitions"][0]
    return int(p["offset"]) if p["error_code"] == 0 else -1


def replicated(leader_port: int, partition: int, records: int) -> Callable[[], bool]:
    return lambda: high_watermark(leader_port, partition) == records


def kafkactl(*args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
    return zygote.run(list(args), input=input, text=True, timeout=60)


def test_a_ca_rollover_reaches_the_brokers_own_connections(
        zookeeper: ZooKeeperServer, tmp_path: Path) -> None:
    if OPENSSL is None:
        pytest.skip("openssl is not installed")
    pki = Pki(tmp_path / "pki")
    ca1, ca2 = pki.ca("ca1"), pki.ca("ca2")
    both = pki.bundle("both", ca1, ca2)
    keystores = {i: pki.keystore(f"broker{i}", f"broker{i}", "ca1") for i in (1, 2)}
    renewed = pki.keystore("broker2-ca2", "broker2", "ca2")
    connect = f"{zookeeper.connect}/tls-roll-{uuid.uuid4().hex[:8]}"
    brokers: dict[int, BrokerProcess] = {}
    try:
        for i in (1, 2):
            data = tmp_path / f"data-{i}"
            data.mkdir()
            port, internal = free_port(), free_port()
            b = brokers[i] = BrokerProcess(data, port, {
                "listeners": f"PLAINTEXT://127.0.0.1:{port},INTERNAL://127.0.0.1:{internal}",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SSL",
                "inter.broker.listener.name": "INTERNAL", "broker.id": str(i),
                "zookeeper.connect": connect,
                "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
                "ssl.keystore.location": str(keystores[i]),
                "ssl.truststore.location": str(ca1),
                "listener.name.internal.ssl.client.auth": "required",
                # a follower that cannot fetch stays in the ISR: a high watermark that
                # reaches the end is the followers' fetches, not an ISR shrink
                "replica.lag.time.max.ms": "600000"})
            b.start()
        port1 = brokers[1].port
        wait_until(lambda: all(len(metadata(b.port, [])["brokers"]) == 2
                               for b in brokers.values()), 30, "both brokers registered")
        resp = request(port1, ApiKey.CREATE_TOPICS, 5, {"topics": [{
            "name": TOPIC, "num_partitions": -1, "replication_factor": -1, "configs": [],
            "assignments": [{"partition_index": 0, "broker_ids": [1, 2]},
                            {"partition_index": 1, "broker_ids": [2, 1]}]}],
            "timeout_ms": 30000, "validate_only": False})
        assert resp["topics"][0]["error_code"] == 0, resp

        def full_isr() -> bool:
            parts = partitions(port1)
            return len(parts) == 2 and all(sorted(p["isr_nodes"]) == [1, 2]
                                           for p in parts.values())

        wait_until(full_isr, 30, "both partitions with an ISR of 2 over TLS")

        # step 1 of the rollover: every broker trusts both CAs (no restart)
        for i, b in brokers.items():
            r = kafkactl("configs", "alter", "-b", b.bootstrap, "--entity-type", "brokers",
                         "--entity-name", str(i), "--add-config",
                         f"listener.name.internal.ssl.truststore.location={both}")
            assert r.returncode == 0, r.stderr
        # step 2: broker 2 restarts with its certificate of the new CA
        brokers[2].stop()
        brokers[2].overrides["ssl.keystore.location"] = str(renewed)
        brokers[2].start()
        # broker 1 (the controller now) reaches it: broker 2 follows again
        wait_until(full_isr, 30, "broker 2 back in both ISRs after its restart with a "
                                 "certificate of the new CA")
        r = kafkactl("rebalance", "--preferred-leaders", "-t", TOPIC, "-b",
                     brokers[1].bootstrap)
        assert r.returncode == 0, r.stderr
        wait_until(lambda: {n: p["leader_id"] for n, p in partitions(port1).items()}
                   == {0: 1, 1: 2}, 30, "broker 2 leading partition 1 again")
        # both ways: broker 1 fetches from broker 2, broker 2 from broker 1
        for partition, leader in ((1, 2), (0, 1)):
            r = kafkactl("produce", "-b", brokers[1].bootstrap, "-t", TOPIC, "--partition",
                         str(partition), "--acks", "1", "-q",
                         input="".join(f"r{n}\n" for n in range(50)))
            assert r.returncode == 0, r.stderr
            wait_until(replicated(brokers[leader].port, partition, 50), 30,
                       f"partition {partition}'s records on its follower")
        assert full_isr()
        assert "inter-broker listener INTERNAL: the connections this broker makes to the " \
               "other brokers from now on" in brokers[1].log()
    finally:
        for b in brokers.values():
            b.kill()
