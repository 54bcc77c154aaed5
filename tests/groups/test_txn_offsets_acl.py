"""TxnOffsetCommit under Kafka's ACL authorizer, in Kafka's order: Write on the
TRANSACTIONAL_ID (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every partition), Read on
the group (GROUP_AUTHORIZATION_FAILED), Read on each topic (TOPIC_AUTHORIZATION_FAILED for
that topic's partitions only); nothing refused is written. A real broker; bob logs in with
SASL/PLAIN on a raw connection."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.errors import ErrorCode as E
from tests.broker.security.certs import Certs
from tests.broker.security.conftest import SecureBroker, certs, start_secure
from tests.broker.wire import Wire
from tests.polling import wait_until

AUTHORIZER = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
              "super.users": "User:admin;User:ANONYMOUS"}
TOPIC, GROUP, TRANSACTIONAL_ID = 2, 3, 5
LITERAL, READ, WRITE, ALLOW = 3, 3, 4, 3
__all__ = ["certs"]  # the security tests' fixture (TLS certificates), used here too


def _acl(rtype: int, name: str, op: int) -> dict[str, object]:
    return {"resource_type": rtype, "resource_name": name, "resource_pattern_type": LITERAL,
            "principal": "User:bob", "host": "*", "operation": op, "permission_type": ALLOW}


@pytest.fixture(scope="module")
def acl_broker(certs: Certs, tmp_path_factory: pytest.TempPathFactory
               ) -> Iterator[SecureBroker]:
    sb = start_secure(tmp_path_factory.mktemp("txn-offsets-acl"), certs, **AUTHORIZER)
    with Wire(sb.bootstrap("PLAINTEXT")) as w:
        for t in ("open", "closed"):
            assert w.create_topic(t)["error_code"] == 0
        r = w.request(ApiKey.CREATE_ACLS, 3, {"creations": [
            _acl(TRANSACTIONAL_ID, "bob-tx", WRITE), _acl(GROUP, "bob-group", READ),
            _acl(TOPIC, "open", READ)]})
        assert [x["error_code"] for x in r["results"]] == [0, 0, 0], r
        # as a client would first: find the coordinators (this makes __consumer_offsets
        # and __transaction_state, and this broker leads them)
        for key, key_type in (("bob-group", 0), ("bob-tx", 1)):
            wait_until(lambda key=key, key_type=key_type: w.request(
                ApiKey.FIND_COORDINATOR, 3, {"key": key, "key_type": key_type}
            )["error_code"] == 0, 60, f"the coordinator of {key}")
    yield sb
    sb.broker.kill()


def _bob(sb: SecureBroker) -> Wire:
    w = Wire(sb.bootstrap("SASL_PLAINTEXT"))
    r = w.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
    assert r["error_code"] == 0, r
    r = w.request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": b"\0bob\0bob-secret"})
    assert r["error_code"] == 0, r
    return w


def _commit(w: Wire, txn_id: str, group: str) -> dict[str, int]:
    r: dict[str, Any] = w.request(ApiKey.TXN_OFFSET_COMMIT, 3, {
        "transactional_id": txn_id, "group_id": group, "producer_id": 90_000,
        "producer_epoch": 0, "generation_id": -1, "member_id": "", "group_instance_id": None,
        "topics": [{"name": t, "partitions": [{
            "partition_index": 0, "committed_offset": 5, "committed_leader_epoch": -1,
            "committed_metadata": ""}]} for t in ("open", "closed")]})
    return {t["name"]: int(t["partitions"][0]["error_code"]) for t in r["topics"]}


def test_txn_offset_commit_authorization_in_kafkas_order(acl_broker: SecureBroker) -> None:
    with _bob(acl_broker) as w:
        assert _commit(w, "other-tx", "bob-group") == {
            "open": E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            "closed": E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
        assert _commit(w, "bob-tx", "other-group") == {
            "open": E.GROUP_AUTHORIZATION_FAILED, "closed": E.GROUP_AUTHORIZATION_FAILED}
        got = _commit(w, "bob-tx", "bob-group")
        assert got["closed"] == E.TOPIC_AUTHORIZATION_FAILED
        # the topic bob may read passes authorization; then the transaction coordinator
        # (this broker) knows no such producer of bob-tx: refused, nothing written
        assert got["open"] == E.INVALID_PRODUCER_ID_MAPPING
