"""Consumers: the seed's SimpleConsumer and an iterating Consumer over assigned partitions.

Consumer gets its partitions from an AssignmentSource. Today that is a static source
(explicit `assign()`, or topic names / a whitelist-blacklist TopicFilter resolved through
metadata); group membership plugs in as another AssignmentSource (join/sync/heartbeat in
`on_poll`, committed offsets from `committed()`).
"""

from __future__ import annotations

import contextlib
import enum
import logging
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from kafkactl.client.errors import (
    STALE_LEADER,
    KafkaConnectionError,
    KafkaTimeoutError,
    NoBrokersAvailable,
    UnknownTopicError,
)
from kafkactl.client.fetcher import (
    EARLIEST,
    LATEST,
    ConsumerRecord,
    CorruptFetchError,
    PartitionFetch,
    TopicPartition,
    fetch_request_body,
    group_by_leader,
    list_offsets_body,
    parse_fetch_response,
    parse_list_offsets,
)
from kafkactl.client.kafka_client import MISSING_ATTEMPTS, KafkaClient
from kafkactl.client.security import ClientSecurity
from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.errors import (
    ErrorCode,
    OffsetOutOfRangeError,
    error_for,
    error_name,
)

log = logging.getLogger(__name__)

NO_PROGRESS_LIMIT = 3  # fetches in a row that return bytes but no whole batch
# partitions -> the offsets of those it can find now (see Consumer.seek_when_available)
OffsetResolver = Callable[[list[TopicPartition]], Mapping[TopicPartition, int]]


# What a partition error of a Fetch answer means, said to the user with its name (Kafka's
# consumer: "Not authorized to access topics: [orders]", Errors' descriptions); `{topic}`
# is the partition's topic. A code not here: _FETCH_REFUSED.
_FETCH_ERRORS: dict[int, str] = {
    ErrorCode.TOPIC_AUTHORIZATION_FAILED: "not authorized to read topic {topic}",
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED: "not authorized on the cluster",
    ErrorCode.UNKNOWN_TOPIC_ID: "the broker does not host topic {topic} under the topic ID "
                                "asked (deleted, or deleted and created again?)",
    ErrorCode.INCONSISTENT_TOPIC_ID: "the topic ID of {topic} asked does not match the "
                                     "partition's log (deleted and created again?)",
    ErrorCode.KAFKA_STORAGE_ERROR: "the broker has a disk error on the partition's log",
    ErrorCode.UNSUPPORTED_COMPRESSION_TYPE: "the broker will not send this client the "
                                            "partition's compression type",
    ErrorCode.REPLICA_NOT_AVAILABLE: "the replica is not available",
    ErrorCode.OFFSET_NOT_AVAILABLE: "the offset is not available yet",
    ErrorCode.OFFSET_MOVED_TO_TIERED_STORAGE: "the offset has moved to tiered storage",
    ErrorCode.UNKNOWN_SERVER_ERROR: "the broker had an unexpected error",
    ErrorCode.UNSUPPORTED_VERSION: "the broker does not support this fetch request version",
    ErrorCode.INVALID_REQUEST: "the broker found the fetch request invalid",
    ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR: "the topic IDs of the fetch session do not "
                                            "match the request's",
    ErrorCode.POLICY_VIOLATION: "the broker's policy refused the fetch",
}
_FETCH_REFUSED = "the broker refused the fetch"


def fetch_error_sentence(code: int, topic: str) -> str:
    """What partition error `code` of a Fetch answer about `topic` means, in a few words."""
    return _FETCH_ERRORS.get(code, _FETCH_REFUSED).format(topic=topic)


def _position_after(pf: PartitionFetch) -> int:
    """A partition's position once chunk `pf` is handed out: its next offset, or where a
    batch header that cannot be framed stands (the reader of the chunk raises there)."""
    damage = pf.damage_offset
    return pf.next_offset() if damage is None else damage


class _Apply(enum.Enum):
    """How a position found for a partition is applied: a seek (what was in flight is
    dropped), an auto.offset.reset, or the first one of a partition with no commit (it
    counts as consumed too)."""

    SEEK = 1
    RESET = 2
    FIRST_RESET = 3


@dataclass
class TopicFilter:
    """Topic subscription: names, or a whitelist regex minus a blacklist regex."""

    topics: tuple[str, ...] = ()
    pattern: str | None = None
    exclude: str | None = None
    include_internal: bool = False

    def __post_init__(self) -> None:
        self._inc = re.compile(self.pattern) if self.pattern else None
        self._exc = re.compile(self.exclude) if self.exclude else None

    def matches(self, topic: str, internal: bool = False) -> bool:
        if self._exc is not None and self._exc.fullmatch(topic):
            return False
        if topic in self.topics:
            return True
        if self._inc is not None:
            return (not internal or self.include_internal) and bool(self._inc.fullmatch(topic))
        return False


class AssignmentSource(Protocol):
    """Where a Consumer's partitions come from (static today, a group coordinator later)."""

    def assignment(self, client: KafkaClient) -> set[TopicPartition]: ...

    def committed(self, client: KafkaClient,
                  tps: set[TopicPartition]) -> dict[TopicPartition, int]: ...

    def on_poll(self, client: KafkaClient) -> None: ...

    def born_since_start(self, tps: list[TopicPartition]) -> list[TopicPartition]: ...

    def close(self, client: KafkaClient) -> None: ...


