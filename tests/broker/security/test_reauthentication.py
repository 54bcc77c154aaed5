"""SASL session lifetimes and re-authentication (KIP-368), and which listeners the
broker-wide ssl.client.auth applies to (KIP-684), against real brokers.

- The session lifetime SaslAuthenticate answers follows Kafka's precedence
  (SaslChannelBuilder): listener.name.<l>.<mechanism>.connections.max.reauth.ms, then
  listener.name.<l>.connections.max.reauth.ms, then connections.max.reauth.ms.
- kafkactl's clients re-authenticate on the same connection before their session ends, as
  Kafka's do, so the broker never closes them ("SASL session expired ... did not
  re-authenticate"): a client connection, `kafkactl produce` and a `kafkactl consume -G`
  member, each over more than two session lifetimes.
- A broker-wide ssl.client.auth=required asks SSL listeners for client certificates, not
  SASL_SSL ones (those only with listener.name.<l>.ssl.client.auth), and is warned about.
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from kafkactl.client.connection import BrokerConnection
from kafkactl.client.errors import KafkaConnectionError
from kafkactl.client.security import ClientSecurity, sasl_authenticate
from kafkactl.protocol.api_keys import ApiKey
from tests.broker.security.certs import Certs
from tests.broker.security.conftest import (
    PASSWORDS,
    SecureBroker,
    add_scram_users,
    needs_openssl,
    start_secure,
)
from tests.polling import wait_until

pytestmark = needs_openssl

LIFETIME_MS = 3000  # short, but long enough for a request's latency on a loaded machine
EXPIRED = "SASL session expired"


def _sasl(mechanism: str, user: str, listener: str = "SASL_PLAINTEXT",
          certs: Certs | None = None, client_cert: bool = False) -> ClientSecurity:
    props = {"security.protocol": listener, "sasl.mechanism": mechanism,
             "sasl.username": user, "sasl.password": PASSWORDS[user]}
    if certs is not None:
        props["ssl.ca.location"] = str(certs.ca)
        if client_cert:
            props["ssl.certificate.location"] = str(certs.client_cert)
            props["ssl.key.location"] = str(certs.client_key)
    return ClientSecurity.from_properties(props)


def _full_log(sb: SecureBroker) -> str:
    path = sb.broker.log_path
    return path.read_text(errors="replace") if path and path.exists() else ""


def _lifetime_answered(sb: SecureBroker, listener: str, mechanism: str, user: str) -> int:
    """The session_lifetime_ms the broker's last SaslAuthenticate answers a login of
    `user` with `mechanism` on `listener`."""
    security = _sasl(mechanism, user, listener, sb.certs if "SSL" in listener else None)
    conn = BrokerConnection("127.0.0.1", sb.ports[listener], request_timeout=10,
                            security=ClientSecurity(  # TLS only: the SASL exchange is ours
                                "SSL" if listener == "SASL_SSL" else "PLAINTEXT",
                                ssl_context=security.ssl_context))
    answers: list[dict[str, Any]] = []

    def request(api_key: int, body: dict[str, Any], *, version: int) -> dict[str, Any]:
        r = conn.request(api_key, body, version=version)
        if api_key == ApiKey.SASL_AUTHENTICATE:
            answers.append(r)
        return r

    try:
        conn.connect()
        sasl_authenticate(request, security, listener)
    finally:
        conn.close()
    assert answers and answers[-1]["error_code"] == 0, answers
    return int(answers[-1]["session_lifetime_ms"])


def test_session_lifetime_follows_kafkas_precedence(certs: Certs, tmp_path: Path) -> None:
    sb = start_secure(tmp_path, certs, **{
        "connections.max.reauth.ms": "11000",
        "listener.name.sasl_plaintext.connections.max.reauth.ms": "7000",
        "listener.name.sasl_plaintext.plain.connections.max.reauth.ms": "3000"})
    try:
        add_scram_users(sb.bootstrap("PLAINTEXT"), {"alice": PASSWORDS["alice"]})
        # the mechanism's own key (Kafka's documented form) wins on its listener
        assert _lifetime_answered(sb, "SASL_PLAINTEXT", "PLAIN", "bob") == 3000
        # another mechanism of that listener: the listener's key
        assert _lifetime_answered(sb, "SASL_PLAINTEXT", "SCRAM-SHA-256", "alice") == 7000
        # another listener: the broker-wide key
        assert _lifetime_answered(sb, "SASL_SSL", "PLAIN", "bob") == 11000
    finally:
        sb.broker.kill()


# ---- KIP-684 ----------------------------------------------------------------------------

def _metadata(sb: SecureBroker, listener: str, security: ClientSecurity) -> dict[str, Any]:
    conn = BrokerConnection("127.0.0.1", sb.ports[listener], security=security,
                            request_timeout=10)
    try:
        conn.connect()
        return conn.request(ApiKey.METADATA, {"topics": [],
                                              "allow_auto_topic_creation": False}, version=1)
    finally:
        conn.close()


def _ssl_only(certs: Certs, client_cert: bool) -> ClientSecurity:
    props = {"security.protocol": "SSL", "ssl.ca.location": str(certs.ca)}
    if client_cert:
        props["ssl.certificate.location"] = str(certs.client_cert)
        props["ssl.key.location"] = str(certs.client_key)
    return ClientSecurity.from_properties(props)


def test_broker_wide_client_auth_applies_to_ssl_listeners_only(certs: Certs,
                                                               tmp_path: Path) -> None:
    sb = start_secure(tmp_path / "wide", certs, **{"ssl.client.auth": "required"})
    try:
        # SASL_SSL without a client certificate: authenticated by SASL, as in Kafka
        assert _metadata(sb, "SASL_SSL", _sasl("PLAIN", "bob", "SASL_SSL", certs))["brokers"]
        # the SSL listener still requires one
        with pytest.raises(KafkaConnectionError):
            _metadata(sb, "SSL", _ssl_only(certs, client_cert=False))
        assert _metadata(sb, "SSL", _ssl_only(certs, client_cert=True))["brokers"]
        log = _full_log(sb)
        assert "'ssl.client.auth=required' is applied only to SSL listeners" in log, log
        assert "listener.name.sasl_ssl.ssl.client.auth" in log
    finally:
        sb.broker.kill()
    # the listener's own key asks SASL_SSL clients for certificates
    sb = start_secure(tmp_path / "own", certs,
                      **{"listener.name.sasl_ssl.ssl.client.auth": "required"})
    try:
        with pytest.raises(KafkaConnectionError):
            _metadata(sb, "SASL_SSL", _sasl("PLAIN", "bob", "SASL_SSL", certs))
        assert _metadata(sb, "SASL_SSL", _sasl("PLAIN", "bob", "SASL_SSL", certs,
                                               client_cert=True))["brokers"]
        assert "applied only to SSL listeners" not in _full_log(sb)
    finally:
        sb.broker.kill()


# ---- kafkactl's clients re-authenticate ---------------------------------------------------

@pytest.fixture
def reauth_broker(certs: Certs, tmp_path: Path) -> Iterator[SecureBroker]:
    sb = start_secure(tmp_path, certs, **{
        "listener.name.sasl_plaintext.connections.max.reauth.ms": str(LIFETIME_MS),
        "group.initial.rebalance.delay.ms": "0", "offsets.topic.replication.factor": "1"})
    add_scram_users(sb.bootstrap("PLAINTEXT"), {"alice": PASSWORDS["alice"]})
    yield sb
    sb.broker.kill()


def _sessions_passed(start: float, n: int = 2) -> bool:
    return time.monotonic() - start > n * LIFETIME_MS / 1000


@pytest.mark.parametrize("mechanism,user", [("PLAIN", "bob"), ("SCRAM-SHA-512", "alice")])
def test_client_connection_reauthenticates(reauth_broker: SecureBroker, mechanism: str,
                                           user: str) -> None:
    conn = BrokerConnection("127.0.0.1", reauth_broker.ports["SASL_PLAINTEXT"],
                            security=_sasl(mechanism, user), request_timeout=10)
    conn.connect()
    sock, start = conn.sock, time.monotonic()
    answered = 0

    def two_sessions_of_requests() -> bool:
        nonlocal answered
        conn.request(ApiKey.METADATA, {"topics": [], "allow_auto_topic_creation": False},
                     version=1)  # raises KafkaConnectionError when the broker closed it
        answered += 1
        return _sessions_passed(start)

    try:
        wait_until(two_sessions_of_requests, 60, "two session lifetimes of requests")
        assert conn.sock is sock, "the connection was made again"
    finally:
        conn.close()
    assert answered > 2
    assert EXPIRED not in _full_log(reauth_broker)


def _cli(*args: str, **kw: Any) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "kafkactl", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)


def _auth(user: str = "alice") -> list[str]:
    return ["-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanism=SCRAM-SHA-512",
            "-X", f"sasl.username={user}", "-X", f"sasl.password={PASSWORDS[user]}"]


def _high_watermark(sb: SecureBroker, topic: str) -> int:
    from kafkactl.client.consumer import Consumer

    with Consumer(bootstrap_servers=sb.bootstrap("PLAINTEXT")) as c:
        return int(c.end_offsets([(topic, 0)])[(topic, 0)])


def _create_topic(sb: SecureBroker, topic: str) -> None:
    from tests.mirror.helpers import create_topics

    create_topics(sb.bootstrap("PLAINTEXT"), {topic: 1})


def test_kafkactl_produce_reauthenticates(reauth_broker: SecureBroker) -> None:
    """One `kafkactl produce` over more than two sessions: every line lands, it never
    says its connection broke, and the broker never closed it."""
    sb = reauth_broker
    _create_topic(sb, "reauth-produce")
    proc = _cli("produce", "-t", "reauth-produce", "-b", sb.bootstrap("SASL_PLAINTEXT"),
                *_auth(), stdin=subprocess.PIPE)
    assert proc.stdin is not None
    start, sent = time.monotonic(), 0

    def one_more_line_landed() -> bool:
        return _high_watermark(sb, "reauth-produce") >= sent

    try:
        while not _sessions_passed(start):
            proc.stdin.write(b"line-%d\n" % sent)
            proc.stdin.flush()
            sent += 1
            wait_until(one_more_line_landed, 30, f"line {sent} acknowledged")
        _out, err = proc.communicate(timeout=60)  # (closes its stdin: the end)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    stderr = err.decode(errors="replace")
    assert proc.returncode == 0, stderr
    assert "retrying" not in stderr and "unreachable" not in stderr, stderr
    assert _high_watermark(sb, "reauth-produce") == sent
    assert EXPIRED not in _full_log(sb)


class _Lines:
    """A process's stdout, line by line as it comes."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        self.fd = proc.stdout.fileno()
        self.buf = b""
        self.lines: list[str] = []

    def read(self) -> list[str]:
        while select.select([self.fd], [], [], 0)[0]:
            chunk = os.read(self.fd, 65536)
            if not chunk:
                break
            self.buf += chunk
        *whole, self.buf = self.buf.split(b"\n")
        self.lines += [w.decode() for w in whole]
        return self.lines

    def has(self, line: str) -> bool:
        return line in self.read()


