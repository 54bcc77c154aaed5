"""KafkaClient: bootstrap, per-node connections, the metadata cache and leader routing.

Shared by Producer (from its sender thread), the consumers and the admin client. One thread
uses a KafkaClient at a time.
"""

from __future__ import annotations

import contextlib
import os
import select
import socket
import time
from collections.abc import Iterable
from typing import Any

from kafkactl.client.cluster import ClusterMetadata
from kafkactl.client.connection import CLOSED_EARLY_HINT, BrokerConnection
from kafkactl.client.errors import (
    METADATA_NOT_READY,
    SERVE_ADVICE,
    KafkaConnectionError,
    KafkaTimeoutError,
    NoBrokersAvailable,
    UnknownTopicError,
)
from kafkactl.client.security import ClientSecurity
from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.errors import ErrorCode, error_name

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
# Metadata answers for a topic that is being auto-created (see ensure_topics).
AUTO_CREATE_IN_PROGRESS = frozenset({ErrorCode.LEADER_NOT_AVAILABLE,
                                     ErrorCode.TOPIC_ALREADY_EXISTS})
# Tries before a topic only ever reported unknown is said not to exist (auto-creation off).
MISSING_ATTEMPTS = 5
# Metadata requests in a row closed unanswered on connections whose ApiVersions was
# answered (CLOSED_EARLY_HINT: a SASL listener's way with a plaintext client) before a
# client that never had metadata gives up rather than retrying out its timeout.
EARLY_CLOSE_ATTEMPTS = 3
# Kafka's reconnect.backoff.ms and reconnect.backoff.max.ms: after a broker could not be
# reached, or a connection to it failed or timed out, it is not chosen as "any broker"
# again for this long, doubled per failure in a row up to the maximum (and after that, the
# brokers tried longest ago come first).
RECONNECT_BACKOFF = 0.05
RECONNECT_BACKOFF_MAX = 1.0
Address = tuple[str, int]


class _Attempts:
    """How connecting to one address went: when it was last tried, the failures in a row
    since it last worked, and until when it is in reconnect backoff."""

    __slots__ = ("last_attempt", "failures", "backoff_until")

    def __init__(self) -> None:
        self.last_attempt = float("-inf")
        self.failures = 0
        self.backoff_until = float("-inf")


def default_bootstrap() -> str:
    return os.environ.get("KAFKACTL_BOOTSTRAP") or DEFAULT_BOOTSTRAP


def parse_bootstrap(servers: str | Iterable[str]) -> list[tuple[str, int]]:
    """'h1:p1,h2:p2' (or a list) -> [(host, port)]; port defaults to 9092."""
    items = servers.split(",") if isinstance(servers, str) else list(servers)
    out: list[tuple[str, int]] = []
    for raw in items:
        s = raw.strip()
        if not s:
            continue
        for scheme in ("PLAINTEXT://", "SSL://", "SASL_PLAINTEXT://", "SASL_SSL://"):
            if s.startswith(scheme):
                s = s[len(scheme):]
        if s.startswith("["):  # [ipv6]:port
            host, _, rest = s[1:].partition("]")
            port_s = rest.lstrip(":") or "9092"
        elif s.count(":") == 1:
            host, port_s = s.split(":")
        else:
            host, port_s = s, "9092"
        try:
            port = int(port_s)
            if not 0 < port < 65536:
                raise ValueError
        except ValueError:
            raise ValueError(f"bad bootstrap server {raw!r}: expected host:port") from None
        out.append((host or "127.0.0.1", port))
    if not out:
        raise ValueError("no bootstrap servers given (expected host:port[,host:port...])")
    return out