class StaticAssignment:
    """Explicit partitions, or every partition of the topics a TopicFilter matches."""

    def __init__(self, partitions: Iterable[TopicPartition] | None = None,
                 topic_filter: TopicFilter | None = None,
                 partition_filter: set[int] | None = None) -> None:
        self.partitions = set(partitions or ())
        self.filter = topic_filter
        self.partition_filter = partition_filter

    def assignment(self, client: KafkaClient) -> set[TopicPartition]:
        if self.filter is None:
            return set(self.partitions)
        f = self.filter
        if f.pattern is None:
            cluster = client.ensure_topics(list(f.topics), allow_auto_create=False)
        else:
            cluster = client.refresh_metadata(None)
        out = set()
        for name, tm in cluster.topics.items():
            if not f.matches(name, tm.is_internal):
                continue
            for p in tm.partitions:
                if self.partition_filter is None or p in self.partition_filter:
                    out.add((name, p))
        if self.partition_filter is not None:
            missing = {p for p in self.partition_filter if not any(q == p for _, q in out)}
            if missing and f.topics:
                raise UnknownTopicError(
                    f"partition {', '.join(map(str, sorted(missing)))} does not exist in "
                    f"{', '.join(f.topics)}")
        return out

    def committed(self, client: KafkaClient,
                  tps: set[TopicPartition]) -> dict[TopicPartition, int]:
        return {}

    def on_poll(self, client: KafkaClient) -> None:
        return None

    def born_since_start(self, tps: list[TopicPartition]) -> list[TopicPartition]:
        return []

    def close(self, client: KafkaClient) -> None:
        return None


