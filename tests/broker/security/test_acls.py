"""Authorization with Kafka's ACL authorizer and real clients: a user allowed on one topic
and refused on another (TOPIC_AUTHORIZATION_FAILED), a user without ACLs refused reads and
group joins, a super user allowed everything, Metadata hiding topics, ACL requests Kafka
refuses (INVALID_REQUEST), and ACLs and SCRAM users surviving a restart."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

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
LITERAL, PREFIXED = 3, 4
READ, WRITE, CREATE, DESCRIBE, ALL = 3, 4, 5, 8, 2
ALLOW = 3


@pytest.fixture(scope="module")
def acl_broker(certs: Certs, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    # ANONYMOUS (the PLAINTEXT set-up listener) is a super user here, as an admin port.
    sb = start_secure(tmp_path_factory.mktemp("acl"), certs, **AUTHORIZER)
    add_scram_users(sb.bootstrap("PLAINTEXT"), {"alice": PASSWORDS["alice"],
                                                "carol": PASSWORDS["carol"]})
    with Wire(sb.bootstrap("PLAINTEXT")) as w:
        r = w.request(ApiKey.CREATE_ACLS, 3, {"creations": [
            _acl(TOPIC, "orders", LITERAL, "User:alice", WRITE),
            _acl(TOPIC, "orders", LITERAL, "User:alice", READ),
            _acl(TOPIC, "orders", LITERAL, "User:alice", CREATE),
            _acl(GROUP, "alice-", PREFIXED, "User:alice", READ),
        ]})
        assert [x["error_code"] for x in r["results"]] == [0, 0, 0, 0], r
    yield sb
    sb.broker.kill()


def _acl(rtype: int, name: str, ptype: int, principal: str, op: int,
         perm: int = ALLOW) -> dict[str, object]:
    return {"resource_type": rtype, "resource_name": name, "resource_pattern_type": ptype,
            "principal": principal, "host": "*", "operation": op, "permission_type": perm}


def _conf(sb: SecureBroker, user: str) -> dict[str, object]:
    return {"bootstrap.servers": sb.bootstrap("SASL_PLAINTEXT"),
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN" if user in ("admin", "bob") else "SCRAM-SHA-256",
            "sasl.username": user, "sasl.password": PASSWORDS[user]}


def _produce(sb: SecureBroker, user: str, topic: str) -> list[str]:
    from confluent_kafka import Producer

    errors: list[str] = []
    p = Producer({**_conf(sb, user), "message.timeout.ms": 5000})
    p.produce(topic, b"x", on_delivery=lambda err, _m: errors.append(err.name() if err else ""))
    p.flush(15)
    return errors


def test_user_allowed_on_one_topic_and_refused_on_another(acl_broker: SecureBroker) -> None:
    assert _produce(acl_broker, "alice", "orders") == [""]
    assert _produce(acl_broker, "alice", "payments") == ["TOPIC_AUTHORIZATION_FAILED"]


def test_user_without_acls_is_refused_reads_and_group_joins(acl_broker: SecureBroker) -> None:
    from confluent_kafka import Consumer, KafkaException

    c = Consumer({**_conf(acl_broker, "carol"), "group.id": "carol-g",
                  "auto.offset.reset": "earliest"})
    c.subscribe(["orders"])
    errors = set()
    for _ in range(20):
        msg = c.poll(0.5)
        if msg is not None and msg.error():
            errors.add(msg.error().name())
        if errors:
            break
    c.close()
    assert errors & {"GROUP_AUTHORIZATION_FAILED", "TOPIC_AUTHORIZATION_FAILED"}, errors
    # a plain fetch (no group) is refused too
    from kafka import KafkaConsumer, TopicPartition
    from kafka.errors import TopicAuthorizationFailedError

    kc = KafkaConsumer(bootstrap_servers=acl_broker.bootstrap("SASL_PLAINTEXT"),
                       security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-256",
                       sasl_plain_username="carol", sasl_plain_password=PASSWORDS["carol"])
    try:
        with pytest.raises((TopicAuthorizationFailedError, KafkaException, AssertionError)):
            kc.assign([TopicPartition("orders", 0)])
            kc.seek(TopicPartition("orders", 0), 0)
            kc.poll(3000)
            kc.poll(3000)
            raise AssertionError("carol read orders")
    finally:
        kc.close()


def test_alice_consumes_with_her_prefixed_group(acl_broker: SecureBroker) -> None:
    from confluent_kafka import Consumer

    assert _produce(acl_broker, "alice", "orders") == [""]
    c = Consumer({**_conf(acl_broker, "alice"), "group.id": "alice-reports",
                  "auto.offset.reset": "earliest"})
    c.subscribe(["orders"])
    got = None
    for _ in range(40):
        msg = c.poll(0.5)
        if msg is not None and not msg.error():
            got = msg.value()
            break
    c.close()
    assert got == b"x"


def test_metadata_hides_unauthorized_topics(acl_broker: SecureBroker) -> None:
    from confluent_kafka.admin import AdminClient

    _produce(acl_broker, "admin", "secret-topic")  # admin is a super user (PLAIN)
    _produce(acl_broker, "admin", "orders")  # exists whichever test ran first (or alone)
    alice = AdminClient(_conf(acl_broker, "alice")).list_topics(timeout=10).topics
    assert "orders" in alice and "secret-topic" not in alice
    admin = AdminClient(_conf(acl_broker, "admin"))
    assert "secret-topic" in admin.list_topics(timeout=10).topics


def test_super_user_may_do_everything(acl_broker: SecureBroker) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    assert _produce(acl_broker, "admin", "anything-goes") == [""]
    admin = AdminClient(_conf(acl_broker, "admin"))
    admin.create_topics([NewTopic("admin-made", 2)])["admin-made"].result(10)
    admin.delete_topics(["anything-goes"])["anything-goes"].result(10)
    # bob has no ACLs and is no super user: the same calls are refused
    bob = AdminClient(_conf(acl_broker, "bob"))
    with pytest.raises(Exception, match="TOPIC_AUTHORIZATION_FAILED|Authorization"):
        bob.create_topics([NewTopic("bob-made", 1)])["bob-made"].result(10)


def test_acl_apis_validate_like_kafka(acl_broker: SecureBroker) -> None:
    with Wire(acl_broker.bootstrap("PLAINTEXT")) as w:
        bad = [_acl(TOPIC, "t", LITERAL, "User:x", 99),  # unknown operation
               _acl(TOPIC, "t", 1, "User:x", READ),  # ANY pattern in a binding
               _acl(CLUSTER, "not-kafka-cluster", LITERAL, "User:x", DESCRIBE),
               _acl(GROUP, "g", LITERAL, "alice", READ)]  # no principal type
        r = w.request(ApiKey.CREATE_ACLS, 3, {"creations": bad})
        assert [x["error_code"] for x in r["results"]] == [42] * len(bad)
        flt = {"resource_type_filter": 1, "resource_name_filter": None,
               "pattern_type_filter": 1, "principal_filter": "User:x", "host_filter": None,
               "operation": 1, "permission_type": 1}
        assert w.request(ApiKey.DESCRIBE_ACLS, 3, flt)["resources"] == []
        r = w.request(ApiKey.DESCRIBE_ACLS, 3, {**flt, "principal_filter": "User:alice"})
        names = {(res["resource_name"], len(res["acls"])) for res in r["resources"]}
        assert names == {("orders", 3), ("alice-", 1)}


def test_acls_and_users_survive_a_restart(certs: Certs, tmp_path: Path) -> None:
    sb = start_secure(tmp_path, certs, **AUTHORIZER)
    try:
        add_scram_users(sb.bootstrap("PLAINTEXT"), {"alice": PASSWORDS["alice"]})
        with Wire(sb.bootstrap("PLAINTEXT")) as w:
            r = w.request(ApiKey.CREATE_ACLS, 3, {"creations": [
                _acl(TOPIC, "kept", LITERAL, "User:alice", ALL)]})
            assert r["results"][0]["error_code"] == 0
        assert _produce(sb, "alice", "kept") == [""]
        sb.broker.restart()
        assert _produce(sb, "alice", "kept") == [""]
        assert _produce(sb, "alice", "other") == ["TOPIC_AUTHORIZATION_FAILED"]
        stored = (sb.broker.data_dir / "scram-credentials.json").read_text()
        assert PASSWORDS["alice"] not in stored
        assert json.loads(stored)["users"]["alice"]["SCRAM-SHA-256"].startswith("salt=")
        assert json.loads((sb.broker.data_dir / "acls.json").read_text())["acls"]
    finally:
        sb.broker.kill()



_SCRAM_ALTER_AS = """
import sys
from confluent_kafka import KafkaException
from confluent_kafka.admin import (AdminClient, ScramCredentialInfo, ScramMechanism,
                                   UserScramCredentialUpsertion)
