"""Security in a ZooKeeper cluster, with real processes: three brokers whose client and
inter-broker listener is SASL_PLAINTEXT with SCRAM-SHA-256, Kafka's ACL authorizer on and
only the brokers' own user as super user (no User:ANONYMOUS). Replication works over the
authenticated inter-broker listener; an ACL added through broker 1 is enforced by broker
3; a SCRAM user added through broker 2 logs in on broker 3; ACLs and users survive a
restart of every broker; Metadata lists each broker's endpoint of the request's listener
(a broker without that listener is left out)."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kafkactl.client.connection import BrokerConnection
from kafkactl.client.security import ClientSecurity
from kafkactl.cluster import zookeeper as zkconn
from kafkactl.cluster.scram_zk_store import ZkCredentialStore
from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.scram import SCRAM_SHA_256, new_credential
from tests import zygote
from tests.cluster.zk import ZooKeeperServer
from tests.conftest import BrokerProcess, free_port
from tests.polling import wait_until

pytest.importorskip("confluent_kafka")

BROKER_USER, BROKER_PASSWORD = "broker", "broker-secret"
MECHANISM = "SCRAM-SHA-256"
JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
        f'username="{BROKER_USER}" password="{BROKER_PASSWORD}";')
TOPIC_AUTHORIZATION_FAILED = 29


@dataclass
class SecureCluster:
    connect: str
    brokers: dict[int, BrokerProcess]
    plaintext_ports: dict[int, int]  # brokers 1 and 2 also have a PLAINTEXT listener

    def sasl(self, broker_id: int) -> str:
        return self.brokers[broker_id].bootstrap

    def restart_all(self) -> None:
        for b in self.brokers.values():
            b.stop()
        for b in self.brokers.values():
            b.start()


def client_config(bootstrap: str, user: str, password: str) -> dict[str, Any]:
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": MECHANISM, "sasl.username": user, "sasl.password": password}


def cli_auth(user: str = BROKER_USER, password: str = BROKER_PASSWORD) -> list[str]:
    return ["-X", "security.protocol=SASL_PLAINTEXT", "-X", f"sasl.mechanism={MECHANISM}",
            "-X", f"sasl.username={user}", "-X", f"sasl.password={password}"]


def kafkactl(*args: str) -> subprocess.CompletedProcess[str]:
    return zygote.run(list(args), text=True, timeout=60)


def metadata(host_port: str, topics: list[str] | None, user: str | None = None,
             password: str = "") -> dict[str, Any]:
    """One Metadata request answered by exactly this broker (SASL when `user` is given)."""
    host, port = host_port.rsplit(":", 1)
    security = ClientSecurity() if user is None else ClientSecurity.from_properties(
        {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": MECHANISM,
         "sasl.username": user, "sasl.password": password})
    conn = BrokerConnection(host, int(port), security=security, request_timeout=10)
    try:
        conn.connect()
        return conn.request(ApiKey.METADATA, {
            "topics": None if topics is None else [{"name": t} for t in topics],
            "allow_auto_topic_creation": False}, version=9)
    finally:
        conn.close()


@pytest.fixture
def secure_cluster(zookeeper: ZooKeeperServer, tmp_path: Path) -> Iterator[SecureCluster]:
    connect = f"{zookeeper.connect}/sec-{uuid.uuid4().hex[:8]}"
    # The brokers' own SCRAM user must exist before they can talk to each other: created
    # in ZooKeeper, as Kafka's `kafka-configs --zookeeper ... --entity-type users` does.
    r = kafkactl("users", "add", BROKER_USER, "--password", BROKER_PASSWORD,
                 "--mechanism", MECHANISM, "--zookeeper", connect)
    assert r.returncode == 0, r.stderr
    brokers: dict[int, BrokerProcess] = {}
    plaintext: dict[int, int] = {}
    for i in (1, 2, 3):
        data = tmp_path / f"data-{i}"
        data.mkdir()
        port = free_port()
        listeners = f"SASL_PLAINTEXT://127.0.0.1:{port}"
        if i != 3:
            plaintext[i] = free_port()
            listeners += f",PLAINTEXT://127.0.0.1:{plaintext[i]}"
        brokers[i] = BrokerProcess(data, port, {
            "listeners": listeners, "broker.id": str(i), "zookeeper.connect": connect,
            "zookeeper.session.timeout.ms": "3000",
            "inter.broker.listener.name": "SASL_PLAINTEXT",
            "sasl.enabled.mechanisms": MECHANISM,
            "sasl.mechanism.inter.broker.protocol": MECHANISM,
            "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": JAAS,
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": f"User:{BROKER_USER}",
            "offsets.topic.replication.factor": "3"})
    for b in brokers.values():
        b.start()
    yield SecureCluster(connect, brokers, plaintext)
    for b in brokers.values():
        b.kill()


def wait_for_brokers(cluster: SecureCluster, via: int) -> dict[str, Any]:
    def all_three() -> dict[str, Any] | None:
        try:
            md = metadata(cluster.sasl(via), [], BROKER_USER, BROKER_PASSWORD)
        except Exception:
            return None
        return md if len(md["brokers"]) == 3 and md["controller_id"] in (1, 2, 3) else None
    return wait_until(all_three, 30, f"three brokers in broker {via}'s metadata")


def create_replicated_topic(cluster: SecureCluster, topic: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(client_config(cluster.sasl(1), BROKER_USER, BROKER_PASSWORD))
    admin.create_topics([NewTopic(topic, 3, 3)])[topic].result(20)

    def fully_replicated() -> bool:
        md = metadata(cluster.sasl(3), [topic], BROKER_USER, BROKER_PASSWORD)
        parts = md["topics"][0]["partitions"]
        return len(parts) == 3 and all(len(p["isr_nodes"]) == 3 and p["leader_id"] >= 0
                                       for p in parts)
    wait_until(fully_replicated, 30, f"{topic}: three partitions, each with ISR of 3")


def produce(bootstrap: str, user: str, password: str, topic: str, n: int) -> list[Any]:
    """Deliver `n` records with acks=all; the delivery errors (None for a success)."""
    from confluent_kafka import Producer

    results: list[Any] = []
    p = Producer({**client_config(bootstrap, user, password), "acks": "all",
                  "message.timeout.ms": 15000})
    for i in range(n):
        p.produce(topic, f"r{i}".encode(), on_delivery=lambda err, _m: results.append(err))
    p.flush(20)
    return results


def plaintext_request(cluster: SecureCluster, api: ApiKey, body: dict[str, Any],
                      version: int) -> dict[str, Any]:
    """One request to broker 1's PLAINTEXT listener."""
    conn = BrokerConnection("127.0.0.1", cluster.plaintext_ports[1], request_timeout=10)
    try:
        conn.connect()
        return conn.request(api, body, version=version)
    finally:
        conn.close()


