"""Operator commands' errors and edges against real brokers: a topic the credentials may not
Describe is refused by `topics offsets` / `topics describe` (not printed as nothing); a
client speaking the wrong security protocol is told to check it; `top` says what it does
not know and rides out a broker restart in its live view; `acls remove --principal` alone,
`quotas remove -c` and a quota that was not set; `log-dirs describe`'s free and total
space. One broker with SASL_PLAINTEXT, SSL (client certificates required) and an ACL
authorizer for the module: alice may Read (so Describe) topic orders only."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafkactl.protocol.api_keys import ApiKey
from tests import zygote
from tests.broker.security.certs import OPENSSL, make_certs
from tests.broker.security.conftest import (
    ACL_AUTHORIZER,
    PASSWORDS,
    SecureBroker,
    add_scram_users,
    start_secure,
)
from tests.broker.wire import Wire
from tests.conftest import BrokerProcess, free_port

AUTHORIZER = ACL_AUTHORIZER
TOPIC, GROUP, LITERAL, READ, ALLOW = 2, 3, 3, 3, 3
HINT = "check security.protocol (it may require SSL or SASL)"


def kafkactl(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return zygote.run(list(args), text=True, timeout=timeout)


def _acl(rtype: int, name: str, principal: str = "User:alice") -> dict[str, object]:
    return {"resource_type": rtype, "resource_name": name, "resource_pattern_type": LITERAL,
            "principal": principal, "host": "*", "operation": READ,
            "permission_type": ALLOW}


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    if OPENSSL is None:
        pytest.skip("openssl is not installed")
    certs = make_certs(tmp_path_factory.mktemp("certs"))
    sb = start_secure(tmp_path_factory.mktemp("ops"), certs, **AUTHORIZER)
    add_scram_users(sb.bootstrap("PLAINTEXT"), {"alice": PASSWORDS["alice"]})
    with Wire(sb.bootstrap("PLAINTEXT")) as w:
        for topic in ("orders", "secret"):
            assert w.create_topic(topic)["error_code"] == 0
        r = w.request(ApiKey.CREATE_ACLS, 3, {"creations": [_acl(TOPIC, "orders")]})
        assert r["results"][0]["error_code"] == 0, r
    yield sb
    sb.broker.kill()


def _alice(sb: SecureBroker, tmp_path: Path) -> list[str]:
    config = tmp_path / "alice.properties"
    config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
                      f"sasl.username=alice\nsasl.password={PASSWORDS['alice']}\n")
    return ["-b", sb.bootstrap("SASL_PLAINTEXT"), "--command-config", str(config)]


def _refused(r: subprocess.CompletedProcess[str], topic: str) -> None:
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert r.stdout == "", r.stdout
    assert r.stderr.strip().splitlines()[-1] == \
        f"error: topic '{topic}': TOPIC_AUTHORIZATION_FAILED", r.stderr


def test_offsets_and_describe_refuse_a_topic_not_authorized(acl_broker: SecureBroker,
                                                            tmp_path: Path) -> None:
    alice = _alice(acl_broker, tmp_path)
    r = kafkactl("topics", "offsets", "-t", "orders", *alice)
    assert r.returncode == 0 and r.stdout == "orders:0:0\n", r.stdout + r.stderr
    _refused(kafkactl("topics", "offsets", "-t", "secret", *alice), "secret")
    _refused(kafkactl("topics", "offsets", "-t", "secret", "--json", *alice), "secret")
    _refused(kafkactl("topics", "offsets", "-t", "orders", "-t", "secret", *alice), "secret")
    _refused(kafkactl("topics", "offsets", "-t", "secret", "-p", "0", *alice), "secret")
    # every topic: those alice may not see are not hers to list (as Kafka's Metadata)
    r = kafkactl("topics", "offsets", *alice)
    assert r.returncode == 0 and r.stdout == "orders:0:0\n", r.stdout + r.stderr
    # said of the topic, not of its configs
    _refused(kafkactl("topics", "describe", "-t", "secret", *alice), "secret")


def test_wrong_security_protocol_is_hinted(acl_broker: SecureBroker, tmp_path: Path) -> None:
    """kcat's hint when a broker closes the connection before answering: plaintext to the
    SSL and SASL_SSL listeners, SSL without the client certificate the listener requires,
    plaintext to a SASL listener (which answers ApiVersions, then closes)."""
    from kafkactl.client.errors import NoBrokersAvailable
    from kafkactl.client.kafka_client import KafkaClient

    for listener, extra in (("SSL", []), ("SASL_SSL", []),
                            ("SSL", ["-X", "security.protocol=SSL", "-X",
                                     f"ssl.ca.location={acl_broker.certs.ca}"])):
        r = kafkactl("topics", "list", "-b", acl_broker.bootstrap(listener), *extra)
        assert r.returncode == 1, r.stderr
        line = r.stderr.strip().splitlines()[-1]
        assert HINT in line and "closed the connection" in line, (listener, extra, line)
        assert "Is `kafkactl serve` running there?" not in line, line
    # the SASL listener answers ApiVersions and closes at Metadata: the same refusal three
    # times in a row gives up at once (it retried out the whole timeout, 30 s by default)
    client = KafkaClient(acl_broker.bootstrap("SASL_PLAINTEXT"), request_timeout_ms=600_000)
    try:
        with pytest.raises(NoBrokersAvailable, match=r"closed the connection.*" + HINT[:20]):
            client.refresh_metadata([])
        assert not client.metadata_seen
    finally:
        client.close()
    # a group consumer too (it said it "lost its coordinator" and looked for 300 s)
    r = kafkactl("consume", "-G", "g-hint", "-t", "orders", "-e", "-b",
                 acl_broker.bootstrap("SASL_PLAINTEXT"), timeout=120)
    assert r.returncode == 1, r.stderr
    assert HINT in r.stderr and "lost its coordinator" not in r.stderr, r.stderr
    # a broker that answered does not get the hint: nothing listens there at all
    r = kafkactl("topics", "list", "-b", f"127.0.0.1:{free_port()}")
    assert r.returncode == 1 and HINT not in r.stderr, r.stderr


def test_acls_remove_principal_alone(acl_broker: SecureBroker) -> None:
    """`acls remove --principal P` without a resource removes every ACL of P (any resource,
    any pattern type), and only P's; neither a resource nor --principal is refused."""
    b = ["-b", acl_broker.bootstrap("PLAINTEXT")]
    for args in (["--topic", "t1"], ["--group", "g1"],
                 ["--topic", "t-", "--resource-pattern-type", "prefixed"]):
        r = kafkactl("acls", "add", "--allow-principal", "User:carl", *args, *b)
        assert r.returncode == 0, r.stderr
    r = kafkactl("acls", "remove", "--principal", "User:carl", *b)
    assert r.returncode == 0 and "Removed 3 ACL(s)." in r.stdout, r.stdout + r.stderr
    listed = kafkactl("acls", "list", *b).stdout
    assert "User:carl" not in listed and "User:alice" in listed, listed
    r = kafkactl("acls", "remove", "--allow-principal", "User:alice", *b)
    assert r.returncode == 2 and "give a resource" in r.stderr, r.stderr
    assert "User:alice" in kafkactl("acls", "list", *b).stdout


