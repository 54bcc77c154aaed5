"""Broker metrics for Prometheus, named as the JMX exporter's standard Kafka rules name
Kafka's MBeans (lowercased, `kafka_<domain>_<type>_<name>`), so that existing dashboards
and alerts carry over.

The request path pays only plain integer and float updates on the event loop: no locks, no
prometheus_client objects, histograms with fixed buckets (a bisect and two additions).
Everything else (partition, controller, log, connection and consumer-lag gauges) is computed
when Prometheus scrapes: the HTTP thread (kafkactl.broker.metrics_http) asks the event loop
for one snapshot of plain numbers (`BrokerMetrics.snapshot`), then formats it off the loop.

What is counted, and where:
- requests per API and version, and their total and queue time: `MeteredHandler`, wrapped
  around the broker's request handler when metrics are on (nothing at all when off); a
  Fetch is counted as `Fetch` and again as `FetchConsumer` or `FetchFollower` (replica id
  >= 0), as Kafka's RequestChannel records it under both names;
- messages and bytes in per topic, and produce requests (total and failed) per topic: every
  local append as leader, as Kafka's ReplicaManager.appendRecords counts them: client
  produces and the coordinators' own writes (offset commits and group metadata to
  __consumer_offsets, __transaction_state, transaction markers), each partition of a
  request once (`ReplicaManager.append` and `count_append`, through `BrokerMetrics.appended`);
  fetch requests (total and failed) per topic: each partition read, consumers' and
  followers' (`ReplicaManager.read`); bytes out per topic (consumer fetches, not
  followers'): `count_fetched` from handlers/fetch.py; replication bytes out (what followers
  were sent, `ReplicaManager.replicated`) and in (what this broker's fetchers got:
  kafkactl.broker.replica_fetcher, read at the scrape with the fetchers' largest lag);
- errors per request and error code (Kafka's RequestMetrics ErrorsPerSec): every error code
  of each response, NONE included (Kafka's errorCounts), by `count_errors`, which the
  request handler calls with each response it encodes;
- failed authentications per listener: `MeteredHandler`, from the connection's
  `failed_authentication` mark;
- event-loop idle ratio: the loop's selector is timed (time spent waiting in select() is idle
  time), on asyncio's own selector loops.

Consumer lag (kafka-lag-exporter's names) is reported by each group's coordinator for every
partition the group committed: the partition's high watermark (what ListOffsets LATEST
answers a read_uncommitted consumer, the "log end" of `offsets show` and kafka-consumer-groups)
minus the committed offset. A partition this broker leads gives its own high watermark; any
other's leader is asked (ListOffsets over the inter-broker listener, one request per leader,
at most once a second whatever the number of scrapers; a scrape waits at most LAG_WAIT_S for
the answers it asked for, a leader's whose last ask failed too: the first scrape after that
leader recovers has its fresh answer). A leader slow to answer (a request out, not failed
yet) leaves its partitions at the last answer it gave, for LAG_MAX_AGE_S; once an ask to it
fails (refused, timed out after LAG_REQUEST_TIMEOUT_S), what it answered before is not served
as its partitions' high watermarks until it answers again. A partition with no usable answer
(no leader for LAG_MAX_AGE_S, a leader down or failing since) is left out of the lag series
and counted in `kafkactl_consumergroup_lag_unknown_partitions{group}`. Offsets of topics
that no longer exist are left out (nothing to lag behind).
"""

from __future__ import annotations

import asyncio
import bisect
import concurrent.futures
import contextlib
import inspect
import logging
import math
import struct
import time
from collections.abc import Awaitable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kafkactl.protocol.codec import decode_request_header
from kafkactl.protocol.errors import ErrorCode, KafkaError
from kafkactl.protocol.versions import SUPPORTED_VERSIONS

if TYPE_CHECKING:
    from kafkactl.broker.network import ConnectionInfo, HandlerResult, RequestHandler
    from kafkactl.broker.replica_manager import ProduceResult
    from kafkactl.broker.services import BrokerServices
    from kafkactl.broker.zk_cluster import ZkCluster
    from kafkactl.cluster.broker_connection import BrokerConnection

log = logging.getLogger(__name__)

# Request time histogram buckets, in milliseconds (fixed: the request path never allocates).
TIME_BUCKETS_MS: tuple[float, ...] = (
    0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000)

# How long a scrape waits for the event loop's snapshot before answering without it.
SNAPSHOT_TIMEOUT_S = 5.0
# The idle ratios are averaged over windows of this many seconds.
IDLE_WINDOW_S = 5.0
# Consumer lag of partitions led elsewhere (module doc): how long a scrape waits for their
# leaders' answers, how often a leader is asked at most, how long one request may take, and
# how long a leader's last answer stands in when it gives none.
LAG_WAIT_S = 1.0
LAG_ASK_MIN_S = 1.0
LAG_REQUEST_TIMEOUT_S = 10.0
LAG_MAX_AGE_S = 300.0
LIST_OFFSETS_VERSION = 7
# Produce errors Kafka's appendToLocalLog does not count as failed produce requests (the
# partition is not here to append to, or the records are refused as too large or corrupt).
_NOT_FAILED_PRODUCE = frozenset({
    ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.CORRUPT_MESSAGE,
    ErrorCode.KAFKA_STORAGE_ERROR})

_HEADER = struct.Struct(">hh")
_INT32 = struct.Struct(">i")
_FETCH = 1  # ApiKey.FETCH
# Kafka's RequestMetrics names of a Fetch from a consumer and from a follower
FETCH_CONSUMER = "FetchConsumer"
FETCH_FOLLOWER = "FetchFollower"
# Fetch versions whose body starts with replica_id (v15 moved it to a tagged ReplicaState)
_FETCH_REPLICA_ID_UNTIL = 14

# A fuzzer's requests must not create series: only APIs and versions we serve are labels.
_API_NAMES: dict[int, str] = {int(k): k.spec_name for k in SUPPORTED_VERSIONS}
_VERSIONS: dict[int, tuple[int, int]] = {int(k): v for k, v in SUPPORTED_VERSIONS.items()}


class Histogram:
    """Fixed-bucket histogram, updated on the event loop only (no lock)."""

    __slots__ = ("counts", "total")

    def __init__(self) -> None:
        self.counts = [0] * (len(TIME_BUCKETS_MS) + 1)  # the last: +Inf
        self.total = 0.0

    def observe(self, value: float) -> None:
        self.counts[_bucket(TIME_BUCKETS_MS, value)] += 1
        self.total += value

    def buckets(self) -> list[tuple[str, float]]:
        """Cumulative (le, count) pairs, as Prometheus wants them."""
        out: list[tuple[str, float]] = []
        running = 0
        for bound, n in zip((*map(_le, TIME_BUCKETS_MS), "+Inf"), list(self.counts),
                            strict=True):
            running += n
            out.append((bound, running))
        return out


