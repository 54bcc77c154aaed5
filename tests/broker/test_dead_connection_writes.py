"""Answers to a connection its client reset while the broker was frozen (SIGSTOP): on
SIGCONT the broker reads the requests the client pipelined, and its first answer finds the
connection gone. The rest are dropped silently, as Kafka drops the responses of a closed
channel: no asyncio "socket.send() raised exception." line per answer (thousands of
them, with no context), and the broker serves on."""

from __future__ import annotations

import signal
import socket
import struct
from pathlib import Path
from typing import Any

from kafkactl.protocol import codec
from kafkactl.protocol.api_keys import ApiKey
from tests.broker.test_metrics import sample, scrape
from tests.cluster.cluster_helpers import request
from tests.conftest import free_port
from tests.polling import wait_until

PIPELINED = 4000


def _connections(metrics_port: int) -> float:
    return sample(scrape(metrics_port), "kafka_server_socket_server_metrics_connection_count",
                  listener="PLAINTEXT") or 0.0


def test_answers_to_a_reset_connection_are_dropped_quietly(broker_factory: Any) -> None:
    metrics_port = free_port()
    b = broker_factory(extra_args=["--metrics", f"127.0.0.1:{metrics_port}"])
    assert b.proc is not None
    wait_until(lambda: _connections(metrics_port) == 0, what="no connections")
    frame = codec.encode_request(ApiKey.API_VERSIONS, 0, 1, "dead", {})
    s = socket.create_connection(("127.0.0.1", b.port), timeout=10)
    try:
        # one answer first: the broker made the connection before it freezes
        s.sendall(frame)
        (size,) = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))
        s.recv(size, socket.MSG_WAITALL)
        b.proc.send_signal(signal.SIGSTOP)
        try:
            s.sendall(frame * PIPELINED)  # in the broker's receive buffer, unread
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            s.close()  # RST: the client is gone
        finally:
            b.proc.send_signal(signal.SIGCONT)
    finally:
        s.close()
    # the broker handled what it read and let the connection go
    wait_until(lambda: _connections(metrics_port) == 0, what="the reset connection gone")
    resp = request(b.port, ApiKey.API_VERSIONS, 0, {})
    assert resp["error_code"] == 0
    assert b.log_path is not None
    log = Path(b.log_path).read_text(errors="replace")  # all of it (b.log() keeps the end)
    assert "socket.send() raised exception" not in log, log[-3000:]
    assert "Traceback" not in log, log[-3000:]