def test_secure_cluster(secure_cluster: SecureCluster) -> None:
    cluster = secure_cluster
    # --- every broker sees all three, over SASL, with the SASL endpoints ------------------
    md = wait_for_brokers(cluster, 3)
    assert sorted((b["node_id"], b["port"]) for b in md["brokers"]) == [
        (i, cluster.brokers[i].port) for i in (1, 2, 3)]
    # a PLAINTEXT client is shown the PLAINTEXT endpoints; broker 3 has none: left out
    plain = metadata(f"127.0.0.1:{cluster.plaintext_ports[1]}", [])
    assert sorted((b["node_id"], b["port"]) for b in plain["brokers"]) == [
        (i, cluster.plaintext_ports[i]) for i in (1, 2)]
    described = plaintext_request(cluster, ApiKey.DESCRIBE_CLUSTER, {
        "include_cluster_authorized_operations": False}, 0)
    assert sorted((b["broker_id"], b["port"]) for b in described["brokers"]) == [
        (i, cluster.plaintext_ports[i]) for i in (1, 2)]

    # --- replication over the authenticated inter-broker listener -------------------------
    topic = "payments"
    create_replicated_topic(cluster, topic)
    assert produce(cluster.sasl(2), BROKER_USER, BROKER_PASSWORD, topic, 20) == [None] * 20

    # --- a SCRAM user added on broker 2 logs in on broker 3 ---------------------------------
    for user in ("alice", "bob"):
        r = kafkactl("users", "add", user, "--password", f"{user}-secret",
                     "--mechanism", MECHANISM, "-b", cluster.sasl(2), *cli_auth())
        assert r.returncode == 0, r.stderr
    wait_until(lambda: _logs_in(cluster.sasl(3), "alice"), 10, "alice to log in on broker 3")

    # --- an ACL added through broker 1 is enforced by broker 3 ------------------------------
    r = kafkactl("acls", "add", "--allow-principal", "User:alice", "--operation", "Write",
                 "--operation", "Describe", "--topic", topic, "-b", cluster.sasl(1),
                 *cli_auth())
    assert r.returncode == 0, r.stderr
    wait_until(lambda: _topic_error(cluster.sasl(3), "alice", topic) == 0, 10,
               "broker 3 to allow alice")
    assert _topic_error(cluster.sasl(3), "bob", topic) == TOPIC_AUTHORIZATION_FAILED
    errors = produce(cluster.sasl(3), "bob", "bob-secret", topic, 1)
    assert [e.code() for e in errors] == [TOPIC_AUTHORIZATION_FAILED]
    assert produce(cluster.sasl(3), "alice", "alice-secret", topic, 5) == [None] * 5

    # --- everything survives a restart of every broker --------------------------------------
    cluster.restart_all()
    wait_for_brokers(cluster, 1)
    assert _logs_in(cluster.sasl(1), "bob")
    wait_until(lambda: _topic_error(cluster.sasl(2), "alice", topic) == 0, 20,
               "alice still allowed after the restart")
    assert _topic_error(cluster.sasl(2), "bob", topic) == TOPIC_AUTHORIZATION_FAILED
    assert produce(cluster.sasl(1), "alice", "alice-secret", topic, 3) == [None] * 3
    listed = kafkactl("acls", "list", "--topic", topic, "-b", cluster.sasl(3), *cli_auth())
    assert listed.returncode == 0 and "User:alice" in listed.stdout, listed.stderr