_bucket = bisect.bisect_left


class ApiStats:
    """One API's requests per version and its two time histograms (event loop only)."""

    __slots__ = ("per_version", "total_time", "queue_time")

    def __init__(self, highest_version: int) -> None:
        self.per_version = [0] * (highest_version + 1)
        self.total_time = Histogram()
        self.queue_time = Histogram()


def _le(bound: float) -> str:
    return str(int(bound)) if bound == int(bound) else str(bound)


@dataclass
class PartitionState:
    topic: str
    partition: int
    size: int
    log_start: int
    log_end: int


@dataclass
class Snapshot:
    """What the event loop hands the HTTP thread at a scrape: plain numbers only."""

    partition_count: int = 0
    leader_count: int = 0
    under_replicated: int = 0
    under_min_isr: int = 0
    offline: int = 0
    offline_log_dirs: int = 0
    active_controller: int = 0
    fetch_purgatory: int = 0
    produce_purgatory: int = 0
    # the fetch session cache (KIP-227): sessions, partitions over them, evictions so far
    fetch_sessions: int = 0
    fetch_session_partitions: int = 0
    fetch_session_evictions: int = 0
    # ReplicaManager's ISR change counts (None until the replica manager keeps them)
    isr_shrinks: int | None = None
    isr_expands: int | None = None
    partitions: list[PartitionState] = field(default_factory=list)
    connections: dict[str, int] = field(default_factory=dict)
    # max.connection.creation.rate: throttle time given on accept, ms, per listener
    accept_throttle_ms: dict[str, int] = field(default_factory=dict)
    # client quotas: throttle time given, ms, per (quota kind, user, client id)
    throttle_ms: dict[tuple[str, str, str], float] = field(default_factory=dict)
    # (group, topic, partition) -> (committed offset, the partition's high watermark)
    group_offsets: dict[tuple[str, str, int], tuple[int, int]] = field(default_factory=dict)
    # group -> its committed partitions whose high watermark is not known (left out)
    lag_unknown: dict[str, int] = field(default_factory=dict)
    # the replica fetchers: bytes they got, and their largest lag in records
    replication_bytes_in: int = 0
    max_lag: int = 0