class KafkaClient:
    def __init__(self, bootstrap_servers: str | Iterable[str] | None = None, *,
                 client_id: str = "kafkactl", request_timeout_ms: int = 30000,
                 connect_timeout_ms: int = 10000, retry_backoff_ms: int = 100,
                 metadata_max_age_ms: int = 300000,
                 security: ClientSecurity | None = None) -> None:
        self.security = security or ClientSecurity()
        self.bootstrap_servers = parse_bootstrap(bootstrap_servers or default_bootstrap())
        self.client_id = client_id
        self.request_timeout = request_timeout_ms / 1000.0
        self.connect_timeout = connect_timeout_ms / 1000.0
        self.retry_backoff = retry_backoff_ms / 1000.0
        self.metadata_max_age = metadata_max_age_ms / 1000.0
        self.cluster = ClusterMetadata()
        self._metadata_tried_at = float("-inf")  # the last Metadata request's start
        self.metadata_seen = False  # a Metadata request was ever answered
        self._conns: dict[int, BrokerConnection] = {}
        self._bootstrap_conn: BrokerConnection | None = None
        self._next_bootstrap = 0
        self._attempts: dict[Address, _Attempts] = {}
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)

    def wakeup(self) -> None:
        """Interrupt a poll() running in another thread."""
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")

    # -- connections ---------------------------------------------------------------------

    def _new_conn(self, host: str, port: int, node_id: int) -> BrokerConnection:
        return BrokerConnection(host, port, node_id=node_id, client_id=self.client_id,
                                connect_timeout=self.connect_timeout,
                                request_timeout=self.request_timeout,
                                security=self.security)

    # reconnect backoff, per address (Kafka's ClusterConnectionStates)

    def _tried(self, address: Address) -> _Attempts:
        a = self._attempts.get(address)
        if a is None:
            a = self._attempts[address] = _Attempts()
        return a

    def _failed(self, address: Address) -> None:
        """A connection to `address` could not be made, or failed or timed out: in
        reconnect backoff for a while, and counted as tried now (Kafka's
        ClusterConnectionStates.disconnected), so that the brokers tried longest ago are
        picked before it after that."""
        a = self._tried(address)
        a.failures += 1
        a.last_attempt = now = time.monotonic()
        a.backoff_until = now + min(
            RECONNECT_BACKOFF * 2 ** min(a.failures - 1, 16), RECONNECT_BACKOFF_MAX)

    def in_backoff(self, address: Address) -> bool:
        """Whether `address` failed a moment ago (reconnect backoff)."""
        a = self._attempts.get(address)
        return a is not None and time.monotonic() < a.backoff_until

    def _connect(self, conn: BrokerConnection, timeout: float | None) -> None:
        """conn.connect(timeout) (its setup given at most `timeout` s); a failure puts the
        address in reconnect backoff."""
        address = (conn.host, conn.port)
        self._tried(address).last_attempt = time.monotonic()
        try:
            conn.connect(timeout)
        except (KafkaConnectionError, KafkaTimeoutError):
            self._failed(address)
            raise
        a = self._tried(address)
        a.failures = 0
        a.backoff_until = float("-inf")

    def bootstrap(self, timeout: float | None = None) -> BrokerConnection:
        """A connection to the first bootstrap server that answers (those in reconnect
        backoff last). With `timeout`, all of them are tried within it, each given half of
        what is left while another is left to try."""
        if self._bootstrap_conn is not None and self._bootstrap_conn.connected:
            return self._bootstrap_conn
        deadline = None if timeout is None else time.monotonic() + timeout
        errors = []
        n = len(self.bootstrap_servers)
        order = sorted(range(n), key=lambda i: self.in_backoff(
            self.bootstrap_servers[(self._next_bootstrap + i) % n]))
        for k, i in enumerate(order):
            host, port = self.bootstrap_servers[(self._next_bootstrap + i) % n]
            budget = None
            if deadline is not None:
                left = deadline - time.monotonic()
                budget = left / 2 if k < n - 1 else left
            conn = self._new_conn(host, port, -1)
            try:
                self._connect(conn, budget)
            except (KafkaConnectionError, KafkaTimeoutError) as e:
                errors.append(str(e))
                continue
            self._next_bootstrap = (self._next_bootstrap + i + 1) % n
            self._bootstrap_conn = conn
            return conn
        servers = ",".join(f"{h}:{p}" for h, p in self.bootstrap_servers)
        if all(CLOSED_EARLY_HINT in e for e in errors):  # something listens there
            raise NoBrokersAvailable(f"no broker answered at {servers} ({'; '.join(errors)})")
        if any("CERTIFICATE_VERIFY_FAILED" in e for e in errors):  # a broker, not trusted
            raise NoBrokersAvailable(
                f"no broker answered at {servers} ({'; '.join(errors)}). The broker's TLS "
                f"certificate was not trusted: {_tls_trust_hint(errors)}")
        raise NoBrokersAvailable(
            f"no broker answered at {servers} ({'; '.join(errors)}). {SERVE_ADVICE}")

    def connection(self, node_id: int, timeout: float | None = None) -> BrokerConnection:
        """The (lazily connected) connection to broker `node_id`; a new one's setup given
        at most `timeout` s (else the request timeout)."""
        conn = self._conns.get(node_id)
        if conn is not None and conn.connected:
            return conn
        broker = self.cluster.brokers.get(node_id)
        if broker is None:
            raise KafkaConnectionError(f"broker {node_id} is not in the cluster metadata")
        # Reuse the bootstrap connection when it reaches the same address.
        bc = self._bootstrap_conn
        if bc is not None and bc.connected and (bc.host, bc.port) == (broker.host, broker.port):
            bc.node_id = node_id
            self._conns[node_id] = bc
            self._bootstrap_conn = None
            return bc
        conn = self._new_conn(broker.host, broker.port, node_id)
        self._conns[node_id] = conn
        try:
            self._connect(conn, timeout)
        except BaseException:
            if self._conns.get(node_id) is conn:
                del self._conns[node_id]
            raise
        return conn

    def _forget_closed(self) -> None:
        """Drop the connections that closed since (a broker closed them, a request on
        them timed out, a send failed): their brokers go into reconnect backoff, as
        Kafka's clients disconnect a node whose request timed out."""
        for nid, c in list(self._conns.items()):
            if not c.connected:
                del self._conns[nid]
                self._failed((c.host, c.port))
        bc = self._bootstrap_conn
        if bc is not None and not bc.connected:
            self._bootstrap_conn = None
            self._failed((bc.host, bc.port))

    def any_connection(self, timeout: float | None = None) -> BrokerConnection:
        """A connection to the least loaded broker, as Kafka's NetworkClient.leastLoadedNode
        picks it for requests any broker answers (Metadata, FindCoordinator, ...): a live
        connection, the bootstrap one included, with the fewest requests in flight (none,
        at best); else a new connection to a broker of the metadata that is not in
        reconnect backoff, the one tried longest ago first; else a bootstrap server. All
        within `timeout` (default: the request timeout): a broker that takes connections
        but does not answer is given half of what is left while another broker can be
        tried."""
        self._forget_closed()
        live = self.connections()
        if live:
            return min(live, key=lambda c: (c.in_flight_count,
                                            self._tried((c.host, c.port)).failures))
        deadline = time.monotonic() + (self.request_timeout if timeout is None else timeout)
        brokers = [b for b in self.cluster.brokers.values()
                   if not self.in_backoff((b.host, b.port))]
        brokers.sort(key=lambda b: (self._tried((b.host, b.port)).last_attempt, b.node_id))
        last: BaseException | None = None
        for b in brokers:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                # the bootstrap servers are left to try after the last broker
                return self.connection(b.node_id, left / 2)
            except (KafkaConnectionError, KafkaTimeoutError) as e:
                last = e
        left = deadline - time.monotonic()
        if left <= 0 and last is not None:
            raise last
        return self.bootstrap(max(left, 0.1))

    def connections(self) -> list[BrokerConnection]:
        out = [c for c in self._conns.values() if c.connected]
        if self._bootstrap_conn is not None and self._bootstrap_conn.connected:
            out.append(self._bootstrap_conn)
        return out

    def drop_connection(self, node_id: int, error: BaseException | None = None) -> None:
        """Close the connection to `node_id` (it failed, or its broker could not be
        reached): the broker goes into reconnect backoff."""
        conn = self._conns.pop(node_id, None)
        if conn is not None:
            conn.close(error)
            self._failed((conn.host, conn.port))

    def poll(self, timeout: float = 0.0) -> int:
        """Read responses on every connection with requests in flight; returns early on
        wakeup()."""
        busy = [c for c in self.connections() if c.in_flight_count and c.sock is not None]
        socks: list[socket.socket] = [self._wake_r] + [c.sock for c in busy]  # type: ignore
        try:
            ready, _, _ = select.select(socks, [], [], max(timeout, 0.0))
        except (OSError, ValueError):
            ready = socks
        if self._wake_r in ready:
            try:
                while self._wake_r.recv(4096):
                    pass
            except OSError:
                pass
        done = 0
        for c in busy:
            if c.sock in ready:
                done += c.poll(0)
            elif c.in_flight_count:
                c._check_timeouts()
        return done

    # -- metadata --------------------------------------------------------------------------

    def metadata_request_body(self, version: int, topics: list[str] | None,
                              allow_auto_create: bool) -> dict[str, Any]:
        if topics is None:
            tlist: list[dict[str, Any]] | None = None if version >= 1 else []
        else:
            tlist = [{"name": t} for t in topics]
        return {"topics": tlist, "allow_auto_topic_creation": allow_auto_create,
                "include_cluster_authorized_operations": False,
                "include_topic_authorized_operations": False}

    def refresh_metadata(self, topics: list[str] | None = None, *,
                         allow_auto_create: bool = False,
                         timeout: float | None = None) -> ClusterMetadata:
        """Fetch metadata for `topics` (None = all) from the least loaded broker
        (any_connection); one that fails or does not answer in time is in reconnect
        backoff, and another is asked, until `timeout` (default: the request timeout).

        As Kafka's clients give each attempt request.timeout.ms within the call's
        default.api.timeout.ms (twice as long), an attempt is given at most the request
        timeout and, while the cluster has another broker to ask, half of what is left:
        a broker that takes the request but does not answer (paused, hung) leaves time to
        ask another. A single-broker cluster's one broker gets all of it."""
        deadline = time.monotonic() + (self.request_timeout if timeout is None else timeout)
        last: BaseException | None = None
        early = 0  # closed unanswered in a row (CLOSED_EARLY_HINT)
        while True:
            self._metadata_tried_at = start = time.monotonic()
            left = deadline - start
            attempt = min(self.request_timeout,
                          left / 2 if len(self.cluster.brokers) > 1 else left)
            try:
                conn = self.any_connection(attempt)
                version = conn.version_for(ApiKey.METADATA)
                body = self.metadata_request_body(version, topics, allow_auto_create)
                resp = conn.request(ApiKey.METADATA, body, version=version,
                                    timeout=max(0.1, start + attempt - time.monotonic()))
                self.cluster.update(resp, all_topics=topics is None)
                self.metadata_seen = True
                return self.cluster
            except NoBrokersAvailable:
                raise
            except (KafkaConnectionError, KafkaTimeoutError) as e:
                last = e
                early = early + 1 if CLOSED_EARLY_HINT in str(e) else 0
                if early >= EARLY_CLOSE_ATTEMPTS and not self.metadata_seen:
                    # the same refusal each time: most likely the wrong security.protocol
                    raise NoBrokersAvailable(f"metadata request failed: {e}") from None
                self._forget_closed()
            if time.monotonic() + self.retry_backoff >= deadline:
                raise KafkaTimeoutError(f"metadata request failed: {last}")
            time.sleep(self.retry_backoff)

    def metadata_backoff(self) -> float:
        """Seconds until maybe_refresh_metadata may ask again (0: now)."""
        return max(0.0, self._metadata_tried_at + self.retry_backoff - time.monotonic())

    def maybe_refresh_metadata(self, topics: list[str], *, force: bool = False) -> bool:
        """Refresh the metadata of `topics` when it is stale: invalidated (a leader could
        not be reached or said it is not the leader), `force` (the caller misses a leader)
        or older than metadata.max.age.ms; at most once per retry.backoff.ms (Kafka's
        metadata refresh backoff), so a partition that has no leader, or a leader that is
        dead but not replaced yet, is asked about again at that pace. Returns whether it
        asked. Raises what refresh_metadata raises (no broker answers)."""
        cluster = self.cluster
        if not (force or cluster.stale
                or time.monotonic() - cluster.updated_at >= self.metadata_max_age):
            return False
        if self.metadata_backoff() > 0:
            return False
        self.refresh_metadata(topics)
        return True

    def ensure_topics(self, topics: list[str], *, allow_auto_create: bool = True,
                      timeout: float | None = None) -> ClusterMetadata:
        """Refresh until each topic exists with its partitions; UnknownTopicError if absent.

        Leaders are not waited for: metadata is usable partition by partition (as in
        Kafka's clients), so a partition with no leader holds up only the requests for it
        (the producer's records for it wait, a consumer skips it and looks again after a
        refresh). With `allow_auto_create`, a topic the cluster is creating is waited for
        until `timeout` (Kafka's clients wait out max.block.ms the same way):
        LEADER_NOT_AVAILABLE (Kafka's answer while a topic is being made, also to the
        second of two concurrent auto-creators), TOPIC_ALREADY_EXISTS (what a broker that
        loses that race may say: older kafkactl brokers did), and UNKNOWN_TOPIC_OR_PARTITION
        once the topic was seen being created (a broker the new topic has not reached
        yet). A topic only ever reported unknown gets MISSING_ATTEMPTS tries: the broker
        does not auto-create it."""
        total = self.request_timeout if timeout is None else timeout
        deadline = time.monotonic() + total
        attempts = 0
        creating: set[str] = set()  # topics the cluster said it is making
        while True:
            attempts += 1
            cluster = self.refresh_metadata(topics, allow_auto_create=allow_auto_create,
                                            timeout=max(0.1, deadline - time.monotonic()))
            missing: list[str] = []
            waiting: list[str] = []
            for t in topics:
                tm = cluster.topics.get(t)
                code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if tm is None else tm.error_code
                if allow_auto_create and code in AUTO_CREATE_IN_PROGRESS:
                    creating.add(t)
                    waiting.append(t)
                elif (tm is None or code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                        or (not tm.partitions and not code)):
                    (waiting if allow_auto_create and t in creating else missing).append(t)
                elif code and code not in METADATA_NOT_READY:
                    raise UnknownTopicError(f"topic {t!r}: {error_name(code)}")
                elif code:
                    waiting.append(t)
            if not missing and not waiting:
                return cluster
            give_up = missing and (not allow_auto_create or attempts >= MISSING_ATTEMPTS)
            if give_up or time.monotonic() + self.retry_backoff >= deadline:
                if missing:
                    raise UnknownTopicError(
                        f"topic {', '.join(map(repr, missing))} does not exist"
                        + ("" if allow_auto_create else
                           " (create it with `kafkactl topics create`)"))
                raise KafkaTimeoutError(
                    f"topic {', '.join(waiting)} is not ready: no metadata with its "
                    f"partitions within {total:g} s (is it being created?)")
            time.sleep(self.retry_backoff)

    def close(self) -> None:
        for s in (self._wake_r, self._wake_w):
            s.close()
        for c in list(self._conns.values()):
            c.close()
        self._conns.clear()
        if self._bootstrap_conn is not None:
            self._bootstrap_conn.close()
            self._bootstrap_conn = None


def _tls_trust_hint(errors: list[str]) -> str:
    """What to set when certificate verification refused the broker."""
    if any("mismatch" in e for e in errors):  # "Hostname mismatch", "IP address mismatch"
        return ("it does not name the host connected to; connect by a name it has, or set "
                "-X ssl.endpoint.identification.algorithm=none to skip that check.")
    return ("give the CA certificate that signed it with -X ssl.ca.location=PATH (or "
            "ssl.ca.location in --command-config).")
