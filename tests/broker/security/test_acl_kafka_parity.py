"""Kafka's ACL authorizer, where kafkactl's differed, on a live broker with
allow.everyone.if.no.acl.found=true and real clients:

- authorizeByResourceType (idempotent producers): one CLUSTER ACL for bob no longer makes
  every other user's idempotent producer fail with CLUSTER_AUTHORIZATION_FAILED;
- the audit log: a denial is logged at INFO to `kafkactl.authorizer` in Kafka's words
  ("Principal = User:alice is Denied Operation = Write from host = ... for request =
  Produce with resourceRefCount = 1"), allowed requests only at DEBUG; ACL changes at INFO;
- resource names with '/' (or '.', '..': not znode names) are refused (INVALID_REQUEST)
  without closing the connection;
- bindings Kafka's broker takes (WRITE on a GROUP) are taken.

Plus Kafka's own authorizeByResourceType cases (BaseAuthorizerTest) on the rules alone."""

from __future__ import annotations

import logging
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
from kafkactl.broker.security.authorizer import AclAuthorizer
from kafkactl.broker.security.principal import KafkaPrincipal
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
from tests.polling import wait_until

INVALID_REQUEST = 42


@pytest.fixture(scope="module")
def open_broker(certs: Certs, tmp_path_factory: pytest.TempPathFactory
                ) -> Iterator[SecureBroker]:
    sb = start_secure(tmp_path_factory.mktemp("acl-parity"), certs, **ACL_AUTHORIZER,
                      **{"allow.everyone.if.no.acl.found": "true"})
    add_scram_users(sb.bootstrap("PLAINTEXT"), {"alice": PASSWORDS["alice"]})
    from confluent_kafka.admin import NewTopic

    admin = _admin(sb)  # (kept: its futures fail once it is collected)
    for future in admin.create_topics(
            [NewTopic(t, 1, 1) for t in ("open-idem", "audited")]).values():
        future.result(30)
    yield sb
    sb.broker.kill()


def _admin(sb: SecureBroker) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": sb.bootstrap("PLAINTEXT")})  # a super user


def _create_acls(sb: SecureBroker, *acls: Any) -> None:
    admin = _admin(sb)
    for future in admin.create_acls(list(acls)).values():
        future.result(30)


def _produce(sb: SecureBroker, user: str, topic: str, **conf: Any) -> str:
    from confluent_kafka import Producer

    errors: list[str] = []
    p = Producer({"bootstrap.servers": sb.bootstrap("SASL_PLAINTEXT"),
                  "security.protocol": "SASL_PLAINTEXT",
                  "sasl.mechanism": "PLAIN" if user == "bob" else "SCRAM-SHA-256",
                  "sasl.username": user, "sasl.password": PASSWORDS[user],
                  "message.timeout.ms": 10000, **conf})
    p.produce(topic, b"x", on_delivery=lambda err, _m: errors.append(err.name() if err else ""))
    p.flush(30)
    return errors[0] if errors else "no delivery report"


def test_one_cluster_acl_does_not_refuse_other_idempotent_producers(
        open_broker: SecureBroker) -> None:
    from confluent_kafka.admin import AclBinding as Acl
    from confluent_kafka.admin import AclOperation as Op
    from confluent_kafka.admin import AclPermissionType as Perm
    from confluent_kafka.admin import ResourcePatternType as Pattern
    from confluent_kafka.admin import ResourceType as Type

    _create_acls(open_broker,
                 Acl(Type.BROKER, "kafka-cluster", Pattern.LITERAL, "User:bob", "*",
                     Op.IDEMPOTENT_WRITE, Perm.ALLOW),
                 Acl(Type.TOPIC, "bobs-", Pattern.PREFIXED, "User:bob", "*", Op.WRITE,
                     Perm.ALLOW))
    # no ACL on this topic: allow.everyone.if.no.acl.found lets alice write, idempotently
    # too (Kafka's authorizeByResourceType allows everyone then, unless a DENY on '*')
    assert _produce(open_broker, "alice", "open-idem", **{"enable.idempotence": False}) == ""
    assert _produce(open_broker, "alice", "open-idem", **{"enable.idempotence": True}) == ""
    assert _produce(open_broker, "bob", "open-idem", **{"enable.idempotence": True}) == ""


