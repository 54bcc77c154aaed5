"""Connection limits (Kafka's ConnectionQuotas, KIP-402 and KIP-612): `max.connections`
(all listeners together), `listener.name.<listener>.max.connections` (one listener),
`max.connections.per.ip` with `max.connections.per.ip.overrides`, and the client quota
`connection_creation_rate` of the peer's IP address or of the default ip entity (KIP-612;
set with AlterClientQuotas, measured over quota.window.num windows of
quota.window.size.seconds by kafkactl.broker.quota_manager, the broker's rate source).

The broker's and the listeners' limits do not refuse: as Kafka's acceptor, a listener
stops accepting while it, or the broker, is at its limit (kafkactl.broker.network's
Acceptor: new connections wait in the listen backlog, unaccepted and unread) and accepts
again as soon as a connection closes or the limit is raised (`slot_freed`, Kafka's
counts.notifyAll). A listener without its own `listener.name.<listener>.max.connections`
takes `max.connections` (Kafka's listener-prefixed keys fall back to the plain key); both
are dynamic (kafkactl.broker.dynamic_config, `update_limits`). The inter-broker listener,
when the broker has others too (Kafka's protected listener), is held to its own listener's
limit only, not the broker-wide one: an inter-broker connection is accepted at the
broker-wide limit, and while the broker has more connections than `max.connections`, the
least recently active connection of the other listeners is closed, one at a time, until it
is back within (Kafka's Processor.closeExcessConnections; lowering max.connections
dynamically below the open count closes connections the same way).

Kafka's defaults are unbounded; here `max.connections` defaults to what the open files
limit (RLIMIT_NOFILE) leaves after the files the log needs (see kafkactl.broker.config), so
that accept() never fails with EMFILE (connections over it wait in the listen backlog,
holding no descriptor), and the per-IP limit stays unbounded. The per-IP limits do refuse
(Kafka's TooManyConnectionsException): such a connection is closed right after accept with
one log line naming the peer and the limit (at most ten such lines a second; the rest are
counted into the next line). A connection over its address's connection_creation_rate is
refused the same way and not counted into the rate (Kafka counts it out too), and its
socket is kept open, unread, for the throttle time before it is closed, as Kafka's
Acceptor does: the client waits rather than reconnect at once.

Connection creation rates (KIP-612's broker keys): `max.connection.creation.rate`, new
connections a second on the broker's listeners together, and
`listener.name.<listener>.max.connection.creation.rate` on one listener (unset there: the
broker-wide value); both unbounded by default (Kafka's 2147483647) and dynamic. The
inter-broker listener, when the broker has others too, is held to its own listener's rate
only, not the broker-wide one. A connection that takes a rate over its bound is counted in
and waits, before anything else is checked, for the throttle time Kafka's acceptor waits
(bounded by one quota window), and its listener accepts nothing meanwhile (the connections
that arrive wait in the listen backlog, not yet counted; nothing is refused). Then it waits
for a slot under the limits above if there is none, and then the per-IP limits are
checked; an address's connection_creation_rate that refuses the connection counts it out
of the listener's and the broker's rates again. Measured only while a rate is set: with
none, accepting reads no clock.
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
BLOCKED_LOG_INTERVAL_S = 60.0  # "stops accepting" lines: at most one per listener per this
UNBOUNDED = 1 << 62
MAX_CONNECTIONS_KEY = "max.connections"
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


def _connection_limit(text: object) -> int | None:
    """A max.connections value: None when it is no integer; UNBOUNDED for one under 1 (as
    the broker has always read 0 and -1 here) or Kafka's Int.MaxValue."""
    try:
        n = int(str(text).strip())
    except ValueError:
        return None
    return n if 0 < n < UNBOUNDED_RATE else UNBOUNDED


def _shown(limit: int) -> str:
    return "unbounded" if limit >= UNBOUNDED else str(limit)


