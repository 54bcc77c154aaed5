"""Ports for the servers a test starts (brokers, ZooKeeper, metrics endpoints).

One allocator per test process, whichever way a test reaches it: pytest imports
tests/conftest.py as a top-level `conftest` module (tests/ is not a package) while test
modules import `tests.conftest`, two module objects. Had each its own cursor, the fixtures'
ports (broker_factory) and a test's own (a cluster's metrics ports) came from two walks over
one slice and met: a broker's metrics endpoint took the port its Kafka listener was handed
next, and that broker could not listen (seen in CI). Both conftest copies re-export this
module's `free_port`, so there is one cursor.

Ports come from below the kernel's ephemeral range (net.ipv4.ip_local_port_range), so no
client socket is given one between the test picking it and the server binding it, and each
pytest-xdist worker has a slice of its own."""

from __future__ import annotations

import os
import random
import socket
import threading
from pathlib import Path

PORTS_LOW = 20000

_next_port: dict[tuple[int, int], int] = {}  # per slice: the port to try next
_port_lock = threading.Lock()


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def slice_width() -> int:
    """How many ports this worker's slice has (0: no room below the ephemeral range)."""
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    width = (_ephemeral_low() - PORTS_LOW) // max(count, 1)
    return width if width >= 100 else 0


def free_port() -> int:
    """A loopback port nothing listens on now, for a server a test is about to start, and
    one this process has not handed out lately: a test often picks several ports (a
    broker's listeners, a cluster's brokers) before anything binds them, so a free port is
    not enough. The worker's slice is walked in order from a random start, so a port comes
    back only after the whole slice (~2,000 ports) has been handed out."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    index = int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else 0
    width = slice_width()
    if width:
        low = PORTS_LOW + (index % count) * width
        with _port_lock:
            offset = _next_port.setdefault((low, width), random.SystemRandom().randrange(width))
            for step in range(width):
                port = low + (offset + step) % width
                with socket.socket() as s:
                    try:
                        s.bind(("127.0.0.1", port))
                    except OSError:
                        continue
                _next_port[(low, width)] = (offset + step + 1) % width
                return port
    with socket.socket() as s:  # no room below the ephemeral range: any free port
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
