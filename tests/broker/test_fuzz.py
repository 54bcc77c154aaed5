"""Hypothesis throws mutated real requests at a live broker; afterwards the broker still
serves and every byte in its logs is a valid batch (nothing bad reached the log)."""

from __future__ import annotations

import socket
import struct

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkactl.protocol import codec
from kafkactl.protocol.api_keys import ApiKey
from kafkactl.record.memory_records import scan
from tests.hypothesis_profiles import examples

from .wire import Wire, batch


def _seeds() -> list[bytes]:
    records = batch([b"seed-a", b"seed-b"])
    produce = {"transactional_id": None, "acks": 1, "timeout_ms": 1000,
               "topic_data": [{"name": "fuzz", "partition_data": [
                   {"index": 0, "records": records}]}]}
    fetch = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20,
             "isolation_level": 1, "session_id": 0, "session_epoch": -1,
             "topics": [{"topic": "fuzz", "partitions": [
                 {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20,
                  "current_leader_epoch": -1, "log_start_offset": -1,
                  "last_fetched_epoch": -1}]}],
             "forgotten_topics_data": [], "rack_id": ""}
    return [
        codec.encode_request(ApiKey.PRODUCE, 9, 1, "fz", produce),
        codec.encode_request(ApiKey.PRODUCE, 7, 1, "fz", produce),
        codec.encode_request(ApiKey.PRODUCE, 3, 1, "fz", produce),
        codec.encode_request(ApiKey.FETCH, 12, 2, "fz", fetch),
        codec.encode_request(ApiKey.FETCH, 4, 2, "fz", fetch),
        codec.encode_request(ApiKey.METADATA, 12, 3, "fz", {"topics": [{"name": "fuzz"}]}),
        codec.encode_request(ApiKey.API_VERSIONS, 3, 4, "fz", {
            "client_software_name": "fz", "client_software_version": "1"}),
        codec.encode_request(ApiKey.LIST_OFFSETS, 7, 5, "fz", {
            "replica_id": -1, "isolation_level": 0, "topics": [{"name": "fuzz", "partitions": [
                {"partition_index": 0, "timestamp": -1, "current_leader_epoch": -1}]}]}),
        codec.encode_request(ApiKey.CREATE_TOPICS, 5, 6, "fz", {
            "topics": [{"name": "fuzz2", "num_partitions": 1, "replication_factor": 1,
                        "assignments": [], "configs": []}], "timeout_ms": 1000}),
    ]


SEEDS = _seeds()

mutation = st.one_of(
    st.tuples(st.just("flip"), st.integers(0, 10**6), st.integers(1, 255)),
    st.tuples(st.just("truncate"), st.integers(0, 10**6), st.just(0)),
    st.tuples(st.just("insert"), st.integers(0, 10**6), st.integers(0, 255)),
    st.tuples(st.just("delete"), st.integers(0, 10**6), st.integers(1, 8)),
)


def _mutate(frame: bytes, muts: list[tuple[str, int, int]], fix_size: bool) -> bytes:
    body = bytearray(frame[4:])
    for kind, pos, arg in muts:
        if not body:
            break
        i = pos % len(body)
        if kind == "flip":
            body[i] ^= arg
        elif kind == "truncate":
            del body[i:]
        elif kind == "insert":
            body.insert(i, arg)
        else:
            del body[i:i + arg]
    size = len(body) if fix_size else struct.unpack(">i", frame[:4])[0]
    return struct.pack(">i", size) + bytes(body)


def _exchange(port: int, data: bytes) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        try:
            while s.recv(65536):
                pass
        except OSError:
            pass


def test_fuzz_mutated_requests(broker) -> None:
    with Wire(broker.bootstrap) as w:
        assert w.produce("fuzz", batch([b"before"]))["error_code"] == 0

    @settings(max_examples=examples(150), deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(seed=st.sampled_from(SEEDS), muts=st.lists(mutation, min_size=1, max_size=4),
           fix_size=st.booleans())
    def run(seed: bytes, muts: list[tuple[str, int, int]], fix_size: bool) -> None:
        _exchange(broker.port, _mutate(seed, muts, fix_size))

    run()
    with Wire(broker.bootstrap) as w:
        assert w.produce("fuzz", batch([b"after"]))["error_code"] == 0
        assert w.request(ApiKey.API_VERSIONS, 3, {"client_software_name": "t",
                                                  "client_software_version": "1"})[
            "error_code"] == 0
    assert broker.stop() == 0
    assert "Traceback" not in broker.log()
    logs = list(broker.data_dir.glob("*-*/*.log"))
    assert logs
    for path in logs:
        data = path.read_bytes()
        result = scan(memoryview(data))
        assert result.error is None, f"{path}: {result.error}"
        assert result.valid_bytes == len(data), path
