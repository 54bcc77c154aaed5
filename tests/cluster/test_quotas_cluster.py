"""Client quotas in a ZooKeeper cluster (issue 34), with real processes: a quota set through
one broker is written where Kafka keeps it (/config/clients/<id>, /config/users/<user>,
...) with a /config/changes notification, and throttles a client of another broker at once;
a broker that was down meanwhile applies it when it starts; a user's quotas and SCRAM
credentials share the user's znode and neither write loses the other's keys, also when
both are written at once from two places."""

from __future__ import annotations

import json
import socket
import struct
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from kafkactl.broker.client_quotas import CLIENT_ID, USER
from kafkactl.broker.zk_client_quotas import ZkQuotaStore, entity_at, entity_location
from kafkactl.cluster.scram_zk_store import ZkCredentialStore
from kafkactl.protocol import codec
from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.scram import MECHANISMS, new_credential
from tests import zygote
from tests.broker.test_client_quotas import throttled_after
from tests.broker.wire import batch
from tests.cluster.cluster_helpers import Cluster, request, start_cluster
from tests.cluster.test_config_changes import create_topic
from tests.cluster.zk import ZooKeeperServer
from tests.polling import wait_until

NOT_LEADER_OR_FOLLOWER = 6
PROPAGATION_S = 2.0  # the brief: a quota set through one broker applies on another within 2 s


def kafkactl(*args: str) -> Any:
    r = zygote.run(list(args), text=True, timeout=60)
    assert r.returncode == 0, (args, r.stdout, r.stderr)
    return r


@pytest.fixture
def cluster(broker_factory: Any, zookeeper: ZooKeeperServer) -> Cluster:
    return start_cluster(broker_factory, zookeeper, quota_window_num="2",
                         quota_window_size_seconds="1")


@pytest.fixture
def czk(cluster: Cluster) -> Iterator[Any]:
    """A kazoo client in the cluster's chroot."""
    from kazoo.client import KazooClient

    client = KazooClient(hosts=cluster.zookeeper_connect)
    client.start(timeout=15)
    yield client
    client.stop()
    client.close()


def described(port: int) -> dict[str, dict[str, float]]:
    """The quotas as the broker on `port` has applied them: entity path -> values."""
    resp = request(port, ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, {"components": [], "strict": False})
    assert resp["error_code"] == 0, resp
    out = {}
    for e in resp["entries"]:
        parts = {x["entity_type"]: x["entity_name"] for x in e["entity"]}
        key = ",".join(f"{t}={parts[t] or '<default>'}" for t in sorted(parts))
        out[key] = {v["key"]: v["value"] for v in e["values"]}
    return out


