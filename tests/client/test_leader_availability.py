"""Leaders per partition in the client's metadata cache: what a failed broker or a stale
leader invalidates, when the metadata is asked again (a backoff, never a busy loop), and
partitioners that keep keyless records to partitions with a leader while a key keeps its
partition."""

from __future__ import annotations

import random
import time
from typing import Any

import pytest

from kafkactl.client.cluster import ClusterMetadata
from kafkactl.client.kafka_client import KafkaClient
from kafkactl.client.partitioner import Partitioner, murmur2_partition
from kafkactl.protocol.errors import ErrorCode


def _metadata(leaders: dict[int, int]) -> dict[str, Any]:
    """A Metadata response for topic t: partition -> leader (-1: none, as brokers say it)."""
    return {"brokers": [{"node_id": n, "host": "127.0.0.1", "port": 9000 + n}
                        for n in (1, 2, 3)],
            "topics": [{"name": "t", "error_code": 0, "partitions": [
                {"partition_index": p, "leader_id": lead,
                 "error_code": 0 if lead >= 0 else ErrorCode.LEADER_NOT_AVAILABLE,
                 "replica_nodes": [1, 2, 3], "isr_nodes": [1, 2, 3]}
                for p, lead in leaders.items()]}]}


def test_a_failed_broker_invalidates_only_the_partitions_it_leads() -> None:
    c = ClusterMetadata()
    c.update(_metadata({0: 1, 1: 2, 2: 1, 3: 3}))
    assert not c.stale
    version = c.version
    c.invalidate_node(1)
    assert c.stale and c.version > version
    assert [c.leader_for("t", p) for p in range(4)] == [-1, 2, -1, 3]
    # the client stopped trusting those leaders; the cluster did not say they have none
    assert not c.reported_leaderless("t", 0)
    assert c.available_partitions("t") == [1, 3]


def test_a_stale_leader_invalidates_its_partition_only() -> None:
    c = ClusterMetadata()
    c.update(_metadata({0: 1, 1: 2}))
    c.invalidate("t", 1)
    assert [c.leader_for("t", p) for p in range(2)] == [1, -1]
    c.invalidate("t")  # the whole topic (spark's reader asks so)
    assert [c.leader_for("t", p) for p in range(2)] == [-1, -1]


def test_leaderless_as_the_cluster_reports_it() -> None:
    c = ClusterMetadata()
    c.update(_metadata({0: -1, 1: 2}))
    assert c.reported_leaderless("t", 0) and not c.reported_leaderless("t", 1)
    assert not c.reported_leaderless("t", 7) and not c.reported_leaderless("nope", 0)
    assert c.available_partitions("t") == [1]
    assert c.partitions_for("t") == [0, 1]  # usable: the partition count is known


def test_stale_metadata_is_asked_again_at_most_once_per_backoff(
        monkeypatch: pytest.MonkeyPatch) -> None:
    client = KafkaClient("127.0.0.1:1", retry_backoff_ms=200)
    asked: list[list[str] | None] = []

    def refresh(topics: list[str] | None = None, **_kw: Any) -> ClusterMetadata:
        asked.append(topics)
        client._metadata_tried_at = time.monotonic()
        client.cluster.update(_metadata({0: 1, 1: 2}))
        return client.cluster

    monkeypatch.setattr(client, "refresh_metadata", refresh)
    try:
        assert client.maybe_refresh_metadata(["t"])  # never fetched
        assert not client.maybe_refresh_metadata(["t"])  # fresh
        client.cluster.invalidate_node(1)
        assert not client.maybe_refresh_metadata(["t"])  # within the backoff
        assert not client.maybe_refresh_metadata(["t"], force=True)
        assert 0 < client.metadata_backoff() <= 0.2
        client._metadata_tried_at -= 0.2
        assert client.maybe_refresh_metadata(["t"], force=True)
        assert asked == [["t"], ["t"]]
    finally:
        client.close()


def test_keys_keep_their_partition_while_keyless_records_avoid_leaderless_ones() -> None:
    part = Partitioner("murmur2")
    available = [1, 3]
    for i in range(200):
        key = f"k{i}".encode()
        assert part.partition("t", key, 4, available) == murmur2_partition(key, 4)
    assert {part.partition("t", None, 4, available) for _ in range(50)} <= set(available)
    part._sticky["t"] = 0  # sticky on a partition that lost its leader: moves
    assert part.sticky_partition("t", 4, available) in available
    for _ in range(50):
        part.on_new_batch("t", part.sticky_partition("t", 4, available), 4, available)
        assert part.sticky_partition("t", 4, available) in available
    crc = Partitioner("crc32")
    assert crc.partition("t", b"abc", 4, available) == crc.partition("t", b"abc", 4)


def test_roundrobin_and_random_keep_to_partitions_with_a_leader() -> None:
    rr = Partitioner("roundrobin")
    assert [rr.partition("t", None, 4, [0, 2]) for _ in range(4)] == [0, 2, 0, 2]
    got = rr.spread("t", [b"a", b"b", b"c"], 4, [1, 3])
    assert sorted(p for p, _ in got) == [1, 3]
    assert sum(len(vs) for _, vs in got) == 3
    rnd = Partitioner("random")
    assert {rnd.partition("t", b"k", 5, [4]) for _ in range(20)} == {4}
    assert {p for p, _ in rnd.spread("t", [b"x"] * 100, 5, [0, 4])} <= {0, 4}


def test_without_available_partitions_the_choices_are_unchanged() -> None:
    """No `available` (every partition has a leader): the same draws as before it existed
    (the same random stream)."""
    random.seed(7)
    a = [Partitioner("random").partition("t", None, 6) for _ in range(20)]
    random.seed(7)
    b = [random.randrange(6) for _ in range(20)]
    assert a == b
    rr = Partitioner("roundrobin")
    assert rr.spread("t", [b"a", b"b", b"c", b"d", b"e"], 3) == \
        [(0, [b"a", b"d"]), (1, [b"b", b"e"]), (2, [b"c"])]
