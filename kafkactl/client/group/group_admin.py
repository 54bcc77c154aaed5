"""Group operations that need no membership: find the coordinator, describe/list/delete
groups, fetch, commit (generation -1, the "simple" commit) and delete offsets.

Used by `kafkactl offsets` / `kafkactl rebalance` and by the group consumer for
FindCoordinator. Retriable coordinator errors (load in progress, not coordinator, not
available) are retried with backoff until the request timeout.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kafkactl.client.connection import BrokerConnection
from kafkactl.client.errors import (
    COORDINATOR_RETRIABLE,
    ClientError,
    KafkaConnectionError,
    KafkaTimeoutError,
)
from kafkactl.client.kafka_client import KafkaClient
from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.data import ASSIGNMENT, SUBSCRIPTION, decode_data, encode_data
from kafkactl.protocol.errors import ErrorCode, KafkaError, error_for

TopicPartition = tuple[str, int]

# What the transient member of trigger_rebalance offers besides the group's own protocol:
# the assignors of the Java client and librdkafka (a member supporting several joins a
# group that uses any of them).
COMMON_ASSIGNORS = ("range", "roundrobin", "sticky", "cooperative-sticky")
REBALANCING = ("PreparingRebalance", "CompletingRebalance")
TRANSIENT_SESSION_MS = 10000


def raise_for(code: int, what: str) -> None:
    if code:
        raise error_for(code)(f"{what}: {ErrorCode(code).name}")


@dataclass
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    subscription: list[str] = field(default_factory=list)
    assignment: list[TopicPartition] = field(default_factory=list)


@dataclass
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: list[MemberDescription]


def decode_subscription(data: bytes | memoryview | None) -> list[str]:
    if not data:
        return []
    try:
        return list(decode_data(SUBSCRIPTION, data)[1].get("topics") or [])
    except KafkaError:
        return []


def decode_assignment(data: bytes | memoryview | None) -> list[TopicPartition]:
    if not data:
        return []
    try:
        a = decode_data(ASSIGNMENT, data)[1]
    except KafkaError:
        return []
    return sorted((t["topic"], p) for t in a.get("assigned_partitions") or ()
                  for p in t.get("partitions") or ())


class GroupAdmin:
    def __init__(self, client: KafkaClient) -> None:
        self.client = client
        self._coordinators: dict[str, BrokerConnection] = {}

    # ---- coordinator --------------------------------------------------------------------
    def find_coordinator(self, group_id: str) -> tuple[str, int, int]:
        """(host, port, node id) of the group's coordinator."""
        deadline = time.monotonic() + self.client.request_timeout
        while True:
            conn = self.client.any_connection()
            version = min(conn.version_for(ApiKey.FIND_COORDINATOR), 3)
            resp = conn.request(ApiKey.FIND_COORDINATOR, {"key": group_id, "key_type": 0},
                                version=version)
            code = resp.get("error_code", 0)
            if code == 0:
                return resp["host"], resp["port"], resp["node_id"]
            if code not in COORDINATOR_RETRIABLE or time.monotonic() >= deadline:
                raise_for(code, f"FindCoordinator for group {group_id!r}")
            time.sleep(self.client.retry_backoff)

    def coordinator(self, group_id: str) -> BrokerConnection:
        conn = self._coordinators.get(group_id)
        if conn is not None and conn.connected:
            return conn
        host, port, node = self.find_coordinator(group_id)
        conn = BrokerConnection(host, port, node_id=node, client_id=self.client.client_id,
                                connect_timeout=self.client.connect_timeout,
                                request_timeout=self.client.request_timeout,
                                security=self.client.security)
        conn.connect()
        self._coordinators[group_id] = conn
        return conn

    def reachable_coordinator(self, group_id: str, deadline: float | None = None
                              ) -> BrokerConnection:
        """coordinator(), again while the broker named cannot be reached: a killed
        coordinator is named by FindCoordinator until its session expires and the group
        moves (Kafka's admin client retries the same way, until default.api.timeout.ms)."""
        if deadline is None:
            deadline = time.monotonic() + self.client.request_timeout
        while True:
            try:
                return self.coordinator(group_id)
            except (KafkaConnectionError, KafkaTimeoutError) as e:
                self._unreachable(group_id, e, deadline)

    def _unreachable(self, group_id: str, e: Exception, deadline: float) -> None:
        self._coordinators.pop(group_id, None)
        if time.monotonic() + self.client.retry_backoff >= deadline:
            raise KafkaTimeoutError(f"group {group_id!r}: its coordinator cannot be reached "
                                    f"({e}) after {self.client.request_timeout:g} s") from None
        time.sleep(self.client.retry_backoff)
        self.client.cluster.invalidate()

    def request(self, group_id: str, api_key: ApiKey, body: dict[str, Any],
                error_of: Any = None, version: int | None = None) -> dict[str, Any]:
        """Send to the coordinator, retrying retriable coordinator errors."""
        deadline = time.monotonic() + self.client.request_timeout
        while True:
            conn = self.reachable_coordinator(group_id, deadline)
            try:
                resp = conn.request(api_key, body, version=version)
            except (KafkaConnectionError, KafkaTimeoutError) as e:
                self._unreachable(group_id, e, deadline)
                continue
            code = error_of(resp) if error_of else resp.get("error_code", 0)
            if code in COORDINATOR_RETRIABLE:
                if code != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                    self._coordinators.pop(group_id, None)
                    conn.close()
                if time.monotonic() >= deadline:
                    raise KafkaTimeoutError(f"group {group_id!r}: coordinator still "
                                            f"answers {ErrorCode(code).name}")
                time.sleep(self.client.retry_backoff)
                continue
            return resp

    # ---- groups -------------------------------------------------------------------------
    def list_groups(self) -> list[tuple[str, str, str]]:
        """[(group id, protocol type, state)] from every broker."""
        self.client.refresh_metadata(None)
        out: dict[str, tuple[str, str, str]] = {}
        for node in list(self.client.cluster.brokers):
            conn = self.client.connection(node)
            resp = conn.request(ApiKey.LIST_GROUPS, {"states_filter": []})
            raise_for(resp.get("error_code", 0), "ListGroups")
            for g in resp.get("groups") or ():
                out[g["group_id"]] = (g["group_id"], g["protocol_type"],
                                      g.get("group_state") or "")
        return sorted(out.values())

    def describe_group(self, group_id: str) -> GroupDescription:
        resp = self.request(group_id, ApiKey.DESCRIBE_GROUPS,
                            {"groups": [group_id], "include_authorized_operations": False},
                            error_of=lambda r: r["groups"][0]["error_code"])
        g = resp["groups"][0]
        raise_for(g["error_code"], f"DescribeGroups {group_id!r}")
        members = [MemberDescription(
            m["member_id"], m.get("group_instance_id"), m["client_id"], m["client_host"],
            decode_subscription(m.get("member_metadata")) if g["protocol_type"] == "consumer"
            else [],
            decode_assignment(m.get("member_assignment")) if g["protocol_type"] == "consumer"
            else []) for m in g.get("members") or ()]
        return GroupDescription(group_id, g["group_state"], g["protocol_type"],
                                g["protocol_data"], members)

    def delete_group(self, group_id: str) -> None:
        resp = self.request(group_id, ApiKey.DELETE_GROUPS, {"groups_names": [group_id]},
                            error_of=lambda r: r["results"][0]["error_code"])
        raise_for(resp["results"][0]["error_code"], f"DeleteGroups {group_id!r}")

    # ---- offsets ------------------------------------------------------------------------
    def fetch_offsets(self, group_id: str, tps: Iterable[TopicPartition] | None = None
                      ) -> dict[TopicPartition, int]:
        """Committed offsets (-1 = none); all of the group's offsets when `tps` is None."""
        topics = None
        if tps is not None:
            by_topic: dict[str, list[int]] = {}
            for t, p in tps:
                by_topic.setdefault(t, []).append(p)
            topics = [{"name": t, "partition_indexes": sorted(ps)} for t, ps in by_topic.items()]
        conn = self.reachable_coordinator(group_id)
        version = min(conn.version_for(ApiKey.OFFSET_FETCH), 7)
        if topics is None and version < 2:
            raise ValueError("listing all offsets of a group needs OffsetFetch v2+")
        resp = self.request(group_id, ApiKey.OFFSET_FETCH,
                            {"group_id": group_id, "topics": topics, "require_stable": False},
                            version=version)
        raise_for(resp.get("error_code", 0), f"OffsetFetch for group {group_id!r}")
        out: dict[TopicPartition, int] = {}
        for t in resp.get("topics") or ():
            for p in t["partitions"]:
                raise_for(p["error_code"], f"OffsetFetch {t['name']}-{p['partition_index']}")
                out[(t["name"], p["partition_index"])] = p["committed_offset"]
        return out

    def commit_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int], *,
                       generation: int = -1, member_id: str = "",
                       group_instance_id: str | None = None,
                       metadata: str = "") -> dict[TopicPartition, int]:
        """OffsetCommit; returns the error code per partition."""
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (t, p), off in offsets.items():
            by_topic.setdefault(t, []).append({
                "partition_index": p, "committed_offset": off, "committed_leader_epoch": -1,
                "commit_timestamp": -1, "committed_metadata": metadata})
        body = {"group_id": group_id, "generation_id_or_member_epoch": generation,
                "member_id": member_id, "group_instance_id": group_instance_id,
                "retention_time_ms": -1,
                "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}

        def first_error(r: dict[str, Any]) -> int:
            return next((p["error_code"] for t in r.get("topics") or ()
                         for p in t["partitions"] if p["error_code"] in COORDINATOR_RETRIABLE), 0)

        resp = self.request(group_id, ApiKey.OFFSET_COMMIT, body, error_of=first_error)
        return {(t["name"], p["partition_index"]): p["error_code"]
                for t in resp.get("topics") or () for p in t["partitions"]}

    def delete_offsets(self, group_id: str, tps: Iterable[TopicPartition]
                       ) -> dict[TopicPartition, int]:
        by_topic: dict[str, list[dict[str, int]]] = {}
        for t, p in tps:
            by_topic.setdefault(t, []).append({"partition_index": p})
        resp = self.request(group_id, ApiKey.OFFSET_DELETE, {
            "group_id": group_id,
            "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]})
        raise_for(resp.get("error_code", 0), f"OffsetDelete for group {group_id!r}")
        return {(t["name"], p["partition_index"]): p["error_code"]
                for t in resp.get("topics") or () for p in t["partitions"]}

    def range_plan(self, desc: GroupDescription) -> dict[str, list[TopicPartition]]:
        """The assignment the range algorithm (the seed's: sort partitions, sort members,
        contiguous blocks, remainders to the first members) computes for the group's
        current members and subscriptions."""
        from kafkactl.client.group.assignors import MemberSubscription, range_assign

        topics = sorted({t for m in desc.members for t in m.subscription})
        partitions: dict[str, list[int]] = {}
        if topics:
            cluster = self.client.refresh_metadata(topics)
            partitions = {t: sorted(cluster.topics[t].partitions) for t in topics
                          if t in cluster.topics and cluster.topics[t].partitions}
        subs = [MemberSubscription(m.member_id, tuple(m.subscription), m.group_instance_id)
                for m in desc.members]
        return range_assign(partitions, subs)

    def trigger_rebalance(self, desc: GroupDescription, timeout_s: float) -> int | None:
        """Join as a transient member (every member must rejoin), then leave. Returns the
        generation the rebalance produced; None when the group was rebalancing already
        with protocols this member cannot offer, and that rebalance ended within
        `timeout_s`.

        The member offers the group's protocol (when a Stable group names it) and the
        consumer assignors clients commonly support, so that it fits whatever the members
        have in common (a group in the middle of a rebalance names none). It always leaves
        (LeaveGroup), also when the rebalance did not end within `timeout_s`, so that it
        does not linger in the group until its session times out."""
        if not desc.members:
            raise ValueError(f"group {desc.group_id!r} has no members to rebalance")
        deadline = time.monotonic() + timeout_s
        conn = self.coordinator(desc.group_id)
        conn.request_timeout = max(conn.request_timeout, timeout_s)
        meta = encode_data(SUBSCRIPTION, 0, {"topics": [], "user_data": None})
        names = list(dict.fromkeys(
            ([desc.protocol] if desc.protocol else [])
            + (list(COMMON_ASSIGNORS) if (desc.protocol_type or "consumer") == "consumer"
               else [])))
        if not names:  # another protocol type, mid-rebalance: its protocols are unknown
            self._await_rebalance(desc, deadline, timeout_s)
            return None
        body: dict[str, Any] = {
            "group_id": desc.group_id, "session_timeout_ms": TRANSIENT_SESSION_MS,
            "rebalance_timeout_ms": int(timeout_s * 1000), "member_id": "",
            "group_instance_id": None, "protocol_type": desc.protocol_type or "consumer",
            "protocols": [{"name": n, "metadata": meta} for n in names]}
        member = ""
        try:
            try:
                resp = conn.request(ApiKey.JOIN_GROUP, body, timeout=timeout_s)
                if resp["error_code"] == ErrorCode.MEMBER_ID_REQUIRED:
                    member = body["member_id"] = resp["member_id"]
                    resp = conn.request(ApiKey.JOIN_GROUP, body,
                                        timeout=max(deadline - time.monotonic(), 0.001))
            except KafkaTimeoutError:
                raise KafkaTimeoutError(
                    f"group {desc.group_id!r} did not finish rebalancing within "
                    f"{timeout_s:g} s (the rebalance goes on without kafkactl's member; "
                    "a longer --timeout waits for it)") from None
            code = resp["error_code"]
            if code == ErrorCode.NONE:
                member = resp["member_id"] or member
                return int(resp["generation_id"])
            if code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL:
                now = self.describe_group(desc.group_id)
                if now.state in REBALANCING:
                    self._await_rebalance(now, deadline, timeout_s)
                    return None
            raise ValueError(f"could not trigger a rebalance: JoinGroup answered "
                             f"{ErrorCode(code).name}")
        finally:
            if member:
                self._leave(desc.group_id, member)

    def _await_rebalance(self, desc: GroupDescription, deadline: float,
                         timeout_s: float) -> None:
        """A group rebalancing already (the rebalance that was asked for is under way):
        wait until it is Stable again."""
        while desc.state in REBALANCING:
            if time.monotonic() >= deadline:
                raise KafkaTimeoutError(
                    f"group {desc.group_id!r} was rebalancing already and did not finish "
                    f"within {timeout_s:g} s")
            time.sleep(min(0.2, max(deadline - time.monotonic(), 0)))
            desc = self.describe_group(desc.group_id)
        if desc.state != "Stable":
            raise ValueError(f"group {desc.group_id!r} was rebalancing and is now "
                             f"{desc.state}")

    def _leave(self, group_id: str, member_id: str) -> None:
        """LeaveGroup for the transient member, on a working connection (a JoinGroup that
        timed out closed the one it was sent on); best effort: its session ends it
        otherwise."""
        with contextlib.suppress(ClientError, KafkaError, OSError):
            self.request(group_id, ApiKey.LEAVE_GROUP, {
                "group_id": group_id, "member_id": member_id,
                "members": [{"member_id": member_id, "group_instance_id": None}]})

    def close(self) -> None:
        for conn in self._coordinators.values():
            conn.close()
        self._coordinators.clear()
