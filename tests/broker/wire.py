"""A tiny blocking Kafka wire client for tests that need exact requests (built on
kafkactl.protocol and kafkactl.record, so the broker is checked byte for byte)."""

from __future__ import annotations

import socket
import struct
import time
from typing import Any

from kafkactl.protocol import codec
from kafkactl.protocol.api_keys import ApiKey
from kafkactl.record.batch import RecordBatchBuilder


class Wire:
    def __init__(self, bootstrap: str, timeout: float = 10.0) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Wire:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def recv_frame(self) -> bytes:
        size = struct.unpack(">i", self._recv_exact(4))[0]
        return self._recv_exact(size)

    def _recv_exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("connection closed by the broker")
            buf += chunk
        return bytes(buf)

    def request(self, api_key: ApiKey, version: int, body: dict[str, Any]) -> dict[str, Any]:
        self.correlation_id += 1
        self.send_raw(codec.encode_request(api_key, version, self.correlation_id, "wire", body))
        frame = self.recv_frame()
        assert codec.peek_correlation_id(frame) == self.correlation_id
        return codec.decode_response(api_key, version, frame)

    def produce(self, topic: str, records: bytes, *, acks: int = 1, version: int = 9,
                partition: int = 0) -> dict[str, Any]:
        resp = self.request(ApiKey.PRODUCE, version, {
            "transactional_id": None, "acks": acks, "timeout_ms": 5000,
            "topic_data": [{"name": topic, "partition_data": [
                {"index": partition, "records": records}]}]})
        return resp["responses"][0]["partition_responses"][0]

    def fetch(self, topic: str, offset: int, *, version: int = 12, max_wait_ms: int = 0,
              min_bytes: int = 1, partition_max_bytes: int = 1 << 20) -> dict[str, Any]:
        resp = self.request(ApiKey.FETCH, version, {
            "replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": min_bytes,
            "max_bytes": 50 << 20, "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [
                {"partition": 0, "fetch_offset": offset, "partition_max_bytes":
                 partition_max_bytes, "current_leader_epoch": -1, "log_start_offset": -1,
                 "last_fetched_epoch": -1}]}],
            "forgotten_topics_data": [], "rack_id": ""})
        return resp["responses"][0]["partitions"][0]

    def create_topic(self, name: str, partitions: int = 1,
                     configs: dict[str, str] | None = None) -> dict[str, Any]:
        resp = self.request(ApiKey.CREATE_TOPICS, 5, {
            "topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1,
                        "assignments": [], "configs": [{"name": k, "value": v}
                                                       for k, v in (configs or {}).items()]}],
            "timeout_ms": 5000, "validate_only": False})
        return resp["topics"][0]


def batch(values: list[bytes], *, producer_id: int = -1, producer_epoch: int = -1,
          base_sequence: int = -1, timestamp: int | None = None, **kw: Any) -> bytes:
    b = RecordBatchBuilder(producer_id=producer_id, producer_epoch=producer_epoch,
                           base_sequence=base_sequence, **kw)
    ts = int(time.time() * 1000) if timestamp is None else timestamp
    for v in values:
        b.append(ts, None, v)
    return b.build()
