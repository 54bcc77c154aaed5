"""What the kernel holds for a test's sockets (Linux's /proc/net/tcp*), for waits that
must not depend on timing: e.g. how many of a broker's connections have unread requests."""

from __future__ import annotations

from pathlib import Path


def queued_requests(port: int) -> int:
    """Sockets on the broker's side of `port` with unread bytes (/proc/net/tcp*)."""
    n = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        path = Path(table)
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            fields = line.split()
            local_port = int(fields[1].rsplit(":", 1)[1], 16)
            rx_queue = int(fields[4].split(":")[1], 16)
            if local_port == port and rx_queue > 0:
                n += 1
    return n