def produce_throttle(port: int, topic: str, client_id: str, size: int) -> int | None:
    """One Produce of `size` bytes with `client_id`; the throttle_time_ms answered (None
    when the broker does not lead the partition yet)."""
    body = {"transactional_id": None, "acks": 1, "timeout_ms": 5000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": batch([b"x" * size])}]}]}
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(codec.encode_request(ApiKey.PRODUCE, 9, 1, client_id, body))
        head = s.recv(4, socket.MSG_WAITALL)
        (n,) = struct.unpack(">i", head)
        resp = codec.decode_response(ApiKey.PRODUCE, 9, s.recv(n, socket.MSG_WAITALL))
    code = resp["responses"][0]["partition_responses"][0]["error_code"]
    if code == NOT_LEADER_OR_FOLLOWER:
        return None
    assert code == 0, resp
    return int(resp["throttle_time_ms"])


def leading(port: int, topic: str) -> None:
    wait_until(lambda: produce_throttle(port, topic, "probe", 1) is not None, 30,
               f"the broker on {port} leading {topic}")


def znode_config(czk: Any, path: str) -> dict[str, str]:
    value = json.loads(czk.get(path)[0])
    assert value["version"] == 1
    return dict(value["config"])


def test_a_quota_set_through_one_broker_throttles_on_another_and_reaches_a_stopped_one(
        cluster: Cluster, czk: Any) -> None:
    b1, b2, b3 = (cluster.brokers[i] for i in (1, 2, 3))
    create_topic(cluster, "q", {0: [2]})  # led by broker 2
    leading(b2.port, "q")
    assert produce_throttle(b2.port, "q", "slow", 300_000) == 0  # no quota yet
    b3.stop()
    kafkactl("quotas", "add", "--client-id", "slow", "-c", "producer_byte_rate=100000",
             "-b", b1.bootstrap)
    set_at = time.monotonic()
    # broker 2 throttles the client within PROPAGATION_S: it heard the notification
    wait_until(lambda: (produce_throttle(b2.port, "q", "slow", 300_000) or 0) > 0,
               PROPAGATION_S,
               "broker 2 throttling client slow")
    print(f"broker 2 throttled {time.monotonic() - set_at:.3f} s after the quota was set")
    assert produce_throttle(b2.port, "q", "other", 1000) == 0  # another client: no quota
    # where Kafka keeps it, with its change notification
    assert znode_config(czk, "/config/clients/slow") == {"producer_byte_rate": "100000"}
    changes = [json.loads(czk.get(f"/config/changes/{c}")[0])
               for c in czk.get_children("/config/changes")]
    assert {"version": 2, "entity_path": "clients/slow"} in changes
    # more changes while broker 3 is down: a user, a user's client, the defaults
    kafkactl("quotas", "add", "--user", "alice", "--client-id", "app", "-c",
             "consumer_byte_rate=2048", "-b", b2.bootstrap)
    kafkactl("quotas", "add", "--user-default", "-c", "request_percentage=12.5",
             "-b", b1.bootstrap)
    kafkactl("quotas", "add", "--client-default", "-c", "controller_mutation_rate=3",
             "-b", b1.bootstrap)
    assert znode_config(czk, "/config/users/alice/clients/app") == \
        {"consumer_byte_rate": "2048"}
    assert znode_config(czk, "/config/users/<default>") == {"request_percentage": "12.5"}
    assert znode_config(czk, "/config/clients/<default>") == \
        {"controller_mutation_rate": "3.0"}
    want = {"client-id=slow": {"producer_byte_rate": 100000.0},
            "client-id=app,user=alice": {"consumer_byte_rate": 2048.0},
            "user=<default>": {"request_percentage": 12.5},
            "client-id=<default>": {"controller_mutation_rate": 3.0}}
    wait_until(lambda: described(b1.port) == want and described(b2.port) == want,
               PROPAGATION_S, "every live broker applying the quotas")
    b3.start()  # read at start
    assert described(b3.port) == want
    create_topic(cluster, "q3", {0: [3]})
    leading(b3.port, "q3")
    assert (produce_throttle(b3.port, "q3", "slow", 300_000) or 0) > 0
    # a removal through broker 3 reaches the others
    kafkactl("quotas", "remove", "--client-id", "slow", "-b", b3.bootstrap)
    del want["client-id=slow"]
    wait_until(lambda: all(described(b.port) == want for b in (b1, b2, b3)), PROPAGATION_S,
               "every broker dropping the quota of client slow")
    assert znode_config(czk, "/config/clients/slow") == {}


def test_scram_credentials_and_quotas_of_a_user_keep_each_other(cluster: Cluster,
                                                                czk: Any) -> None:
    b1, b2, b3 = (cluster.brokers[i] for i in (1, 2, 3))
    user = "bob smith"  # sanitized in the path: bob%20smith
    path = "/config/users/bob%20smith"
    kafkactl("users", "add", user, "--password", "pw1", "--mechanism", "SCRAM-SHA-256",
             "-b", b1.bootstrap)
    kafkactl("quotas", "add", "--user", user, "-c", "producer_byte_rate=5000",
             "-b", b2.bootstrap)
    config = znode_config(czk, path)
    assert config["producer_byte_rate"] == "5000" and "SCRAM-SHA-256" in config
    kafkactl("users", "add", user, "--password", "pw2", "--mechanism", "SCRAM-SHA-512",
             "-b", b3.bootstrap)
    config = znode_config(czk, path)
    assert set(config) == {"producer_byte_rate", "SCRAM-SHA-256", "SCRAM-SHA-512"}
    wait_until(lambda: all(described(b.port) == {f"user={user}": {"producer_byte_rate":
                                                                  5000.0}}
                           for b in (b1, b2, b3)), PROPAGATION_S, "the quota on every broker")
    kafkactl("quotas", "remove", "--user", user, "-b", b1.bootstrap)
    assert set(znode_config(czk, path)) == {"SCRAM-SHA-256", "SCRAM-SHA-512"}
    listed = kafkactl("users", "list", "-b", b2.bootstrap).stdout
    assert f"{user}\tSCRAM-SHA-256 (iterations=4096), SCRAM-SHA-512 (iterations=4096)" in listed
    wait_until(lambda: all(described(b.port) == {} for b in (b1, b2, b3)), PROPAGATION_S,
               "the quota gone from every broker")


def test_concurrent_quota_and_scram_writes_of_one_user_lose_nothing(
        zookeeper: ZooKeeperServer) -> None:
    """Two writers (as two brokers would be), each with its own ZooKeeper session, change
    the same user's znode at once: every key each wrote is there at the end."""
    from kazoo.client import KazooClient

    chroot = f"/q-{uuid.uuid4().hex[:8]}"
    root = KazooClient(hosts=zookeeper.connect)
    root.start(timeout=15)
    root.ensure_path(chroot)
    root.stop()
    root.close()
    clients = [KazooClient(hosts=zookeeper.connect + chroot) for _ in range(2)]
    for c in clients:
        c.start(timeout=15)
    try:
        clients[0].ensure_path("/config/changes")
        quotas, creds = ZkQuotaStore(clients[0]), ZkCredentialStore(clients[1])
        quotas.start()
        creds.start()
        rounds = 25
        mechs = sorted(MECHANISMS)
        errors: list[BaseException] = []

        def write_quotas() -> None:
            try:
                for i in range(rounds):
                    quotas.alter(((USER, "carol"),),
                                 [("producer_byte_rate", 1000.0 + i),
                                  ("consumer_byte_rate", 2000.0 + i)])
            except BaseException as e:
                errors.append(e)

        def write_creds() -> None:
            try:
                for i in range(rounds):
                    m = mechs[i % 2]
                    creds.alter({("carol", m): new_credential(MECHANISMS[m], f"p{i}", 4096)},
                                set())
            except BaseException as e:
                errors.append(e)

        threads = [threading.Thread(target=write_quotas), threading.Thread(target=write_creds)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not errors, errors
        config = json.loads(clients[0].get("/config/users/carol")[0])["config"]
        assert config["producer_byte_rate"] == str(1000 + rounds - 1)
        assert config["consumer_byte_rate"] == str(2000 + rounds - 1)
        assert set(mechs) <= set(config)
        # each store's view, kept by the notifications
        wait_until(lambda: quotas.quota("producer_byte_rate", "carol", "any") is not None
                   and creds.get("carol", mechs[0]) is not None
                   and creds.get("carol", mechs[1]) is not None, 10, "both views current")
        assert quotas.quota("producer_byte_rate", "carol", "any") == \
            (1000.0 + rounds - 1, ((USER, "carol"),))
        quotas.stop()
    finally:
        for c in clients:
            c.stop()
            c.close()


@pytest.mark.parametrize("entity", [
    ((USER, "alice"),), ((USER, None),), ((CLIENT_ID, "a/b c"),), ((CLIENT_ID, None),),
    ((CLIENT_ID, "app"), (USER, "alice")), ((CLIENT_ID, None), (USER, None)),
    ((CLIENT_ID, "<default>"), (USER, "*")),
])
def test_entity_paths_round_trip(entity: Any) -> None:
    etype, name = entity_location(entity)
    assert entity_at(etype, name) == entity


def test_a_standalone_brokers_quotas_are_adopted_when_it_joins_a_cluster(
        broker_factory: Any, zookeeper: ZooKeeperServer, zk: Any) -> None:
    """A standalone data dir's client-quotas.json goes into ZooKeeper when the broker
    joins a cluster (a key ZooKeeper has keeps ZooKeeper's value), as its topics, users
    and ACLs do; the file is renamed *.adopted."""
    b = broker_factory()
    kafkactl("quotas", "add", "--client-id", "etl", "-c", "producer_byte_rate=4096",
             "-b", b.bootstrap)
    kafkactl("quotas", "add", "--user", "ann", "-c", "consumer_byte_rate=100",
             "-b", b.bootstrap)
    b.stop()
    chroot = f"/c-{uuid.uuid4().hex[:8]}"
    zk.ensure_path(f"{chroot}/config/users/ann")
    zk.set(f"{chroot}/config/users/ann",
           json.dumps({"version": 1, "config": {"consumer_byte_rate": "999"}}).encode())
    b.overrides.update({"zookeeper.connect": zookeeper.connect + chroot, "broker.id": "0"})
    b.start()
    assert described(b.port) == {"client-id=etl": {"producer_byte_rate": 4096.0},
                                 "user=ann": {"consumer_byte_rate": 999.0}}
    assert json.loads(zk.get(f"{chroot}/config/clients/etl")[0])["config"] == \
        {"producer_byte_rate": "4096"}
    assert not (b.data_dir / "client-quotas.json").exists()
    assert (b.data_dir / "client-quotas.json.adopted").exists()


def test_request_percentage_charges_a_produce_that_waits_for_the_isr(cluster: Cluster) -> None:
    """acks=all on two replicas: the leader appends, then waits for the follower. The
    append is busy time a request_percentage quota charges (as Kafka charges its handler
    threads); a request answered after a wait was charged nothing, so a producer with
    acks=all, today's default, was never throttled (found on a 3-broker cluster)."""
    b1 = cluster.brokers[1]
    create_topic(cluster, "busy-topic", {0: [1, 2]})
    leading(b1.port, "busy-topic")
    kafkactl("quotas", "add", "--client-id", "busy", "-c", "request_percentage=0.5",
             "-b", b1.bootstrap)
    wait_until(lambda: "client-id=busy" in described(b1.port), PROPAGATION_S,
               "the quota applied")
    # 0.5 % of a 2 x 1 s window is 10 ms of busy time: more than the client's few other
    # requests take (Metadata, ApiVersions), less than 2,000 appends
    assert throttled_after(b1.bootstrap, "busy", "all", 2000) < 2000
