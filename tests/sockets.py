"""What the kernel holds for a test's sockets (Linux's /proc/net/tcp*), for waits that
must not depend on timing: e.g. how many of a broker's connections have unread requests;
and a partition's end offset, for waits on what a broker took."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path


def _tcp_sockets() -> Iterator[tuple[int, int, int, int]]:
    """(local port, remote port, tx queue, rx queue) of every TCP socket here."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        path = Path(table)
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            fields = line.split()
            tx, rx = (int(q, 16) for q in fields[4].split(":"))
            yield (int(fields[1].rsplit(":", 1)[1], 16), int(fields[2].rsplit(":", 1)[1], 16),
                   tx, rx)


def queued_requests(port: int) -> int:
    """Sockets on the broker's side of `port` with unread bytes (/proc/net/tcp*)."""
    return sum(1 for local, _r, _tx, rx in _tcp_sockets() if local == port and rx > 0)


def queued_bytes(port: int) -> int:
    """Bytes sent to the broker listening on `port` that it has not read yet."""
    return sum(rx for local, _r, _tx, rx in _tcp_sockets() if local == port)


def all_answered(port: int) -> bool:
    """Every connection to or from `port` has nothing queued either way (the broker read
    its requests, the client its answers)."""
    return not any(port in (local, remote) and (tx or rx)
                   for local, remote, tx, rx in _tcp_sockets())


def end_offset(bootstrap: str, topic: str) -> int:
    """Partition 0's log end offset as a kafka-python consumer sees it (-1: not yet)."""
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        tp = TopicPartition(topic, 0)
        return int(c.end_offsets([tp]).get(tp) or 0)
    except Exception:  # noqa: BLE001 - not there yet
        return -1
    finally:
        c.close()


def ipv6_loopback() -> bool:
    """Whether this machine can bind ::1 (a test of IPv6 clients skips without it)."""
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False