class SimpleConsumer:
    """The seed's SimpleConsumer: fetch by topic/partition/offset (many partitions per
    request), and offsets before a time. Stateless about positions."""

    def __init__(self, bootstrap_servers: str | Iterable[str] | None = None, *,
                 client_id: str = "kafkactl-consumer", max_wait_ms: int = 500,
                 min_bytes: int = 1, max_bytes: int = 52428800,
                 max_partition_bytes: int = 1048576, isolation_level: int = 0,
                 request_timeout_ms: int = 30000, client: KafkaClient | None = None,
                 security: ClientSecurity | None = None,
                 metadata_max_age_ms: int = 300000) -> None:
        self.client = client or KafkaClient(bootstrap_servers, client_id=client_id,
                                            request_timeout_ms=request_timeout_ms,
                                            metadata_max_age_ms=metadata_max_age_ms,
                                            security=security)
        self.max_wait_ms = max_wait_ms
        self.min_bytes = min_bytes
        self.max_bytes = max_bytes
        self.max_partition_bytes = max_partition_bytes
        self.isolation_level = isolation_level

    def partitions_for(self, topic: str) -> list[int]:
        cluster = self.client.ensure_topics([topic], allow_auto_create=False)
        return sorted(cluster.topics[topic].partitions)

    def _leaders(self, tps: Iterable[TopicPartition]) -> dict[int, list[TopicPartition]]:
        """`tps` by leader (-1: no leader known now), the metadata of their topics refreshed
        first when it is stale: invalidated after a broker could not be reached or said it
        is not the leader, or a leader is missing (at most once per retry.backoff.ms)."""
        tps = list(tps)
        if tps:
            cluster = self.client.cluster
            missing = any(cluster.leader_for(*tp) < 0 for tp in tps)
            self.client.maybe_refresh_metadata(sorted({t for t, _ in tps}), force=missing)
        return group_by_leader(self.client.cluster, tps)

    def send_fetch(self, node: int, positions: Mapping[TopicPartition, int],
                   max_wait_ms: int | None = None) -> Any:
        conn = self.client.connection(node)
        body = fetch_request_body(
            positions, max_wait_ms=self.max_wait_ms if max_wait_ms is None else max_wait_ms,
            min_bytes=self.min_bytes, max_bytes=self.max_bytes,
            partition_max_bytes=self.max_partition_bytes,
            isolation_level=self.isolation_level)
        return conn, conn.send(ApiKey.FETCH, body)

    def fetch(self, positions: Mapping[TopicPartition, int],
              max_wait_ms: int | None = None) -> list[PartitionFetch]:
        """One Fetch per leader for all `positions` (multifetch); a partition with no leader
        known is left out."""
        pending = []
        for node, tps in self._leaders(positions).items():
            if node < 0:
                continue
            pending.append((self.send_fetch(node, {tp: positions[tp] for tp in tps},
                                            max_wait_ms), tps))
        out: list[PartitionFetch] = []
        for (conn, req), _tps in pending:
            resp = conn.wait(req, self.client.request_timeout +
                             (max_wait_ms or self.max_wait_ms) / 1000.0)
            out.extend(parse_fetch_response(resp, positions))
        return out

    def list_offsets(self, requests: Mapping[TopicPartition, int], *,
                     timeout: float | None = None) -> dict[TopicPartition, tuple[int, int]]:
        """(offset, timestamp) per partition for a timestamp, EARLIEST (-2) or LATEST (-1).
        offset -1 means no record at or after that timestamp. A partition with no leader
        is waited for up to `timeout` (default: the request timeout), then
        KafkaTimeoutError names it; the others are asked at once all the same."""
        wait = self.client.request_timeout if timeout is None else timeout
        found, why = self.try_list_offsets(requests, wait)
        if why:
            raise KafkaTimeoutError(
                f"no offsets within {wait:g} s for " + "; ".join(
                    f"{t}-{p}: {reason}" for (t, p), reason in sorted(why.items())))
        return found

    def try_list_offsets(self, requests: Mapping[TopicPartition, int], timeout: float
                         ) -> tuple[dict[TopicPartition, tuple[int, int]],
                                    dict[TopicPartition, str]]:
        """list_offsets for the partitions that can answer within `timeout` seconds (0: one
        round, nothing waited for): ((offset, timestamp) per partition answered, why each
        other one was not: it has no leader, its leader cannot be reached or answered a
        retriable error). Each round asks every leader known; a partition without one is
        looked up again (metadata refresh, with backoff) until the time is up. An error
        that is not retriable raises; so does a topic or partition the metadata keeps
        saying does not exist."""
        deadline = time.monotonic() + max(0.0, timeout)
        out: dict[TopicPartition, tuple[int, int]] = {}
        todo = dict(requests)
        unknown_rounds: dict[TopicPartition, int] = {}
        while True:
            why: dict[TopicPartition, str] = {}
            for node, tps in self._leaders(todo).items():
                if node < 0:
                    for tp in tps:
                        why[tp] = self._no_leader(tp, unknown_rounds)
                    continue
                try:
                    conn = self.client.connection(node)
                    resp = conn.request(ApiKey.LIST_OFFSETS, list_offsets_body(
                        {tp: todo[tp] for tp in tps}, self.isolation_level))
                except (KafkaConnectionError, KafkaTimeoutError) as e:
                    self.client.drop_connection(node)
                    self.client.cluster.invalidate_node(node)
                    for tp in tps:
                        why[tp] = f"its leader, broker {node}, cannot be reached ({e})"
                    continue
                answers = parse_list_offsets(resp)
                for tp in tps:
                    code, off, ts = answers.get(tp, (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                                     -1, -1))
                    if code == 0:
                        out[tp] = (off, ts)
                        del todo[tp]
                    elif code in STALE_LEADER:
                        self.client.cluster.invalidate(*tp)
                        why[tp] = f"broker {node} answered {error_name(code)}"
                    else:
                        raise error_for(code)(f"ListOffsets for {tp[0]}-{tp[1]}")
            if not todo or time.monotonic() + self.client.retry_backoff >= deadline:
                return out, why
            time.sleep(self.client.retry_backoff)

    def _no_leader(self, tp: TopicPartition, unknown_rounds: dict[TopicPartition, int]) -> str:
        """Why `tp` has no leader, per the metadata; UnknownTopicError once fresh metadata
        has said MISSING_ATTEMPTS times that the topic or partition does not exist."""
        cluster = self.client.cluster
        tm = cluster.topics.get(tp[0])
        if tm is not None and not tm.error_code and tp[1] in tm.partitions:
            return ("the partition has no leader" if cluster.reported_leaderless(*tp)
                    else "its leader is being looked up")
        if cluster.stale:
            return "its leader is being looked up"
        if tm is None or tm.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            reason = f"topic {tp[0]!r} does not exist"
        elif tm.error_code:
            return f"the topic is not ready ({error_name(tm.error_code)})"
        else:
            reason = f"topic {tp[0]!r} has no partition {tp[1]}"
        unknown_rounds[tp] = n = unknown_rounds.get(tp, 0) + 1
        if n >= MISSING_ATTEMPTS:
            raise UnknownTopicError(reason)
        return reason

    def offsets_before(self, topic: str, partition: int, timestamp_ms: int) -> int:
        """The seed's getOffsetsBefore: first offset at/after `timestamp_ms` (-2 earliest,
        -1 latest); the log end offset when no record is that new."""
        off, _ = self.list_offsets({(topic, partition): timestamp_ms})[(topic, partition)]
        if off < 0:
            off, _ = self.list_offsets({(topic, partition): LATEST})[(topic, partition)]
        return off

    def close(self) -> None:
        self.client.close()


