"""OffsetCommit v0 and OffsetFetch v0 on a broker of a ZooKeeper cluster are Kafka's
ZooKeeper-mode v0 (KafkaApis, Kafka 0.8.2-2.x): the offsets are the znodes
/consumers/GROUP/offsets/TOPIC/PARTITION (the offset as decimal text, no metadata), no group
coordinator is involved; authorization, unknown partitions and metadata size as Kafka's.
v1+ stay with the group coordinator."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from kafkactl.cluster import zookeeper as zkmod
from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.errors import ErrorCode
from tests.cluster.cluster_helpers import metadata, request
from tests.cluster.zk import ZooKeeperServer
from tests.conftest import BrokerProcess
from tests.polling import wait_until

TOPIC = "oc"
# (resource type, operation, permission): topic 2, group 3; read 3, describe 8; deny 2
TOPIC_T, GROUP_T, READ, DESCRIBE, DENY = 2, 3, 3, 8, 2


@dataclass
class Env:
    broker: BrokerProcess
    zk: Any  # a kazoo client rooted at the cluster's chroot


def _create(port: int, name: str, partitions: int) -> None:
    resp = request(port, ApiKey.CREATE_TOPICS, 5, {"topics": [{
        "name": name, "num_partitions": partitions, "replication_factor": 1,
        "assignments": [], "configs": []}], "timeout_ms": 30000, "validate_only": False}, 60)
    assert resp["topics"][0]["error_code"] == 0, resp


def _known(port: int, name: str, partitions: int) -> bool:
    md = request(port, ApiKey.METADATA, 1, {"topics": [{"name": name}]})
    t = md["topics"][0]
    return t["error_code"] == 0 and len(t["partitions"]) == partitions and all(
        p["leader_id"] >= 0 for p in t["partitions"])


@pytest.fixture
def env(broker_factory: Any, zookeeper: ZooKeeperServer) -> Iterator[Env]:
    connect = f"{zookeeper.connect}/v0-{uuid.uuid4().hex[:8]}"
    b = broker_factory(zookeeper_connect=connect, offsets_topic_num_partitions="1",
                       offsets_topic_replication_factor="1",
                       group_initial_rebalance_delay_ms="0",
                       authorizer_class_name="kafka.security.authorizer.AclAuthorizer",
                       allow_everyone_if_no_acl_found="true")
    zk = zkmod.connect(connect, timeout_s=10)
    try:
        wait_until(lambda: metadata(b.port, [])["controller_id"] == 0, 30, "the controller")
        for name, n in ((TOPIC, 2), ("no-read", 1), ("no-describe", 1)):
            _create(b.port, name, n)
            wait_until(lambda name=name, n=n: _known(b.port, name, n), 30, f"topic {name}")
        yield Env(b, zk)
    finally:
        zkmod.close(zk)


def commit(port: int, version: int, group: str,
           offsets: dict[tuple[str, int], tuple[int, str | None]]) -> dict[tuple[str, int], int]:
    topics: dict[str, list[dict[str, Any]]] = {}
    for (t, p), (off, meta) in offsets.items():
        topics.setdefault(t, []).append({
            "partition_index": p, "committed_offset": off, "committed_leader_epoch": -1,
            "commit_timestamp": -1, "committed_metadata": meta})
    body: dict[str, Any] = {
        "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
        "group_instance_id": None, "retention_time_ms": -1,
        "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
    resp = request(port, ApiKey.OFFSET_COMMIT, version, body)
    return {(t["name"], p["partition_index"]): p["error_code"]
            for t in resp["topics"] for p in t["partitions"]}


def fetch(port: int, version: int, group: str, tps: list[tuple[str, int]]
          ) -> dict[tuple[str, int], tuple[int, str, int]]:
    topics: dict[str, list[int]] = {}
    for t, p in tps:
        topics.setdefault(t, []).append(p)
    resp = request(port, ApiKey.OFFSET_FETCH, version, {
        "group_id": group, "require_stable": False,
        "topics": [{"name": t, "partition_indexes": ps} for t, ps in topics.items()]})
    return {(t["name"], p["partition_index"]): (p["committed_offset"], p["metadata"] or "",
                                                p["error_code"])
            for t in resp["topics"] for p in t["partitions"]}


def find_coordinator(port: int, group: str) -> None:
    """Until this broker is the group's coordinator (it creates __consumer_offsets)."""
    wait_until(lambda: request(port, ApiKey.FIND_COORDINATOR, 1, {
        "key": group, "key_type": 0})["error_code"] == 0, 30, f"a coordinator of {group}")


def znode(zk: Any, group: str, topic: str, partition: int) -> bytes | None:
    path = f"/consumers/{group}/offsets/{topic}/{partition}"
    return zk.get(path)[0] if zk.exists(path) else None


NONE = ErrorCode.NONE
UNKNOWN = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_v0_fetch_reads_the_znodes(env: Env) -> None:
    """The tester's repro: /consumers/zk1/offsets/oc/0 = "3" is what a v0 fetch answers
    (it answered -1); a partition without a znode -1 with UNKNOWN_TOPIC_OR_PARTITION, as
    Kafka's OffsetFetchResponse.UNKNOWN_PARTITION; unknown partitions the same."""
    env.zk.create("/consumers/zk1/offsets/oc/0", b"3", makepath=True)
    got = fetch(env.broker.port, 0, "zk1",
                [(TOPIC, 0), (TOPIC, 1), (TOPIC, 7), ("nowhere", 0)])
    assert got == {(TOPIC, 0): (3, "", NONE), (TOPIC, 1): (-1, "", UNKNOWN),
                   (TOPIC, 7): (-1, "", UNKNOWN), ("nowhere", 0): (-1, "", UNKNOWN)}
    # a negative offset is a number (answered as it is); text that is none fails the
    # partition (Kafka's NumberFormatException: UNKNOWN_SERVER_ERROR)
    env.zk.set("/consumers/zk1/offsets/oc/0", b"-1")
    env.zk.create("/consumers/zk1/offsets/oc/1", b"abc")
    assert fetch(env.broker.port, 0, "zk1", [(TOPIC, 0), (TOPIC, 1)]) == {
        (TOPIC, 0): (-1, "", NONE), (TOPIC, 1): (-1, "", ErrorCode.UNKNOWN_SERVER_ERROR)}


