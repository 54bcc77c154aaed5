"""Malformed frames, absurd sizes, unknown APIs, bad UTF-8, half-open connections and
pipelining: each bad client is closed (or told), logged once, and others keep being served."""

from __future__ import annotations

import socket
import struct
import time

import pytest

from kafkactl.protocol import codec
from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.errors import ErrorCode
from tests.conftest import BrokerProcess
from tests.polling import wait_until

from .wire import Wire, batch


@pytest.fixture
def broker(module_broker: BrokerProcess) -> BrokerProcess:
    """Tests given `broker` here use their own connections and topics: one broker for the
    module (the log-counting and broker-config ones have their own)."""
    return module_broker


def _api_versions_ok(bootstrap: str) -> None:
    with Wire(bootstrap) as w:
        r = w.request(ApiKey.API_VERSIONS, 3, {"client_software_name": "t",
                                               "client_software_version": "1"})
        assert r["error_code"] == 0
        keys = {e["api_key"] for e in r["api_keys"]}
        assert {0, 1, 2, 3, 18, 22}.issubset(keys)
        assert 71 not in keys  # never advertise what we do not implement
        assert all(e["min_version"] <= e["max_version"] for e in r["api_keys"])


def _closed_by_broker(sock: socket.socket, timeout: float = 5.0) -> bool:
    sock.settimeout(timeout)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def _header(api_key: int, version: int, cid: int = 1, client: bytes = b"c") -> bytes:
    return struct.pack(">hhih", api_key, version, cid, len(client)) + client


@pytest.mark.parametrize("frame", [
    struct.pack(">i", 0x7FFFFFFF),  # a 2 GiB size prefix
    struct.pack(">i", -5),
    struct.pack(">i", 3) + b"abc",  # shorter than a header
    struct.pack(">i", 10) + _header(999, 0),  # an API key Kafka does not define
    struct.pack(">i", 10) + _header(3, 99),  # Metadata v99
    struct.pack(">i", 12) + _header(3, 1) + b"\x00\x00",  # truncated Metadata body
    # Metadata v1 asking for a topic whose name is not UTF-8
    (lambda body: struct.pack(">i", len(body)) + body)(
        _header(3, 1) + struct.pack(">ih", 1, 2) + b"\xff\xfe"),
], ids=["2GiB", "negative", "short", "unknown-api", "bad-version", "truncated", "bad-utf8"])
def test_bad_frames_close_only_that_connection(broker, frame: bytes) -> None:
    bystander = Wire(broker.bootstrap)
    with socket.create_connection(("127.0.0.1", broker.port)) as s:
        s.sendall(frame)
        assert _closed_by_broker(s)
    _api_versions_ok(broker.bootstrap)
    assert bystander.request(ApiKey.METADATA, 1, {"topics": []})["brokers"]
    bystander.close()
    assert "Traceback" not in broker.log()


def test_each_bad_connection_is_logged_once(broker_factory) -> None:
    broker = broker_factory()  # counts lines in the broker log: not the shared one
    with socket.create_connection(("127.0.0.1", broker.port)) as s:
        s.sendall(struct.pack(">i", 0x7FFFFFFF) + b"x" * 100)
        assert _closed_by_broker(s)
    wait_until(lambda: "socket.request.max.bytes" in broker.log(), 20, "the log line")
    # a second line would come from the same close, right after the first: give it the time
    # a close takes (elapsed time is the point here: "once" means none follows)
    time.sleep(0.2)
    assert broker.log().count("socket.request.max.bytes") == 1


def test_too_new_api_versions_gets_v0_error_reply(broker) -> None:
    with socket.create_connection(("127.0.0.1", broker.port)) as s:
        body = _header(18, 9, cid=77) + b"\x00"
        s.sendall(struct.pack(">i", len(body)) + body)
        s.settimeout(5)
        size = struct.unpack(">i", s.recv(4))[0]
        data = b""
        while len(data) < size:
            data += s.recv(size - len(data))
    cid, err, n, key, lo, hi = struct.unpack(">ihihhh", data)
    assert (cid, err, n, key, lo) == (77, ErrorCode.UNSUPPORTED_VERSION, 1, 18, 0)
    assert hi >= 3


def test_pipelined_requests_are_answered_in_order(broker) -> None:
    with Wire(broker.bootstrap) as w:
        frames = b"".join(
            codec.encode_request(ApiKey.METADATA if i % 2 else ApiKey.API_VERSIONS,
                                 1 if i % 2 else 0, 1000 + i, "p", {"topics": []} if i % 2 else {})
            for i in range(200))
        w.send_raw(frames)
        ids = [codec.peek_correlation_id(w.recv_frame()) for _ in range(200)]
    assert ids == [1000 + i for i in range(200)]


def test_half_open_and_idle_connections(broker_factory) -> None:
    broker = broker_factory(connections_max_idle_ms="500")
    with socket.create_connection(("127.0.0.1", broker.port)) as s:
        s.sendall(struct.pack(">i", 100) + b"partial")  # never completed
        _api_versions_ok(broker.bootstrap)  # others are served meanwhile
        assert _closed_by_broker(s, timeout=10)  # reaped as idle
    with socket.create_connection(("127.0.0.1", broker.port)) as s:
        body = codec.encode_request(ApiKey.API_VERSIONS, 0, 5, "h", {})
        s.sendall(body)
        s.shutdown(socket.SHUT_WR)  # half-closed: the queued request is still answered
        s.settimeout(5)
        got = b""
        while chunk := s.recv(65536):
            got += chunk
        assert codec.peek_correlation_id(got[4:]) == 5


def test_absurd_partition_counts_are_refused_up_front(broker) -> None:
    """CreateTopics / CreatePartitions asking for more partitions than the broker can hold
    open get INVALID_PARTITIONS at once (nothing made, nothing to undo), and the broker
    keeps serving: before, a fuzzed count of millions stalled it for seconds creating and
    then removing thousands of partitions until it ran out of file descriptors."""
    with Wire(broker.bootstrap) as w:
        r = w.create_topic("huge", partitions=10_000_000)
        assert r["error_code"] == 37, r  # INVALID_PARTITIONS
        assert "open files" in (r.get("error_message") or "")
        assert not list(broker.data_dir.glob("huge-*"))
        assert w.create_topic("small", partitions=2)["error_code"] == 0
        grow = w.request(ApiKey.CREATE_PARTITIONS, 3, {
            "topics": [{"name": "small", "count": 5_000_000, "assignments": None}],
            "timeout_ms": 5000, "validate_only": False})
        assert grow["results"][0]["error_code"] == 37
        assert w.produce("small", batch([b"still serving"]), partition=1)["error_code"] == 0
    assert len(list(broker.data_dir.glob("small-*"))) == 2
