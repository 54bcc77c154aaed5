"""A consumer's long-poll Fetch on a replicated partition waits for min_bytes of committed
records, on real brokers and ZooKeeper (Kafka's DelayedFetch: the bytes between the fetch
offset and the high watermark must reach fetch.min.bytes, else max_wait_ms ends the wait).

One Fetch with min_bytes = the size of five small batches and max_wait_ms 30 s is
outstanding on the leader of an RF=2 partition while five batches are produced one at a
time with acks=all, each acknowledged (so committed: below the high watermark) before the
next is sent. Its one answer carries all five. Before the fix every high-watermark advance
answered a consumer's waiting fetch: it carried the first batch only."""

from __future__ import annotations

from typing import Any

import pytest

from kafkactl.protocol import codec
from kafkactl.protocol.api_keys import ApiKey
from kafkactl.record.memory_records import iter_batches
from tests.broker.wire import Wire, batch
from tests.cluster.cluster_helpers import Cluster, request, start_cluster
from tests.cluster.test_replication import full_isr
from tests.cluster.zk import ZooKeeperServer
from tests.polling import wait_until

TOPIC = "minbytes"
RECORDS = 5
MAX_WAIT_MS = 30000


def _cluster(broker_factory: Any, zookeeper: ZooKeeperServer) -> Cluster:
    # the followers stay in the ISR however slow the machine (the high watermark must move
    # with each acks=all produce, not by an ISR shrink)
    cluster = start_cluster(broker_factory, zookeeper, ids=(1, 2),
                            replica_lag_time_max_ms="60000",
                            offsets_topic_replication_factor="2")
    resp = request(cluster.brokers[cluster.controller()].port, ApiKey.CREATE_TOPICS, 5, {
        "topics": [{"name": TOPIC, "num_partitions": 1, "replication_factor": 2,
                    "assignments": [], "configs": []}],
        "timeout_ms": 30000, "validate_only": False}, 60)
    assert resp["topics"][0]["error_code"] == 0, resp
    full_isr(cluster, TOPIC, 1, size=2)
    return cluster


def _fetch_body(offset: int, min_bytes: int, max_wait_ms: int, isolation: int,
                session_id: int = 0, session_epoch: int = -1,
                listed: bool = True) -> dict[str, Any]:
    parts = [{"partition": 0, "fetch_offset": offset, "partition_max_bytes": 1 << 20,
              "current_leader_epoch": -1, "log_start_offset": -1, "last_fetched_epoch": -1}]
    return {"replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": min_bytes,
            "max_bytes": 50 << 20, "isolation_level": isolation, "session_id": session_id,
            "session_epoch": session_epoch,
            "topics": [{"topic": TOPIC, "partitions": parts}] if listed else [],
            "forgotten_topics_data": [], "rack_id": ""}


@pytest.mark.parametrize("mode", ["sessionless", "incremental-session", "read-committed"])
def test_a_long_poll_on_a_replicated_partition_waits_for_min_bytes_of_committed_records(
        broker_factory: Any, zookeeper: ZooKeeperServer, mode: str) -> None:
    cluster = _cluster(broker_factory, zookeeper)
    leader = cluster.brokers[cluster.wait_for_leaders(TOPIC, 1)[0]]
    values = [f"small-{i}".encode() for i in range(RECORDS)]
    batches = [batch([v]) for v in values]
    min_bytes = sum(len(b) for b in batches)
    with Wire(leader.bootstrap, timeout=60) as producer, \
            Wire(leader.bootstrap, timeout=MAX_WAIT_MS / 1000 + 60) as consumer:
        # the partition takes acks=all writes (leader and follower in the ISR)
        wait_until(lambda: producer.produce(TOPIC, batch([b"warm"]), acks=-1)[
            "error_code"] == 0, 30, "an acks=all write")
        start = consumer.fetch(TOPIC, 0)["high_watermark"]
        isolation = 1 if mode == "read-committed" else 0
        body = _fetch_body(start, min_bytes, MAX_WAIT_MS, isolation)
        if mode == "incremental-session":  # a full fetch makes the session, at `start`
            full = consumer.request(ApiKey.FETCH, 12, _fetch_body(start, 1, 0, 0, 0, 0))
            assert full["error_code"] == 0 and full["session_id"] != 0, full
            body = _fetch_body(start, min_bytes, MAX_WAIT_MS, 0, full["session_id"], 1,
                               listed=False)
        consumer.correlation_id += 1
        cid = consumer.correlation_id
        consumer.send_raw(codec.encode_request(ApiKey.FETCH, 12, cid, "wire", body))
        for b in batches:  # one at a time, each committed before the next is sent
            resp = producer.produce(TOPIC, b, acks=-1)
            assert resp["error_code"] == 0, resp
        frame = consumer.recv_frame()
        assert codec.peek_correlation_id(frame) == cid
        answer = codec.decode_response(ApiKey.FETCH, 12, frame)
    assert answer["error_code"] == 0, answer
    part = answer["responses"][0]["partitions"][0]
    assert part["error_code"] == 0, part
    got = [bytes(r.value) for b in iter_batches(memoryview(part["records"] or b""))
           for r in b if r.offset >= start and r.value is not None]
    # one answer with every record: it waited for min_bytes, not for the first commit
    assert got == values, f"the long poll answered with {got}, not all {RECORDS} records"
