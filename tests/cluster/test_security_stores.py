"""The ZooKeeper-backed ACL and SCRAM credential stores on a real ZooKeeper: Kafka's znode
layout and JSON, change notifications seen by another store, concurrent writers losing
nothing, malformed znodes skipped."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from kafkactl.broker.security.acl import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from kafkactl.broker.security.stores import binding_from_znode, binding_to_znode
from kafkactl.cluster import zookeeper as zkconn
from kafkactl.cluster.acl_zk_store import ZkAclStore
from kafkactl.cluster.scram_zk_store import ZkCredentialStore, sanitize
from kafkactl.protocol.scram import SCRAM_SHA_256, SCRAM_SHA_512, new_credential
from tests.cluster.zk import ZooKeeperServer
from tests.polling import wait_until


@pytest.fixture
def clients(zookeeper: ZooKeeperServer) -> Iterator[list[Any]]:
    """Two kazoo clients (two brokers) under one fresh chroot."""
    connect = f"{zookeeper.connect}/s-{uuid.uuid4().hex[:8]}"
    out = [zkconn.connect(connect, timeout_s=15) for _ in range(2)]
    yield out
    for c in out:
        zkconn.close(c)


def acl_store(zk: Any) -> ZkAclStore[AclBinding]:
    store = ZkAclStore(zk, binding_from_znode, binding_to_znode)
    store.start()
    return store


def binding(principal: str, op: AclOperation = AclOperation.READ, name: str = "orders",
            pattern: PatternType = PatternType.LITERAL,
            rtype: ResourceType = ResourceType.TOPIC) -> AclBinding:
    return AclBinding.create(rtype, name, pattern, principal, "*", op, AclPermissionType.ALLOW)


def test_acls_in_kafkas_znodes_and_seen_by_another_broker(clients: list[Any]) -> None:
    zk1, zk2 = clients
    one, two = acl_store(zk1), acl_store(zk2)
    literal = binding("User:alice")
    prefixed = binding("User:bob", AclOperation.WRITE, "logs-", PatternType.PREFIXED)
    cluster = binding("User:broker", AclOperation.CLUSTER_ACTION, "kafka-cluster",
                      rtype=ResourceType.CLUSTER)
    one.add([literal, prefixed, cluster])

    data, _ = zk1.get("/kafka-acl/Topic/orders")
    assert json.loads(data) == {"version": 1, "acls": [
        {"principal": "User:alice", "permissionType": "Allow", "operation": "Read",
         "host": "*"}]}
    data, _ = zk1.get("/kafka-acl-extended/prefixed/Topic/logs-")
    assert json.loads(data)["acls"][0]["operation"] == "Write"
    data, _ = zk1.get("/kafka-acl/Cluster/kafka-cluster")
    assert json.loads(data)["acls"][0]["operation"] == "ClusterAction"
    changes = sorted(zk1.get_children("/kafka-acl-changes"))
    assert all(c.startswith("acl_changes_") for c in changes)
    assert {zk1.get(f"/kafka-acl-changes/{c}")[0] for c in changes} == {
        b"Topic:orders", b"Cluster:kafka-cluster"}
    (ext,) = zk1.get_children("/kafka-acl-extended-changes")
    assert json.loads(zk1.get(f"/kafka-acl-extended-changes/{ext}")[0]) == {
        "version": 1, "resourceType": "TOPIC", "name": "logs-", "patternType": "PREFIXED"}

    assert one.bindings() == {literal, prefixed, cluster}
    wait_until(lambda: two.bindings() == {literal, prefixed, cluster}, 10,
               "the other broker to see the new ACLs")
    two.remove([literal])
    assert not zk1.exists("/kafka-acl/Topic/orders")  # an empty resource's znode goes
    wait_until(lambda: one.bindings() == {prefixed, cluster}, 10, "the removal on broker 1")
    # a third broker starting now loads them all
    assert acl_store(zk2).bindings() == {prefixed, cluster}


def test_concurrent_adds_on_two_brokers_lose_nothing(clients: list[Any]) -> None:
    stores = [acl_store(zk) for zk in clients]
    per_store = 15
    errors: list[BaseException] = []

    def add_many(i: int) -> None:
        try:
            for n in range(per_store):
                stores[i].add([binding(f"User:u{i}-{n}")])
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=add_many, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    data, _ = clients[0].get("/kafka-acl/Topic/orders")
    assert len(json.loads(data)["acls"]) == 2 * per_store
    for s in stores:
        wait_until(lambda s=s: len(s.bindings()) == 2 * per_store, 10, "every ACL everywhere")


def test_malformed_acl_znodes_are_skipped(clients: list[Any]) -> None:
    zk = clients[0]
    zk.create("/kafka-acl/Topic/bad", b"{not json", makepath=True)
    zk.create("/kafka-acl/Topic/half", json.dumps({"version": 1, "acls": [
        {"principal": "User:a", "permissionType": "Allow", "operation": "Read", "host": "*"},
        {"principal": "User:b", "permissionType": "Allow", "operation": "Fly", "host": "*"},
        {"principal": "User:c"}]}).encode(), makepath=True)
    zk.create("/kafka-acl-changes/acl_changes_", b"no separator", sequence=True,
              makepath=True)
    store = acl_store(zk)
    assert store.bindings() == {binding("User:a", name="half")}


def test_scram_credentials_in_config_users(clients: list[Any]) -> None:
    zk1, zk2 = clients
    one, two = ZkCredentialStore(zk1), ZkCredentialStore(zk2)
    one.start()
    two.start()
    zk1.create("/config/users/alice", json.dumps(
        {"version": 1, "config": {"producer_byte_rate": "1024"}}).encode(), makepath=True)
    cred = new_credential(SCRAM_SHA_256, "secret")
    one.alter({("alice", "SCRAM-SHA-256"): cred, ("bob smith*", "SCRAM-SHA-512"):
               new_credential(SCRAM_SHA_512, "pw")}, set())

    value = json.loads(zk1.get("/config/users/alice")[0])
    assert value == {"version": 1, "config": {"producer_byte_rate": "1024",
                                              "SCRAM-SHA-256": cred.to_text()}}
    assert sanitize("bob smith*") == "bob%20smith%2A"
    assert zk1.exists("/config/users/bob%20smith%2A")
    notes = [json.loads(zk1.get(f"/config/changes/{c}")[0])
             for c in sorted(zk1.get_children("/config/changes"))]
    assert {"version": 2, "entity_path": "users/alice"} in notes
    assert {"version": 2, "entity_path": "users/bob%20smith%2A"} in notes

    # one notification per user: the other store applies them one after the other
    wait_until(lambda: two.get("alice", "SCRAM-SHA-256") == cred, 10,
               "the other broker to see alice")
    wait_until(lambda: two.get("bob smith*", "SCRAM-SHA-512") is not None, 10,
               "the other broker to see bob smith*")
    two.alter({}, {("alice", "SCRAM-SHA-256")})
    wait_until(lambda: one.get("alice", "SCRAM-SHA-256") is None, 10, "the deletion")
    assert json.loads(zk1.get("/config/users/alice")[0])["config"] == {
        "producer_byte_rate": "1024"}
    fresh = ZkCredentialStore(zk2)
    fresh.start()
    assert set(fresh.users()) == {"bob smith*"}


def test_a_standalone_data_dirs_users_and_acls_are_adopted(clients: list[Any],
                                                           tmp_path: Any) -> None:
    from kafkactl.broker.config import BrokerConfig
    from kafkactl.broker.security import acl_store, credential_store
    from kafkactl.broker.security.stores import security_stores

    zk = clients[0]
    local_users = credential_store.FileCredentialStore(tmp_path / credential_store.FILE_NAME)
    local_users.alter({("carol", "SCRAM-SHA-256"): new_credential(SCRAM_SHA_256, "c"),
                       ("dave", "SCRAM-SHA-256"): new_credential(SCRAM_SHA_256, "local")},
                      set())
    acl_store.FileAclStore(tmp_path / acl_store.FILE_NAME).add([binding("User:carol")])
    in_zk = new_credential(SCRAM_SHA_256, "cluster")
    ZkCredentialStore(zk).alter({("dave", "SCRAM-SHA-256"): in_zk}, set())

    cfg = BrokerConfig.build(overrides=[
        "authorizer.class.name=kafka.security.authorizer.AclAuthorizer"])
    credentials, authorizer = security_stores(cfg, tmp_path, zk)
    assert authorizer is not None
    assert authorizer.store.bindings() == {binding("User:carol")}
    assert credentials.get("carol", "SCRAM-SHA-256") is not None
    assert credentials.get("dave", "SCRAM-SHA-256") == in_zk  # ZooKeeper's stays
    assert json.loads(zk.get("/kafka-acl/Topic/orders")[0])["acls"][0]["principal"] == \
        "User:carol"
    assert not (tmp_path / acl_store.FILE_NAME).exists()
    assert (tmp_path / f"{acl_store.FILE_NAME}.adopted").exists()
    assert (tmp_path / f"{credential_store.FILE_NAME}.adopted").exists()
