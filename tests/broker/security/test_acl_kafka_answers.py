"""Authorizer answers where kafkactl differed from Kafka, on a live broker whose PLAINTEXT
listener's principal (User:ANONYMOUS) has only the ACLs a test gives it, with a SASL
listener on 127.0.0.1 (admin, a super user, and bob) and one on [::1]:

- an IPv6 client's host is compared (and audited) as Java's InetAddress.getHostAddress()
  writes it: an ACL for host 0:0:0:0:0:0:0:1 lets a client on ::1 in, one written `::1`
  does not (Kafka's AclAuthorizer compares the strings);
- without Describe on the cluster, the cluster's authorized operations are 0 (Metadata v8-10
  and DescribeCluster), and a topic refused with TOPIC_AUTHORIZATION_FAILED carries the
  "not asked" sentinel (Kafka fills them only for the topics it answers);
- DeleteAcls reports a binding two filters match once, under the first
  (AclAuthorizer.deleteAcls);
- DescribeUserScramCredentials refused: one result per requested user carrying the error
  (DescribeUserScramCredentialsRequest.getErrorResponse)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest

from kafkactl.protocol.api_keys import ApiKey
from tests.broker.wire import Wire
from tests.conftest import BrokerProcess, free_port
from tests.polling import wait_until
from tests.sockets import ipv6_loopback

pytest.importorskip("confluent_kafka")

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_admin="admin-secret" user_bob="bob-secret";')
OMITTED = -(1 << 31)
CLUSTER_AUTHORIZATION_FAILED, TOPIC_AUTHORIZATION_FAILED = 31, 29
# AclOperation codes
DELETE, CREATE, DESCRIBE, DESCRIBE_CONFIGS = 6, 7, 8, 10


class Broker:
    def __init__(self, process: BrokerProcess, sasl_port: int, v6_port: int) -> None:
        self.process, self.sasl_port, self.v6_port = process, sasl_port, v6_port

    @property
    def plaintext(self) -> str:
        return self.process.bootstrap

    def client_conf(self, user: str, *, ipv6: bool = False) -> dict[str, Any]:
        where = f"[::1]:{self.v6_port}" if ipv6 else f"127.0.0.1:{self.sasl_port}"
        return {"bootstrap.servers": where, "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN", "sasl.username": user,
                "sasl.password": f"{user}-secret"}

    def admin(self, user: str = "admin", *, ipv6: bool = False) -> Any:
        from confluent_kafka.admin import AdminClient

        return AdminClient(self.client_conf(user, ipv6=ipv6))


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    v6 = ipv6_loopback()
    data = tmp_path_factory.mktemp("acl-answers") / "data"
    data.mkdir()
    port, sasl_port, v6_port = free_port(), free_port(), free_port()
    listeners = [f"PLAINTEXT://127.0.0.1:{port}", f"SASL_PLAINTEXT://127.0.0.1:{sasl_port}"]
    if v6:
        listeners.append(f"SASL6://[::1]:{v6_port}")
    b = BrokerProcess(data, port, {
        "listeners": ",".join(listeners),
        "listener.security.protocol.map":
            "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL6:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "listener.name.sasl6.plain.sasl.jaas.config": JAAS,
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:admin",
    })
    b.start()
    if v6:
        def listening() -> bool:
            try:
                socket.create_connection(("::1", v6_port), timeout=1).close()
                return True
            except OSError:
                return False
        wait_until(listening, 20, "the [::1] listener")
    yield Broker(b, sasl_port, v6_port if v6 else 0)
    b.kill()


def _acl(resource_type: str, name: str, principal: str, operation: str, *,
         host: str = "*", pattern: str = "LITERAL", permission: str = "ALLOW") -> Any:
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    return AclBinding(getattr(ResourceType, resource_type), name,
                      getattr(ResourcePatternType, pattern), principal, host,
                      getattr(AclOperation, operation), getattr(AclPermissionType, permission))


def _create_acls(b: Broker, *acls: Any) -> None:
    admin = b.admin()  # kept until the futures are done: they fail once it is collected
    for future in admin.create_acls(list(acls)).values():
        future.result(30)


def _delete_acls_of(b: Broker, principal: str) -> None:
    from confluent_kafka.admin import (
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    flt = AclBindingFilter(ResourceType.ANY, None,  # type: ignore[arg-type]
                           ResourcePatternType.ANY, principal,
                           None,  # type: ignore[arg-type]
                           AclOperation.ANY, AclPermissionType.ANY)
    admin = b.admin()
    for future in admin.delete_acls([flt]).values():
        future.result(30)


def _create_topics(b: Broker, *names: str) -> None:
    from confluent_kafka.admin import NewTopic

    admin = b.admin()
    for future in admin.create_topics([NewTopic(n, 1, 1) for n in names]).values():
        future.result(30)


def _topic_error(b: Broker, user: str, topic: str, *, ipv6: bool) -> str | None:
    md = b.admin(user, ipv6=ipv6).list_topics(topic=topic, timeout=15)
    error = md.topics[topic].error
    return None if error is None else error.name()


# ---- 1. IPv6 hosts ------------------------------------------------------------------------
def test_an_ipv6_clients_host_is_compared_as_java_writes_it(broker: Broker) -> None:
    if not broker.v6_port:
        pytest.skip("no IPv6 loopback")
    _create_topics(broker, "v6-topic")
    try:
        # Java's form: the client on ::1 may Describe the topic
        _create_acls(broker, _acl("TOPIC", "v6-topic", "User:bob", "DESCRIBE",
                                  host="0:0:0:0:0:0:0:1"))
        assert _topic_error(broker, "bob", "v6-topic", ipv6=True) is None
        _delete_acls_of(broker, "User:bob")
        # written "::1": matches no client, as in Kafka (and a warning says so)
        _create_acls(broker, _acl("TOPIC", "v6-topic", "User:bob", "DESCRIBE", host="::1"))
        assert _topic_error(broker, "bob", "v6-topic", ipv6=True) == \
            "TOPIC_AUTHORIZATION_FAILED"
        denied = ("INFO kafkactl.authorizer: Principal = User:bob is Denied Operation = "
                  "Describe from host = 0:0:0:0:0:0:0:1 on resource = "
                  "Topic:LITERAL:v6-topic for request = Metadata")
        wait_until(lambda: denied in broker.process.log(), 10, "the denial in the log")
        assert ("ACL host ::1 matches no client: Kafka compares a client's address written "
                "as Java writes it (0:0:0:0:0:0:0:1)") in broker.process.log()
        # an IPv4 client is unaffected
        _create_acls(broker, _acl("TOPIC", "v6-topic", "User:bob", "DESCRIBE",
                                  host="127.0.0.1"))
        assert _topic_error(broker, "bob", "v6-topic", ipv6=False) is None
    finally:
        _delete_acls_of(broker, "User:bob")


# ---- 2. authorized operations -------------------------------------------------------------
def _wire_acls(b: Broker, *acls: tuple[int, str, int, int]) -> None:
    """(resource type, name, pattern type, operation) ALLOW bindings for User:ANONYMOUS."""
    _create_acls(b, *(_acl({2: "TOPIC", 4: "BROKER"}[rt], name, "User:ANONYMOUS",
                           {CREATE: "CREATE", DESCRIBE: "DESCRIBE", DELETE: "DELETE",
                            DESCRIBE_CONFIGS: "DESCRIBE_CONFIGS"}[op],
                           pattern={3: "LITERAL", 4: "PREFIXED"}[pt])
                      for rt, name, pt, op in acls))


def _metadata_v10(w: Wire, *topics: str) -> dict[str, Any]:
    return w.request(ApiKey.METADATA, 10, {
        "topics": [{"name": t} for t in topics], "allow_auto_topic_creation": True,
        "include_cluster_authorized_operations": True,
        "include_topic_authorized_operations": True})


def test_authorized_operations_need_describe_on_the_cluster(broker: Broker) -> None:
    _create_topics(broker, "ops-seen", "ops-hidden")
    try:
        _wire_acls(broker, (2, "ops-seen", 3, DESCRIBE), (2, "ops-auto-", 4, DESCRIBE),
                   (4, "kafka-cluster", 3, CREATE), (4, "kafka-cluster", 3, DESCRIBE_CONFIGS))
        with Wire(broker.plaintext) as w:  # User:ANONYMOUS
            r = _metadata_v10(w, "ops-seen", "ops-hidden")
            described = w.request(ApiKey.DESCRIBE_CLUSTER, 0,
                                  {"include_cluster_authorized_operations": True})
        assert described["error_code"] == 0
        # no Describe on the cluster: 0 for it; the refused topic: the sentinel
        assert {"metadata cluster": r["cluster_authorized_operations"],
                "describe cluster": described["cluster_authorized_operations"],
                **{t["name"]: (t["error_code"], t["topic_authorized_operations"])
                   for t in r["topics"]}} == {
            "metadata cluster": 0, "describe cluster": 0,
            "ops-seen": (0, 1 << DESCRIBE),
            "ops-hidden": (TOPIC_AUTHORIZATION_FAILED, OMITTED)}
        # Create on the cluster covers auto-creation; without it, and with Describe but
        # not Create on the topic, the refused auto-creation carries the sentinel too
        _delete_acls_of(broker, "User:ANONYMOUS")
        _wire_acls(broker, (2, "ops-auto-", 4, DESCRIBE))
        with Wire(broker.plaintext) as w:
            r = _metadata_v10(w, "ops-auto-new")
        (t,) = r["topics"]
        assert (t["error_code"], t["topic_authorized_operations"]) == \
            (TOPIC_AUTHORIZATION_FAILED, OMITTED)
        # with Describe on the cluster: every cluster operation it may do
        _wire_acls(broker, (4, "kafka-cluster", 3, DESCRIBE),
                   (4, "kafka-cluster", 3, DESCRIBE_CONFIGS))
        with Wire(broker.plaintext) as w:
            want = 1 << DESCRIBE | 1 << DESCRIBE_CONFIGS
            assert _metadata_v10(w, "ops-seen")["cluster_authorized_operations"] == want
            r = w.request(ApiKey.DESCRIBE_CLUSTER, 0,
                          {"include_cluster_authorized_operations": True})
            assert r["cluster_authorized_operations"] == want
    finally:
        _delete_acls_of(broker, "User:ANONYMOUS")


def test_describe_cluster_by_a_real_client_without_describe(broker: Broker) -> None:
    """confluent-kafka's describe_cluster: bob may Create and DescribeConfigs the cluster
    but not Describe it: Kafka's 0 (no operations), where kafkactl listed the two."""
    try:
        _create_acls(broker, _acl("BROKER", "kafka-cluster", "User:bob", "CREATE"),
                     _acl("BROKER", "kafka-cluster", "User:bob", "DESCRIBE_CONFIGS"))
        bob = broker.admin("bob")
        desc = bob.describe_cluster(
            include_authorized_operations=True, request_timeout=15).result(30)
        assert not desc.authorized_operations, desc.authorized_operations
        _create_acls(broker, _acl("BROKER", "kafka-cluster", "User:bob", "DESCRIBE"))
        desc = bob.describe_cluster(
            include_authorized_operations=True, request_timeout=15).result(30)
        assert {op.name for op in desc.authorized_operations} == \
            {"CREATE", "DESCRIBE_CONFIGS", "DESCRIBE"}
    finally:
        _delete_acls_of(broker, "User:bob")