class BrokerMetrics:
    """The counters of one broker and what it needs to compute the rest at scrape time."""

    def __init__(self, broker_id: int, listeners: Iterable[str] = ()) -> None:
        self.broker_id = broker_id
        self.listeners = list(listeners)
        # per topic; a deleted topic's go (remove_topic), as Kafka's BrokerTopicStats
        self.messages_in: dict[str, int] = {}
        self.bytes_in: dict[str, int] = {}
        self.bytes_out: dict[str, int] = {}
        # all topics (the series without a topic label): kept when a topic's go
        self.messages_in_all = 0
        self.bytes_in_all = 0
        self.bytes_out_all = 0
        # produce and fetch requests per partition read or append, per topic (Kafka's
        # Total/FailedProduceRequestsPerSec, Total/FailedFetchRequestsPerSec) and all topics
        self.total_produce: dict[str, int] = {}
        self.failed_produce: dict[str, int] = {}
        self.total_fetch: dict[str, int] = {}
        self.failed_fetch: dict[str, int] = {}
        self.total_produce_all = 0
        self.failed_produce_all = 0
        self.total_fetch_all = 0
        self.failed_fetch_all = 0
        self.replication_bytes_out = 0  # sent to followers (ReplicationBytesOutPerSec)
        # api key -> error code -> responses' error codes (ErrorsPerSec)
        self.errors: dict[int, dict[int, int]] = {}
        self._error_plans: dict[int, _ErrorPlan | None] = {}  # by api key << 16 | version
        # consumer lag of partitions led elsewhere: their leaders' answers (a cluster)
        self.leader_ends: LeaderEndOffsets | None = None
        self._finishing: set[asyncio.Task[None]] = set()  # snapshots awaiting leaders
        # indexed by API key: None for a key we do not serve (never a label)
        self.apis: list[ApiStats | None] = [None] * (max(_VERSIONS) + 1)
        for key, (_lo, hi) in _VERSIONS.items():
            self.apis[key] = ApiStats(hi)
        # Fetch requests again, split as consumers' and followers' (Kafka's FetchConsumer,
        # FetchFollower)
        fetch_hi = _VERSIONS.get(_FETCH, (0, 0))[1]
        self.fetch_consumer = ApiStats(fetch_hi)
        self.fetch_follower = ApiStats(fetch_hi)
        self.failed_authentications: dict[str, int] = {}
        self.handler_busy_s = 0.0
        # idle ratios over the last window (None: not measured yet, or not measurable)
        self.network_idle: float | None = None
        self.handler_idle: float | None = None
        self.services: BrokerServices | None = None
        self.socket_server: Any = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.ready = False  # logs loaded and, in a cluster, registered
        self._idle_meter: _SelectorIdleMeter | None = None
        self._idle_task: asyncio.Task[None] | None = None

    # ---- wiring (KafkaServer) ---------------------------------------------------------------
    def count_failed_auth(self, listener: str) -> None:
        """One more failed authentication on `listener` (SASL, or a TLS handshake)."""
        counts = self.failed_authentications
        counts[listener] = counts.get(listener, 0) + 1

    def attach(self, services: BrokerServices, socket_server: Any) -> None:
        """The broker's parts exist: scrapes can now report their state; produce and fetch
        handlers find these counters through `services`."""
        self.services = services
        self.socket_server = socket_server
        self.loop = asyncio.get_running_loop()
        _BY_SERVICES[id(services)] = self
        services.replica_manager.metrics = self
        if services.cluster is not None:
            self.leader_ends = LeaderEndOffsets(services.broker_id, services.cluster)
        self._idle_meter = _SelectorIdleMeter.install(self.loop)
        self._idle_task = self.loop.create_task(self._measure_idle())

    def detach(self) -> None:
        if self.services is not None:
            _BY_SERVICES.pop(id(self.services), None)
            if self.services.replica_manager.metrics is self:
                self.services.replica_manager.metrics = None
        if self.leader_ends is not None:
            self.leader_ends.close()
            self.leader_ends = None
        for task in list(self._finishing):
            task.cancel()
        if self._idle_task is not None:
            self._idle_task.cancel()
            self._idle_task = None
        if self._idle_meter is not None:
            self._idle_meter.uninstall()
            self._idle_meter = None
        self.ready = False

    async def _measure_idle(self) -> None:
        meter = self._idle_meter
        last_time = time.monotonic()
        last_idle = meter.idle_s if meter is not None else 0.0
        last_busy = self.handler_busy_s
        while True:
            await asyncio.sleep(IDLE_WINDOW_S)
            now = time.monotonic()
            elapsed = max(now - last_time, 1e-9)
            if meter is not None:
                self.network_idle = min(max((meter.idle_s - last_idle) / elapsed, 0.0), 1.0)
                last_idle = meter.idle_s
            self.handler_idle = min(max(1 - (self.handler_busy_s - last_busy) / elapsed, 0.0),
                                    1.0)
            last_busy = self.handler_busy_s
            last_time = now

    # ---- the request path (event loop) -------------------------------------------------------
    def appended(self, topic: str, size: int, messages: int, code: int,
                 known: bool = True) -> None:
        """One partition of a produce (a client's or a coordinator's) appended, or refused
        with `code`: produce requests, failed ones, and messages and bytes in (`size`: the
        request's record bytes, Kafka's records.sizeInBytes; `messages`: the records
        appended). `known`: the topic exists (else only the all-topics series count)."""
        self.total_produce_all += 1
        if known:
            self.total_produce[topic] = self.total_produce.get(topic, 0) + 1
        if code:
            if code not in _NOT_FAILED_PRODUCE:
                self.failed_produce_all += 1
                if known:
                    self.failed_produce[topic] = self.failed_produce.get(topic, 0) + 1
            return
        self.bytes_in[topic] = self.bytes_in.get(topic, 0) + size
        self.messages_in[topic] = self.messages_in.get(topic, 0) + messages
        self.bytes_in_all += size
        self.messages_in_all += messages

    def produce_result(self, topic: str, records: Any, result: ProduceResult) -> None:
        """ReplicaManager.append's outcome for one partition."""
        code = result.error
        self.appended(topic, len(records) if records is not None and not code else 0,
                      result.appended_records, code,
                      code != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)

    def fetched(self, topic: str, failed: bool, known: bool, n: int = 1) -> None:
        """`n` partition reads of `topic` for fetches (a consumer's or a follower's; the
        failed ones one at a time)."""
        self.total_fetch_all += n
        if known:
            self.total_fetch[topic] = self.total_fetch.get(topic, 0) + n
        if failed:
            self.failed_fetch_all += 1
            if known:
                self.failed_fetch[topic] = self.failed_fetch.get(topic, 0) + 1

    def count_errors(self, api_key: int, version: int, body: Any) -> None:
        """Every error code of one response (NONE too), as Kafka's errorCounts: the
        request handler calls this with each response body it encodes."""
        key = api_key << 16 | version
        plan = self._error_plans.get(key, _UNPLANNED)
        if plan is _UNPLANNED:
            plan = self._error_plans[key] = _error_plan(api_key, version)
        if plan is None or body.__class__ is not dict:
            return
        counts = self.errors.get(api_key)
        if counts is None:
            counts = self.errors[api_key] = {}
        try:
            _count_errors(plan, body, counts)
        except (AttributeError, TypeError):  # a body not shaped as its schema: not counted
            return

    def remove_topic(self, topic: str) -> None:
        """The last local partition of `topic` is gone (deleted, or moved away): its
        per-topic counters go, so a topic created again under the name starts from zero
        (Kafka's BrokerTopicStats.removeMetrics); the all-topics totals keep counting.
        On the event loop, as the counting."""
        for counts in (self.messages_in, self.bytes_in, self.bytes_out, self.total_produce,
                       self.failed_produce, self.total_fetch, self.failed_fetch):
            counts.pop(topic, None)

    # ---- scrape time ------------------------------------------------------------------------
    def snapshot(self) -> Snapshot | None:
        """The broker's state, taken on the event loop (waits at most SNAPSHOT_TIMEOUT_S);
        None before the broker's parts exist or while the loop does not answer."""
        loop = self.loop
        if loop is None or self.services is None or loop.is_closed():
            return None
        fut: concurrent.futures.Future[Snapshot] = concurrent.futures.Future()

        def take() -> None:
            if fut.set_running_or_notify_cancel():
                try:
                    asks = self.ask_leaders()
                    if asks:  # a cluster's lag: the leaders' answers first (module doc)
                        self._finish_after(asks, fut)
                        return
                    fut.set_result(self.take_snapshot())
                except Exception as e:  # reported by the scrape, the loop carries on
                    fut.set_exception(e)

        try:
            loop.call_soon_threadsafe(take)
            return fut.result(SNAPSHOT_TIMEOUT_S)
        except concurrent.futures.TimeoutError:
            fut.cancel()
            log.warning("metrics: the event loop did not answer within %.0f s; the scrape "
                        "has counters only", SNAPSHOT_TIMEOUT_S)
            return None
        except RuntimeError:  # the loop closed meanwhile
            return None

    def _finish_after(self, asks: list[asyncio.Task[None]],
                      fut: concurrent.futures.Future[Snapshot]) -> None:
        """On the event loop: the snapshot once `asks` are answered, or LAG_WAIT_S passed."""

        async def finish() -> None:
            try:
                await asyncio.wait(asks, timeout=LAG_WAIT_S)
                fut.set_result(self.take_snapshot())
            except asyncio.CancelledError:  # the broker stops: the scrape has counters only
                if not fut.done():
                    fut.set_exception(RuntimeError("the broker is stopping"))
                raise
            except Exception as e:
                if not fut.done():
                    fut.set_exception(e)

        assert self.loop is not None
        task = self.loop.create_task(finish())
        self._finishing.add(task)
        task.add_done_callback(self._finishing.discard)

    def ask_leaders(self) -> list[asyncio.Task[None]]:
        """On the event loop, in a cluster: ask the leaders of the partitions the groups
        coordinated here committed, but this broker does not lead, for their high
        watermarks; the asks a scrape should wait for (module doc)."""
        ends = self.leader_ends
        services = self.services
        if ends is None or services is None:
            return []
        cache = services.metadata_cache
        hosted = services.partitions.partitions
        me = services.broker_id
        by_leader: dict[int, set[tuple[str, int]]] = {}
        for group in list(services.group_coordinator.groups.values()):
            for tp in list(group.offsets):
                part = hosted.get(tp)
                if part is not None and _leads(part, True):
                    continue
                state = cache.partition(*tp)
                if state is not None and state.leader >= 0 and state.leader != me:
                    by_leader.setdefault(state.leader, set()).add(tp)
        return ends.ask(by_leader) if by_leader else []

    # C901: one pass over the partitions, groups and connections, each a few branches
    def take_snapshot(self) -> Snapshot:  # noqa: C901
        """On the event loop: every gauge's value."""
        services = self.services
        assert services is not None
        snap = Snapshot()
        cluster = services.cluster
        for part in list(services.partitions.partitions.values()):
            snap.partition_count += 1
            log_ = part.log
            snap.partitions.append(PartitionState(
                part.topic, part.partition, int(log_.size_in_bytes), part.log_start_offset,
                part.log_end_offset))
            if not _leads(part, cluster is not None):
                continue
            snap.leader_count += 1
            if part.replicas and len(part.isr) < len(part.replicas):
                snap.under_replicated += 1
            if part.replicas and len(part.isr) < log_.config.min_insync_replicas:
                snap.under_min_isr += 1
        if cluster is None or cluster.controller.active:
            snap.active_controller = 1
        if snap.active_controller:
            cache = services.metadata_cache
            for name in cache.topic_names():
                topic = cache.topic(name)
                if topic is not None:
                    snap.offline += sum(1 for p in topic.partitions.values() if p.leader < 0)
        snap.offline_log_dirs = len(services.log_manager.offline_dirs())
        snap.fetch_purgatory = services.fetch_purgatory.size
        sessions = services.fetch_sessions
        if sessions is not None:
            snap.fetch_sessions = len(sessions.sessions)
            snap.fetch_session_partitions = sessions.num_partitions
            snap.fetch_session_evictions = sessions.evictions
        snap.isr_shrinks = getattr(services.replica_manager, "isr_shrinks", None)
        snap.isr_expands = getattr(services.replica_manager, "isr_expands", None)
        watchers = getattr(services.replica_manager.produce_purgatory, "_watchers", {})
        snap.produce_purgatory = len(set().union(*watchers.values())) if watchers else 0
        snap.connections = dict.fromkeys(self.listeners, 0)
        if self.socket_server is not None:
            for conn in list(self.socket_server.connections):
                listener = conn.info.listener
                snap.connections[listener] = snap.connections.get(listener, 0) + 1
            snap.accept_throttle_ms = dict.fromkeys(self.listeners, 0)
            snap.accept_throttle_ms.update(self.socket_server.quotas.accept_throttle_ms)
        self._group_offsets(snap)
        fetchers = getattr(cluster, "fetchers", None)
        if fetchers is not None:
            snap.replication_bytes_in = fetchers.replication_bytes_in
            snap.max_lag = fetchers.max_lag()
        if services.quotas is not None:
            snap.throttle_ms = dict(services.quotas.throttle_ms_total)
        return snap

    def _group_offsets(self, snap: Snapshot) -> None:
        """Each group's committed offsets with their partitions' high watermarks: this
        broker's own for the partitions it leads, else their leaders' last answers (module
        doc); the partitions with neither are counted per group in `snap.lag_unknown`."""
        services = self.services
        assert services is not None
        clustered = services.cluster is not None
        hosted = services.partitions.partitions
        offline = services.partitions.offline
        cache = services.metadata_cache
        remote = self.leader_ends.known() if self.leader_ends is not None else {}
        offsets = snap.group_offsets
        for group_id, group in list(services.group_coordinator.groups.items()):
            unknown = 0
            for tp, committed in list(group.offsets.items()):
                part = hosted.get(tp)
                if part is not None and _leads(part, clustered):
                    offsets[(group_id, *tp)] = (committed.offset, part.high_watermark)
                    continue
                end = remote.get(tp)
                if end is not None:
                    offsets[(group_id, *tp)] = (committed.offset, end)
                elif part is not None or tp in offline or (
                        clustered and cache.partition(*tp) is not None):
                    unknown += 1  # it exists, but its high watermark is not known here
            if unknown or group.offsets:
                snap.lag_unknown[group_id] = unknown


