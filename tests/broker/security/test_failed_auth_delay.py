"""connection.failed.authentication.delay.ms (Kafka's, default 100 ms): a failed SASL
login gets its SASL_AUTHENTICATION_FAILED answer, and its connection closes, only after the
delay, so guessing passwords is slow; the event loop is not held meanwhile (other clients
are served while failures wait); the "Failed authentication" line is logged once per peer
and then counted; the delay must be below connections.max.idle.ms, as Kafka requires.
Real clients (librdkafka through confluent-kafka, kafka-python) with wrong PLAIN and SCRAM
passwords get Kafka's error, after the delay. Elapsed times are only checked from below (a
delay cannot be shorter than its timer)."""

from __future__ import annotations

import re
import select
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkactl.protocol import codec
from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.errors import ErrorCode
from tests.broker.security.conftest import JAAS, PASSWORDS, add_scram_users
from tests.broker.wire import Wire
from tests.conftest import BrokerProcess, free_port


def _start(tmp: Path, delay_ms: int | None, **extra: str) -> tuple[BrokerProcess, int]:
    data = tmp / "data"
    data.mkdir()
    plain, sasl = free_port(), free_port()
    overrides = {
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        **extra,
    }
    if delay_ms is not None:
        overrides["connection.failed.authentication.delay.ms"] = str(delay_ms)
    b = BrokerProcess(data, plain, overrides)
    b.start()
    return b, sasl


@pytest.fixture
def slow_failures(tmp_path: Path) -> Iterator[tuple[BrokerProcess, int]]:
    b, sasl = _start(tmp_path, 3000)
    yield b, sasl
    b.kill()


def _recv(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed by the broker")
        data += chunk
    return data


def _request(sock: socket.socket, api_key: int, version: int,
             body: dict[str, object]) -> dict[str, object]:
    sock.sendall(codec.encode_request(api_key, version, 1, "guesser", body))
    size = struct.unpack(">i", _recv(sock, 4))[0]
    return codec.decode_response(api_key, version, memoryview(_recv(sock, size)))


def _start_wrong_login(port: int, user: str = "bob") -> socket.socket:
    """A PLAIN login with a wrong password, its answer not yet read."""
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    r = _request(s, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
    assert r["error_code"] == 0
    s.sendall(codec.encode_request(ApiKey.SASL_AUTHENTICATE, 2, 2, "guesser", {
        "auth_bytes": f"\0{user}\0wrong-password".encode()}))
    return s


def _read_failure(s: socket.socket) -> None:
    size = struct.unpack(">i", _recv(s, 4))[0]
    r = codec.decode_response(ApiKey.SASL_AUTHENTICATE, 2, memoryview(_recv(s, size)))
    assert r["error_code"] == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert r["error_message"] == "Authentication failed: Invalid username or password"
    assert s.recv(1) == b""  # then the broker closes the connection


def test_failures_wait_out_the_delay_while_others_are_served(slow_failures) -> None:
    broker, sasl = slow_failures
    started = time.monotonic()
    guessers = [_start_wrong_login(sasl) for _ in range(10)]
    # while ten failures wait, a good client gets many answers, and a good SASL login too
    with Wire(broker.bootstrap) as w:
        for _ in range(20):
            assert w.request(ApiKey.METADATA, 1, {"topics": []})["brokers"]
    with socket.create_connection(("127.0.0.1", sasl), timeout=10) as ok:
        assert _request(ok, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})["error_code"] == 0
        r = _request(ok, ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": b"\0bob\0bob-secret"})
        assert r["error_code"] == 0
    served = time.monotonic()
    waiting, _, _ = select.select(guessers, [], [], 0)
    if served - started < 3.0:  # (always, unless this machine stalled for seconds)
        assert waiting == [], "a failed login was answered before the delay"
    for s in guessers:
        _read_failure(s)
        s.close()
    # ten failures, each waited at least the delay (they waited side by side)
    assert time.monotonic() - started >= 3.0


def test_a_raw_token_failure_is_closed_after_the_delay_too(slow_failures) -> None:
    """SaslHandshake v0 (tokens without Kafka headers): no answer, a delayed close."""
    _broker, sasl = slow_failures
    with socket.create_connection(("127.0.0.1", sasl), timeout=30) as s:
        assert _request(s, ApiKey.SASL_HANDSHAKE, 0, {"mechanism": "PLAIN"})["error_code"] == 0
        started = time.monotonic()
        token = b"\0bob\0wrong"
        s.sendall(struct.pack(">i", len(token)) + token)
        assert s.recv(1) == b""
        assert time.monotonic() - started >= 3.0


def test_the_delay_must_be_below_the_idle_timeout(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="must be less than connections.max.idle.ms"):
        _start(tmp_path, 5000, **{"connections.max.idle.ms": "5000"})


@pytest.fixture
def default_delay(tmp_path: Path) -> Iterator[tuple[BrokerProcess, int]]:
    b, sasl = _start(tmp_path, None)  # Kafka's default: 100 ms
    add_scram_users(b.bootstrap, {"alice": PASSWORDS["alice"]})
    yield b, sasl
    b.kill()


@pytest.mark.parametrize("mechanism,user", [("PLAIN", "bob"), ("SCRAM-SHA-256", "alice")])
def test_librdkafka_with_a_wrong_password_gets_kafkas_error_after_the_delay(
        default_delay, mechanism: str, user: str) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    _broker, sasl = default_delay
    errors: list[str] = []
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{sasl}",
                         "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
                         "sasl.username": user, "sasl.password": "wrong-password",
                         "error_cb": lambda e: errors.append(str(e)), "log_level": 0})
    started = time.monotonic()
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=2)
    assert time.monotonic() - started >= 0.1
    admin.poll(1)  # serves the error callbacks
    assert any("Authentication failed" in e for e in errors), errors


def test_kafka_python_with_a_wrong_scram_password_gets_kafkas_error(
        default_delay, caplog: pytest.LogCaptureFixture) -> None:
    """kafka-python retries a failed login until its timeout; each failure is Kafka's.

    kafka-python 3.0's transport drops the bytes it read together with the end of the
    stream (`_sock_recv` returns both, `_read_from_sock` aborts on the error first): when
    the answer and the close reach it in one wake-up (a loaded machine), it reports
    "socket disconnected" instead of the error it was sent. So the client's side is
    checked for either, and the broker's side (what it answered) from its log."""
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError

    broker, sasl = default_delay
    with pytest.raises(KafkaError):
        KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{sasl}",
                         security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-256",
                         sasl_plain_username="alice", sasl_plain_password="wrong",
                         request_timeout_ms=10000, bootstrap_timeout_ms=10000)
    assert "SaslAuthenticationFailedError" in caplog.text or \
        "socket disconnected" in caplog.text, caplog.text
    assert "invalid credentials with SASL mechanism SCRAM-SHA-256" in broker.log()


def test_many_failures_log_one_line_then_a_count(default_delay) -> None:
    broker, sasl = default_delay
    attempts = 300
    for _ in range(attempts // 30):  # 30 side by side, ten rounds
        guessers = [_start_wrong_login(sasl) for _ in range(30)]
        for s in guessers:
            _read_failure(s)
            s.close()
    text = broker.log()
    assert text.count("Failed authentication with 127.0.0.1:") == 1
    assert "wrong-password" not in text
    assert broker.stop() == 0
    assert broker.log_path is not None
    text = broker.log_path.read_text(errors="replace")
    m = re.search(r"127\.0\.0\.1: (\d+) more failed authentications", text)
    assert m is not None, text[-3000:]
    assert int(m[1]) == attempts - 1
