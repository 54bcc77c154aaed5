"""Authorized operations (KIP-430) with an authorizer: Metadata, DescribeCluster and
DescribeGroups report what the connection's principal may do, seen by confluent-kafka's
AdminClient as two users with different ACLs and a super user; not asked = Kafka's sentinel."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kafkactl.protocol.api_keys import ApiKey
from tests.broker.security.certs import Certs
from tests.broker.security.conftest import (
    ACL_AUTHORIZER,
    PASSWORDS,
    SecureBroker,
    add_scram_users,
    start_secure,
)
from tests.broker.wire import Wire

AUTHORIZER = ACL_AUTHORIZER
TOPIC, GROUP, CLUSTER = 2, 3, 4
LITERAL = 3
READ, WRITE, DESCRIBE, DESCRIBE_CONFIGS = 3, 4, 8, 10
OMITTED = -(1 << 31)


def _acl(rtype: int, name: str, principal: str, op: int) -> dict[str, object]:
    return {"resource_type": rtype, "resource_name": name, "resource_pattern_type": LITERAL,
            "principal": principal, "host": "*", "operation": op, "permission_type": 3}


@pytest.fixture(scope="module")
def ops_broker(certs: Certs, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    sb = start_secure(tmp_path_factory.mktemp("ops"), certs, **AUTHORIZER)
    add_scram_users(sb.bootstrap("PLAINTEXT"), {"alice": PASSWORDS["alice"],
                                                "carol": PASSWORDS["carol"]})
    with Wire(sb.bootstrap("PLAINTEXT")) as w:
        assert w.create_topic("orders")["error_code"] == 0
        r = w.request(ApiKey.CREATE_ACLS, 3, {"creations": [
            _acl(TOPIC, "orders", "User:alice", READ),
            _acl(TOPIC, "orders", "User:alice", WRITE),
            _acl(CLUSTER, "kafka-cluster", "User:alice", DESCRIBE_CONFIGS),
            _acl(GROUP, "reports", "User:alice", READ),
            _acl(TOPIC, "orders", "User:carol", DESCRIBE),
            _acl(GROUP, "reports", "User:carol", DESCRIBE),
        ]})
        assert [x["error_code"] for x in r["results"]] == [0] * 6, r
        # the group exists once it has committed offsets (ANONYMOUS is a super user here),
        # after the FindCoordinator every client sends first
        found = w.request(ApiKey.FIND_COORDINATOR, 1, {"key": "reports", "key_type": 0})
        assert found["error_code"] == 0, found
        r = w.request(ApiKey.OFFSET_COMMIT, 2, {
            "group_id": "reports", "generation_id": -1, "member_id": "",
            "retention_time_ms": -1,
            "topics": [{"name": "orders", "partitions": [
                {"partition_index": 0, "committed_offset": 0, "committed_metadata": ""}]}]})
        assert r["topics"][0]["partitions"][0]["error_code"] == 0, r
    yield sb
    sb.broker.kill()


def _admin(sb: SecureBroker, user: str) -> object:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": sb.bootstrap("SASL_PLAINTEXT"),
                        "security.protocol": "SASL_PLAINTEXT",
                        "sasl.mechanism": "PLAIN" if user == "admin" else "SCRAM-SHA-256",
                        "sasl.username": user, "sasl.password": PASSWORDS[user]})


def _names(ops: list[object] | None) -> set[str]:
    return {op.name for op in ops or []}  # type: ignore[attr-defined]


TOPIC_ALL = {"READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "DESCRIBE_CONFIGS",
             "ALTER_CONFIGS"}
CLUSTER_ALL = {"CREATE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS",
               "IDEMPOTENT_WRITE", "ALTER", "DESCRIBE"}


@pytest.mark.parametrize(("user", "expected"), [
    ("alice", {"READ", "WRITE", "DESCRIBE"}),  # Read and Write imply Describe
    ("carol", {"DESCRIBE"}),
    ("admin", TOPIC_ALL),
])
def test_topic_operations_per_principal(ops_broker: SecureBroker, user: str,
                                        expected: set[str]) -> None:
    from confluent_kafka import TopicCollection

    admin = _admin(ops_broker, user)
    futures = admin.describe_topics(  # type: ignore[attr-defined]
        TopicCollection(["orders"]), include_authorized_operations=True, request_timeout=10)
    desc = futures["orders"].result(15)
    assert _names(desc.authorized_operations) == expected


@pytest.mark.parametrize(("user", "expected"), [
    # alice may DescribeConfigs the cluster but not Describe it: Kafka answers 0 then
    # (AuthHelper.computeDescribeClusterResponse), no operation at all
    ("alice", set()),
    ("carol", set()),
    ("admin", CLUSTER_ALL),
])
def test_cluster_operations_per_principal(ops_broker: SecureBroker, user: str,
                                          expected: set[str]) -> None:
    admin = _admin(ops_broker, user)
    desc = admin.describe_cluster(  # type: ignore[attr-defined]
        include_authorized_operations=True, request_timeout=10).result(15)
    assert _names(desc.authorized_operations) == expected


@pytest.mark.parametrize(("user", "expected"), [
    ("alice", {"READ", "DESCRIBE"}),
    ("carol", {"DESCRIBE"}),
    ("admin", {"READ", "DESCRIBE", "DELETE"}),
])
def test_group_operations_per_principal(ops_broker: SecureBroker, user: str,
                                        expected: set[str]) -> None:
    admin = _admin(ops_broker, user)
    futures = admin.describe_consumer_groups(  # type: ignore[attr-defined]
        ["reports"], include_authorized_operations=True, request_timeout=10)
    desc = futures["reports"].result(15)
    assert _names(desc.authorized_operations) == expected


def test_operations_over_the_wire(ops_broker: SecureBroker) -> None:
    """Not asked: the sentinel; a group the principal may not Describe: refused."""
    with Wire(ops_broker.bootstrap("PLAINTEXT")) as w:  # ANONYMOUS: a super user
        r = w.request(ApiKey.METADATA, 10, {
            "topics": [{"name": "orders"}], "allow_auto_topic_creation": False,
            "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False})
        assert r["topics"][0]["topic_authorized_operations"] == OMITTED
        assert r["cluster_authorized_operations"] == OMITTED
        r = w.request(ApiKey.DESCRIBE_GROUPS, 5, {"groups": ["reports"],
                                                  "include_authorized_operations": False})
        assert r["groups"][0]["authorized_operations"] == OMITTED
    from confluent_kafka import TopicCollection

    admin = _admin(ops_broker, "admin")
    desc = admin.describe_topics(  # type: ignore[attr-defined]
        TopicCollection(["orders"]), include_authorized_operations=False,
        request_timeout=10)["orders"].result(15)
    assert not desc.authorized_operations
    carol = _admin(ops_broker, "carol")
    groups = carol.describe_consumer_groups(  # type: ignore[attr-defined]
        ["other"], include_authorized_operations=True, request_timeout=10)
    with pytest.raises(Exception, match="GROUP_AUTHORIZATION_FAILED|[Aa]uthoriz"):
        groups["other"].result(15)