def _leads(part: Any, clustered: bool) -> bool:
    """This broker leads `part` (in a cluster: the controller's word made it so)."""
    if not clustered:
        return bool(part.is_leader)
    return bool(part.role_set and part.leader_id == part.local_id and part.is_leader)


class LeaderEndOffsets:
    """The high watermarks of partitions a cluster broker's groups committed but it does not
    lead, asked of their leaders (ListOffsets LATEST, read_uncommitted), one request per
    leader at a time, and kept for the scrapes (module doc). On the event loop only."""

    def __init__(self, broker_id: int, cluster: ZkCluster) -> None:
        self.broker_id = broker_id
        self.cluster = cluster
        # (topic, partition) -> (high watermark, time.monotonic() of the answer, the
        # leader that answered)
        self.ends: dict[tuple[str, int], tuple[int, float, int]] = {}
        self._asks: dict[int, asyncio.Task[None]] = {}
        self._asked_at: dict[int, float] = {}
        # leaders whose last ask failed: what they answered before is not served (known)
        self._failing: set[int] = set()
        self._connections: dict[int, BrokerConnection] = {}

    def known(self) -> dict[tuple[str, int], int]:
        """The high watermarks answered within LAG_MAX_AGE_S (older ones are dropped) by a
        leader whose last ask did not fail (a failing leader's are kept, unserved, until it
        answers again or they age out)."""
        oldest = time.monotonic() - LAG_MAX_AGE_S
        stale = [tp for tp, (_end, at, _by) in self.ends.items() if at < oldest]
        for tp in stale:
            del self.ends[tp]
        failing = self._failing
        return {tp: end for tp, (end, _at, by) in self.ends.items() if by not in failing}

    def ask(self, by_leader: dict[int, set[tuple[str, int]]]) -> list[asyncio.Task[None]]:
        """Ask each leader for its partitions' high watermarks, unless a request to it is
        still out or it was asked less than LAG_ASK_MIN_S ago; returns the asks made, to
        wait for (a leader's whose last ask failed too: it may be back)."""
        now = time.monotonic()
        loop = asyncio.get_running_loop()
        waiting = []
        for leader, tps in by_leader.items():
            running = self._asks.get(leader)
            if running is not None and not running.done():
                continue
            if now - self._asked_at.get(leader, -math.inf) < LAG_ASK_MIN_S:
                continue
            self._asked_at[leader] = now
            task = self._asks[leader] = loop.create_task(self._ask(leader, sorted(tps)))
            waiting.append(task)
        return waiting

    async def _ask(self, leader: int, tps: list[tuple[str, int]]) -> None:
        try:
            answers = await self._list_offsets(leader, tps)
        except Exception as e:  # connection errors, timeouts, an answer that did not decode
            if leader not in self._failing:
                log.info("metrics: broker %d did not answer for the consumer lag of the "
                         "%d partition(s) it leads (%s: %s); they are counted as unknown "
                         "until it answers", leader, len(tps), type(e).__name__, e)
                self._failing.add(leader)
            return
        if leader in self._failing:
            log.info("metrics: broker %d answers for the consumer lag again", leader)
            self._failing.discard(leader)
        now = time.monotonic()
        for tp, end in answers.items():
            self.ends[tp] = (end, now, leader)

    async def _list_offsets(self, leader: int, tps: list[tuple[str, int]]
                            ) -> dict[tuple[str, int], int]:
        from kafkactl.cluster.broker_connection import BrokerConnection
        from kafkactl.protocol.api_keys import ApiKey

        security = self.cluster.inter_broker
        broker = self.cluster.cache.broker(leader)
        address = broker.endpoint(security.listener) if broker is not None else None
        if address is None:
            raise LookupError(f"broker {leader} is not live on listener {security.listener}")
        conn = self._connections.get(leader)
        if conn is None or (conn.host, conn.port) != address:
            if conn is not None:
                conn.close()
            conn = self._connections[leader] = BrokerConnection(
                *address, client_id=f"kafkactl-metrics-{self.broker_id}", security=security)
        topics: dict[str, list[dict[str, Any]]] = {}
        for topic, p in tps:
            topics.setdefault(topic, []).append(
                {"partition_index": p, "current_leader_epoch": -1, "timestamp": -1})
        resp = await conn.request(ApiKey.LIST_OFFSETS, LIST_OFFSETS_VERSION, {
            "replica_id": -1, "isolation_level": 0,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]},
            LAG_REQUEST_TIMEOUT_S)
        out: dict[tuple[str, int], int] = {}
        for t in resp.get("topics") or ():
            for p in t.get("partitions") or ():
                if p.get("error_code", 0) == 0 and p.get("offset", -1) >= 0:
                    out[(t["name"], p["partition_index"])] = p["offset"]
        return out

    def close(self) -> None:
        for task in self._asks.values():
            task.cancel()
        self._asks.clear()
        for conn in self._connections.values():
            conn.close()
        self._connections.clear()


