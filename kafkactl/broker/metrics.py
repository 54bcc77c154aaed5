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
  around the broker's request handler when metrics are on (nothing at all when off);
- messages and bytes in per topic (successful appends of client produces):
  `BrokerMetrics.produced` from handlers/produce.py (which looks the metrics up once per
  request with `metrics_of`); bytes out per topic (consumer fetches, not followers'):
  `count_fetched` from handlers/fetch.py;
- failed authentications per listener: `MeteredHandler`, from the connection's
  `failed_authentication` mark;
- event-loop idle ratio: the loop's selector is timed (time spent waiting in select() is idle
  time), on asyncio's own selector loops.
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

from kafkactl.protocol.versions import SUPPORTED_VERSIONS

if TYPE_CHECKING:
    from kafkactl.broker.network import ConnectionInfo, HandlerResult, RequestHandler
    from kafkactl.broker.services import BrokerServices

log = logging.getLogger(__name__)

# Request time histogram buckets, in milliseconds (fixed: the request path never allocates).
TIME_BUCKETS_MS: tuple[float, ...] = (
    0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000)

# How long a scrape waits for the event loop's snapshot before answering without it.
SNAPSHOT_TIMEOUT_S = 5.0
# The idle ratios are averaged over windows of this many seconds.
IDLE_WINDOW_S = 5.0

_HEADER = struct.Struct(">hh")
_INT32 = struct.Struct(">i")

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
    # ReplicaManager's ISR change counts (None until the replica manager keeps them)
    isr_shrinks: int | None = None
    isr_expands: int | None = None
    partitions: list[PartitionState] = field(default_factory=list)
    connections: dict[str, int] = field(default_factory=dict)
    # max.connection.creation.rate: throttle time given on accept, ms, per listener
    accept_throttle_ms: dict[str, int] = field(default_factory=dict)
    # client quotas: throttle time given, ms, per (quota kind, user, client id)
    throttle_ms: dict[tuple[str, str, str], float] = field(default_factory=dict)
    # (group, topic, partition) -> (committed offset, log end offset)
    group_offsets: dict[tuple[str, str, int], tuple[int, int]] = field(default_factory=dict)


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
        # indexed by API key: None for a key we do not serve (never a label)
        self.apis: list[ApiStats | None] = [None] * (max(_VERSIONS) + 1)
        for key, (_lo, hi) in _VERSIONS.items():
            self.apis[key] = ApiStats(hi)
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
        self._idle_meter = _SelectorIdleMeter.install(self.loop)
        self._idle_task = self.loop.create_task(self._measure_idle())

    def detach(self) -> None:
        if self.services is not None:
            _BY_SERVICES.pop(id(self.services), None)
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
    def produced(self, topic: str, records: Any) -> None:
        """A successful append of a client's produce: messages and bytes in."""
        size = len(records)
        count = record_count(records)
        self.bytes_in[topic] = self.bytes_in.get(topic, 0) + size
        self.messages_in[topic] = self.messages_in.get(topic, 0) + count
        self.bytes_in_all += size
        self.messages_in_all += count

    def remove_topic(self, topic: str) -> None:
        """The last local partition of `topic` is gone (deleted, or moved away): its
        per-topic counters go, so a topic created again under the name starts from zero
        (Kafka's BrokerTopicStats.removeMetrics); the all-topics totals keep counting.
        On the event loop, as the counting."""
        for counts in (self.messages_in, self.bytes_in, self.bytes_out):
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
            leads = part.is_leader if cluster is None else (
                part.role_set and part.leader_id == part.local_id and part.is_leader)
            if not leads:
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
        hosted = services.partitions.partitions
        for group_id, group in list(services.group_coordinator.groups.items()):
            for (topic_name, partition), committed in list(group.offsets.items()):
                hosted_part = hosted.get((topic_name, partition))
                if hosted_part is None:
                    continue  # not hosted here: its log end is another broker's to know
                snap.group_offsets[(group_id, topic_name, partition)] = (
                    committed.offset, hosted_part.high_watermark)
        if services.quotas is not None:
            snap.throttle_ms = dict(services.quotas.throttle_ms_total)
        return snap


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
        if result is not None and result.__class__ is not list and inspect.isawaitable(result):
            return self._finish(result, stats, version, received, started)
        stats.per_version[version] += 1
        total = stats.total_time
        ms = (now - received) * 1000
        total.counts[_bucket(TIME_BUCKETS_MS, ms)] += 1
        total.total += ms
        queue = stats.queue_time
        ms = (started - received) * 1000 if started > received else 0.0
        queue.counts[_bucket(TIME_BUCKETS_MS, ms)] += 1
        queue.total += ms
        return result

    async def _finish(self, pending: Awaitable[Any], stats: ApiStats, version: int,
                      received: float, started: float) -> Any:
        try:
            return await pending
        finally:
            stats.per_version[version] += 1
            stats.total_time.observe((self.clock() - received) * 1000)
            stats.queue_time.observe(max(started - received, 0.0) * 1000)


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
        parts.append(_lag_text(snap.group_offsets))
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


def _lag_text(offsets: dict[tuple[str, str, int], tuple[int, int]]) -> str:
    """kafka-lag-exporter's names: lag and committed offset per group/topic/partition, the
    largest and total lag per group."""
    lag = ["# HELP kafka_consumergroup_group_lag Log end offset minus the group's committed "
           "offset\n# TYPE kafka_consumergroup_group_lag gauge\n"]
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
    for key, stats in enumerate(metrics.apis):
        if stats is None:
            continue
        counts = list(stats.per_version)
        if not any(counts):
            continue  # an API nobody called: no series
        name = _API_NAMES[key]
        for version, n in enumerate(counts):
            if n:
                requests.add_metric([name, str(version)], n)
        total.add_metric([name], stats.total_time.buckets(), stats.total_time.total)
        queue.add_metric([name], stats.queue_time.buckets(), stats.queue_time.total)
    yield from (requests, total, queue)
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