def test_kafkactl_consume_group_member_reauthenticates(reauth_broker: SecureBroker) -> None:
    """A `kafkactl consume -G` member over more than two sessions keeps its connections:
    the group is not rebalanced again after it joined, and every record reaches it."""
    sb = reauth_broker
    _create_topic(sb, "reauth-consume")
    proc = _cli("consume", "-t", "reauth-consume", "-G", "reauth-grp", "--from-beginning",
                "-b", sb.bootstrap("SASL_PLAINTEXT"), *_auth())
    out = _Lines(proc)
    from kafkactl.client.producer import Producer

    producer = Producer(sb.bootstrap("PLAINTEXT"), linger_ms=0)
    try:

        def produce(value: str) -> None:
            producer.send("reauth-consume", value.encode(), None)
            assert producer.flush(30)

        produce("first")
        wait_until(partial(out.has, "first"), 60, "the member consumed the first record")
        start, n = time.monotonic(), 0
        while not _sessions_passed(start):
            value = f"v{n}"
            produce(value)
            wait_until(partial(out.has, value), 30, f"the member consumed {value}")
            n += 1
        log = _full_log(sb)  # before the member leaves (a rebalance of its own)
    finally:
        producer.close()
        proc.terminate()
        _o, err = proc.communicate(timeout=30)
    stderr = err.decode(errors="replace")
    assert "retrying" not in stderr, stderr
    assert EXPIRED not in log
    rebalances = [line for line in log.splitlines()
                  if "preparing to rebalance group reauth-grp" in line]
    assert len(rebalances) == 1, rebalances
