"""`kafkactl consume` on a topic the user may Describe but not Read fails with a line that
says why, as Kafka's consumer does (TopicAuthorizationException "Not authorized to access
topics: [orders]"): "fetch orders-0 at offset 0: not authorized to read topic orders
(TOPIC_AUTHORIZATION_FAILED)". Before, the line was only "fetch orders-0 at offset 0". A real
broker with Kafka's ACL authorizer; alice may Describe topic orders and use groups
alice-*, not Read orders. Every other partition error of a Fetch answer is named too."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.errors import ErrorCode
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

TOPIC, GROUP = 2, 3
LITERAL, PREFIXED = 3, 4
ALL, DESCRIBE = 2, 8


def _acl(rtype: int, name: str, ptype: int, op: int) -> dict[str, object]:
    return {"resource_type": rtype, "resource_name": name, "resource_pattern_type": ptype,
            "principal": "User:alice", "host": "*", "operation": op, "permission_type": 3}


@pytest.fixture(scope="module")
def read_denied(certs: Certs, tmp_path_factory: pytest.TempPathFactory
                ) -> Iterator[SecureBroker]:
    from confluent_kafka import Producer

    sb = start_secure(tmp_path_factory.mktemp("read-denied"), certs, **ACL_AUTHORIZER)
    add_scram_users(sb.bootstrap("PLAINTEXT"), {"alice": PASSWORDS["alice"]})
    with Wire(sb.bootstrap("PLAINTEXT")) as w:
        assert w.create_topic("orders")["error_code"] == 0
        r = w.request(ApiKey.CREATE_ACLS, 3, {"creations": [
            _acl(TOPIC, "orders", LITERAL, DESCRIBE), _acl(GROUP, "alice-", PREFIXED, ALL)]})
        assert [x["error_code"] for x in r["results"]] == [0, 0], r
    p = Producer({"bootstrap.servers": sb.bootstrap("PLAINTEXT")})
    p.produce("orders", b"one")
    assert p.flush(15) == 0
    yield sb
    sb.broker.kill()


def _alice(sb: SecureBroker) -> list[str]:
    props = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
             "sasl.username": "alice", "sasl.password": PASSWORDS["alice"],
             "ssl.ca.location": str(sb.certs.ca)}
    out = ["-b", sb.bootstrap("SASL_SSL")]
    for k, v in props.items():
        out += ["-X", f"{k}={v}"]
    return out


@pytest.mark.parametrize("group", [[], ["-G", "alice-g"]], ids=["no-group", "group"])
def test_consume_says_read_is_not_authorized(read_denied: SecureBroker,
                                             group: list[str]) -> None:
    r = zygote.run(["consume", "-t", "orders", "--from-beginning", "-e", "-q", *group,
                    *_alice(read_denied)], text=True, timeout=60)
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    last = r.stderr.strip().splitlines()[-1]
    assert last == ("error: fetch orders-0 at offset 0: not authorized to read topic orders "
                    "(TOPIC_AUTHORIZATION_FAILED)"), r.stderr
    assert "Traceback" not in r.stderr


def test_every_fetch_error_has_a_sentence() -> None:
    from kafkactl.client.consumer import fetch_error_sentence

    assert fetch_error_sentence(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "orders") == \
        "not authorized on the cluster"
    for code in ErrorCode:
        if code != ErrorCode.NONE:
            sentence = fetch_error_sentence(code, "orders")
            assert sentence and "{" not in sentence and code.name not in sentence, code