# A response's error codes: (the names of the error code fields of a struct, and its fields
# holding structs with some: (name, an array?, their plan)).
_ErrorPlan = tuple[tuple[str, ...], tuple[tuple[str, bool, Any], ...]]
_UNPLANNED: Any = object()


def _error_plan(api_key: int, version: int) -> _ErrorPlan | None:
    """Where the error codes of a response are (None: it has none)."""
    from kafkactl.protocol.messages import RESPONSES

    message = RESPONSES.get(api_key)
    if message is None:
        return None

    def plan(fields: Iterable[Any]) -> _ErrorPlan | None:
        codes = []
        children = []
        for f in fields:
            if not f.present_in(version):
                continue
            if f.fields:
                sub = plan(f.fields)
                if sub is not None:
                    children.append((f.name, f.is_array, sub))
            elif f.type == "int16" and (f.name == "error_code" or
                                        f.name.endswith("_error_code")):
                codes.append(f.name)
        return (tuple(codes), tuple(children)) if codes or children else None

    return plan(message.fields)


def _count_errors(plan: _ErrorPlan, body: dict[str, Any], counts: dict[int, int]) -> None:
    codes, children = plan
    for name in codes:
        code = body.get(name)
        if code is not None:
            counts[code] = counts.get(code, 0) + 1
    for name, many, sub in children:
        value = body.get(name)
        if not value:
            continue
        if many:
            for item in value:
                _count_errors(sub, item, counts)
        else:
            _count_errors(sub, value, counts)


# Each running broker's metrics, by id(services): the handlers reach them through services.
_BY_SERVICES: dict[int, BrokerMetrics] = {}


def metrics_of(services: BrokerServices) -> BrokerMetrics | None:
    return _BY_SERVICES.get(id(services)) if _BY_SERVICES else None


def remove_topic_metrics(store: object, topic: str) -> None:
    """The PartitionStore `store` no longer hosts any partition of `topic`: the per-topic
    metrics of its broker go (Kafka's ReplicaManager calls BrokerTopicStats.removeMetrics
    once the last local partition of a topic is deleted). Per-partition gauges need
    nothing: they are read from the hosted partitions at each scrape."""
    for metrics in list(_BY_SERVICES.values()):
        services = metrics.services
        if services is not None and services.partitions is store:
            metrics.remove_topic(topic)


def count_fetched(services: BrokerServices, request: dict[str, Any],
                  topics: list[dict[str, Any]]) -> None:
    """A consumer fetch's answer: bytes out per topic (followers' fetches are replication,
    as Kafka counts them apart)."""
    metrics = metrics_of(services)
    if metrics is None or request.get("replica_id", -1) >= 0:
        return
    out = metrics.bytes_out
    for topic in topics:
        size = 0
        for p in topic["partitions"]:
            records = p["records"]
            size += records.length if hasattr(records, "length") else len(records)
        if size:
            name = topic["topic"]
            out[name] = out.get(name, 0) + size
            metrics.bytes_out_all += size


def record_count(records: Any) -> int:
    """Records in a produce's record set: each v2 batch's record count; a v0/v1 message
    counts as one (a compressed wrapper message too)."""
    end = len(records)
    unpack = _INT32.unpack_from
    pos = count = 0
    while pos + 17 <= end:
        length = unpack(records, pos + 8)[0]
        if records[pos + 16] >= 2 and pos + 61 <= end:
            count += unpack(records, pos + 57)[0]
        else:
            count += 1
        if length <= 0:
            break
        pos += 12 + length
    return count