class Consumer:
    """Iterates records of its assigned partitions, fetching ahead (one Fetch in flight per
    leader while the caller processes the previous response). `max_poll_records`: at most
    that many records a poll (Java's max.poll.records; None, the default: every chunk the
    fetches brought)."""

    def __init__(self, *topics: str, bootstrap_servers: str | Iterable[str] | None = None,
                 pattern: str | None = None, exclude: str | None = None,
                 partitions: Iterable[int] | None = None,
                 auto_offset_reset: str = "latest", client_id: str = "kafkactl-consumer",
                 fetch_max_wait_ms: int = 500, fetch_min_bytes: int = 1,
                 fetch_max_bytes: int = 52428800, max_partition_fetch_bytes: int = 8388608,
                 isolation_level: int = 0, check_crcs: bool = True,
                 assignment_source: AssignmentSource | None = None,
                 request_timeout_ms: int = 30000,
                 security: ClientSecurity | None = None,
                 max_poll_records: int | None = None,
                 metadata_max_age_ms: int = 300000) -> None:
        if auto_offset_reset not in ("earliest", "latest", "none"):
            raise ValueError("auto_offset_reset must be earliest, latest or none")
        if max_poll_records is not None and max_poll_records < 1:
            raise ValueError("max_poll_records must be at least 1")
        self.simple = SimpleConsumer(
            bootstrap_servers, client_id=client_id, max_wait_ms=fetch_max_wait_ms,
            min_bytes=fetch_min_bytes, max_bytes=fetch_max_bytes,
            max_partition_bytes=max_partition_fetch_bytes, isolation_level=isolation_level,
            request_timeout_ms=request_timeout_ms, security=security,
            metadata_max_age_ms=metadata_max_age_ms)
        self.client = self.simple.client
        self.auto_offset_reset = auto_offset_reset
        self.check_crcs = check_crcs
        self.source: AssignmentSource | None = assignment_source
        if self.source is None and (topics or pattern):
            self.subscribe(topics, pattern=pattern, exclude=exclude, partitions=partitions)
        self._assignment: set[TopicPartition] | None = None
        self.positions: dict[TopicPartition, int] = {}
        # The offset after the last record the application is done with, per partition:
        # what a group commits. poll() and iteration mark what they hand out; a caller that
        # renders fetches itself (TopicReader.lines) marks what it has written.
        self.consumed: dict[TopicPartition, int] = {}
        # called before a group commits `consumed` (kafkactl consume: marks what the reader
        # of its pipe has taken)
        self.before_commit: Callable[[], None] | None = None
        self.high_watermarks: dict[TopicPartition, int] = {}
        self._in_flight: dict[int, tuple[Any, Any, dict[TopicPartition, int]]] = {}
        # max.poll.records (None: a poll hands out every chunk fetched). What a poll cut
        # off waits here, per partition, for the next polls, which hand it out before
        # the partition is fetched again; the partition's position is where it starts
        # (a seek elsewhere, or a partition lost, voids it)
        self.max_poll_records = max_poll_records
        self._buffered: dict[TopicPartition, PartitionFetch] = {}
        self._stalled: dict[TopicPartition, tuple[int, int]] = {}  # offset, answers
        # a fetch could not reach its broker: since when (a notice once per outage; group
        # consumers give their own)
        self.report_outages = True
        # brokers fetches failed from (-1: no metadata), since when; the partitions of
        # those fetches, until fetched again (from where, since when)
        self._failed_nodes: dict[int, float] = {}
        self._refetch: dict[TopicPartition, tuple[int, float]] = {}
        # partitions whose position waits for a leader: what gives it (OffsetResolver) and
        # how it is applied (_Apply)
        self._deferred: dict[TopicPartition, tuple[OffsetResolver, _Apply]] = {}
        self._leaderless: set[TopicPartition] = set()  # said so on the log
        # damaged data poll() stopped at after returning the records before it: raised by
        # the next poll
        self._poll_error: CorruptFetchError | None = None

    # -- assignment ----------------------------------------------------------------------------

    def subscribe(self, topics: Iterable[str] = (), *, pattern: str | None = None,
                  exclude: str | None = None, partitions: Iterable[int] | None = None) -> None:
        self.source = StaticAssignment(
            topic_filter=TopicFilter(tuple(topics), pattern, exclude),
            partition_filter=set(partitions) if partitions is not None else None)
        self._assignment = None

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        self.source = StaticAssignment(partitions)
        self._assignment = None

    def assignment(self) -> set[TopicPartition]:
        if self._assignment is None:
            if self.source is None:
                raise ValueError("the consumer has no subscription or assignment")
            self._assignment = self.source.assignment(self.client)
            for tp in list(self.positions):
                if tp not in self._assignment:
                    del self.positions[tp]
                    self.consumed.pop(tp, None)
        return self._assignment

    # -- positions -----------------------------------------------------------------------------

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self._drop_in_flight()
        error = self._poll_error
        if error is not None and (error.topic, error.partition) == tp:
            self._poll_error = None  # moved away from the damage (or back to it)
        self._deferred.pop(tp, None)
        self.positions[tp] = offset

    def forget_positions(self, tps: Iterable[TopicPartition]) -> None:
        """Forget where `tps` were (position, consumed offset, a position waiting for a
        leader): once assigned again they start from the committed offset, else
        auto.offset.reset (a group member whose partitions were revoked or lost)."""
        error = self._poll_error
        for tp in tps:
            self.positions.pop(tp, None)
            self.consumed.pop(tp, None)
            self._deferred.pop(tp, None)
            self._stalled.pop(tp, None)
            self._refetch.pop(tp, None)
            if error is not None and (error.topic, error.partition) == tp:
                self._poll_error = error = None

    def seek_to_beginning(self, *tps: TopicPartition) -> None:
        self._seek_to(tps or tuple(self.assignment()), EARLIEST)

    def seek_to_end(self, *tps: TopicPartition) -> None:
        self._seek_to(tps or tuple(self.assignment()), LATEST)

    def _seek_to(self, tps: Iterable[TopicPartition], which: int) -> None:
        self.seek_when_available(tps, self._offsets_at(which))

    def _offsets_at(self, which: int) -> OffsetResolver:
        def resolve(tps: list[TopicPartition]) -> dict[TopicPartition, int]:
            return {tp: v[0] for tp, v in self.available_offsets(
                dict.fromkeys(tps, which)).items()}
        return resolve

    def available_offsets(self, requests: Mapping[TopicPartition, int]
                          ) -> dict[TopicPartition, tuple[int, int]]:
        """list_offsets for the partitions that can answer now (one round: a partition
        with no leader, or whose leader cannot be reached, is left out)."""
        return self.simple.try_list_offsets(requests, 0)[0]

    def seek_when_available(self, tps: Iterable[TopicPartition],
                            resolve: OffsetResolver) -> None:
        """Seek each of `tps` to the offset `resolve(partitions)` gives it (it returns
        offsets for the partitions it can ask now). A partition it gives none (no leader,
        or the leader is unreachable) has no position until a later poll resolves it,
        once the partition has a leader: the others are fetched meanwhile (Kafka's
        consumer resets positions lazily the same way)."""
        self._position(list(tps), resolve, _Apply.SEEK)

    def _position(self, tps: list[TopicPartition], resolve: OffsetResolver,
                  how: _Apply) -> None:
        if tps:
            self._apply(tps, resolve, how, resolve(tps))

    def _apply(self, tps: list[TopicPartition], resolve: OffsetResolver, how: _Apply,
               found: Mapping[TopicPartition, int]) -> None:
        for tp in tps:
            off = found.get(tp)
            if off is None:
                # (a fetch in flight for it is ignored when it comes: no position)
                self.positions.pop(tp, None)
                self._deferred[tp] = (resolve, how)
                continue
            if how is _Apply.SEEK:
                self.seek(tp, off)
                continue
            self._deferred.pop(tp, None)
            self.positions[tp] = off
            if how is _Apply.FIRST_RESET:
                self.consumed.setdefault(tp, off)
            elif how is _Apply.RESET:
                # where auto.offset.reset moved a position no longer in the log is consumed
                # (Java commits every valid position): a group run that reads nothing
                # after it commits it, and the next run does not reset again past what
                # arrived meanwhile
                self.consumed[tp] = off

    def _resolve_deferred(self) -> None:
        """Try again the positions that waited for a leader (a failure to reach the
        cluster leaves them waiting: the fetches say so)."""
        groups: dict[tuple[int, _Apply], tuple[OffsetResolver, list[TopicPartition]]] = {}
        for tp, (resolve, how) in self._deferred.items():
            groups.setdefault((id(resolve), how), (resolve, []))[1].append(tp)
        for (_key, how), (resolve, tps) in groups.items():
            try:
                found = resolve(tps)
            except (KafkaConnectionError, KafkaTimeoutError, NoBrokersAvailable) as e:
                log.debug("positions of %s wait: %s", tps, e)
                return
            self._apply(tps, resolve, how, found)
        self._note_leaderless(list(self._deferred))

    def rebalance_pending(self) -> bool:
        """True when the consumer should poll soon to take part in a rebalance (a group
        member asked to rejoin); a static assignment never is."""
        return False

    def position(self, tp: TopicPartition) -> int:
        """The offset of the next record to fetch from `tp`; waits up to the request
        timeout for a partition whose position waits for a leader."""
        if tp not in self.positions:
            self._init_positions()
            deadline = time.monotonic() + self.client.request_timeout
            while tp not in self.positions and tp in self._deferred:
                if time.monotonic() >= deadline:
                    raise KafkaTimeoutError(
                        f"no position for {tp[0]}-{tp[1]} within "
                        f"{self.client.request_timeout:g} s: the partition has no leader")
                time.sleep(self.client.retry_backoff)
                self._init_positions()
        return self.positions[tp]

    def offsets_for_times(self, timestamps: Mapping[TopicPartition, int]
                          ) -> dict[TopicPartition, tuple[int, int] | None]:
        res = self.simple.list_offsets(timestamps)
        return {tp: (None if res[tp][0] < 0 else res[tp]) for tp in timestamps}

    def beginning_offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: v[0] for tp, v in self.simple.list_offsets(
            {tp: EARLIEST for tp in tps}).items()}

    def end_offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: v[0] for tp, v in self.simple.list_offsets(
            {tp: LATEST for tp in tps}).items()}

    def init_positions(self) -> None:
        """Give the assigned partitions that have no position one now (the committed
        offset, else auto.offset.reset; a partition without a leader waits for a later
        poll), as the next poll would first."""
        self._init_positions()

    def _init_positions(self) -> None:
        assigned = self.assignment()
        for tp in [tp for tp in self._deferred if tp not in assigned]:
            del self._deferred[tp]
        if self._deferred:
            self._resolve_deferred()
        need = [tp for tp in assigned if tp not in self.positions and tp not in self._deferred]
        if not need:
            return
        committed = self.source.committed(self.client, set(need)) if self.source else {}
        for tp, off in committed.items():
            if off >= 0:
                self.positions[tp] = off
        rest = [tp for tp in need if tp not in self.positions]
        if rest and self.auto_offset_reset == "latest" and self.source is not None:
            # a partition made after this consumer first saw its topic (partitions added,
            # a new topic matching the pattern) holds nothing older than this consumer:
            # it is read from its start, not from whatever its end is by the time the
            # group assigns it (Java's consumer would skip what was written meanwhile)
            born = self.source.born_since_start(rest)
            if born:
                log.info("reading %s from the start: made after this consumer started",
                         ", ".join(f"{t}-{p}" for t, p in sorted(born)))
                self._position(born, self._offsets_at(EARLIEST), _Apply.FIRST_RESET)
                rest = [tp for tp in rest if tp not in born]
        if rest:
            # where auto.offset.reset puts a partition with no commit is consumed already,
            # as in Kafka's client: a group that read nothing yet commits it (a later run
            # resumes there instead of resetting again past what arrived meanwhile)
            self._reset(rest, first=True)

    def _out_of_range(self, tp: TopicPartition, offset: int) -> None:
        """A fetch position the partition no longer (or not yet) has: reset it by
        auto.offset.reset, saying so (Java's consumer logs it; records may be skipped), or,
        with none, fail naming the offset (Java's OffsetOutOfRangeException)."""
        if self.auto_offset_reset == "none":
            raise OffsetOutOfRangeError(
                f"fetch position {offset} is out of range for {tp[0]}-{tp[1]} and "
                "auto.offset.reset=none")
        log.warning("fetch position %d is out of range for %s-%d (deleted by retention or "
                    "DeleteRecords, or past the end): resetting to the %s offset "
                    "(auto.offset.reset)", offset, tp[0], tp[1], self.auto_offset_reset)
        self._reset([tp])

    def _reset(self, tps: list[TopicPartition], *, first: bool = False) -> None:
        if self.auto_offset_reset == "none":
            raise OffsetOutOfRangeError(
                f"no position for {', '.join(f'{t}-{p}' for t, p in tps)} and "
                "auto.offset.reset=none")
        which = EARLIEST if self.auto_offset_reset == "earliest" else LATEST
        self._position(tps, self._offsets_at(which),
                       _Apply.FIRST_RESET if first else _Apply.RESET)

    # -- fetching ------------------------------------------------------------------------------

    def _drop_in_flight(self) -> None:
        for conn, _req, _pos in self._in_flight.values():
            conn.close()
        self._in_flight.clear()
        self._buffered.clear()

    def _send_fetches(self) -> None:
        assigned = self.assignment()
        # in `positions` order: a partition that got records went last (`_rotate`)
        wanted = {tp: off for tp, off in self.positions.items() if tp in assigned}
        busy: set[TopicPartition] = set(self._buffered)
        for _c, _r, pos in self._in_flight.values():
            busy.update(pos)
        todo = {tp: off for tp, off in wanted.items() if tp not in busy}
        if not todo:
            return
        try:
            by_leader = self.simple._leaders(todo)
        except (KafkaConnectionError, KafkaTimeoutError, NoBrokersAvailable) as e:
            self._fetch_failed(-1, e, todo)  # no metadata: no broker answers
            return
        for node, tps in by_leader.items():
            if node < 0:
                self._note_leaderless(tps)  # looked up again at the next polls
                continue
            if node in self._in_flight:
                continue
            pos = {tp: todo[tp] for tp in tps}
            try:
                conn, req = self.simple.send_fetch(node, pos)
            except (KafkaConnectionError, KafkaTimeoutError) as e:
                self._fetch_failed(node, e, pos)
                continue
            self._in_flight[node] = (conn, req, pos)

    def _rotate(self, tp: TopicPartition) -> None:
        """`tp` got records: it goes last in the next fetches (as Java's consumer moves a
        partition to the end), so partitions with data early in a request cannot take
        every response's bytes from one after them whose batch does not fit what they
        leave (the broker answers it empty)."""
        if tp in self.positions:
            self.positions[tp] = self.positions.pop(tp)

    def _note_leaderless(self, tps: list[TopicPartition]) -> None:
        """Say once (until it is read again) that a partition the metadata reports without
        a leader is skipped; its leader is looked up again at the next polls."""
        cluster = self.client.cluster
        for tp in tps:
            if tp not in self._leaderless and cluster.reported_leaderless(*tp):
                self._leaderless.add(tp)
                log.warning("partition %s-%d has no leader: reading the other partitions "
                            "and looking for one", tp[0], tp[1])

    def poll_fetches(self, timeout: float = 1.0) -> list[PartitionFetch]:
        """The next fetched partition chunks (positions already advanced past them), sending
        the following Fetch before returning (prefetch). With max_poll_records, the chunks
        hold that many records at most, across partitions (Java's max.poll.records): the
        rest of a chunk is handed out by the next polls, before its partition is fetched
        again, and a partition's position is the offset after what was handed out."""
        if self.source is not None:
            self.source.on_poll(self.client)
        self._init_positions()
        if self._buffered:
            out = self._limit(self._take_buffered())
            if out:
                self._send_fetches()
                return out
        self._send_fetches()
        deadline = time.monotonic() + timeout
        results: list[PartitionFetch] = []
        while not results:
            remaining = deadline - time.monotonic()
            if not self._in_flight:
                if remaining <= 0:
                    return []
                time.sleep(min(remaining, self.client.retry_backoff))
                self._send_fetches()
                continue
            self.client.poll(max(0.0, min(remaining, 0.5)))
            for node, (_conn, req, pos) in list(self._in_flight.items()):
                if not req.done:
                    continue
                del self._in_flight[node]
                if req.error is not None:
                    self._fetch_failed(node, req.error, pos)
                    continue
                if self._failed_nodes:
                    self._fetched_from(node, pos)
                for pf in parse_fetch_response(req.response, pos):
                    self._handle(pf, results)
                    if len(pf.records):
                        self._rotate((pf.topic, pf.partition))
            if results and self.max_poll_records is not None:
                results = self._limit(results)  # (before the prefetch: what it keeps)
            self._send_fetches()  # prefetch the next chunk while the caller works
            if time.monotonic() >= deadline:
                break
        return results

    def _take_buffered(self) -> list[PartitionFetch]:
        """What earlier polls cut off, of the partitions still assigned and positioned
        where it starts."""
        assigned = self.assignment()
        positions = self.positions
        kept = [pf for tp, pf in self._buffered.items()
                if tp in assigned and positions.get(tp) == pf.fetch_offset]
        self._buffered = {}
        return kept

    def _limit(self, chunks: list[PartitionFetch]) -> list[PartitionFetch]:
        """The first max_poll_records records of `chunks`, in order (a chunk cut inside
        keeps its first part); what is left of each partition waits in `_buffered`, its
        position moved back to where that starts."""
        left = self.max_poll_records
        if left is None:
            return chunks
        out: list[PartitionFetch] = []
        positions = self.positions
        for pf in chunks:
            tp = (pf.topic, pf.partition)
            if left > 0:
                head, rest, n = pf.split(left)
                left -= n
                out.append(head)
                positions[tp] = _position_after(head)
                if rest is None:
                    continue
                pf = rest
            self._buffered[tp] = pf
            positions[tp] = pf.fetch_offset
        return out

    def _fetch_failed(self, node: int, error: BaseException,
                      tps: Iterable[TopicPartition] = ()) -> None:
        """A fetch of `tps` from `node` (-1: no broker gave metadata) could not be sent or
        answered: drop the connection and retry at the next polls, from the leader the
        next metadata refresh names (the partitions `node` leads have none until then;
        once the cluster elected a new one, it is that). The first failure of a broker is
        a notice on the log (a reader that prints nothing says why), and so is the first
        fetch answered for its partitions after it."""
        if node >= 0:
            self.client.drop_connection(node)
        self.client.cluster.invalidate_node(node)
        now = time.monotonic()
        for tp in tps:
            self._refetch.setdefault(tp, (node, now))
        if node in self._failed_nodes or (node < 0 and self._failed_nodes):
            return
        self._failed_nodes[node] = now
        if self.report_outages:
            where = f"broker {node}" if node >= 0 else "the cluster"
            log.warning("cannot fetch from %s (%s); retrying until it is back or the "
                        "partitions have a new leader", where, error)

    def _fetched_from(self, node: int, tps: Iterable[TopicPartition]) -> None:
        """A fetch from `node` was answered after fetches failed: say what fetches again
        (from the same broker, or from the partitions' new leader)."""
        now = time.monotonic()
        say = self.report_outages
        back = self._failed_nodes.pop(node, None)
        if back is not None and say:
            log.warning("fetching again from broker %d, after %.0f s", node, now - back)
        since = self._failed_nodes.pop(-1, None)
        if since is not None and back is None and say:
            log.warning("fetching again, after %.0f s without a broker", now - since)
        moved: dict[int, list[TopicPartition]] = {}
        for tp in tps:
            failed = self._refetch.pop(tp, None)
            if failed is not None and failed[0] != node and failed[0] in self._failed_nodes:
                moved.setdefault(failed[0], []).append(tp)
        assigned = self.assignment()
        for tp in [tp for tp in self._refetch if tp not in assigned]:
            del self._refetch[tp]
        waiting = {n for n, _ in self._refetch.values()}
        for old, parts in sorted(moved.items()):
            if say:
                log.warning("fetching again: %s from broker %d (the new leader), after "
                            "%.0f s", ", ".join(f"{t}-{p}" for t, p in sorted(parts)), node,
                            now - self._failed_nodes[old])
            if old not in waiting:  # all its partitions are read elsewhere now
                del self._failed_nodes[old]

    def _handle(self, pf: PartitionFetch, results: list[PartitionFetch]) -> None:
        tp = (pf.topic, pf.partition)
        if self.positions.get(tp) != pf.fetch_offset:
            return  # a seek happened meanwhile
        if pf.error_code == 0:
            # a read_committed consumer's end is the last stable offset (Kafka's
            # Fetcher): records past it wait for their transaction to end
            end = (pf.last_stable_offset if self.simple.isolation_level == 1
                   and pf.last_stable_offset >= 0 else pf.high_watermark)
            if end >= 0:
                self.high_watermarks[tp] = end
            nxt = _position_after(pf)
            if tp in self._leaderless:
                self._leaderless.discard(tp)
                log.warning("partition %s-%d has a leader again", pf.topic, pf.partition)
            # a header that cannot be framed (damage, not a response cut short) stops the
            # partition at the offset after the last complete batch: the chunk goes to the
            # caller, whose reading of it hands out the batches before the damage, then
            # raises there (Kafka's consumer: CorruptRecordException at that offset)
            if nxt > pf.fetch_offset or pf.damaged:
                self.positions[tp] = nxt
                self._stalled.pop(tp, None)
                results.append(pf)
            elif len(pf.records) and len(pf.records) < self.simple.max_partition_bytes:
                self._no_progress(pf)
        elif pf.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:  # -> auto.offset.reset
            self._out_of_range(tp, pf.fetch_offset)
        elif pf.error_code in STALE_LEADER:
            self.client.cluster.invalidate(pf.topic, pf.partition)
        elif pf.error_code == ErrorCode.CORRUPT_MESSAGE:
            # the leader's log is damaged there: refetching cannot help, and the error is
            # the data's, not the cluster's (Java's consumer raises it from poll)
            raise CorruptFetchError(
                pf.topic, pf.partition, pf.fetch_offset,
                f"fetch {pf.topic}-{pf.partition} at offset {pf.fetch_offset}: the broker "
                "answers CORRUPT_MESSAGE: its log is damaged at that offset")
        else:
            raise error_for(pf.error_code)(
                f"fetch {pf.topic}-{pf.partition} at offset {pf.fetch_offset}: "
                f"{fetch_error_sentence(pf.error_code, pf.topic)} "
                f"({error_name(pf.error_code)})")

    def _no_progress(self, pf: PartitionFetch) -> None:
        """Bytes came back below the partition limit but not one whole batch: the log is
        torn there. Refetching cannot help; after NO_PROGRESS_LIMIT answers in a row at the
        same offset it is an error naming the offset (not an endless loop)."""
        tp = (pf.topic, pf.partition)
        off, n = self._stalled.get(tp, (pf.fetch_offset, 0))
        n = n + 1 if off == pf.fetch_offset else 1
        self._stalled[tp] = (pf.fetch_offset, n)
        if n >= NO_PROGRESS_LIMIT:  # (not a retriable Kafka error: a group gives up too)
            raise CorruptFetchError(
                pf.topic, pf.partition, pf.fetch_offset,
                f"fetch {pf.topic}-{pf.partition} at offset {pf.fetch_offset} makes no "
                f"progress: the broker answered {n} times with {len(pf.records)} bytes that "
                f"hold no whole batch (high watermark {pf.high_watermark}); the log is "
                f"damaged at that offset")

    def poll(self, timeout_ms: int = 1000) -> dict[TopicPartition, list[ConsumerRecord]]:
        """The records of the next fetches, by partition; they count as consumed.

        Damaged data (CorruptFetchError) stops its partition at the first offset not
        read, as Kafka's consumer does: the records before it are returned, and the error
        is raised by the next poll (at once when there are none)."""
        if self._poll_error is not None:
            error, self._poll_error = self._poll_error, None
            raise error
        out: dict[TopicPartition, list[ConsumerRecord]] = {}
        for pf in self.poll_fetches(timeout_ms / 1000.0):
            tp = (pf.topic, pf.partition)
            records = out.setdefault(tp, [])
            try:
                for r in pf.records_iter(self.check_crcs):
                    records.append(r)
            except CorruptFetchError as e:
                # fetched again from there (a fetch in flight from further on is ignored)
                self.positions[tp] = e.offset
                self.consumed[tp] = e.offset
                if self._poll_error is None:
                    self._poll_error = e
                continue
            self.consumed[tp] = self.positions.get(tp, pf.next_offset())
        if self._poll_error is not None and not any(out.values()):
            error, self._poll_error = self._poll_error, None
            raise error
        return out

    def __iter__(self) -> Iterator[ConsumerRecord]:
        """Every record, as it comes; a record counts as consumed once handed out."""
        consumed = self.consumed
        while True:
            for pf in self.poll_fetches(1.0):
                tp = (pf.topic, pf.partition)
                for r in pf.records_iter(self.check_crcs):
                    consumed[tp] = r.offset + 1
                    yield r
                consumed[tp] = pf.next_offset()  # past markers that end the fetch

    def at_end(self) -> bool:
        """True when every assigned partition's position reached its high watermark."""
        for tp in self.assignment():
            hw = self.high_watermarks.get(tp)
            if hw is None or self.positions.get(tp, -1) < hw:
                return False
        return True

    def close(self) -> None:
        if self.source is not None:
            with contextlib.suppress(Exception):
                self.source.close(self.client)
        self._drop_in_flight()
        self.client.close()

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