def _logs_in(bootstrap: str, user: str) -> bool:
    try:
        metadata(bootstrap, [], user, f"{user}-secret")
    except Exception:
        return False
    return True


def _topic_error(bootstrap: str, user: str, topic: str) -> int:
    md = metadata(bootstrap, [topic], user, f"{user}-secret")
    return int(md["topics"][0]["error_code"])


def test_users_in_zookeeper_before_any_broker(zookeeper: ZooKeeperServer) -> None:
    """`kafkactl users add|list|delete --zookeeper`: the credentials land in
    /config/users in Kafka's format (a broker's store reads them), listed and deleted by
    mechanism; a bootstrap server as well is refused."""
    connect = f"{zookeeper.connect}/users-{uuid.uuid4().hex[:8]}"
    r = kafkactl("users", "add", "admin", "--password", "pw", "--zookeeper", connect)
    assert r.returncode == 0, r.stderr
    # no warning: the command watched /config/changes and read its own change notification
    # as it closed the session ("reading config change ... failed: ")
    assert r.stderr == "", r.stderr
    r = kafkactl("users", "list", "--zookeeper", connect)
    assert r.stdout.split("\t") == [
        "admin", "SCRAM-SHA-256 (iterations=4096), SCRAM-SHA-512 (iterations=4096)\n"], r
    zk = zkconn.connect(connect, timeout_s=15)
    try:
        store = ZkCredentialStore(zk)
        store.start()
        cred = store.get("admin", "SCRAM-SHA-256")
        assert cred is not None and cred.iterations == 4096
        expected = new_credential(SCRAM_SHA_256, "pw", 4096, salt=cred.salt)
        assert (cred.stored_key, cred.server_key) == (expected.stored_key, expected.server_key)
    finally:
        zkconn.close(zk)
    r = kafkactl("users", "delete", "admin", "--mechanism", "SCRAM-SHA-512",
                 "--zookeeper", connect)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert kafkactl("users", "list", "--zookeeper", connect).stdout == \
        "admin\tSCRAM-SHA-256 (iterations=4096)\n"
    r = kafkactl("users", "delete", "nobody", "--zookeeper", connect)
    assert r.returncode == 1 and "no such SCRAM credentials" in r.stderr
    r = kafkactl("users", "list", "--zookeeper", connect, "-b", "127.0.0.1:9")
    assert r.returncode == 2 and "give one" in r.stderr