class MeteredHandler:
    """The broker's request handler, counted: requests per API and version, total and queue
    time, failed authentications. Wrapped around the handler only when metrics are on."""

    def __init__(self, inner: RequestHandler, metrics: BrokerMetrics) -> None:
        self.inner = inner
        self.metrics = metrics
        self.apis = metrics.apis
        # the request handler (KafkaApis, maybe behind an authentication gate) counts each
        # response's error codes
        target: Any = inner
        while target is not None and not hasattr(target, "count_errors"):
            target = getattr(target, "inner", None)
        if target is not None:
            target.count_errors = metrics.count_errors
        # the loop's clock: the network layer stamps arrivals (received_at) with it
        self.clock = asyncio.get_running_loop().time

    def handle(self, conn: ConnectionInfo, frame: bytearray) -> HandlerResult:
        clock = self.clock
        started = clock()
        failed_before = conn.failed_authentication
        result = self.inner.handle(conn, frame)  # bad frames raise CloseConnection: uncounted
        now = clock()
        metrics = self.metrics
        metrics.handler_busy_s += now - started
        if conn.failed_authentication and not failed_before:
            metrics.count_failed_auth(conn.listener)
        api_key, version = _HEADER.unpack_from(frame)
        apis = self.apis
        stats = apis[api_key] if 0 <= api_key < len(apis) else None
        if stats is None or not 0 <= version < len(stats.per_version):
            return result  # refused (an API or version we do not serve): no series for it
        received = conn.received_at or started
        split = self._fetch_split(frame, version) if api_key == _FETCH else None
        if result is not None and result.__class__ is not list and inspect.isawaitable(result):
            return self._finish(result, stats, version, received, started, split)
        stats.per_version[version] += 1
        total = stats.total_time
        total_ms = (now - received) * 1000
        total.counts[_bucket(TIME_BUCKETS_MS, total_ms)] += 1
        total.total += total_ms
        queue = stats.queue_time
        queue_ms = (started - received) * 1000 if started > received else 0.0
        queue.counts[_bucket(TIME_BUCKETS_MS, queue_ms)] += 1
        queue.total += queue_ms
        if split is not None:
            split.per_version[version] += 1
            split.total_time.observe(total_ms)
            split.queue_time.observe(queue_ms)
        return result

    def _fetch_split(self, frame: bytearray, version: int) -> ApiStats | None:
        """A Fetch's second name (Kafka's RequestChannel: FetchFollower when its replica id
        is >= 0, else FetchConsumer); None when the frame does not say."""
        if version > _FETCH_REPLICA_ID_UNTIL:
            return None
        try:
            _header, pos = decode_request_header(frame)
            (replica_id,) = _INT32.unpack_from(frame, pos)
        except (KafkaError, struct.error, IndexError, ValueError):
            return None
        metrics = self.metrics
        return metrics.fetch_follower if replica_id >= 0 else metrics.fetch_consumer

    async def _finish(self, pending: Awaitable[Any], stats: ApiStats, version: int,
                      received: float, started: float, split: ApiStats | None = None) -> Any:
        try:
            return await pending
        finally:
            total_ms = (self.clock() - received) * 1000
            queue_ms = max(started - received, 0.0) * 1000
            for counted in (stats, split):
                if counted is not None:
                    counted.per_version[version] += 1
                    counted.total_time.observe(total_ms)
                    counted.queue_time.observe(queue_ms)


class _SelectorIdleMeter:
    """Times the event loop's waits in select(): the loop is idle exactly then."""

    def __init__(self, selector: Any) -> None:
        self.selector = selector
        self.original = selector.select
        self.idle_s = 0.0
        clock = time.monotonic
        original = self.original

        def select(timeout: float | None = None) -> Any:
            start = clock()
            try:
                return original(timeout)
            finally:
                self.idle_s += clock() - start

        selector.select = select

    @classmethod
    def install(cls, loop: asyncio.AbstractEventLoop) -> _SelectorIdleMeter | None:
        selector = getattr(loop, "_selector", None)  # asyncio's selector loops; not uvloop
        if selector is None or not hasattr(selector, "select"):
            return None
        return cls(selector)

    def uninstall(self) -> None:
        with contextlib.suppress(AttributeError):
            del self.selector.select  # the class's method again


# ---- the Prometheus side (the HTTP thread) ---------------------------------------------------
def exposition(metrics: BrokerMetrics) -> str:
    """The broker's metrics in Prometheus's text format (0.0.4). The families are
    prometheus_client's; their samples are written here, not by generate_latest, which
    spends ~25 µs a sample validating and escaping names that are constants here: a broker
    with 10,000 partitions has ~40,000 samples. The per-partition and per-group families are
    written straight from the snapshot."""
    parts = [_format(family) for family in families(metrics)]
    snap = metrics.snapshot()
    if snap is not None:
        parts.extend(_format(family) for family in _state_families(snap))
        parts.append(_log_text(snap.partitions))
        parts.append(_lag_text(snap.group_offsets, snap.lag_unknown))
    return "".join(parts)


def _escape(value: str) -> str:
    if "\\" in value or '"' in value or "\n" in value:
        return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r'\"')
    return value


def _number(value: float) -> str:
    if value.__class__ is int:
        return str(value)
    if value != value:
        return "NaN"
    if value in (math.inf, -math.inf):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def _format(family: Any) -> str:
    """One prometheus_client metric family as text (as generate_latest writes it)."""
    name, kind = family.name, family.type
    if kind == "counter":
        name += "_total"
    doc = family.documentation.replace("\\", r"\\").replace("\n", r"\n")
    lines = [f"# HELP {name} {doc}\n# TYPE {name} {kind}\n"]
    for sample in family.samples:
        if sample.labels:
            labels = ",".join(f'{k}="{_escape(v)}"' for k, v in sample.labels.items())
            lines.append(f"{sample.name}{{{labels}}} {_number(sample.value)}\n")
        else:
            lines.append(f"{sample.name} {_number(sample.value)}\n")
    return "".join(lines)


def _log_text(partitions: list[PartitionState]) -> str:
    if not partitions:
        return ""
    ordered = sorted(partitions, key=lambda p: (p.topic, p.partition))
    labels = [f'{{topic="{_escape(p.topic)}",partition="{p.partition}"}} ' for p in ordered]
    lines = []
    for name, doc, attr in (
            ("kafka_log_log_size", "Bytes of the partition's log on disk", "size"),
            ("kafka_log_log_logstartoffset", "The partition's log start offset", "log_start"),
            ("kafka_log_log_logendoffset", "The partition's log end offset", "log_end")):
        lines.append(f"# HELP {name} {doc}\n# TYPE {name} gauge\n")
        lines.extend(f"{name}{label}{getattr(p, attr)}\n" for label, p in zip(
            labels, ordered, strict=True))
    return "".join(lines)