# ---- 3. DeleteAcls ------------------------------------------------------------------------
def test_delete_acls_reports_a_binding_under_the_first_filter_only(broker: Broker) -> None:
    from confluent_kafka.admin import (
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    _create_acls(broker, _acl("TOPIC", "del-1", "User:dan", "READ"),
                 _acl("TOPIC", "del-2", "User:dan", "READ"))
    every = AclBindingFilter(ResourceType.ANY, None,  # type: ignore[arg-type]
                             ResourcePatternType.ANY, "User:dan",
                             None,  # type: ignore[arg-type]
                             AclOperation.ANY, AclPermissionType.ANY)
    first = AclBindingFilter(ResourceType.TOPIC, "del-1", ResourcePatternType.MATCH,
                             None, None, AclOperation.ANY,  # type: ignore[arg-type]
                             AclPermissionType.ANY)
    admin = broker.admin()
    results = admin.delete_acls([every, first])
    assert sorted(b.name for b in results[every].result(30)) == ["del-1", "del-2"]
    assert results[first].result(30) == []
    assert admin.describe_acls(every).result(30) == []  # both removed


# ---- 4. DescribeUserScramCredentials refused ----------------------------------------------
def test_describe_scram_credentials_refused_names_each_requested_user(
        broker: Broker) -> None:
    """As Kafka's getErrorResponse: the error, and one result per requested user carrying
    it (user left ""); none when every user was asked for. (confluent-kafka 2.16 is not
    used: librdkafka frees a string it did not allocate on any request-level error here,
    whatever the results, against Kafka too.)"""
    with Wire(broker.plaintext) as w:  # User:ANONYMOUS: no Describe on the cluster
        r = w.request(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0,
                      {"users": [{"name": "bob"}, {"name": "nobody"}]})
        assert r["error_code"] == CLUSTER_AUTHORIZATION_FAILED
        assert [(x["user"], x["error_code"], x["credential_infos"]) for x in r["results"]] \
            == [("", CLUSTER_AUTHORIZATION_FAILED, [])] * 2
        r = w.request(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, {"users": None})
        assert r["error_code"] == CLUSTER_AUTHORIZATION_FAILED and r["results"] == []


def test_created_topics_configs_need_describe_configs_and_ids_need_describe(
        broker: Broker) -> None:
    """KIP-525: CreateTopics v5+ returns a created topic's configs and counts only to a
    principal that may DescribeConfigs it, else topic_config_error_code 29 (KafkaApis);
    DeleteTopics by topic id without Describe (denied; Delete would imply it) keeps the
    name unsaid and answers 29, the topic kept."""
    try:
        _wire_acls(broker, (2, "kip525-", 4, CREATE), (2, "kip525-seen", 3, DESCRIBE_CONFIGS),
                   (2, "kip525-", 4, DELETE))
        _create_acls(broker, _acl("TOPIC", "kip525-hidden", "User:ANONYMOUS", "DESCRIBE",
                                  permission="DENY"))
        with Wire(broker.plaintext) as w:  # User:ANONYMOUS
            r = w.request(ApiKey.CREATE_TOPICS, 7, {"topics": [
                {"name": n, "num_partitions": 1, "replication_factor": 1, "assignments": [],
                 "configs": []} for n in ("kip525-hidden", "kip525-seen")],
                "timeout_ms": 10000, "validate_only": False})
            got = {t["name"]: t for t in r["topics"]}
            hidden, seen = got["kip525-hidden"], got["kip525-seen"]
            assert (hidden["error_code"], hidden.get("topic_config_error_code"),
                    hidden["num_partitions"], hidden["configs"] or []) == (0, 29, -1, [])
            assert (seen["error_code"], seen.get("topic_config_error_code", 0),
                    seen["num_partitions"]) == (0, 0, 1) and seen["configs"]
            r = w.request(ApiKey.DELETE_TOPICS, 6, {"topics": [
                {"name": None, "topic_id": hidden["topic_id"]}], "timeout_ms": 10000})
            (row,) = r["responses"]
            assert (row["name"], row["error_code"]) == (None, TOPIC_AUTHORIZATION_FAILED)
        _delete_acls_of(broker, "User:ANONYMOUS")
        _wire_acls(broker, (2, "kip525-", 4, DELETE))
        with Wire(broker.plaintext) as w:
            r = w.request(ApiKey.DELETE_TOPICS, 6, {"topics": [
                {"name": None, "topic_id": hidden["topic_id"]}], "timeout_ms": 10000})
            (row,) = r["responses"]
            assert (row["name"], row["error_code"]) == ("kip525-hidden", 0), row
    finally:
        _delete_acls_of(broker, "User:ANONYMOUS")