def connection_limits(props: Mapping[str, str], listeners: Iterable[str]
                      ) -> tuple[int | None, dict[str, int]]:
    """The broker-wide max.connections (None: not in `props`, or not a number) and the
    listeners that have their own `listener.name.<listener lowercased>.max.connections`
    (the others take the broker-wide one)."""
    broker = _connection_limit(props[MAX_CONNECTIONS_KEY]) \
        if MAX_CONNECTIONS_KEY in props else None
    per_listener: dict[str, int] = {}
    for name in listeners:
        key = f"listener.name.{name.lower()}.{MAX_CONNECTIONS_KEY}"
        if key in props:
            limit = _connection_limit(props[key])
            if limit is not None:
                per_listener[name] = limit
    return broker, per_listener


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
        # connections counted in: accepted and let in (from then until they close, their
        # TLS handshake included), all listeners together and per listener
        self.total = 0
        self.listener_counts: dict[str, int] = {}
        # listeners with their own listener.name.<listener>.max.connections
        self._listener_limits: dict[str, int] = {}
        # called when a connection is counted out or a limit changes (Kafka's
        # counts.notifyAll): the socket server lets its waiting acceptors retry
        self.slot_freed: Callable[[], None] | None = None
        self._per_ip: dict[str, int] = {}
        self._unlogged = 0
        self._window_start = -REFUSAL_LOG_INTERVAL_S
        self._logged_in_window = 0
        self._blocked_logged: dict[str, float] = {}  # listener -> its last "stops" line
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

    # ---- the broker's listeners ---------------------------------------------------------
    def configure_rates(self, listeners: Iterable[str], inter_broker: str | None,
                        window_num: int = WINDOW_NUM, window_size_s: float = WINDOW_SIZE_S,
                        clock: Callable[[], float] = time.monotonic) -> None:
        """The broker's listeners, its inter-broker listener (None: none; protected from
        the broker-wide limit and rate when there are other listeners) and the quota
        windows (quota.window.num, quota.window.size.seconds) the rates are measured over."""
        self._listeners = list(listeners)
        self._protected = inter_broker if inter_broker in self._listeners and \
            len(self._listeners) > 1 else None
        self._window_num, self._window_size_s = max(1, window_num), window_size_s
        self._clock = clock

    @property
    def protected(self) -> str | None:
        """The inter-broker listener when the broker has others too (Kafka's protected
        listener), else None."""
        return self._protected

    def update(self, props: Mapping[str, str]) -> None:
        """The broker's live configs (at start and on each dynamic change): the limits
        and the rates."""
        self.update_limits(props)
        self.update_rates(props)

    # ---- max.connections, broker-wide and per listener ----------------------------------
    def update_limits(self, props: Mapping[str, str]) -> None:
        """Take max.connections and listener.name.<listener>.max.connections from `props`
        (the broker's live configs); waiting acceptors retry at once (a raised limit lets
        them accept; a lowered one below the open connections closes some: see the
        module's note on the inter-broker listener)."""
        broker, per_listener = connection_limits(props, self._listeners)
        broker = self.max_connections if broker is None else broker
        if (broker, per_listener) == (self.max_connections, self._listener_limits):
            return
        log.info("max.connections: broker-wide %s, per listener %s", _shown(broker),
                 {k: _shown(v) for k, v in per_listener.items()} or "none of their own")
        self.max_connections, self._listener_limits = broker, per_listener
        if self.slot_freed is not None:
            self.slot_freed()

    def listener_limit(self, listener: str) -> int:
        """`listener`'s max.connections: its own, else the broker-wide one."""
        return self._listener_limits.get(listener, self.max_connections)

    def slot_available(self, listener: str) -> bool:
        """May `listener` accept one more connection (Kafka's connectionSlotAvailable)?
        Below its own limit, and (but the protected inter-broker listener) below the
        broker-wide one."""
        if self.listener_counts.get(listener, 0) >= self.listener_limit(listener):
            return False
        return listener == self._protected or self.total < self.max_connections

    def excess(self) -> int:
        """Connections over max.connections (taken by the inter-broker listener, or left
        by a lowered limit): that many of the other listeners' are to be closed."""
        return max(0, self.total - self.max_connections)

    def log_blocked(self, listener: str) -> None:
        """`listener` stops accepting for want of a slot: one line, at most once per
        listener per BLOCKED_LOG_INTERVAL_S."""
        now = time.monotonic()
        last = self._blocked_logged.get(listener)
        if last is not None and now - last < BLOCKED_LOG_INTERVAL_S:
            return
        self._blocked_logged[listener] = now
        count, own = self.listener_counts.get(listener, 0), self.listener_limit(listener)
        if count >= own:
            key = f"listener.name.{listener.lower()}.max.connections" \
                if listener in self._listener_limits else "max.connections"
            why = f"{count} connections are open on it and {key} is {own}"
        else:
            why = (f"{self.total} connections are open and max.connections is "
                   f"{self.max_connections}")
        log.warning("listener %s stops accepting new connections: %s; they wait in the "
                    "listen backlog until a connection closes", listener, why)

    # ---- connection creation rates -----------------------------------------------------
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

    # ---- counting in and out ------------------------------------------------------------
    def admit(self, ip: str, listener: str = "") -> Refusal | None:
        """Count a new connection from `ip` on `listener` in (its acceptor found a slot
        for it: `slot_available`), or return which per-IP limit refuses it."""
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
        self.listener_counts[listener] = self.listener_counts.get(listener, 0) + 1
        self._per_ip[ip] = have + 1
        return None

    def release(self, ip: str, listener: str = "") -> None:
        """A connection counted in by `admit` is gone: count it out, and wake the
        acceptors that wait for a slot."""
        self.total -= 1
        left = self.listener_counts.get(listener, 0) - 1
        if left > 0:
            self.listener_counts[listener] = left
        else:
            self.listener_counts.pop(listener, None)
        left = self._per_ip.get(ip, 0) - 1
        if left > 0:
            self._per_ip[ip] = left
        else:
            self._per_ip.pop(ip, None)
        if self.slot_freed is not None:
            self.slot_freed()

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