def test_tls_inter_broker_listener(zookeeper: ZooKeeperServer, tmp_path: Path) -> None:
    """Two brokers with only an SSL listener requiring client certificates: each uses its
    keystore as client certificate towards the other (principal User:CN=broker, the only
    super user), so the controller's requests and the followers' fetches are authorized
    and a topic with replication factor 2 gets its full ISR."""
    from tests.broker.security.certs import OPENSSL, _leaf, make_certs

    if OPENSSL is None:
        pytest.skip("openssl is not installed")
    certs = make_certs(tmp_path / "certs")
    _leaf(certs.ca.parent, "inter", "/CN=broker",
          "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
          "extendedKeyUsage=serverAuth,clientAuth\n")
    keystore = certs.ca.parent / "inter-keystore.pem"
    keystore.write_text((certs.ca.parent / "inter.key").read_text() +
                        (certs.ca.parent / "inter.pem").read_text())
    connect = f"{zookeeper.connect}/tls-{uuid.uuid4().hex[:8]}"
    brokers = []
    try:
        for i in (1, 2):
            data = tmp_path / f"data-{i}"
            data.mkdir()
            port = free_port()
            b = BrokerProcess(data, port, {
                "listeners": f"SSL://127.0.0.1:{port}", "broker.id": str(i),
                "zookeeper.connect": connect, "zookeeper.session.timeout.ms": "3000",
                "security.inter.broker.protocol": "SSL",
                "ssl.keystore.location": str(keystore), "ssl.truststore.location": str(certs.ca),
                "ssl.client.auth": "required",
                "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                "super.users": "User:CN=broker", "offsets.topic.replication.factor": "2"})
            b.start()
            brokers.append(b)
        security = ClientSecurity.from_properties({
            "security.protocol": "SSL", "ssl.ca.location": str(certs.ca),
            "ssl.certificate.location": str(certs.ca.parent / "inter.pem"),
            "ssl.key.location": str(certs.ca.parent / "inter.key")})

        def request(api_key: ApiKey, body: dict[str, Any], version: int) -> dict[str, Any]:
            conn = BrokerConnection("127.0.0.1", brokers[1].port, security=security,
                                    request_timeout=10)
            try:
                conn.connect()
                return conn.request(api_key, body, version=version)
            finally:
                conn.close()

        def topic_metadata() -> dict[str, Any] | None:
            try:
                md = request(ApiKey.METADATA, {"topics": [{"name": "tls"}],
                                               "allow_auto_topic_creation": False}, 9)
            except Exception:
                return None
            return md if len(md["brokers"]) == 2 else None

        wait_until(topic_metadata, 30, "both brokers in the metadata over TLS")
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({
            "bootstrap.servers": brokers[1].bootstrap, "security.protocol": "SSL",
            "ssl.ca.location": str(certs.ca),
            "ssl.certificate.location": str(certs.ca.parent / "inter.pem"),
            "ssl.key.location": str(certs.ca.parent / "inter.key")})
        admin.create_topics([NewTopic("tls", 2, 2)])["tls"].result(20)

        def replicated() -> bool:
            md = topic_metadata()
            if md is None or md["topics"][0]["error_code"]:
                return False
            parts = md["topics"][0]["partitions"]
            return len(parts) == 2 and all(len(p["isr_nodes"]) == 2 for p in parts)

        wait_until(replicated, 30, "topic tls with an ISR of 2 on both partitions")
    finally:
        for b in brokers:
            b.kill()
