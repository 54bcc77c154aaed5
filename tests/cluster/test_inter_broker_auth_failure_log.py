"""A broker whose inter-broker credentials are wrong says so in its own log at ERROR (the
partitions it follows are not replicated): its replica fetcher's authentication failures
were logged at DEBUG only, so the broker looked healthy while every partition it follows
stayed under-replicated (Kafka's NetworkClient logs them at ERROR). Two real brokers,
SASL_PLAINTEXT SCRAM-SHA-256 between them; broker 2's password is wrong, so it cannot
fetch from broker 1, which leads (and is the controller: its own requests to broker 2
authenticate)."""

from __future__ import annotations

import uuid
from pathlib import Path

from tests.cluster.test_security_cluster import (
    BROKER_PASSWORD,
    BROKER_USER,
    MECHANISM,
    kafkactl,
    metadata,
)
from tests.cluster.zk import ZooKeeperServer
from tests.conftest import BrokerProcess, free_port
from tests.polling import wait_until


def _broker(i: int, connect: str, tmp: Path, password: str) -> BrokerProcess:
    data = tmp / f"data-{i}"
    data.mkdir()
    port = free_port()
    jaas = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
            f'username="{BROKER_USER}" password="{password}";')
    return BrokerProcess(data, port, {
        "listeners": f"SASL_PLAINTEXT://127.0.0.1:{port}", "broker.id": str(i),
        "zookeeper.connect": connect, "zookeeper.session.timeout.ms": "3000",
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": MECHANISM,
        "sasl.mechanism.inter.broker.protocol": MECHANISM,
        "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": jaas})


def test_a_follower_that_cannot_authenticate_says_so(zookeeper: ZooKeeperServer,
                                                     tmp_path: Path) -> None:
    connect = f"{zookeeper.connect}/auth-{uuid.uuid4().hex[:8]}"
    r = kafkactl("users", "add", BROKER_USER, "--password", BROKER_PASSWORD,
                 "--mechanism", MECHANISM, "--zookeeper", connect)
    assert r.returncode == 0, r.stderr
    one = _broker(1, connect, tmp_path, BROKER_PASSWORD)
    two = _broker(2, connect, tmp_path, "wrong-secret")
    try:
        one.start()
        wait_until(lambda: metadata(one.bootstrap, [], BROKER_USER, BROKER_PASSWORD)[
            "controller_id"] == 1, 30, "broker 1 the controller")
        two.start()
        wait_until(lambda: len(metadata(one.bootstrap, [], BROKER_USER, BROKER_PASSWORD)[
            "brokers"]) == 2, 30, "broker 2 registered")
        auth = ["-X", "security.protocol=SASL_PLAINTEXT", "-X", f"sasl.mechanism={MECHANISM}",
                "-X", f"sasl.username={BROKER_USER}", "-X", f"sasl.password={BROKER_PASSWORD}"]
        r = kafkactl("topics", "create", "-t", "followed", "--replica-assignment", "1:2",
                     "-b", one.bootstrap, *auth)
        assert r.returncode == 0, r.stderr
        said = "ERROR kafkactl.broker.replica_fetcher: replica fetcher: connection to broker 1 " \
               "failed authentication"
        wait_until(lambda: said in two.log(), 30, f"broker 2 saying it:\n{two.log()}")
        assert "the partitions it leads are not replicated here" in two.log()
    finally:
        one.kill()
        two.kill()
