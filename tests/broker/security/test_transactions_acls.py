"""Transactions under Kafka's ACL authorizer (issue 32.5): Write on the TRANSACTIONAL_ID to
use it (InitProducerId, AddPartitionsToTxn, EndTxn; FindCoordinator needs Describe),
Describe to see it (DescribeTransactions answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
ListTransactions leaves it out), ClusterAction for WriteTxnMarkers (an admin's abort)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from kafkactl.protocol.api_keys import ApiKey
from tests import zygote
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
TOPIC, TRANSACTIONAL_ID = 2, 5
LITERAL = 3
WRITE, DESCRIBE = 4, 8
ALLOW = 3
TOPIC_NAME = "tx-acl-orders"


def _acl(rtype: int, name: str, principal: str, op: int) -> dict[str, object]:
    return {"resource_type": rtype, "resource_name": name, "resource_pattern_type": LITERAL,
            "principal": principal, "host": "*", "operation": op, "permission_type": ALLOW}


@pytest.fixture(scope="module")
def txn_acl_broker(certs: Certs,
                   tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    sb = start_secure(tmp_path_factory.mktemp("txn-acl"), certs, **AUTHORIZER)
    add_scram_users(sb.bootstrap("PLAINTEXT"), {"alice": PASSWORDS["alice"],
                                                "carol": PASSWORDS["carol"]})
    with Wire(sb.bootstrap("PLAINTEXT")) as w:
        assert w.create_topic(TOPIC_NAME)["error_code"] == 0
        r = w.request(ApiKey.CREATE_ACLS, 3, {"creations": [
            _acl(TOPIC, TOPIC_NAME, "User:alice", WRITE),
            _acl(TOPIC, TOPIC_NAME, "User:carol", WRITE),
            _acl(TRANSACTIONAL_ID, "alice-tx", "User:alice", WRITE),
            _acl(TRANSACTIONAL_ID, "alice-tx", "User:alice", DESCRIBE),
        ]})
        assert [x["error_code"] for x in r["results"]] == [0, 0, 0, 0], r
    yield sb
    sb.broker.kill()


def _conf(sb: SecureBroker, user: str) -> dict[str, Any]:
    return {"bootstrap.servers": sb.bootstrap("SASL_PLAINTEXT"),
            "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": user, "sasl.password": PASSWORDS[user]}


def _cli(sb: SecureBroker, user: str, *args: str) -> Any:
    props = [x for k, v in _conf(sb, user).items() if k != "bootstrap.servers"
             for x in ("-X", f"{k}={v}")]
    return zygote.run(["transactions", *args, "-b", sb.bootstrap("SASL_PLAINTEXT"), *props],
                      text=True, timeout=60)


def test_transactional_id_write_needed(txn_acl_broker: SecureBroker) -> None:
    from confluent_kafka import KafkaException, Producer

    ok = Producer({**_conf(txn_acl_broker, "alice"), "transactional.id": "alice-tx"})
    ok.init_transactions(30)
    ok.begin_transaction()
    ok.produce(TOPIC_NAME, b"by-alice")
    ok.commit_transaction(30)
    for user, tid in (("carol", "carol-tx"), ("alice", "other-tx")):
        p = Producer({**_conf(txn_acl_broker, user), "transactional.id": tid})
        with pytest.raises(KafkaException) as info:
            p.init_transactions(20)
        err = info.value.args[0]
        assert err.name() == "TRANSACTIONAL_ID_AUTHORIZATION_FAILED" and err.fatal(), err


def test_describe_list_and_abort_need_their_acls(txn_acl_broker: SecureBroker) -> None:
    from confluent_kafka import Producer

    sb = txn_acl_broker
    p = Producer({**_conf(sb, "alice"), "transactional.id": "alice-tx"})
    p.init_transactions(30)
    r = _cli(sb, "alice", "describe", "-t", "alice-tx", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    r = _cli(sb, "carol", "describe", "-t", "alice-tx")
    assert r.returncode == 1 and "TRANSACTIONAL_ID_AUTHORIZATION_FAILED" in r.stderr
    r = _cli(sb, "carol", "list", "--json")
    assert r.returncode == 0 and json.loads(r.stdout) == [], r.stdout + r.stderr
    r = _cli(sb, "alice", "list", "--json")
    assert [t["transactional_id"] for t in json.loads(r.stdout)] == ["alice-tx"]
    # WriteTxnMarkers needs ClusterAction: alice may not write markers
    r = _cli(sb, "alice", "abort", "--topic", TOPIC_NAME, "--partition", "0",
             "--producer-id", str(d["producer_id"]), "--producer-epoch",
             str(d["producer_epoch"]), "--coordinator-epoch", "0")
    assert r.returncode == 1 and "CLUSTER_AUTHORIZATION_FAILED" in r.stderr