def test_a_denial_is_audited_in_kafkas_words(open_broker: SecureBroker) -> None:
    from confluent_kafka.admin import AclBinding as Acl
    from confluent_kafka.admin import AclOperation as Op
    from confluent_kafka.admin import AclPermissionType as Perm
    from confluent_kafka.admin import ResourcePatternType as Pattern
    from confluent_kafka.admin import ResourceType as Type

    _create_acls(open_broker,
                 Acl(Type.TOPIC, "audited", Pattern.LITERAL, "User:bob", "*", Op.WRITE,
                     Perm.ALLOW),
                 Acl(Type.TOPIC, "audited", Pattern.LITERAL, "User:alice", "*", Op.DESCRIBE,
                     Perm.ALLOW))
    assert _produce(open_broker, "bob", "audited") == ""
    assert _produce(open_broker, "alice", "audited") == "TOPIC_AUTHORIZATION_FAILED"
    denied = ("INFO kafkactl.authorizer: Principal = User:alice is Denied Operation = Write "
              "from host = 127.0.0.1 on resource = Topic:LITERAL:audited for request = "
              "Produce with resourceRefCount = 1")
    wait_until(lambda: denied in open_broker.broker.log(), 10, "the denial in the log")
    log = open_broker.broker.log()
    # allowed requests only at DEBUG (the broker logs at INFO)
    assert "User:bob is Allowed" not in log
    added = ("Added ACL (pattern=ResourcePattern(resourceType=TOPIC, name=audited, "
             "patternType=LITERAL), entry=(principal=User:bob, host=*, operation=WRITE, "
             "permissionType=ALLOW))")
    assert added in log


def _acl(rtype: int, name: str, op: int = 3) -> dict[str, object]:
    return {"resource_type": rtype, "resource_name": name, "resource_pattern_type": 3,
            "principal": "User:x", "host": "*", "operation": op, "permission_type": 3}


def test_resource_names_kafka_refuses_keep_the_connection(open_broker: SecureBroker) -> None:
    names = ["a/b", "/", "x/../../y", "..", ".", "nul\0"]
    with Wire(open_broker.bootstrap("PLAINTEXT")) as w:
        r = w.request(ApiKey.CREATE_ACLS, 3, {"creations": [
            *(_acl(2, n) for n in names), _acl(2, "fine.name")]})
        codes = [x["error_code"] for x in r["results"]]
        assert codes == [INVALID_REQUEST] * len(names) + [0], r
        assert "ACL binding contains invalid resource name" in r["results"][0]["error_message"]
        # the same connection still answers
        flt = {"resource_type_filter": 1, "resource_name_filter": None,
               "pattern_type_filter": 1, "principal_filter": "User:x", "host_filter": None,
               "operation": 1, "permission_type": 1}
        r = w.request(ApiKey.DESCRIBE_ACLS, 3, flt)
        assert [res["resource_name"] for res in r["resources"]] == ["fine.name"]
        r = w.request(ApiKey.DELETE_ACLS, 3, {"filters": [
            {**flt, "resource_name_filter": "x/../../y"}, {**flt, "resource_name_filter": "/"}]})
        assert [f["error_code"] for f in r["filter_results"]] == [0, 0]


