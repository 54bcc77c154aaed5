"""ConsumerCoordinator: one member's side of the classic group protocol.

The caller's thread joins (JoinGroup, with the KIP-394 member-id round trip), runs the
assignor when it is the leader, syncs, commits and fetches offsets. A daemon thread sends
Heartbeats every heartbeat.interval.ms while the member is stable and flags a rejoin when
the coordinator answers REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION or UNKNOWN_MEMBER_ID. Both
threads talk to the coordinator over one dedicated connection guarded by a lock.
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
)
from kafkactl.client.group.assignors import MemberSubscription, assign
from kafkactl.client.group.group_admin import GroupAdmin
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
        cluster = self.client.refresh_metadata(None)
        return sorted(t for t, tm in cluster.topics.items()
                      if not tm.is_internal and self.pattern.fullmatch(t))

    def _metadata(self, topics: list[str]) -> bytes:
        return encode_data(SUBSCRIPTION, 1, {
            "topics": topics, "user_data": None,
            "owned_partitions": _by_topic(self.assignment)})

    # ---- join / sync --------------------------------------------------------------------
    def ensure_active(self, timeout: float | None = None) -> bool:
        """Join (or rejoin) until stable; returns True if a new assignment arrived."""
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
                                self.group_id, e, self.reconnect_timeout)
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
            self.member_id = ""
            return False
        if code in COORDINATOR_RETRIABLE:
            if code != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                self._drop_coordinator()
            return False
        if code == ErrorCode.REBALANCE_IN_PROGRESS:
            return False
        if code:
            raise error_for(code)(f"JoinGroup {self.group_id!r}: {ErrorCode(code).name}")
        self.member_id = resp["member_id"]
        self.generation = resp["generation_id"]
        self.protocol = resp["protocol_name"]
        self.leader_id = resp["leader"]
        assignments: list[dict[str, Any]] = []
        if self.member_id == self.leader_id and resp.get("members"):
            assignments = self._lead(resp["members"])
        sync = self._request(ApiKey.SYNC_GROUP, {
            "group_id": self.group_id, "generation_id": self.generation,
            "member_id": self.member_id, "group_instance_id": self.group_instance_id,
            "protocol_type": "consumer", "protocol_name": self.protocol,
            "assignments": assignments})
        code = sync["error_code"]
        if code in REJOIN_GROUP or code in COORDINATOR_RETRIABLE:
            if code == ErrorCode.UNKNOWN_MEMBER_ID:
                self.member_id = ""
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

    def _heartbeat_loop(self) -> None:
        while not self._stop.wait(self.heartbeat_interval):
            if not self._stable.is_set() or self.rejoin_needed:
                continue
            try:
                resp = self._request(ApiKey.HEARTBEAT, {
                    "group_id": self.group_id, "generation_id": self.generation,
                    "member_id": self.member_id, "group_instance_id": self.group_instance_id})
            except (KafkaConnectionError, KafkaTimeoutError, ClientError) as e:
                log.info("group %s: heartbeat failed (%s); will rejoin", self.group_id, e)
                self.rejoin_needed = True
                continue
            code = resp["error_code"]
            if code in REJOIN_GROUP:
                if code == ErrorCode.UNKNOWN_MEMBER_ID:
                    self.member_id = ""
                self.rejoin_needed = True
                self.client.wakeup()
            elif code in COORDINATOR_RETRIABLE:
                with self._lock:
                    self._drop_coordinator()

    # ---- offsets ------------------------------------------------------------------------
    def commit(self, offsets: Mapping[TopicPartition, int], metadata: str = "") -> None:
        if not offsets:
            return
        for attempt in (1, 2):  # a coordinator that went away (a restart): look it up again
            try:
                with self._lock:
                    admin_conn = self._coordinator()
                    self.admin._coordinators[self.group_id] = admin_conn
                    errors = self.admin.commit_offsets(
                        self.group_id, offsets, generation=self.generation,
                        member_id=self.member_id, group_instance_id=self.group_instance_id,
                        metadata=metadata)
                break
            except (KafkaConnectionError, KafkaTimeoutError, NoBrokersAvailable):
                self.lost_coordinator()
                if attempt == 2:
                    raise
        bad = {tp: c for tp, c in errors.items() if c}
        if not bad:
            return
        codes = set(bad.values())
        if codes & REJOIN_GROUP:
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
