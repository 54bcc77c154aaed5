"""A broker killed while a request waits on a new connection (only ApiVersions answered)
is not taken for a security misconfiguration: the error says the broker no longer accepts
connections instead of "check security.protocol ..." (the hint that fits a broker that is
up and closes a client speaking the wrong protocol; test_ops_errors keeps that one). A
real broker, stopped (SIGSTOP) so the request is surely unanswered, then killed."""

from __future__ import annotations

import os
import signal
import threading
from typing import Any

from kafkactl.client.connection import CLOSED_EARLY_HINT, BrokerConnection
from kafkactl.client.errors import KafkaConnectionError
from kafkactl.protocol.api_keys import ApiKey


def test_a_killed_broker_gets_no_security_hint(broker: Any) -> None:
    conn = BrokerConnection("127.0.0.1", broker.port, request_timeout=60)
    conn.connect()  # ApiVersions answered: nothing else yet
    pid = broker.proc.pid
    os.kill(pid, signal.SIGSTOP)
    errors: list[BaseException] = []

    def ask() -> None:
        try:
            conn.request(ApiKey.METADATA, {"topics": [], "allow_auto_topic_creation": False})
        except BaseException as e:  # noqa: BLE001 (the test reads it)
            errors.append(e)

    t = threading.Thread(target=ask)
    t.start()
    try:
        os.kill(pid, signal.SIGKILL)
    finally:
        t.join(60)
        conn.close()
    assert len(errors) == 1 and isinstance(errors[0], KafkaConnectionError), errors
    text = str(errors[0])
    assert CLOSED_EARLY_HINT not in text, text
    assert "it no longer accepts connections (stopped or restarting)" in text, text

