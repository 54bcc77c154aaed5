"""ConsumerCoordinator: one member's side of the classic group protocol.

The caller's thread joins (JoinGroup, with the KIP-394 member-id round trip), runs the
assignor when it is the leader, syncs, commits and fetches offsets. A daemon thread sends
Heartbeats every heartbeat.interval.ms while the member holds a generation, also once a
rebalance has begun and until the member rejoins (so the coordinator keeps it for up to
the rebalance timeout, as Java's heartbeat thread does), and flags a rejoin when the
coordinator answers REBALANCE_IN_PROGRESS. Both threads talk to the coordinator over one
dedicated connection guarded by a lock.

The member loses its generation (Java's resetStateAndGeneration) when the coordinator says
it is no longer in it (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID to a heartbeat, a commit or a
join) or when it leaves because the caller did not poll for max.poll.interval.ms (the
heartbeat thread sends LeaveGroup, as Java's does): `partitions_lost` then tells the group
consumer that the partitions it held are lost (another member may have read and committed
them meanwhile: their positions are void), commits are refused until it has rejoined, and
the next poll rejoins. FENCED_INSTANCE_ID (another member took over the group.instance.id)
is fatal.
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kafkactl.client.connection import CLOSED_EARLY_HINT, BrokerConnection
from kafkactl.client.errors import (
    COORDINATOR_RETRIABLE,
    REJOIN_GROUP,
    ClientError,
    KafkaConnectionError,
    KafkaTimeoutError,
    NoBrokersAvailable,
    without_advice,
)
from kafkactl.client.group.assignors import MemberSubscription, assign
from kafkactl.client.group.group_admin import GroupAdmin
from kafkactl.client.group.subscription_watch import SubscriptionWatch, layout_of, matching
from kafkactl.client.kafka_client import KafkaClient
from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.data import ASSIGNMENT, SUBSCRIPTION, decode_data, encode_data
from kafkactl.protocol.errors import ErrorCode, KafkaError, error_for

log = logging.getLogger(__name__)
LOST_CLUSTER = "group %s: lost its coordinator (%s); looking for it again for up to %.0f s"
NO_CLUSTER_YET = "group %s: cannot reach the cluster yet (%s); trying for up to %.0f s"

TopicPartition = tuple[str, int]


class CommitFailedError(ClientError):
    """The group rebalanced before the commit: the partitions may belong to someone else."""


def fenced_error(group_id: str, instance_id: str | None) -> KafkaError:
    """FENCED_INSTANCE_ID said in words: another member took over this group.instance.id."""
    return error_for(ErrorCode.FENCED_INSTANCE_ID)(
        f"group {group_id!r}: another member with the same group.instance.id "
        f"{instance_id!r} joined and took over (FENCED_INSTANCE_ID); each instance of a "
        "group needs its own group.instance.id")


class ConsumerCoordinator:
    def __init__(self, client: KafkaClient, group_id: str, *,
                 topics: Iterable[str] = (), pattern: str | None = None,
                 assignors: Iterable[str] = ("range", "roundrobin"),
                 session_timeout_ms: int = 10000, rebalance_timeout_ms: int = 300000,
                 heartbeat_interval_ms: int = 3000,
                 group_instance_id: str | None = None) -> None:
        if not group_id:
            raise ValueError("a consumer group needs a non-empty group id")
        self.client = client
        self.group_id = group_id
        self.topics = tuple(topics)
        self.pattern = re.compile(pattern) if pattern else None
        self.assignors = tuple(assignors)
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.heartbeat_interval = heartbeat_interval_ms / 1000
        self.group_instance_id = group_instance_id
        self.admin = GroupAdmin(client)
        self.watch = SubscriptionWatch(client)  # topics changed since the join: rejoin
        self.member_id = ""
        self.generation = -1
        self.protocol: str | None = None
        self.leader_id = ""
        self.assignment: set[TopicPartition] = set()
        self.rejoin_needed = True
        self._conn: BrokerConnection | None = None
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._stable = threading.Event()
        self._hb_thread: threading.Thread | None = None
        # since when no join could reach the coordinator (None: it answers), and how long
        # that may last before ensure_active gives up (the rebalance timeout by default)
        self.unreachable_since: float | None = None
        self.reconnect_timeout = rebalance_timeout_ms / 1000
        # the member's generation lapsed (expelled, or left after max.poll.interval.ms):
        # the partitions it held are lost (the group consumer forgets their positions)
        self.partitions_lost = False
        self.lost_reason = ""
        # the generation of the assignment held (-1: none, or void since it lapsed), and
        # whether the last join followed it without a gap: only then may the partitions
        # kept across the rebalance keep their positions (no one else held them meanwhile)
        self._assigned_generation = -1
        self.assignment_continuous = False
        self._last_poll = time.monotonic()  # the caller's last poll (max.poll.interval.ms)
        self._heard_at = time.monotonic()  # the coordinator's last word that we are a member
        # FENCED_INSTANCE_ID, whichever request was answered it: every later join, poll
        # and commit raises it (nothing is committed after it)
        self._fatal: KafkaError | None = None

    # ---- coordinator connection ---------------------------------------------------------
    def _coordinator(self) -> BrokerConnection:
        if self._conn is not None and self._conn.connected:
            return self._conn
        host, port, node = self.admin.find_coordinator(self.group_id)
        conn = BrokerConnection(host, port, node_id=node, client_id=self.client.client_id,
                                connect_timeout=self.client.connect_timeout,
                                request_timeout=max(self.client.request_timeout,
                                                    self.rebalance_timeout_ms / 1000 + 5),
                                security=self.client.security)
        conn.connect()
        self._conn = conn
        return conn

    def _request(self, api_key: ApiKey, body: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            try:
                return self._coordinator().request(api_key, body)
            except (KafkaConnectionError, KafkaTimeoutError):
                self._drop_coordinator()
                raise

    def lost_coordinator(self) -> None:
        """The coordinator (or the whole cluster) went away: find it again and rejoin."""
        with self._lock:
            self._drop_coordinator()
            self.admin._coordinators.pop(self.group_id, None)
        self.rejoin_needed = True

    def _drop_coordinator(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    # ---- subscription -------------------------------------------------------------------
    def subscribed_topics(self) -> list[str]:
        if self.pattern is None:
            return sorted(self.topics)
        return matching(self.client.refresh_metadata(None), self.pattern)

    def subscription_changed(self) -> bool:
        """Whether the topics this member subscribed, or (its leader) assigned, changed
        since the join (looked at every metadata.max.age.ms): then it must rejoin."""
        if not self._in_generation():
            return False
        why = self.watch.changed(self.pattern)
        if why:
            log.info("group %s: rejoining, %s", self.group_id, why)
        return bool(why)

    def _metadata(self, topics: list[str]) -> bytes:
        return encode_data(SUBSCRIPTION, 1, {
            "topics": topics, "user_data": None,
            "owned_partitions": _by_topic(self.assignment)})

    # ---- join / sync --------------------------------------------------------------------
    def ensure_active(self, timeout: float | None = None) -> bool:
        """Join (or rejoin) until stable; returns True if a new assignment arrived."""
        self.raise_if_fatal()
        if not self.rejoin_needed and self._stable.is_set():
            return False
        deadline = time.monotonic() + (timeout if timeout is not None else
                                       self.rebalance_timeout_ms / 1000 + 30)
        while True:
            try:
                if self._join_and_sync():
                    self._start_heartbeat()
                    self.unreachable_since = None
                    return True
            except (KafkaConnectionError, KafkaTimeoutError, NoBrokersAvailable) as e:
                self._drop_coordinator()
                first_contact = not self.client.metadata_seen
                if first_contact and CLOSED_EARLY_HINT in str(e):
                    raise  # the wrong security protocol, most likely: waiting cannot help
                now = time.monotonic()
                if self.unreachable_since is None:
                    self.unreachable_since = now
                    log.warning(NO_CLUSTER_YET if first_contact else LOST_CLUSTER,
                                self.group_id, e if first_contact else without_advice(e),
                                self.reconnect_timeout)
                elif now - self.unreachable_since >= self.reconnect_timeout:
                    raise
            if time.monotonic() >= deadline:
                raise KafkaTimeoutError(f"could not join group {self.group_id!r} in time")
            time.sleep(self.client.retry_backoff)

    def _join_and_sync(self, given_member_id: bool = False) -> bool:
        self._stable.clear()
        topics = self.subscribed_topics()
        if self.topics and self.pattern is None:
            self.client.ensure_topics(topics, allow_auto_create=False)
        self.watch.joining(topics)
        meta = self._metadata(topics)
        resp = self._request(ApiKey.JOIN_GROUP, {
            "group_id": self.group_id, "session_timeout_ms": self.session_timeout_ms,
            "rebalance_timeout_ms": self.rebalance_timeout_ms, "member_id": self.member_id,
            "group_instance_id": self.group_instance_id, "protocol_type": "consumer",
            "protocols": [{"name": a, "metadata": meta} for a in self.assignors]})
        code = resp["error_code"]
        if code == ErrorCode.MEMBER_ID_REQUIRED:
            self.member_id = resp["member_id"]
            # Rejoin at once with the id just given, as Kafka's client does (not after a
            # retry backoff: 100 ms off every group member's start).
            return False if given_member_id else self._join_and_sync(given_member_id=True)
        if code == ErrorCode.UNKNOWN_MEMBER_ID:
            self._reset_generation("JoinGroup answered UNKNOWN_MEMBER_ID", member_id=True)
            return False
        if code in COORDINATOR_RETRIABLE:
            if code != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                self._drop_coordinator()
            return False
        if code == ErrorCode.REBALANCE_IN_PROGRESS:
            return False
        if code == ErrorCode.FENCED_INSTANCE_ID:
            self._fatal = fenced_error(self.group_id, self.group_instance_id)
            raise self._fatal
        if code:
            raise error_for(code)(f"JoinGroup {self.group_id!r}: {ErrorCode(code).name}")
        self.member_id = resp["member_id"]
        self.generation = resp["generation_id"]
        self.protocol = resp["protocol_name"]
        self.leader_id = resp["leader"]
        assignments: list[dict[str, Any]] = []
        if self.member_id == self.leader_id and resp.get("members"):
            assignments = self._lead(resp["members"])
        asked_at = time.monotonic()  # the answer is news of this moment at the earliest
        sync = self._request(ApiKey.SYNC_GROUP, {
            "group_id": self.group_id, "generation_id": self.generation,
            "member_id": self.member_id, "group_instance_id": self.group_instance_id,
            "protocol_type": "consumer", "protocol_name": self.protocol,
            "assignments": assignments})
        code = sync["error_code"]
        if code == ErrorCode.FENCED_INSTANCE_ID:
            self._fatal = fenced_error(self.group_id, self.group_instance_id)
            raise self._fatal
        if code in REJOIN_GROUP or code in COORDINATOR_RETRIABLE:
            if code == ErrorCode.UNKNOWN_MEMBER_ID:
                self._reset_generation("SyncGroup answered UNKNOWN_MEMBER_ID", member_id=True)
            return False
        if code:
            raise error_for(code)(f"SyncGroup {self.group_id!r}: {ErrorCode(code).name}")
        data = sync.get("assignment") or b""
        parts: set[TopicPartition] = set()
        if data:
            a = decode_data(ASSIGNMENT, data)[1]
            parts = {(t["topic"], p) for t in a.get("assigned_partitions") or ()
                     for p in t.get("partitions") or ()}
        self.assignment = parts
        # the generation just synced follows the one whose assignment we held (or is it):
        # no assignment of this group went by unseen
        self.assignment_continuous = (self._assigned_generation >= 0 and
                                      self.generation - self._assigned_generation in (0, 1))
        self._assigned_generation = self.generation
        self._heard_at = asked_at
        self._last_poll = time.monotonic()
        self.rejoin_needed = False
        self._stable.set()
        log.info("group %s generation %d: member %s assigned %s", self.group_id,
                 self.generation, self.member_id, sorted(parts))
        return True

    def _lead(self, members: list[dict[str, Any]]) -> list[dict[str, Any]]:
        subs = []
        for m in members:
            try:
                s = decode_data(SUBSCRIPTION, m["metadata"])[1]
            except KafkaError:
                s = {"topics": []}
            subs.append(MemberSubscription(m["member_id"], tuple(s.get("topics") or ()),
                                           m.get("group_instance_id")))
        topics = sorted({t for s in subs for t in s.topics})
        cluster = self.client.refresh_metadata(topics) if topics else self.client.cluster
        partitions = {t: sorted(cluster.topics[t].partitions) for t in topics
                      if t in cluster.topics and cluster.topics[t].partitions}
        self.watch.leading(layout_of(cluster, topics))
        plan = assign(self.protocol or "range", partitions, subs)
        return [{"member_id": mid, "assignment": encode_data(ASSIGNMENT, 0, {
            "assigned_partitions": _by_topic(tps, key="topic"), "user_data": None})}
            for mid, tps in plan.items()]

    # ---- heartbeat ----------------------------------------------------------------------
    def _start_heartbeat(self) -> None:
        if self._hb_thread is None or not self._hb_thread.is_alive():
            self._hb_thread = threading.Thread(target=self._heartbeat_loop,
                                               name=f"heartbeat-{self.group_id}", daemon=True)
            self._hb_thread.start()

    def _in_generation(self) -> bool:
        """The member holds a generation: it heartbeats (also while a rebalance waits for
        it to rejoin) and may commit."""
        return self._stable.is_set() and self.generation >= 0

    def _heartbeat_loop(self) -> None:
        poll_timeout = self.rebalance_timeout_ms / 1000
        next_beat = time.monotonic() + self.heartbeat_interval
        while True:
            now = time.monotonic()
            wait = next_beat - now
            if self._in_generation():  # wake for max.poll.interval.ms too
                wait = min(wait, self._last_poll + poll_timeout - now)
            if self._stop.wait(max(0.05, wait)):
                return
            now = time.monotonic()
            if not self._in_generation():
                next_beat = now + self.heartbeat_interval
                continue
            if now - self._last_poll > poll_timeout:
                self._leave_for_poll_timeout(now - self._last_poll)
                continue
            if now < next_beat:
                continue
            next_beat = now + self.heartbeat_interval
            try:
                self._heartbeat()
            except (ClientError, KafkaError, OSError) as e:
                log.info("group %s: heartbeat failed (%s); will rejoin", self.group_id, e)
                self.rejoin_needed = True

    def _heartbeat(self) -> int:
        """One Heartbeat of the generation held; returns its error code (handled)."""
        with self._lock:
            if not self._in_generation():
                return ErrorCode.NONE
            generation = self.generation
            # a member as of when it was asked, no later: an answer read only after the
            # process was stopped for longer than its session is no news of the present
            asked_at = time.monotonic()
            resp = self._request(ApiKey.HEARTBEAT, {
                "group_id": self.group_id, "generation_id": generation,
                "member_id": self.member_id, "group_instance_id": self.group_instance_id})
            code = int(resp["error_code"])
            if generation != self.generation:
                return code  # the answer is about a generation no longer held
            if code in (ErrorCode.NONE, ErrorCode.REBALANCE_IN_PROGRESS):
                # heartbeats go on while the group waits for this member to rejoin, so
                # that the coordinator keeps it for up to the rebalance timeout
                self._heard_at = asked_at
                if code:
                    self.rejoin_needed = True
                    self.client.wakeup()
            elif code == ErrorCode.FENCED_INSTANCE_ID:
                self._fatal = fenced_error(self.group_id, self.group_instance_id)
                self._stable.clear()
                self.rejoin_needed = True
                self.client.wakeup()
            elif code in (ErrorCode.ILLEGAL_GENERATION, ErrorCode.UNKNOWN_MEMBER_ID):
                self._reset_generation(f"Heartbeat answered {ErrorCode(code).name}",
                                       member_id=code == ErrorCode.UNKNOWN_MEMBER_ID)
            elif code in COORDINATOR_RETRIABLE:
                self._drop_coordinator()
            return code

    def _leave_for_poll_timeout(self, idle: float) -> None:
        """The caller has not polled for max.poll.interval.ms (it is stuck, e.g. writing to
        a reader that takes nothing): leave the group so that its partitions go to the
        other members (a static member does not send LeaveGroup; its session expires),
        as Java's heartbeat thread does. The next poll rejoins, the positions forgotten."""
        log.warning("group %s: no poll for %.0f s, longer than max.poll.interval.ms "
                    "(%d ms): leaving the group so that its partitions go to the other "
                    "members; this member rejoins when it polls again", self.group_id,
                    idle, self.rebalance_timeout_ms)
        with self._lock:
            if self.member_id and self.group_instance_id is None:
                with contextlib.suppress(ClientError, KafkaError, OSError):
                    self._request(ApiKey.LEAVE_GROUP, {
                        "group_id": self.group_id, "member_id": self.member_id,
                        "members": [{"member_id": self.member_id,
                                     "group_instance_id": None}]})
            self._reset_generation("max.poll.interval.ms passed without a poll",
                                   member_id=True)

    def _reset_generation(self, reason: str, *, member_id: bool) -> None:
        """The member is no longer in its generation: its partitions are lost, it commits
        nothing until it has rejoined (Java's resetStateAndGeneration; the member id is
        kept for ILLEGAL_GENERATION, it may still be valid)."""
        with self._lock:
            if self._assigned_generation >= 0 or self.generation >= 0:
                log.info("group %s: member %s lost generation %d: %s", self.group_id,
                         self.member_id, self.generation, reason)
                self.partitions_lost = True
                self.lost_reason = reason
            self.generation = -1
            self._assigned_generation = -1
            if member_id:
                self.member_id = ""
            self._stable.clear()
            self.rejoin_needed = True
        self.client.wakeup()

    def polled(self) -> None:
        """The caller polled (Java's poll timer: max.poll.interval.ms)."""
        self._last_poll = time.monotonic()

    def raise_if_fatal(self) -> None:
        if self._fatal is not None:
            raise self._fatal

    def session_lapsed(self) -> bool:
        """No word from the coordinator for longer than the session timeout while holding a
        generation (the process was stopped or starved): the group may have expelled it."""
        return (self._in_generation()
                and time.monotonic() - self._heard_at > self.session_timeout_ms / 1000)

    def check_membership(self) -> bool:
        """A Heartbeat now: True when the coordinator still counts this member in its
        generation (also while it rebalances), False when the generation is lost.
        Connection errors raise; a coordinator that is not available raises its
        (retriable) error."""
        if not self._in_generation():
            return False
        code = self._heartbeat()
        if code in COORDINATOR_RETRIABLE:
            raise error_for(code)(f"Heartbeat {self.group_id!r}: {ErrorCode(code).name}")
        self.raise_if_fatal()
        return self._in_generation()

    # ---- offsets ------------------------------------------------------------------------
    def commit(self, offsets: Mapping[TopicPartition, int], metadata: str = "") -> None:
        if not offsets:
            return
        self.raise_if_fatal()
        generation, member_id = self.generation, self.member_id
        if generation < 0:
            # (Java's generationIfStable): a member out of its generation must not commit
            # the positions of partitions that may be another member's by now
            raise CommitFailedError(
                f"commit refused: this member of group {self.group_id!r} is not in the "
                f"group's current generation ({self.lost_reason or 'not joined yet'}); "
                "its partitions may belong to another member now: poll again to rejoin")
        for attempt in (1, 2):  # a coordinator that went away (a restart): look it up again
            try:
                with self._lock:
                    admin_conn = self._coordinator()
                    self.admin._coordinators[self.group_id] = admin_conn
                    errors = self.admin.commit_offsets(
                        self.group_id, offsets, generation=generation,
                        member_id=member_id, group_instance_id=self.group_instance_id,
                        metadata=metadata)
                break
            except (KafkaConnectionError, KafkaTimeoutError, NoBrokersAvailable):
                self.lost_coordinator()
                if attempt == 2:
                    raise
        bad = {tp: c for tp, c in errors.items() if c}
        if not bad:
            self._heard_at = time.monotonic()  # a commit counts as a heartbeat
            return
        codes = set(bad.values())
        if ErrorCode.FENCED_INSTANCE_ID in codes:
            self._fatal = fenced_error(self.group_id, self.group_instance_id)
            raise self._fatal
        if codes & REJOIN_GROUP:
            lapsed = codes & {ErrorCode.ILLEGAL_GENERATION, ErrorCode.UNKNOWN_MEMBER_ID}
            if lapsed and generation == self.generation:
                self._reset_generation(
                    f"OffsetCommit answered {ErrorCode(min(lapsed)).name}",
                    member_id=ErrorCode.UNKNOWN_MEMBER_ID in lapsed)
            self.rejoin_needed = True
            raise CommitFailedError(
                f"commit failed: group {self.group_id!r} rebalanced "
                f"({', '.join(ErrorCode(c).name for c in codes)}); poll again to rejoin")
        code = next(iter(codes))
        raise error_for(code)(f"OffsetCommit: {ErrorCode(code).name} for "
                              f"{', '.join(f'{t}-{p}' for t, p in sorted(bad))}")

    def committed(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        with self._lock:
            self.admin._coordinators[self.group_id] = self._coordinator()
            return self.admin.fetch_offsets(self.group_id, list(tps))

    # ---- leave --------------------------------------------------------------------------
    def leave(self) -> None:
        self._stop.set()
        if self._hb_thread is not None:
            self._hb_thread.join(timeout=5)
        if self.member_id and self.group_instance_id is None:
            with contextlib.suppress(ClientError, KafkaError, OSError):
                self._request(ApiKey.LEAVE_GROUP, {
                    "group_id": self.group_id, "member_id": self.member_id,
                    "members": [{"member_id": self.member_id, "group_instance_id": None}]})
        self.member_id = ""
        self.generation = -1
        self._assigned_generation = -1
        self._stable.clear()

    def close(self) -> None:
        self.leave()
        with self._lock:
            self._drop_coordinator()
        self.admin.close()

    @property
    def on_wakeup(self) -> Callable[[], None]:
        return self.client.wakeup


def _by_topic(tps: Iterable[TopicPartition], key: str = "topic") -> list[dict[str, Any]]:
    out: dict[str, list[int]] = {}
    for t, p in tps:
        out.setdefault(t, []).append(p)
    return [{key: t, "partitions": sorted(ps)} for t, ps in sorted(out.items())]