def test_the_broker_takes_what_kafkas_broker_takes(open_broker: SecureBroker) -> None:
    from confluent_kafka.admin import AclBinding as Acl
    from confluent_kafka.admin import AclBindingFilter as Filter
    from confluent_kafka.admin import AclOperation as Op
    from confluent_kafka.admin import AclPermissionType as Perm
    from confluent_kafka.admin import ResourcePatternType as Pattern
    from confluent_kafka.admin import ResourceType as Type

    odd = Acl(Type.GROUP, "terraform", Pattern.LITERAL, "User:tf", "*", Op.WRITE, Perm.ALLOW)
    _create_acls(open_broker, odd)
    admin = _admin(open_broker)
    found = admin.describe_acls(Filter(
        Type.GROUP, "terraform", Pattern.LITERAL, None, None,  # type: ignore[arg-type]
        Op.ANY, Perm.ANY)).result(30)
    assert [(a.principal, a.operation) for a in found] == [("User:tf", Op.WRITE)]


# ---- Kafka's authorizeByResourceType cases (BaseAuthorizerTest), on the rules alone ------
class _Store:
    def __init__(self) -> None:
        self._bindings: frozenset[AclBinding] = frozenset()

    def bindings(self) -> frozenset[AclBinding]:
        return self._bindings

    def add(self, bindings: Any) -> None:
        self._bindings |= frozenset(bindings)

    def remove(self, bindings: Any) -> None:
        self._bindings -= frozenset(bindings)


U1, U2 = KafkaPrincipal("User", "user1"), KafkaPrincipal("User", "user2")
H1, H2 = "192.168.1.1", "192.168.1.2"
T, G = ResourceType.TOPIC, ResourceType.GROUP
R, W = AclOperation.READ, AclOperation.WRITE
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY


def _b(rtype: ResourceType, name: str, ptype: PatternType, who: str, host: str,
       op: AclOperation, perm: AclPermissionType) -> AclBinding:
    return AclBinding.create(rtype, name, ptype, who, host, op, perm)


def test_kafkas_by_resource_type_cases() -> None:
    store = _Store()
    auth = AclAuthorizer(store)

    def may(p: KafkaPrincipal, host: str, op: AclOperation, rtype: ResourceType) -> bool:
        return auth.authorize_any(p, host, op, rtype)

    # DenyTakesPrecedence
    store.add([_b(T, "sb1", LIT, "User:user1", H1, W, ALLOW)])
    assert may(U1, H1, W, T)
    store.add([_b(T, "sb1", LIT, "User:user1", H1, W, DENY)])
    assert not may(U1, H1, W, T)

    # PrefixedResourceDenyDominate
    store = _Store()
    auth = AclAuthorizer(store)
    store.add([_b(G, "abcde", PRE, "User:user1", H1, R, ALLOW)])
    assert may(U1, H1, R, G)
    store.add([_b(G, "abcd", PRE, "User:user1", H1, R, DENY)])
    assert not may(U1, H1, R, G)
    store.add([_b(G, "abc", PRE, "User:user1", H1, R, ALLOW)])
    assert may(U1, H1, R, G)
    store.add([_b(G, "a", PRE, "User:user1", H1, R, DENY)])
    assert not may(U1, H1, R, G)
    store.add([_b(G, "ab", PRE, "User:user1", H1, R, ALLOW)])
    assert not may(U1, H1, R, G)

    # WildcardResourceDenyDominate
    store = _Store()
    auth = AclAuthorizer(store)
    store.add([_b(G, "hello", PRE, "User:user1", H1, W, ALLOW)])
    assert may(U1, H1, W, G)
    store.add([_b(G, "*", LIT, "User:user1", H1, W, DENY)])
    assert not may(U1, H1, W, G)
    store.add([_b(G, "*", LIT, "User:user1", H1, W, ALLOW),
               _b(G, "aloha", LIT, "User:user1", H1, W, ALLOW)])
    assert not may(U1, H1, W, G)

    # WithAllPrincipalAce / WithAllHostAce
    store = _Store()
    auth = AclAuthorizer(store)
    assert not may(U1, H1, R, T)
    store.add([_b(T, "sb1", LIT, "User:user1", H1, R, ALLOW)])
    assert may(U1, H1, R, T)
    store.add([_b(T, "sb1", LIT, "User:*", H1, R, DENY)])
    assert not may(U1, H1, R, T)
    store.add([_b(T, "sb2", LIT, "User:user1", H1, R, DENY)])
    assert not may(U2, H1, R, T)
    store.add([_b(T, "sb2", LIT, "User:*", H1, R, ALLOW)])
    assert may(U2, H1, R, T)
    store.add([_b(T, "sb2", LIT, "User:*", H1, R, DENY)])
    assert not may(U2, H1, R, T)
    assert not may(U1, H2, R, T)

    # IsolationUnrelatedDenyWontDominateAllow (another user's, host's, operation's denials)
    store = _Store()
    auth = AclAuthorizer(store)
    store.add([_b(T, "sb1", LIT, "User:user1", H1, R, DENY),
               _b(T, "sb1", LIT, "User:user2", H1, R, DENY),
               _b(T, "sb1", LIT, "User:user1", H2, W, DENY),
               _b(T, "sb1", LIT, "User:user2", H2, R, DENY),
               _b(T, "sb1", LIT, "User:user1", H2, R, ALLOW),
               _b(T, "sb2", LIT, "User:user1", H2, R, DENY),
               _b(G, "s", PRE, "User:user1", H2, R, DENY)])
    assert not may(U1, H1, R, T)
    assert not may(U1, H1, R, G)
    assert may(U1, H2, R, T)

    # NoAclFoundOverride and super users; a LITERAL '*' DENY still refuses
    store = _Store()
    auth = AclAuthorizer(store, allow_if_no_acl=True,
                         super_users=frozenset({"User:superuser1"}))
    store.add([_b(ResourceType.CLUSTER, "kafka-cluster", LIT, "User:bob", "*",
                  AclOperation.IDEMPOTENT_WRITE, ALLOW),
               _b(T, "only-bob", LIT, "User:bob", "*", W, ALLOW),
               _b(T, "x", PRE, "User:user1", "*", W, DENY)])
    assert may(U1, H1, W, T) and may(U1, H1, R, T)
    store.add([_b(T, "*", LIT, "User:*", "*", AclOperation.ALL, DENY)])
    assert not may(U1, H1, W, T)
    assert may(KafkaPrincipal("User", "superuser1"), H1, W, T)


