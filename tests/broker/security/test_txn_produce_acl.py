"""Produce with transactional records under Kafka's ACL authorizer: Write on the topic is
not enough, the request's TRANSACTIONAL_ID needs Write too (Kafka's handleProduceRequest
answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED for the whole request otherwise, and stores
nothing). A real broker; bob logs in with SASL/PLAIN on a raw connection."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kafkactl.protocol.api_keys import ApiKey
from kafkactl.record.batch import RecordBatchBuilder
from tests.broker.security.certs import Certs
from tests.broker.security.conftest import SecureBroker, start_secure
from tests.broker.wire import Wire

AUTHORIZER = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
              "super.users": "User:admin;User:ANONYMOUS",
              # the ACL check alone, on hand-built batches with no coordinator transaction
              # behind them (KIP-890's leader check: tests/broker/test_txn_verification.py)
              "transaction.partition.verification.enable": "false"}
TOPIC, TRANSACTIONAL_ID = 2, 5
LITERAL, WRITE, ALLOW = 3, 4, 3
TOPIC_NAME = "txn-produce-acl"
TXN_ID_AUTH_FAILED = 53


def _acl(rtype: int, name: str, principal: str, op: int) -> dict[str, object]:
    return {"resource_type": rtype, "resource_name": name, "resource_pattern_type": LITERAL,
            "principal": principal, "host": "*", "operation": op, "permission_type": ALLOW}


@pytest.fixture(scope="module")
def acl_broker(certs: Certs, tmp_path_factory: pytest.TempPathFactory
               ) -> Iterator[SecureBroker]:
    sb = start_secure(tmp_path_factory.mktemp("txn-produce-acl"), certs, **AUTHORIZER)
    with Wire(sb.bootstrap("PLAINTEXT")) as w:
        assert w.create_topic(TOPIC_NAME)["error_code"] == 0
        r = w.request(ApiKey.CREATE_ACLS, 3, {"creations": [
            _acl(TOPIC, TOPIC_NAME, "User:bob", WRITE),
            _acl(TRANSACTIONAL_ID, "bob-tx", "User:bob", WRITE)]})
        assert [x["error_code"] for x in r["results"]] == [0, 0], r
    yield sb
    sb.broker.kill()


def _bob(sb: SecureBroker) -> Wire:
    w = Wire(sb.bootstrap("SASL_PLAINTEXT"))
    r = w.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
    assert r["error_code"] == 0, r
    r = w.request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": b"\0bob\0bob-secret"})
    assert r["error_code"] == 0, r
    return w


def _produce(w: Wire, txn_id: str | None, *, transactional: bool, seq: int) -> dict:
    b = RecordBatchBuilder(producer_id=80_000, producer_epoch=0, base_sequence=seq,
                           is_transactional=transactional)
    b.append(None, b"k", b"v")
    resp = w.request(ApiKey.PRODUCE, 9, {
        "transactional_id": txn_id, "acks": 1, "timeout_ms": 5000,
        "topic_data": [{"name": TOPIC_NAME, "partition_data": [
            {"index": 0, "records": b.build()}]}]})
    return resp["responses"][0]["partition_responses"][0]


def test_transactional_produce_needs_write_on_the_transactional_id(
        acl_broker: SecureBroker) -> None:
    with _bob(acl_broker) as w:
        r = _produce(w, "other-tx", transactional=True, seq=0)
        assert r["error_code"] == TXN_ID_AUTH_FAILED
        assert "other-tx" in r["error_message"]
        r = _produce(w, None, transactional=True, seq=0)  # no id at all
        assert r["error_code"] == TXN_ID_AUTH_FAILED
        r = _produce(w, "bob-tx", transactional=True, seq=0)
        assert r["error_code"] == 0 and r["base_offset"] == 0  # nothing stored before
    with Wire(acl_broker.bootstrap("PLAINTEXT")) as admin:
        resp = admin.request(ApiKey.LIST_OFFSETS, 5, {
            "replica_id": -1, "isolation_level": 0,
            "topics": [{"name": TOPIC_NAME, "partitions": [
                {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]})
        assert resp["topics"][0]["partitions"][0]["offset"] == 1


def test_elect_leaders_refused_names_each_partition_asked_for(acl_broker: SecureBroker
                                                              ) -> None:
    """bob may not Alter the cluster: ElectLeaders answers CLUSTER_AUTHORIZATION_FAILED at
    the top and, as Kafka's KafkaApis, for each partition named (it listed none)."""
    with _bob(acl_broker) as w:
        r = w.request(ApiKey.ELECT_LEADERS, 2, {
            "election_type": 0, "timeout_ms": 5000,
            "topic_partitions": [{"topic": TOPIC_NAME, "partitions": [0, 1]}]})
    assert r["error_code"] == 31, r
    assert [(t["topic"], p["partition_id"], p["error_code"])
            for t in r["replica_election_results"] for p in t["partition_result"]] == [
        (TOPIC_NAME, 0, 31), (TOPIC_NAME, 1, 31)], r
