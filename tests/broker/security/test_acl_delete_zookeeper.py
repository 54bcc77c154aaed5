"""DeleteAcls in a ZooKeeper cluster (ACLs in Kafka's /kafka-acl znodes): a binding that
two filters match is reported once, under the first filter, as Kafka's
AclAuthorizer.deleteAcls reports it; kafkactl listed it under every matching filter. Both
are removed from ZooKeeper."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from kafkactl.cluster import zookeeper as zkconn
from tests.cluster.cluster_helpers import metadata
from tests.polling import wait_until

pytest.importorskip("confluent_kafka")


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from tests.cluster.zk import ZooKeeperServer, available

    reason = available()
    if reason is not None:
        pytest.skip(reason)
    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper"))
    server.start()
    yield server
    server.stop()


def test_delete_acls_reports_each_binding_once_in_a_zookeeper_cluster(
        broker_factory: Any, zookeeper: Any) -> None:
    from confluent_kafka.admin import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    chroot = f"/acl-del-{uuid.uuid4().hex[:8]}"
    broker = broker_factory(zookeeper_connect=zookeeper.connect + chroot, broker_id="1",
                            authorizer_class_name="kafka.security.authorizer.AclAuthorizer",
                            super_users="User:ANONYMOUS")
    # librdkafka sends CreateAcls and DeleteAcls to the controller: wait until it is known
    wait_until(lambda: metadata(broker.port)["controller_id"] == 1, 30, "the controller known")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    created = admin.create_acls([
        AclBinding(ResourceType.TOPIC, name, ResourcePatternType.LITERAL, "User:dan", "*",
                   AclOperation.READ, AclPermissionType.ALLOW) for name in ("d1", "d2")])
    for future in created.values():
        future.result(30)
    every = AclBindingFilter(ResourceType.ANY, None,  # type: ignore[arg-type]
                             ResourcePatternType.ANY, "User:dan",
                             None,  # type: ignore[arg-type]
                             AclOperation.ANY, AclPermissionType.ANY)
    d1 = AclBindingFilter(ResourceType.TOPIC, "d1", ResourcePatternType.LITERAL,
                          None, None,  # type: ignore[arg-type]
                          AclOperation.ANY, AclPermissionType.ANY)
    results = admin.delete_acls([every, d1])
    assert sorted(b.name for b in results[every].result(30)) == ["d1", "d2"]
    assert results[d1].result(30) == []
    assert admin.describe_acls(every).result(30) == []
    zk = zkconn.connect(zookeeper.connect + chroot, timeout_s=15)
    try:
        for name in ("d1", "d2"):  # no entry left (an emptied resource's znode goes too)
            path = f"/kafka-acl/Topic/{name}"
            assert not zk.exists(path) or b"User:dan" not in zk.get(path)[0], path
    finally:
        zkconn.close(zk)
