"""A scrape its client gives up on (Prometheus's scrape timeout, a probe that closes or
resets at once) is a DEBUG line of the broker's logging at most: no traceback on stderr
per scrape, and nothing outside --log-format json."""

from __future__ import annotations

import json
import socket
import struct
from pathlib import Path
from typing import Any

from tests.broker.test_metrics import scrape, status
from tests.conftest import free_port
from tests.polling import wait_until

ABORTED = 20
GONE = "the client went away"


def _lines(log: str) -> list[str]:
    return [line for line in log.splitlines() if line.strip()]


def _log(b: Any) -> str:
    """The broker's whole log (BrokerProcess.log keeps only its end)."""
    return Path(b.log_path).read_text(errors="replace")


def test_aborted_scrapes_log_no_traceback(broker_factory: Any) -> None:
    port = free_port()
    b = broker_factory(extra_args=["--metrics", f"127.0.0.1:{port}", "--log-level", "debug",
                                   "--log-format", "json"])
    assert status(port, "/health") == 200
    for _ in range(ABORTED):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()  # RST before the answer is read

    def handled() -> bool:  # each aborted scrape ended, one way (a line) or the other
        log = _log(b)
        return log.count(GONE) + log.count("Traceback") >= ABORTED

    wait_until(handled, what="the aborted scrapes handled")
    log = _log(b)
    assert "Traceback" not in log, log[-3000:]
    for line in _lines(log):
        record = json.loads(line)  # every line the broker wrote is its JSON logging's
        if GONE in record.get("message", ""):
            assert record["level"].upper() == "DEBUG", record
    assert scrape(port)  # the listener serves on