def _lag_text(offsets: dict[tuple[str, str, int], tuple[int, int]],
              unknown: dict[str, int] | None = None) -> str:
    """kafka-lag-exporter's names: lag and committed offset per group/topic/partition, the
    largest and total lag per group (of the partitions whose high watermark is known); and
    per group the committed partitions left out, their high watermark not known."""
    lag = ["# HELP kafka_consumergroup_group_lag The partition's high watermark (its leader's "
           "latest offset) minus the group's committed offset\n"
           "# TYPE kafka_consumergroup_group_lag gauge\n"]
    offset = ["# HELP kafka_consumergroup_group_offset The group's committed offset\n"
              "# TYPE kafka_consumergroup_group_offset gauge\n"]
    per_group: dict[str, list[int]] = {}
    for (group, topic, partition), (committed, end) in sorted(offsets.items()):
        value = max(end - committed, 0) if committed >= 0 else end
        label = f'{{group="{_escape(group)}",topic="{_escape(topic)}",partition="{partition}"}}'
        lag.append(f"kafka_consumergroup_group_lag{label} {value}\n")
        offset.append(f"kafka_consumergroup_group_offset{label} {committed}\n")
        per_group.setdefault(group, []).append(value)
    lines = lag + offset
    for name, doc, fn in (("kafka_consumergroup_group_max_lag",
                           "The group's largest partition lag", max),
                          ("kafka_consumergroup_group_sum_lag",
                           "The group's lag over all its partitions", sum)):
        lines.append(f"# HELP {name} {doc}\n# TYPE {name} gauge\n")
        lines.extend(f'{name}{{group="{_escape(group)}"}} {fn(lags)}\n'
                     for group, lags in per_group.items())
    if unknown:
        name = "kafkactl_consumergroup_lag_unknown_partitions"
        lines.append(f"# HELP {name} The group's committed partitions left out of its lag: "
                     "no high watermark known (no leader, or the leader has not answered)\n"
                     f"# TYPE {name} gauge\n")
        lines.extend(f'{name}{{group="{_escape(group)}"}} {n}\n'
                     for group, n in sorted(unknown.items()))
    return "".join(lines)


def _per_topic(name: str, doc: str, counts: dict[str, int], all_topics: int) -> Any:
    """A counter per topic plus the all-topics series without a topic label (the JMX
    exporter's output for the MBean without `topic=`), which deleted topics still count
    in, as Kafka's allTopicsStats."""
    from prometheus_client.core import Metric

    family = Metric(name, doc, "counter")
    values = dict(counts)
    family.add_sample(name + "_total", {}, float(all_topics))
    for topic, value in sorted(values.items()):
        family.add_sample(name + "_total", {"topic": topic}, float(value))
    return family


def families(metrics: BrokerMetrics) -> Iterator[Any]:
    """The families of the counters (read without waiting on the event loop)."""
    from prometheus_client.core import (
        CounterMetricFamily,
        GaugeMetricFamily,
        HistogramMetricFamily,
    )

    yield _per_topic("kafka_server_brokertopicmetrics_messagesin",
                     "Messages appended by client produces (MessagesInPerSec)",
                     metrics.messages_in, metrics.messages_in_all)
    yield _per_topic("kafka_server_brokertopicmetrics_bytesin",
                     "Record bytes appended by client produces (BytesInPerSec)",
                     metrics.bytes_in, metrics.bytes_in_all)
    yield _per_topic("kafka_server_brokertopicmetrics_bytesout",
                     "Record bytes sent to consumers (BytesOutPerSec)", metrics.bytes_out,
                     metrics.bytes_out_all)
    for suffix, doc, per_topic, all_topics in (
            ("totalproducerequests", "Partitions of produce requests appended to here, "
             "clients' and coordinators' (TotalProduceRequestsPerSec)",
             metrics.total_produce, metrics.total_produce_all),
            ("failedproducerequests", "Partitions of produce requests whose append failed "
             "(FailedProduceRequestsPerSec)",
             {**dict.fromkeys(metrics.total_produce, 0), **metrics.failed_produce},
             metrics.failed_produce_all),
            ("totalfetchrequests", "Partitions of fetch requests read, consumers' and "
             "followers' (TotalFetchRequestsPerSec)", metrics.total_fetch,
             metrics.total_fetch_all),
            ("failedfetchrequests", "Partitions of fetch requests whose read failed "
             "(FailedFetchRequestsPerSec)",
             {**dict.fromkeys(metrics.total_fetch, 0), **metrics.failed_fetch},
             metrics.failed_fetch_all)):
        yield _per_topic("kafka_server_brokertopicmetrics_" + suffix, doc, per_topic,
                         all_topics)
    yield CounterMetricFamily(
        "kafka_server_brokertopicmetrics_replicationbytesout",
        "Record bytes sent to followers (ReplicationBytesOutPerSec)",
        value=metrics.replication_bytes_out)
    requests = CounterMetricFamily(
        "kafka_network_requestmetrics_requests", "Requests handled (RequestsPerSec)",
        labels=["request", "version"])
    total = HistogramMetricFamily(
        "kafka_network_requestmetrics_totaltimems",
        "Request total time in ms, arrival to answer (TotalTimeMs)", labels=["request"])
    queue = HistogramMetricFamily(
        "kafka_network_requestmetrics_requestqueuetimems",
        "Time in ms a request waited before its handler ran (RequestQueueTimeMs)",
        labels=["request"])
    for name, stats in _request_stats(metrics):
        counts = list(stats.per_version)
        if not any(counts):
            continue  # an API nobody called: no series
        for version, n in enumerate(counts):
            if n:
                requests.add_metric([name, str(version)], n)
        total.add_metric([name], stats.total_time.buckets(), stats.total_time.total)
        queue.add_metric([name], stats.queue_time.buckets(), stats.queue_time.total)
    yield from (requests, total, queue)
    errors = CounterMetricFamily(
        "kafka_network_requestmetrics_errors",
        "Error codes in responses, NONE included, per request and error (ErrorsPerSec)",
        labels=["request", "error"])
    for key, by_code in sorted(dict(metrics.errors).items()):
        request = _API_NAMES.get(key)
        if request is None:
            continue
        named: dict[str, int] = {}  # codes Kafka does not know are one UNKNOWN_SERVER_ERROR
        for code, n in dict(by_code).items():
            error = _error_name(code)
            named[error] = named.get(error, 0) + n
        for error, n in sorted(named.items()):
            errors.add_metric([request, error], n)
    yield errors
    failed = CounterMetricFamily(
        "kafka_server_socket_server_metrics_failed_authentication",
        "Failed authentications per listener (failed-authentication-total)",
        labels=["listener", "networkprocessor"])
    for listener in sorted({*metrics.listeners, *metrics.failed_authentications}):
        failed.add_metric([listener, "0"], metrics.failed_authentications.get(listener, 0))
    yield failed
    for name, doc, value in (
            ("kafka_network_socketserver_networkprocessoravgidle_percent",
             "Fraction of time the event loop waited for network events "
             "(NetworkProcessorAvgIdlePercent)", metrics.network_idle),
            ("kafka_server_kafkarequesthandlerpool_requesthandleravgidle_percent",
             "Fraction of time no request handler ran (RequestHandlerAvgIdlePercent)",
             metrics.handler_idle)):
        if value is not None:
            yield GaugeMetricFamily(name, doc, value=value)
    yield GaugeMetricFamily("kafkactl_broker_ready",
                            "1 once logs are loaded and, in a cluster, the broker is "
                            "registered", value=1 if metrics.ready else 0)


