"""Shared helpers for the consumer-group tests (real broker, real clients)."""

from __future__ import annotations

import json
import subprocess
import threading
from typing import IO, Any

from tests import zygote
from tests.polling import wait_until

__all__ = ["wait_until"]  # re-exported: the group tests import it from here

FAST = {"group_initial_rebalance_delay_ms": "0"}


def read_lines(stream: IO[bytes], into: list[bytes]) -> threading.Thread:
    """Append each line of `stream` to `into` from a daemon thread, until EOF (join it)."""
    def run() -> None:
        for line in stream:
            into.append(line)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def kafkactl(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return zygote.run(list(args), text=True, timeout=timeout)


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    r = kafkactl("topics", "create", "-t", topic, "--partitions", str(partitions),
                 "-b", bootstrap)
    assert r.returncode == 0, r.stderr


def produce(bootstrap: str, topic: str, values: list[str]) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i, v in enumerate(values):
        p.produce(topic, value=v.encode(), key=str(i).encode())
    assert p.flush(30) == 0


def offsets_show(bootstrap: str, group: str) -> dict[tuple[str, int], Any]:
    r = kafkactl("offsets", "show", "--group", group, "--json", "-b", bootstrap)
    assert r.returncode == 0, r.stderr
    return {(row["topic"], row["partition"]): row for row in json.loads(r.stdout)}


def assigned_members(bootstrap: str, group: str) -> int:
    """How many members of `group` hold partitions once it is Stable (0 while it is not):
    a rebalance is over when this reaches the number of members."""
    from kafkactl.client.group import GroupAdmin
    from kafkactl.client.kafka_client import KafkaClient

    client = KafkaClient(bootstrap)
    try:
        desc = GroupAdmin(client).describe_group(group)
    finally:
        client.close()
    return sum(1 for m in desc.members if m.assignment) if desc.state == "Stable" else 0


# ---- raw classic-group-protocol members (real requests, the versions real clients send) ----
# librdkafka 2.0.2 sends JoinGroup v5, SyncGroup v3, Heartbeat v3, LeaveGroup v1,
# OffsetCommit v7, OffsetFetch v7, DescribeGroups v4; the Java client against this broker
# (whose maxima are JoinGroup 7, LeaveGroup 4, OffsetCommit 8) sends JoinGroup v7,
# SyncGroup v5, Heartbeat v4, LeaveGroup v4, OffsetCommit v8, DescribeGroups v5.

def connect(bootstrap: str, client_id: str = "raw-member") -> Any:
    from kafkactl.client.connection import BrokerConnection

    host, port = bootstrap.rsplit(":", 1)
    conn = BrokerConnection(host, int(port), client_id=client_id, request_timeout=60)
    conn.connect()
    return conn


def find_coordinator(conn: Any, group: str) -> None:
    """What every client does before its first group request: FindCoordinator, which
    creates __consumer_offsets on first use (a group request before it is NOT_COORDINATOR,
    as in Kafka)."""
    from kafkactl.protocol.api_keys import ApiKey

    r = conn.request(ApiKey.FIND_COORDINATOR, {"key": group, "key_type": 0}, version=2)
    assert r["error_code"] == 0, r


def subscription(topics: list[str]) -> bytes:
    from kafkactl.protocol.data import SUBSCRIPTION, encode_data

    return encode_data(SUBSCRIPTION, 0, {"topics": sorted(topics), "user_data": None})


def assignment(tps: list[tuple[str, int]]) -> bytes:
    from kafkactl.protocol.data import ASSIGNMENT, encode_data

    by_topic: dict[str, list[int]] = {}
    for t, p in sorted(tps):
        by_topic.setdefault(t, []).append(p)
    return encode_data(ASSIGNMENT, 0, {"assigned_partitions": [
        {"topic": t, "partitions": ps} for t, ps in by_topic.items()], "user_data": None})


class RawMember:
    """One member of a classic consumer group driven by raw requests on its own connection
    (so a parked JoinGroup/SyncGroup does not block the others)."""

    def __init__(self, bootstrap: str, group: str, topics: list[str], *,
                 instance_id: str | None = None, session_ms: int = 10000,
                 rebalance_ms: int = 10000, client_id: str = "raw-member",
                 join_version: int = 5, sync_version: int = 3,
                 heartbeat_version: int = 3) -> None:
        self.bootstrap = bootstrap
        self.group = group
        self.topics = topics
        self.instance_id = instance_id
        self.session_ms = session_ms
        self.rebalance_ms = rebalance_ms
        self.client_id = client_id
        self.join_version = join_version
        self.sync_version = sync_version
        self.heartbeat_version = heartbeat_version
        self.conn = connect(bootstrap, client_id)
        find_coordinator(self.conn, group)
        self.member_id = ""
        self.generation = -1
        self.leader = ""
        self.members: list[dict[str, Any]] = []
        self.protocol = "range"

    def reconnect(self) -> None:
        self.conn.close()
        self.conn = connect(self.bootstrap, self.client_id)

    def close(self) -> None:
        self.conn.close()

    # -- JoinGroup ---------------------------------------------------------------------
    def join_body(self, member_id: str | None = None) -> dict[str, Any]:
        return {"group_id": self.group, "session_timeout_ms": self.session_ms,
                "rebalance_timeout_ms": self.rebalance_ms,
                "member_id": self.member_id if member_id is None else member_id,
                "group_instance_id": self.instance_id, "protocol_type": "consumer",
                "protocols": [{"name": "range", "metadata": subscription(self.topics)}]}

    def start_join(self) -> Any:
        """Send JoinGroup (after KIP-394's MEMBER_ID_REQUIRED round for a new dynamic
        member); returns the in-flight request (it parks until the rebalance completes)."""
        from kafkactl.protocol.api_keys import ApiKey
        from kafkactl.protocol.errors import ErrorCode

        if not self.member_id and self.instance_id is None and self.join_version >= 4:
            r = self.conn.request(ApiKey.JOIN_GROUP, self.join_body(),
                                  version=self.join_version)
            assert r["error_code"] == ErrorCode.MEMBER_ID_REQUIRED, r
            self.member_id = r["member_id"]
        return self.conn.send(ApiKey.JOIN_GROUP, self.join_body(), version=self.join_version)

    def end_join(self, req: Any, timeout: float = 30) -> dict[str, Any]:
        r: dict[str, Any] = self.conn.wait(req, timeout)
        if r["error_code"] == 0:
            self.member_id = r["member_id"]
            self.generation = r["generation_id"]
            self.leader = r["leader"]
            self.members = r["members"]
            self.protocol = r["protocol_name"]
        return r

    def join(self, timeout: float = 30) -> dict[str, Any]:
        return self.end_join(self.start_join(), timeout)

    # -- SyncGroup -----------------------------------------------------------------------
    def start_sync(self, assignments: dict[str, bytes] | None = None, *,
                   member_id: str | None = None, generation: int | None = None) -> Any:
        from kafkactl.protocol.api_keys import ApiKey

        return self.conn.send(ApiKey.SYNC_GROUP, {
            "group_id": self.group,
            "generation_id": self.generation if generation is None else generation,
            "member_id": self.member_id if member_id is None else member_id,
            "group_instance_id": self.instance_id, "protocol_type": "consumer",
            "protocol_name": self.protocol,
            "assignments": [{"member_id": m, "assignment": a}
                            for m, a in (assignments or {}).items()]},
            version=self.sync_version)

    def end_sync(self, req: Any, timeout: float = 30) -> dict[str, Any]:
        r: dict[str, Any] = self.conn.wait(req, timeout)
        return r

    def sync(self, assignments: dict[str, bytes] | None = None, **kw: Any) -> dict[str, Any]:
        return self.end_sync(self.start_sync(assignments, **kw))

    # -- Heartbeat / OffsetCommit / LeaveGroup -------------------------------------------
    def heartbeat(self, *, member_id: str | None = None, generation: int | None = None
                  ) -> int:
        from kafkactl.protocol.api_keys import ApiKey

        r = self.conn.request(ApiKey.HEARTBEAT, {
            "group_id": self.group,
            "generation_id": self.generation if generation is None else generation,
            "member_id": self.member_id if member_id is None else member_id,
            "group_instance_id": self.instance_id}, version=self.heartbeat_version)
        return int(r["error_code"])

    def commit(self, offsets: dict[tuple[str, int], int], *, version: int = 7,
               retention_ms: int = -1, commit_timestamp: int = -1,
               member_id: str | None = None, generation: int | None = None
               ) -> dict[tuple[str, int], int]:
        return commit_offsets(self.conn, self.group, offsets, version=version,
                              retention_ms=retention_ms, commit_timestamp=commit_timestamp,
                              member_id=self.member_id if member_id is None else member_id,
                              generation=self.generation if generation is None
                              else generation, instance_id=self.instance_id)

    def leave(self) -> int:
        """LeaveGroup v1, as librdkafka sends it on close."""
        from kafkactl.protocol.api_keys import ApiKey

        r = self.conn.request(ApiKey.LEAVE_GROUP, {"group_id": self.group,
                                                   "member_id": self.member_id}, version=1)
        return int(r["error_code"])


def commit_offsets(conn: Any, group: str, offsets: dict[tuple[str, int], int], *,
                   version: int = 7, retention_ms: int = -1, commit_timestamp: int = -1,
                   member_id: str = "", generation: int = -1,
                   instance_id: str | None = None) -> dict[tuple[str, int], int]:
    """OffsetCommit at `version` (v1 carries `commit_timestamp`, v2-v4 `retention_ms`);
    returns the error code per partition."""
    return wait_commit(conn, send_commit(conn, group, offsets, version=version,
                                         retention_ms=retention_ms,
                                         commit_timestamp=commit_timestamp,
                                         member_id=member_id, generation=generation,
                                         instance_id=instance_id))


def send_commit(conn: Any, group: str, offsets: dict[tuple[str, int], int], *,
                version: int = 7, retention_ms: int = -1, commit_timestamp: int = -1,
                member_id: str = "", generation: int = -1,
                instance_id: str | None = None) -> Any:
    from kafkactl.protocol.api_keys import ApiKey

    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (t, p), o in sorted(offsets.items()):
        by_topic.setdefault(t, []).append({
            "partition_index": p, "committed_offset": o, "committed_leader_epoch": -1,
            "commit_timestamp": commit_timestamp, "committed_metadata": ""})
    return conn.send(ApiKey.OFFSET_COMMIT, {
        "group_id": group, "generation_id_or_member_epoch": generation,
        "member_id": member_id, "group_instance_id": instance_id,
        "retention_time_ms": retention_ms,
        "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]},
        version=version)


def wait_commit(conn: Any, req: Any) -> dict[tuple[str, int], int]:
    r = conn.wait(req, 60)
    return {(t["name"], p["partition_index"]): int(p["error_code"])
            for t in r["topics"] for p in t["partitions"]}


def fetch_offsets(conn: Any, group: str, tps: list[tuple[str, int]], *, version: int = 7
                  ) -> tuple[int, dict[tuple[str, int], int]]:
    """OffsetFetch (v7, librdkafka's); returns (group error, offset per partition, -1 =
    none committed)."""
    from kafkactl.protocol.api_keys import ApiKey

    by_topic: dict[str, list[int]] = {}
    for t, p in sorted(tps):
        by_topic.setdefault(t, []).append(p)
    r = conn.request(ApiKey.OFFSET_FETCH, {
        "group_id": group, "require_stable": False,
        "topics": [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()]},
        version=version)
    return int(r["error_code"]), {(t["name"], p["partition_index"]): int(p["committed_offset"])
                                  for t in r["topics"] for p in t["partitions"]}


def describe_group(conn: Any, group: str, *, version: int = 4) -> dict[str, Any]:
    """DescribeGroups (v4, librdkafka's) for one group: its entry."""
    from kafkactl.protocol.api_keys import ApiKey

    r = conn.request(ApiKey.DESCRIBE_GROUPS, {"groups": [group],
                                              "include_authorized_operations": False},
                     version=version)
    entry: dict[str, Any] = r["groups"][0]
    return entry
