"""The client's wire paths without copies: a built batch is assemble_batch's bytes (the
records copied once, behind the header), a Produce request is framed as parts holding the
batches themselves (codec.encode_request_parts, the same bytes as encode_request), the
parts are written with sendmsg until every byte is out, however the socket cuts them, and
a large response is received straight into a buffer of its own, however it arrives."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from kafkactl.client.connection import BrokerConnection, InFlightRequest, _send_parts
from kafkactl.client.producer_batch import ProducerBatch
from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.codec import (
    encode_request,
    encode_request_parts,
    encode_response,
    frame_bytes,
)
from kafkactl.record.batch import RecordBatch, assemble_batch
from kafkactl.record.codecs import Compression, compress


def _batch(n: int, size: int = 1_000_000) -> ProducerBatch:
    b = ProducerBatch("t", 0, size, timestamp=1_700_000_000_000)
    lines = [b"line %d %s" % (i, b"x" * (i % 300)) for i in range(n)]
    i = 0
    while i < n:
        i = b.append_values(lines, i)
    b.producer_id, b.producer_epoch, b.base_sequence = 7, 1, 42
    return b


@pytest.mark.parametrize("n", [1, 2, 3000])
@pytest.mark.parametrize("codec", [Compression.NONE, Compression.LZ4])
def test_a_built_batch_is_assemble_batchs_bytes(n: int, codec: Compression) -> None:
    b = _batch(n)
    records = b"".join(b.parts)
    if codec:
        records = compress(codec, records)
    want = assemble_batch(records, attributes=int(codec), last_offset_delta=n - 1,
                          base_timestamp=b.base_timestamp, max_timestamp=b.max_timestamp,
                          producer_id=7, producer_epoch=1, base_sequence=42, record_count=n)
    built = b.build(codec)
    assert bytes(built) == want and b.build(codec) is built  # cached: re-sent as it was
    rb = RecordBatch(memoryview(built))
    rb.ensure_valid()
    assert [r.offset for r in rb] == list(range(n))


def _produce_body(batches: list[bytes | bytearray]) -> dict[str, object]:
    return {"transactional_id": None, "acks": -1, "timeout_ms": 30000,
            "topic_data": [{"name": "t", "partition_data": [
                {"index": i, "records": r} for i, r in enumerate(batches)]}]}


@pytest.mark.parametrize("sizes", [[10], [100_000], [100_000, 5, 300_000]])
def test_request_parts_hold_the_batches_and_make_encode_requests_bytes(sizes: list[int]
                                                                       ) -> None:
    batches: list[bytes | bytearray] = [bytearray(_batch(max(1, s // 100)).build())
                                        for s in sizes]
    body = _produce_body(batches)
    whole = encode_request(int(ApiKey.PRODUCE), 9, 5, "c", body)
    parts = encode_request_parts(int(ApiKey.PRODUCE), 9, 5, "c", body)
    if isinstance(parts, list):
        assert frame_bytes(parts) == whole
        # the large batches are the parts themselves, not copies
        assert {id(p) for p in parts} >= {id(b) for b in batches if len(b) >= 65536}
    else:
        assert parts == whole
    assert encode_request_parts(int(ApiKey.METADATA), 9, 6, "c", {
        "topics": None, "allow_auto_topic_creation": False,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False}) == encode_request(
        int(ApiKey.METADATA), 9, 6, "c", {
            "topics": None, "allow_auto_topic_creation": False,
            "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False})


@pytest.mark.parametrize("count", [1, 3, 700, 1500])
def test_send_parts_writes_every_byte_through_a_small_socket_buffer(count: int) -> None:
    """Partial writes cut inside buffers and between them; more parts than one sendmsg
    takes."""
    parts: list[bytes | bytearray] = [
        (b"%06d" % i) * (1 + (i * 7919) % 3000) if i % 5 else b"" for i in range(count)]
    parts[0] = bytearray(b"head" * 1000)
    want = b"".join(parts)
    a, b = socket.socketpair()
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    a.settimeout(30)
    got = bytearray()

    def read() -> None:
        while len(got) < len(want):
            chunk = b.recv(3001)
            if not chunk:
                return
            got.extend(chunk)

    t = threading.Thread(target=read)
    t.start()
    try:
        _send_parts(a, parts)
        t.join(30)
    finally:
        a.close()
        b.close()
    assert bytes(got) == want


# ---- responses: a large one received where it stays ------------------------------------

def _fetch_response(cid: int, records: bytes) -> bytes:
    body = {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": [
        {"topic": "t", "partitions": [
            {"partition_index": 0, "error_code": 0, "high_watermark": 5,
             "last_stable_offset": 5, "log_start_offset": 0, "aborted_transactions": None,
             "preferred_read_replica": -1, "records": records}]}]}
    return frame_bytes(encode_response(int(ApiKey.FETCH), 11, cid, body))


@pytest.mark.parametrize("cut", [1, 3, 4, 5, 4096, 262_143, 1 << 20])
def test_responses_cut_anywhere_complete_in_order(cut: int) -> None:
    """Small and large Fetch responses (the large ones received into buffers of their own,
    found by their size whether it arrives whole or in pieces), written by the peer in
    pieces cut anywhere; each request completes with its own records."""
    records = [b"a" * 10, bytes(range(256)) * 2048, b"b" * 300_000, b"", b"c" * 70,
               b"d" * (1 << 20)]
    stream = b"".join(_fetch_response(i + 1, r) for i, r in enumerate(records))
    ours, theirs = socket.socketpair()
    conn = BrokerConnection("peer", 0)
    conn.sock = ours
    got: list[bytes] = []
    reqs = []
    for i in range(len(records)):
        req = InFlightRequest(i + 1, int(ApiKey.FETCH), 11, lambda resp, err: got.append(
            bytes(resp["responses"][0]["partitions"][0]["records"])))  # type: ignore[index]
        conn._in_flight.append(req)
        reqs.append(req)

    def write() -> None:  # pieces of `cut` bytes, then of 100,003: cuts land everywhere
        i, step = 0, 0
        while i < len(stream):
            n = cut if step % 2 == 0 else 100_003
            theirs.sendall(stream[i:i + n])
            i, step = i + n, step + 1

    t = threading.Thread(target=write)
    t.start()
    try:
        deadline = time.monotonic() + 30
        while not reqs[-1].done and time.monotonic() < deadline:
            conn.poll(0.5)
        t.join(30)
    finally:
        ours.close()
        theirs.close()
    assert all(r.done and r.error is None for r in reqs)
    assert got == records