def _request_stats(metrics: BrokerMetrics) -> Iterator[tuple[str, ApiStats]]:
    """Each request name's stats: the APIs served, Fetch followed by FetchConsumer and
    FetchFollower (its requests again, split as Kafka's RequestChannel records them; the
    errors per request stay under Fetch only, as Kafka's updateErrorMetrics keeps them)."""
    for key, stats in enumerate(metrics.apis):
        if stats is None:
            continue
        yield _API_NAMES[key], stats
        if key == _FETCH:
            yield FETCH_CONSUMER, metrics.fetch_consumer
            yield FETCH_FOLLOWER, metrics.fetch_follower


def _error_name(code: int) -> str:
    """Kafka's name of an error code (Errors.forCode: an unknown code is
    UNKNOWN_SERVER_ERROR)."""
    try:
        return ErrorCode(code).name
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR.name


def _state_families(snap: Snapshot) -> Iterator[Any]:
    """The gauges of one event-loop snapshot, but the per-partition and per-group ones."""
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    for name, doc, value in (
            ("kafka_server_replicamanager_partitioncount", "Partitions on this broker",
             snap.partition_count),
            ("kafka_server_replicamanager_leadercount", "Partitions this broker leads",
             snap.leader_count),
            ("kafka_server_replicamanager_underreplicatedpartitions",
             "Led partitions whose ISR is smaller than their replica set",
             snap.under_replicated),
            ("kafka_server_replicamanager_underminisrpartitioncount",
             "Led partitions with fewer in-sync replicas than min.insync.replicas",
             snap.under_min_isr),
            ("kafka_controller_kafkacontroller_activecontrollercount",
             "1 on the active controller, else 0", snap.active_controller),
            ("kafka_controller_kafkacontroller_offlinepartitionscount",
             "Partitions without a leader (reported by the active controller)",
             snap.offline),
            ("kafka_log_logmanager_offlinelogdirectorycount",
             "Log dirs offline (failed at start) or with storage errors",
             snap.offline_log_dirs)):
        yield GaugeMetricFamily(name, doc, value=value)
    for name, doc, count in (
            ("kafka_server_replicamanager_isrshrinks", "ISR shrinks (IsrShrinksPerSec)",
             snap.isr_shrinks),
            ("kafka_server_replicamanager_isrexpands", "ISR expansions (IsrExpandsPerSec)",
             snap.isr_expands)):
        if count is not None:
            yield CounterMetricFamily(name, doc, value=count)
    yield CounterMetricFamily("kafka_server_brokertopicmetrics_replicationbytesin",
                              "Record bytes fetched from leaders (ReplicationBytesInPerSec)",
                              value=snap.replication_bytes_in)
    max_lag = GaugeMetricFamily(
        "kafka_server_replicafetchermanager_maxlag",
        "The largest lag, in records, of a partition this broker follows behind its leader's "
        "high watermark, at the last fetch (MaxLag)", labels=["clientid"])
    max_lag.add_metric(["Replica"], snap.max_lag)
    yield max_lag
    yield GaugeMetricFamily(
        "kafka_server_fetchsessioncache_numincrementalfetchsessions",
        "Incremental fetch sessions cached (NumIncrementalFetchSessions)",
        value=snap.fetch_sessions)
    yield GaugeMetricFamily(
        "kafka_server_fetchsessioncache_numincrementalfetchpartitionscached",
        "Partitions over the cached fetch sessions (NumIncrementalFetchPartitionsCached)",
        value=snap.fetch_session_partitions)
    yield CounterMetricFamily(
        "kafka_server_fetchsessioncache_incrementalfetchsessionevictions",
        "Fetch sessions evicted for new ones (IncrementalFetchSessionEvictionsPerSec)",
        value=snap.fetch_session_evictions)
    purgatory = GaugeMetricFamily(
        "kafka_server_delayedoperationpurgatory_purgatorysize",
        "Requests waiting in a purgatory", labels=["delayedoperation"])
    purgatory.add_metric(["Fetch"], snap.fetch_purgatory)
    purgatory.add_metric(["Produce"], snap.produce_purgatory)
    yield purgatory
    connections = GaugeMetricFamily(
        "kafka_server_socket_server_metrics_connection_count", "Open connections per listener",
        labels=["listener", "networkprocessor"])
    for listener, n in sorted(snap.connections.items()):
        connections.add_metric([listener, "0"], n)
    yield connections
    accept_throttle = CounterMetricFamily(
        "kafka_server_socket_server_metrics_connection_accept_throttle_time_ms",
        "Time new connections waited before they were accepted, ms, over "
        "max.connection.creation.rate (the broker's or the listener's; Kafka's "
        "connection-accept-throttle-time, here a total), per listener",
        labels=["listener"])
    for listener, waited in sorted(snap.accept_throttle_ms.items()):
        accept_throttle.add_metric([listener], waited)
    yield accept_throttle
    throttled = CounterMetricFamily(
        "kafka_server_quota_throttle_time_ms",
        "Throttle time given to clients over a quota, ms (Produce, Fetch, Request and "
        "ControllerMutation throttle-time), per user and client id",
        labels=["quota", "user", "client_id"])
    for (kind, user, client), ms in sorted(snap.throttle_ms.items()):
        throttled.add_metric([kind, user, client], ms)
    yield throttled


def parse_listen(value: str) -> tuple[str, int]:
    """`metrics.listen`'s HOST:PORT (ValueError with a sentence when it is not one)."""
    host, sep, port = value.strip().rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"metrics.listen={value!r} must be HOST:PORT, e.g. 0.0.0.0:9308")
    return host.strip("[]"), int(port)