def test_v0_commit_writes_the_znodes_without_a_coordinator(env: Env) -> None:
    """A v0 commit is answered at once (no __consumer_offsets, no coordinator: it answered
    NOT_COORDINATOR) and writes the offset, only the offset, to ZooKeeper; a v0 fetch
    reads it back with no metadata."""
    port = env.broker.port
    big = "x" * 4097  # over offset.metadata.max.bytes (4096)
    got = commit(port, 0, "g0", {(TOPIC, 0): (42, "meta"), (TOPIC, 1): (7, None),
                                 (TOPIC, 5): (1, ""), ("nowhere", 0): (1, ""),
                                 ("no-read", 0): (3, big)})
    assert got == {(TOPIC, 0): NONE, (TOPIC, 1): NONE, (TOPIC, 5): UNKNOWN,
                   ("nowhere", 0): UNKNOWN,
                   ("no-read", 0): ErrorCode.OFFSET_METADATA_TOO_LARGE}
    assert znode(env.zk, "g0", TOPIC, 0) == b"42"
    assert znode(env.zk, "g0", TOPIC, 1) == b"7"
    assert env.zk.get_children("/consumers/g0/offsets") == [TOPIC]
    assert sorted(env.zk.get_children(f"/consumers/g0/offsets/{TOPIC}")) == ["0", "1"]
    assert fetch(port, 0, "g0", [(TOPIC, 0), (TOPIC, 1)]) == {
        (TOPIC, 0): (42, "", NONE), (TOPIC, 1): (7, "", NONE)}
    # a second commit overwrites the znode
    assert commit(port, 0, "g0", {(TOPIC, 0): (50, "")}) == {(TOPIC, 0): NONE}
    assert znode(env.zk, "g0", TOPIC, 0) == b"50"
    # the coordinator knows nothing of them: v1 asks it
    assert env.zk.exists("/brokers/topics/__consumer_offsets") is None
    find_coordinator(port, "g0")
    got1 = wait_until(lambda: (lambda r: r if r[(TOPIC, 0)][2] == NONE else None)(
        fetch(port, 1, "g0", [(TOPIC, 0)])), 30, "the group coordinator")
    assert got1 == {(TOPIC, 0): (-1, "", NONE)}


def test_v1_and_later_stay_with_the_coordinator(env: Env) -> None:
    port = env.broker.port
    find_coordinator(port, "g1")

    def committed() -> dict[tuple[str, int], int] | None:
        got = commit(port, 2, "g1", {(TOPIC, 0): (9, "m")})
        return got if got[(TOPIC, 0)] == NONE else None

    wait_until(committed, 30, "a v2 commit to the group coordinator")
    assert env.zk.exists("/consumers/g1") is None
    assert fetch(port, 1, "g1", [(TOPIC, 0)]) == {(TOPIC, 0): (9, "m", NONE)}
    assert fetch(port, 0, "g1", [(TOPIC, 0)]) == {(TOPIC, 0): (-1, "", UNKNOWN)}


def test_v0_authorization(env: Env) -> None:
    """Commit: Read on the group and on the topic; fetch: Describe on both."""
    from kafkactl.client.kafka_client import KafkaClient
    from kafkactl.client.security_admin import AclEntry, create_acls

    port = env.broker.port
    client = KafkaClient(env.broker.bootstrap)
    try:
        create_acls(client, [AclEntry(TOPIC_T, "no-read", 3, "User:*", "*", READ, DENY),
                             AclEntry(TOPIC_T, "no-describe", 3, "User:*", "*", DESCRIBE,
                                      DENY),
                             AclEntry(GROUP_T, "g-no-read", 3, "User:*", "*", READ, DENY),
                             AclEntry(GROUP_T, "g-no-describe", 3, "User:*", "*", DESCRIBE,
                                      DENY)])
    finally:
        client.close()
    wait_until(lambda: commit(port, 0, "g-no-read", {(TOPIC, 0): (1, "")})
               == {(TOPIC, 0): ErrorCode.GROUP_AUTHORIZATION_FAILED}, 30, "the ACLs")
    assert env.zk.exists("/consumers/g-no-read") is None
    assert commit(port, 0, "ga", {(TOPIC, 0): (4, ""), ("no-read", 0): (4, "")}) == {
        (TOPIC, 0): NONE, ("no-read", 0): ErrorCode.TOPIC_AUTHORIZATION_FAILED}
    assert znode(env.zk, "ga", TOPIC, 0) == b"4"
    assert znode(env.zk, "ga", "no-read", 0) is None

    env.zk.create("/consumers/ga/offsets/no-describe/0", b"8", makepath=True)
    env.zk.create("/consumers/g-no-describe/offsets/oc/0", b"8", makepath=True)
    assert fetch(port, 0, "ga", [(TOPIC, 0), ("no-describe", 0)]) == {
        (TOPIC, 0): (4, "", NONE),
        ("no-describe", 0): (-1, "", ErrorCode.TOPIC_AUTHORIZATION_FAILED)}
    assert fetch(port, 0, "g-no-describe", [(TOPIC, 0)]) == {
        (TOPIC, 0): (-1, "", ErrorCode.GROUP_AUTHORIZATION_FAILED)}
