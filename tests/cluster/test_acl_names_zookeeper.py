"""ACL resource names that are not znode names, in a ZooKeeper cluster. Kafka's
AclAuthorizer refuses '/' ("ACL binding contains invalid resource name"); kafkactl took
them and wrote `a/b` as nested znodes, `/` onto /kafka-acl/Topic itself (never removable),
and `x/../../y` raised a ValueError that closed the client's connection. Now: refused with
INVALID_REQUEST, nothing written, the connection kept; and a store write of such a name
(an old standalone acls.json adopted into ZooKeeper) writes no znode."""

from __future__ import annotations

import uuid
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
from tests.cluster.cluster_helpers import metadata
from tests.cluster.zk import ZooKeeperServer
from tests.polling import wait_until

pytest.importorskip("confluent_kafka")

BAD_NAMES = ["a/b", "/", "x/../../y", ".."]


def _binding(name: str, *, stored: bool = False) -> Any:
    from confluent_kafka.admin import AclBinding as Acl
    from confluent_kafka.admin import AclOperation as Op
    from confluent_kafka.admin import AclPermissionType as Perm
    from confluent_kafka.admin import ResourcePatternType as Pattern
    from confluent_kafka.admin import ResourceType as Type

    return Acl(Type.TOPIC, name, Pattern.LITERAL, "User:x", "*", Op.READ, Perm.ALLOW)


def test_resource_names_that_are_not_znodes_are_refused(
        broker_factory: Any, zookeeper: ZooKeeperServer) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AclBindingFilter, AdminClient
    from confluent_kafka.admin import AclOperation as Op
    from confluent_kafka.admin import AclPermissionType as Perm
    from confluent_kafka.admin import ResourcePatternType as Pattern
    from confluent_kafka.admin import ResourceType as Type

    chroot = f"/acl-{uuid.uuid4().hex[:8]}"
    broker = broker_factory(zookeeper_connect=zookeeper.connect + chroot, broker_id="1",
                            authorizer_class_name="kafka.security.authorizer.AclAuthorizer",
                            super_users="User:ANONYMOUS")
    # librdkafka sends CreateAcls to the controller: wait until Metadata names it
    wait_until(lambda: metadata(broker.port)["controller_id"] == 1, 30, "the controller known")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    results = admin.create_acls([_binding(n) for n in [*BAD_NAMES, "fine"]])
    for name in BAD_NAMES:
        with pytest.raises(KafkaException) as e:
            results[next(b for b in results if b.name == name)].result(30)
        assert e.value.args[0].name() == "INVALID_REQUEST", name
    results[next(b for b in results if b.name == "fine")].result(30)
    # the client's connection was not closed: the same client still gets answers
    found = admin.describe_acls(AclBindingFilter(
        Type.ANY, None, Pattern.ANY, "User:x", None,  # type: ignore[arg-type]
        Op.ANY, Perm.ANY)).result(30)
    assert [b.name for b in found] == ["fine"]

    zk = zkconn.connect(zookeeper.connect + chroot, timeout_s=15)
    try:
        assert zk.get_children("/kafka-acl/Topic") == ["fine"]
        assert not zk.get("/kafka-acl/Topic")[0]  # nothing written onto the type's znode
        assert not zk.exists("/y") and not zk.exists("/kafka-acl/y")
    finally:
        zkconn.close(zk)
    assert "Traceback" not in broker.log()


def test_the_store_writes_no_znode_for_such_a_name(zookeeper: ZooKeeperServer) -> None:
    chroot = f"/acl-{uuid.uuid4().hex[:8]}"
    zk = zkconn.connect(zookeeper.connect + chroot, timeout_s=15)
    try:
        store = ZkAclStore(zk, binding_from_znode, binding_to_znode)
        store.start()
        # as an acls.json an older kafkactl wrote would load them
        old = [AclBinding.create(ResourceType.TOPIC, name, PatternType.LITERAL, "User:x", "*",
                                 AclOperation.READ, AclPermissionType.ALLOW, stored=True)
               for name in BAD_NAMES]
        fine = AclBinding.create(ResourceType.TOPIC, "fine", PatternType.LITERAL, "User:x",
                                 "*", AclOperation.READ, AclPermissionType.ALLOW)
        store.add([*old, fine])
        assert zk.get_children("/kafka-acl/Topic") == ["fine"]
        assert not zk.get("/kafka-acl/Topic")[0]
        assert store.bindings() == {fine}
    finally:
        zkconn.close(zk)