def test_quotas_remove_takes_c_and_says_when_nothing_was_set(acl_broker: SecureBroker
                                                             ) -> None:
    b = ["-b", acl_broker.bootstrap("PLAINTEXT")]
    r = kafkactl("quotas", "remove", "--user", "nobody", *b)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "Nothing to remove: no quota is set for user nobody.\n", r.stdout
    r = kafkactl("quotas", "add", "--user", "q", "-c",
                 "producer_byte_rate=1000,consumer_byte_rate=2000", *b)
    assert r.returncode == 0, r.stderr
    r = kafkactl("quotas", "remove", "--user", "q", "-c", "producer_byte_rate", *b)
    assert r.returncode == 0 and r.stdout == "Removed producer_byte_rate of user q.\n", \
        r.stdout + r.stderr
    r = kafkactl("quotas", "remove", "--user", "q", "--config", "producer_byte_rate", *b)
    assert r.stdout.startswith("Nothing to remove: no producer_byte_rate is set"), r.stdout
    r = kafkactl("quotas", "remove", "--user", "q", "-k", "consumer_byte_rate", *b)  # still
    assert r.returncode == 0 and r.stdout == "Removed consumer_byte_rate of user q.\n", \
        r.stdout + r.stderr
    assert json.loads(kafkactl("quotas", "list", "--json", *b).stdout) == []


def test_log_dirs_table_shows_free_and_total_space(acl_broker: SecureBroker) -> None:
    r = kafkactl("log-dirs", "describe", "-b", acl_broker.bootstrap("PLAINTEXT"))
    assert r.returncode == 0, r.stderr
    head, *rows = r.stdout.splitlines()
    assert head.split()[:4] == ["BROKER", "LOG", "DIR", "FREE"] and "TOTAL" in head, head
    doc = json.loads(kafkactl("log-dirs", "describe", "--json", "-b",
                              acl_broker.bootstrap("PLAINTEXT")).stdout)
    assert doc[0]["total_bytes"] > 0
    assert all(("iB" in row or " B " in row) for row in rows), rows


def test_top_once_with_no_source_answering_is_unknown_and_fails() -> None:
    url = f"http://127.0.0.1:{free_port()}/metrics"
    r = kafkactl("top", "--once", "--json", "--interval", "0.1", "--metrics", url)
    assert r.returncode == 1, r.stdout + r.stderr
    doc = json.loads(r.stdout)
    assert doc["under_replicated"] is None and doc["offline"] is None, doc
    assert [b["up"] for b in doc["brokers"]] == [False]
    assert "no metrics endpoint answered" in r.stderr.strip().splitlines()[-1], r.stderr
    r = kafkactl("top", "--once", "--interval", "0.1", "--metrics", url)
    assert r.returncode == 1
    assert "under-replicated partitions: -" in r.stdout and "DOWN" in r.stdout, r.stdout


def test_live_top_shows_a_restarting_broker_down_then_up(broker_factory: Any) -> None:
    b: BrokerProcess = broker_factory()
    proc = subprocess.Popen([sys.executable, "-m", "kafkactl", "top", "--json", "-i", "0.3",
                             "-b", b.bootstrap], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)

    def look() -> dict[str, Any]:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line, proc.stderr.read() if proc.stderr else ""
        doc: dict[str, Any] = json.loads(line)
        return doc

    try:
        assert [x["up"] for x in look()["brokers"]] == [True]
        b.stop()
        down = look()
        while down["brokers"] and down["brokers"][0]["up"]:  # a look begun before the stop
            down = look()
        assert [x["up"] for x in down["brokers"]] == [False], down
        assert down["under_replicated"] is None and "cannot reach" in down["error"], down
        b.start()
        for _ in range(50):
            up = look()
            if up["brokers"] and up["brokers"][0]["up"]:
                break
        assert [x["up"] for x in up["brokers"]] == [True] and "error" not in up, up
        assert proc.poll() is None
    finally:
        proc.terminate()
        proc.wait(30)
