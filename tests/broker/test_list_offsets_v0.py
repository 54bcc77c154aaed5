"""ListOffsets v0 is the seed's getOffsetsBefore, answered as Kafka's
Log.legacyFetchOffsetsBefore: up to max_num_offsets offsets, newest first, from the
segments' base offsets (with their .log files' last-modified times) and the log end; v1+
keep answering one offset."""

from __future__ import annotations

import os
import socket
import struct
import time
from pathlib import Path
from typing import Any

from kafkactl.protocol import codec
from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.errors import ErrorCode
from kafkactl.record.builder import RecordBatchBuilder
from tests.conftest import BrokerProcess

TOPIC = "lo"
LATEST, EARLIEST = -1, -2
T0 = 1_600_000_000_000  # the segments' mtimes: T0, T0 + 1 s, T0 + 2 s, ...


def request(port: int, api_key: ApiKey, version: int, body: dict[str, Any]) -> dict[str, Any]:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(codec.encode_request(api_key, version, 1, "lo-test", body))
        size = struct.unpack(">i", _read(s, 4))[0]
        return codec.decode_response(api_key, version, _read(s, size))


def _read(s: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = s.recv(n - len(out))
        assert chunk, "connection closed"
        out += chunk
    return bytes(out)


def _batch(base: int, records: int = 10) -> bytes:
    b = RecordBatchBuilder(base_offset=base)
    for i in range(records):
        b.append(int(time.time() * 1000), None, b"value-%04d" % (base + i))
    return b.build()


def _setup(broker: BrokerProcess) -> tuple[list[int], int, Path]:
    """The topic with segments of a few batches each: (the segment base offsets, the log
    end, the partition's directory); the segments' mtimes are set to T0 + i s."""
    resp = request(broker.port, ApiKey.CREATE_TOPICS, 5, {"topics": [{
        "name": TOPIC, "num_partitions": 1, "replication_factor": 1, "assignments": [],
        "configs": [{"name": "segment.bytes", "value": "1000"}]}], "timeout_ms": 30000,
        "validate_only": False})
    assert resp["topics"][0]["error_code"] == 0, resp
    for base in range(0, 200, 10):
        got = request(broker.port, ApiKey.PRODUCE, 3, {
            "transactional_id": None, "acks": 1, "timeout_ms": 30000, "topic_data": [
                {"name": TOPIC, "partition_data": [{"index": 0, "records": _batch(base)}]}]})
        assert got["responses"][0]["partition_responses"][0]["error_code"] == 0, got
    [pdir] = [p for p in broker.data_dir.rglob(f"{TOPIC}-0") if p.is_dir()]
    logs = sorted(pdir.glob("*.log"))
    bases = [int(p.name.split(".")[0]) for p in logs]
    assert len(bases) >= 5 and bases[0] == 0, bases
    for i, p in enumerate(logs):
        os.utime(p, ns=((T0 + i * 1000) * 1_000_000,) * 2)
    return bases, 200, pdir


def v0(broker: BrokerProcess, ts: int, max_num: int, partition: int = 0,
       replica_id: int = -1) -> tuple[int, list[int]]:
    resp = request(broker.port, ApiKey.LIST_OFFSETS, 0, {
        "replica_id": replica_id, "topics": [{"name": TOPIC, "partitions": [
            {"partition_index": partition, "timestamp": ts, "max_num_offsets": max_num}]}]})
    p = resp["topics"][0]["partitions"][0]
    return p["error_code"], list(p["old_style_offsets"])


def v1(broker: BrokerProcess, ts: int) -> tuple[int, int]:
    resp = request(broker.port, ApiKey.LIST_OFFSETS, 1, {
        "replica_id": -1, "topics": [{"name": TOPIC, "partitions": [
            {"partition_index": 0, "timestamp": ts}]}]})
    p = resp["topics"][0]["partitions"][0]
    return p["error_code"], p["offset"]


def test_list_offsets_v0_answers_as_get_offsets_before(broker_factory: Any) -> None:
    b = broker_factory()
    bases, end, _pdir = _setup(b)
    newest_first = sorted(bases, reverse=True)
    ok = ErrorCode.NONE
    # LATEST: the log end, then every segment's base offset, newest first, capped
    assert v0(b, LATEST, 100) == (ok, [end, *newest_first])
    assert v0(b, LATEST, 3) == (ok, [end, *newest_first[:2]])
    assert v0(b, LATEST, 1) == (ok, [end])
    assert v0(b, LATEST, 0) == (ok, [])
    # EARLIEST: the log start
    assert v0(b, EARLIEST, 100) == (ok, [0])
    assert v0(b, EARLIEST, 0) == (ok, [])
    # a timestamp: the segments last modified at or before it (none: empty)
    assert v0(b, 1000, 100) == (ok, [])
    assert v0(b, T0 - 1, 100) == (ok, [])
    assert v0(b, T0, 100) == (ok, [0])
    assert v0(b, T0 + 2500, 100) == (ok, sorted(bases[:3], reverse=True))
    assert v0(b, T0 + 2500, 2) == (ok, [bases[2], bases[1]])
    # the log end counts as modified "now", when the broker answers: a timestamp even one
    # ms before that leaves it out (the same ms would take it: not asked here)
    now = int(time.time() * 1000) - 1
    assert v0(b, now, 100) == (ok, newest_first)
    assert v0(b, now + 3_600_000, 100) == (ok, [end, *newest_first])
    # a negative count fails the partition, as Kafka's NegativeArraySizeException
    assert v0(b, LATEST, -1) == (ErrorCode.UNKNOWN_SERVER_ERROR, [])
    assert v0(b, LATEST, 5, partition=3) == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, [])


def test_list_offsets_v0_start_after_deleted_records(broker_factory: Any) -> None:
    """A log start inside the first remaining segment is its offset in the list."""
    b = broker_factory()
    bases, end, _pdir = _setup(b)
    start = bases[1] + 3
    resp = request(b.port, ApiKey.DELETE_RECORDS, 0, {"topics": [{"name": TOPIC, "partitions": [
        {"partition_index": 0, "offset": start}]}], "timeout_ms": 30000})
    assert resp["topics"][0]["partitions"][0]["error_code"] == 0, resp
    assert v0(b, EARLIEST, 10) == (ErrorCode.NONE, [start])
    got = v0(b, LATEST, 100)
    assert got == (ErrorCode.NONE, [end, *sorted(bases[2:], reverse=True), start]), got


def test_list_offsets_v1_still_answers_one_offset(broker_factory: Any) -> None:
    b = broker_factory()
    _bases, end, _pdir = _setup(b)
    assert v1(b, LATEST) == (ErrorCode.NONE, end)
    assert v1(b, EARLIEST) == (ErrorCode.NONE, 0)
    assert v1(b, 1000) == (ErrorCode.NONE, 0)  # by the records' timestamps, not mtimes
    assert v1(b, int(time.time() * 1000) + 3_600_000) == (ErrorCode.NONE, -1)
