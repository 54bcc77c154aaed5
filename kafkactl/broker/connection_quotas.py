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

Connection creation rates (KIP-612's broker keys): `max.connection.creation.rate`, new
connections a second on the broker's listeners together, and
`listener.name.<listener>.max.connection.creation.rate` on one listener (unset there: the
broker-wide value, as Kafka's listener-prefixed keys fall back to the plain key); both
unbounded by default (Kafka's 2147483647) and dynamic (kafkactl.broker.dynamic_config). The
inter-broker listener, when the broker has others too, is held to its own listener's rate
only, not the broker-wide one, as Kafka's protected listener. A connection that takes a
rate over its bound is counted in and waits, before anything else is checked, for the
throttle time Kafka's acceptor waits (bounded by one quota window); the connections of
its listener that arrive meanwhile wait behind it, not yet counted, and each is counted
as its turn comes (kafkactl.broker.network holds them, unread; nothing is refused). Then
the limits above are checked; an address's connection_creation_rate that refuses the
connection counts it out of the listener's and the broker's rates again. Measured only
while a rate is set: with none, accepting reads no clock.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import NamedTuple, Protocol

from kafkactl.broker.quota_manager import WINDOW_NUM, WINDOW_SIZE_S, Rate, record_connection

log = logging.getLogger(__name__)

REFUSAL_LOG_INTERVAL_S = 1.0
REFUSAL_LOG_LINES = 10  # "refused connection" lines per interval; the rest are counted
UNBOUNDED = 1 << 62
CREATION_RATE_KEY = "max.connection.creation.rate"
UNBOUNDED_RATE = 2**31 - 1  # Kafka's default: Int.MaxValue, no limit


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


def creation_rates(props: Mapping[str, str], listeners: Iterable[str]
                   ) -> tuple[int | None, dict[str, int]]:
    """The broker-wide max.connection.creation.rate and each listener's (its
    `listener.name.<listener lowercased>.` key, else the broker-wide one), None or left out
    where unbounded."""
    def bound(text: str | None) -> int | None:
        try:
            n = int(str(text).strip())
        except ValueError:
            return None
        return n if 0 <= n < UNBOUNDED_RATE else None

    broker = bound(props.get(CREATION_RATE_KEY))
    per_listener: dict[str, int] = {}
    for name in listeners:
        key = f"listener.name.{name.lower()}.{CREATION_RATE_KEY}"
        rate = bound(props[key]) if key in props else broker
        if rate is not None:
            per_listener[name] = rate
    return broker, per_listener


class ConnectionQuotas:
    def __init__(self, max_connections: int, max_connections_per_ip: int,
                 per_ip_overrides: dict[str, int] | None = None,
                 rate_source: ConnectionRateSource | None = None) -> None:
        self.max_connections = max_connections if max_connections > 0 else UNBOUNDED
        self.max_per_ip = max_connections_per_ip if max_connections_per_ip > 0 else UNBOUNDED
        self.overrides = dict(per_ip_overrides or {})
        self.rate_source = rate_source  # the broker's QuotaManager (None: no rates)
        self.total = 0
        # accepted sockets waiting for a connection creation rate (kafkactl.broker.network
        # keeps the count): they hold descriptors, so max.connections counts them too
        self.waiting = 0
        self._per_ip: dict[str, int] = {}
        self._unlogged = 0
        self._window_start = -REFUSAL_LOG_INTERVAL_S
        self._logged_in_window = 0
        # connection creation rates (configure_rates, update_rates)
        self.rates_on = False  # some listener has a rate: accepting measures
        self._listeners: list[str] = []
        self._protected: str | None = None  # the inter-broker listener, with others
        self._window_num, self._window_size_s = WINDOW_NUM, WINDOW_SIZE_S
        self._clock: Callable[[], float] = time.monotonic
        self._broker_bound: int | None = None
        self._listener_bounds: dict[str, int] = {}
        self._broker_rate: Rate | None = None
        self._listener_rate: dict[str, Rate] = {}
        # throttle time given on accept, ms, per listener (Kafka's
        # connection-accept-throttle-time sensor; kafkactl.broker.metrics)
        self.accept_throttle_ms: dict[str, int] = {}

    # ---- connection creation rates -----------------------------------------------------
    def configure_rates(self, listeners: Iterable[str], inter_broker: str | None,
                        window_num: int = WINDOW_NUM, window_size_s: float = WINDOW_SIZE_S,
                        clock: Callable[[], float] = time.monotonic) -> None:
        """The broker's listeners, its inter-broker listener (None: none) and the quota
        windows (quota.window.num, quota.window.size.seconds) the rates are measured over."""
        self._listeners = list(listeners)
        self._protected = inter_broker if inter_broker in self._listeners and \
            len(self._listeners) > 1 else None
        self._window_num, self._window_size_s = max(1, window_num), window_size_s
        self._clock = clock

    def update_rates(self, props: Mapping[str, str]) -> None:
        """Take the rates of `props` (the broker's live configs; called again on each
        dynamic change). A connection already waiting keeps its throttle time, as in
        Kafka; the ones behind it are measured against the new rates."""
        broker, per_listener = creation_rates(props, self._listeners)
        if (broker, per_listener) != (self._broker_bound, self._listener_bounds):
            log.info("max.connection.creation.rate: broker-wide %s, per listener %s",
                     "unbounded" if broker is None else broker, per_listener or "none")
        self._broker_bound, self._listener_bounds = broker, per_listener
        self.rates_on = broker is not None or bool(per_listener)

    def rated(self, listener: str) -> bool:
        """Does a rate apply to new connections on `listener` (no clock read)?"""
        return (self._broker_bound is not None and listener != self._protected) or \
            listener in self._listener_bounds

    def creation_throttle_ms(self, listener: str) -> int:
        """Count a new connection on `listener` into the broker's and the listener's
        rates: 0 when both stay within their bounds, else how long (ms) it waits before it
        is accepted, the longer of the two (Kafka's ConnectionQuotas)."""
        now = self._clock()
        ms = 0
        bound = self._broker_bound
        if bound is not None and listener != self._protected:
            if self._broker_rate is None:
                self._broker_rate = Rate(self._window_num, self._window_size_s)
            ms = record_connection(self._broker_rate, bound, now, self._window_size_s)
        bound = self._listener_bounds.get(listener)
        if bound is not None:
            rate = self._listener_rate.get(listener)
            if rate is None:
                rate = self._listener_rate[listener] = Rate(self._window_num,
                                                            self._window_size_s)
            ms = max(ms, record_connection(rate, bound, now, self._window_size_s))
        if ms > 0:
            self.accept_throttle_ms[listener] = self.accept_throttle_ms.get(listener, 0) + ms
        return ms

    def _count_out(self, listener: str) -> None:
        """A connection counted by creation_throttle_ms and then refused by its address's
        rate: out of the listener's and the broker's rates again (as Kafka does)."""
        if not self.rates_on or not listener:
            return
        now = self._clock()
        if self._broker_rate is not None and self._broker_bound is not None and \
                listener != self._protected:
            self._broker_rate.record(-1.0, now)
        rate = self._listener_rate.get(listener)
        if rate is not None and listener in self._listener_bounds:
            rate.record(-1.0, now)

    # ---- limits -----------------------------------------------------------------------------
    def has_room(self) -> bool:
        """May one more socket wait for a creation rate (max.connections counts it)?"""
        return self.total + self.waiting < self.max_connections

    def admit(self, ip: str, listener: str = "") -> Refusal | None:
        """Count a new connection from `ip` on `listener` in, or return which limit
        refuses it."""
        if self.total + self.waiting >= self.max_connections:
            more = (f" and {self.waiting} more wait for max.connection.creation.rate"
                    if self.waiting else "")
            return Refusal(f"{self.total} connections are open{more} and max.connections "
                           f"is {self.max_connections}")
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
            self._count_out(listener)
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