admin = AdminClient(dict(a.split("=", 1) for a in sys.argv[1:]))
up = UserScramCredentialUpsertion(
    "carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"pw")
try:
    list(admin.alter_user_scram_credentials([up]).values())[0].result(10)
    print("allowed")
except KafkaException as e:
    print(e.args[0].name(), e.args[0].str())
"""


def test_scram_admin_refused_with_kafkas_message(acl_broker: SecureBroker) -> None:
    """carol may not alter or describe SCRAM credentials: CLUSTER_AUTHORIZATION_FAILED
    with Kafka's message (the broker sent null: confluent-kafka said '(null)').
    confluent-kafka's describe_user_scram_credentials is not used: librdkafka frees a
    string it did not allocate on any request-level error, against Kafka too
    (docs/compatibility.md)."""
    import subprocess
    import sys

    from tests import zygote

    conf = _conf(acl_broker, "carol")
    r = subprocess.run([sys.executable, "-c", _SCRAM_ALTER_AS,
                        *(f"{k}={v}" for k, v in conf.items())],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, (r.returncode, r.stderr)
    assert r.stdout.strip() == "CLUSTER_AUTHORIZATION_FAILED Cluster authorization failed.", \
        r.stdout
    r = zygote.run(["users", "list", "-b", str(conf["bootstrap.servers"]),
                    *(x for k, v in conf.items() if k != "bootstrap.servers"
                      for x in ("-X", f"{k}={v}"))], text=True, timeout=60)
    assert r.returncode == 1, r.stderr
    assert "CLUSTER_AUTHORIZATION_FAILED" in r.stderr, r.stderr
    assert "Cluster authorization failed." in r.stderr, r.stderr
