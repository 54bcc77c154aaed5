"""Connection limits checked on accept: `max.connections` (all listeners together) and
`max.connections.per.ip` with `max.connections.per.ip.overrides` (Kafka's keys), and the
client quota `connection_creation_rate` of the peer's IP address or of the default ip entity
(KIP-612; set with AlterClientQuotas, measured over quota.window.num windows of
quota.window.size.seconds by kafkactl.broker.quota_manager, the broker's rate source).

Kafka's defaults are unbounded; here `max.connections` defaults to what the open files limit
(RLIMIT_NOFILE) leaves after the files the log needs (see kafkactl.broker.config), so that
accept() never fails with EMFILE, and the per-IP limit stays unbounded. A refused connection
is closed right after accept with one log line naming the peer and the limit (at most ten
such lines a second; the rest are counted into the next line). A connection over its
address's connection_creation_rate is refused the same way and not counted into the rate
(Kafka counts it out too), and its socket is kept open, unread, for the throttle time
before it is closed, as Kafka's Acceptor does: the client waits rather than reconnect at
once.
"""

from __future__ import annotations

import logging
import time
from typing import NamedTuple, Protocol

log = logging.getLogger(__name__)

REFUSAL_LOG_INTERVAL_S = 1.0
REFUSAL_LOG_LINES = 10  # "refused connection" lines per interval; the rest are counted
UNBOUNDED = 1 << 62


class Refusal(NamedTuple):
    reason: str
    close_after_ms: int = 0  # a throttled connection rate: its socket stays open this long


class ConnectionRateSource(Protocol):
    def connection_throttle_ms(self, ip: str) -> int:
        """0: a new connection from `ip` is within its connection_creation_rate (and
        counted); otherwise the throttle time in ms (not counted)."""


def parse_per_ip_overrides(text: str) -> dict[str, int]:
    """`max.connections.per.ip.overrides`: `host:count,host:count` (IP addresses; an IPv6
    address keeps its colons: the count is after the last one)."""
    out: dict[str, int] = {}
    for item in filter(None, (s.strip() for s in text.split(","))):
        host, sep, count = item.rpartition(":")
        if not sep or not host or not count.strip().isdigit():
            raise ValueError(f"max.connections.per.ip.overrides entry {item!r} must look like "
                             "IP:COUNT")
        out[host.strip().strip("[]")] = int(count)
    return out


class ConnectionQuotas:
    def __init__(self, max_connections: int, max_connections_per_ip: int,
                 per_ip_overrides: dict[str, int] | None = None,
                 rate_source: ConnectionRateSource | None = None) -> None:
        self.max_connections = max_connections if max_connections > 0 else UNBOUNDED
        self.max_per_ip = max_connections_per_ip if max_connections_per_ip > 0 else UNBOUNDED
        self.overrides = dict(per_ip_overrides or {})
        self.rate_source = rate_source  # the broker's QuotaManager (None: no rates)
        self.total = 0
        self._per_ip: dict[str, int] = {}
        self._unlogged = 0
        self._window_start = -REFUSAL_LOG_INTERVAL_S
        self._logged_in_window = 0

    def admit(self, ip: str) -> Refusal | None:
        """Count a new connection from `ip` in, or return which limit refuses it."""
        if self.total >= self.max_connections:
            return Refusal(f"{self.total} connections are open and max.connections is "
                           f"{self.max_connections}")
        have = self._per_ip.get(ip, 0)
        limit = self.overrides.get(ip)
        key = "max.connections.per.ip.overrides"
        if limit is None:
            limit, key = self.max_per_ip, "max.connections.per.ip"
        if have >= limit:
            return Refusal(f"{ip} already has {have} connection(s) and {key} is {limit} "
                           "for it")
        source = self.rate_source
        throttle_ms = source.connection_throttle_ms(ip) if source is not None else 0
        if throttle_ms > 0:
            return Refusal(f"{ip} is over its connection_creation_rate quota (new "
                           f"connections a second); throttled for {throttle_ms} ms",
                           throttle_ms)
        self.total += 1
        self._per_ip[ip] = have + 1
        return None

    def release(self, ip: str) -> None:
        self.total -= 1
        left = self._per_ip.get(ip, 0) - 1
        if left > 0:
            self._per_ip[ip] = left
        else:
            self._per_ip.pop(ip, None)

    def log_refusal(self, peer: str, reason: str) -> None:
        now = time.monotonic()
        if now - self._window_start >= REFUSAL_LOG_INTERVAL_S:
            self._window_start, self._logged_in_window = now, 0
        if self._logged_in_window >= REFUSAL_LOG_LINES:
            self._unlogged += 1
            return
        more = (f" ({self._unlogged} more refused without a line of their own)"
                if self._unlogged else "")
        self._logged_in_window += 1
        self._unlogged = 0
        log.warning("refused connection from %s: %s; closed it%s", peer, reason, more)