def test_audit_levels_follow_the_loggers_level(caplog: pytest.LogCaptureFixture) -> None:
    """Allowed requests are audited at DEBUG once the audit logger's level allows it (as a
    KIP-412 change of kafkactl.authorizer's level does), and no longer after."""
    store = _Store()
    store.add([_b(T, "t", LIT, "User:user1", "*", W, ALLOW)])
    auth = AclAuthorizer(store)
    audit = "kafkactl.authorizer"
    caplog.set_level(logging.INFO, logger=audit)
    assert auth.authorize(U1, H1, W, T, "t", int(ApiKey.PRODUCE))
    assert not auth.authorize(U2, H1, W, T, "t", int(ApiKey.PRODUCE), ["t", "t"])
    assert [r.getMessage() for r in caplog.records if r.name == audit] == [
        "Principal = User:user2 is Denied Operation = Write from host = 192.168.1.1 on "
        "resource = Topic:LITERAL:t for request = Produce with resourceRefCount = 2"]
    caplog.clear()
    caplog.set_level(logging.DEBUG, logger=audit)
    assert auth.authorize(U1, H1, W, T, "t", int(ApiKey.FETCH))
    assert not auth.authorize(U2, H1, W, T, "t", log_if_denied=False)
    assert auth.authorize(U1, H1, W, T, "t", log_if_allowed=False)
    assert [(r.levelname, r.getMessage()) for r in caplog.records if r.name == audit] == [
        ("DEBUG", "Principal = User:user1 is Allowed Operation = Write from host = "
                  "192.168.1.1 on resource = Topic:LITERAL:t for request = Fetch with "
                  "resourceRefCount = 1")]
    caplog.clear()
    caplog.set_level(logging.INFO, logger=audit)
    assert auth.authorize(U1, H1, W, T, "t")
    assert not [r for r in caplog.records if r.name == audit]
