"""acks=all Produce requests pipelined on one connection (kafkactl.broker.network,
"Ordering"), on a real RF=3 cluster: with a follower stopped (SIGSTOP: still in the ISR, so
the high watermark cannot pass the new records), five Produce requests sent back to back on
one connection are all appended at once, none answered; once the follower runs again the
five answers come back in request order, at consecutive offsets. Before the exception each
waited for the one before it to be replicated (Kafka's strict turns per connection)."""

from __future__ import annotations

import os
import signal
import struct
from typing import Any

from kafkactl.protocol import codec
from kafkactl.protocol.api_keys import ApiKey
from tests.broker.wire import Wire, batch
from tests.cluster.cluster_helpers import request, start_cluster
from tests.cluster.zk import ZooKeeperServer
from tests.polling import wait_until

TOPIC = "piped"


def _log_end(port: int) -> int:
    """The leader's log end offset (asked as a replica: a consumer is told the high
    watermark)."""
    resp = request(port, ApiKey.LIST_OFFSETS, 7, {
        "replica_id": 1000, "isolation_level": 0, "topics": [{"name": TOPIC, "partitions": [
            {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]})
    return int(resp["topics"][0]["partitions"][0]["offset"])


def _create(port: int) -> None:
    resp = request(port, ApiKey.CREATE_TOPICS, 5, {"topics": [{
        "name": TOPIC, "num_partitions": 1, "replication_factor": 3, "assignments": [],
        "configs": [{"name": "min.insync.replicas", "value": "2"}]}],
        "timeout_ms": 30000, "validate_only": False}, 60)
    assert resp["topics"][0]["error_code"] == 0, resp


def _produce_frame(cid: int, value: bytes) -> bytes:
    return codec.encode_request(ApiKey.PRODUCE, 9, cid, "pipelined", {
        "transactional_id": None, "acks": -1, "timeout_ms": 60000,
        "topic_data": [{"name": TOPIC, "partition_data": [
            {"index": 0, "records": batch([value])}]}]})


def test_acks_all_produces_on_one_connection_are_appended_at_once_and_answered_in_order(
        broker_factory: Any, zookeeper: ZooKeeperServer) -> None:
    # the stopped follower stays in the ISR: neither its lag nor its ZooKeeper session ends
    cluster = start_cluster(broker_factory, zookeeper, replica_lag_time_max_ms="60000",
                            zookeeper_session_timeout_ms="60000")
    ctl = cluster.brokers[cluster.controller()]
    _create(ctl.port)
    leader_id = cluster.wait_for_leaders(TOPIC, 1)[0]
    leader = cluster.brokers[leader_id]
    with Wire(leader.bootstrap) as w:  # the ISR is whole and the partition writable
        wait_until(lambda: w.produce(TOPIC, batch([b"warm"]), acks=-1)["error_code"] == 0, 30,
                   "an acks=all write")
    start = _log_end(leader.port)
    follower = next(b for i, b in cluster.brokers.items() if i != leader_id)
    assert follower.proc is not None
    os.kill(follower.proc.pid, signal.SIGSTOP)
    try:
        with Wire(leader.bootstrap, timeout=60) as w:
            w.send_raw(b"".join(_produce_frame(cid, b"v%d" % cid) for cid in range(1, 6)))
            # all five appended while the first still waits for the stopped follower
            wait_until(lambda: _log_end(leader.port) == start + 5, 30,
                       "the five batches appended")
            w.sock.settimeout(0.5)
            try:
                early = w.sock.recv(1)
            except TimeoutError:
                early = b""
            assert early == b"", "an answer came before the follower could have the records"
            w.sock.settimeout(60)
            os.kill(follower.proc.pid, signal.SIGCONT)
            answers = []
            for _ in range(5):
                frame = w.recv_frame()
                cid = struct.unpack_from(">i", frame)[0]
                part = codec.decode_response(ApiKey.PRODUCE, 9, frame)[
                    "responses"][0]["partition_responses"][0]
                answers.append((cid, part["error_code"], part["base_offset"]))
        assert answers == [(cid, 0, start + cid - 1) for cid in range(1, 6)]
    finally:
        os.kill(follower.proc.pid, signal.SIGCONT)
