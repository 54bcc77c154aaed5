"""The producer's send path without copies: a built batch is assemble_batch's bytes (the
records copied once, behind the header), a Produce request is framed as parts holding the
batches themselves (codec.encode_request_parts, the same bytes as encode_request), and the
parts are written with sendmsg until every byte is out, however the socket cuts them."""

from __future__ import annotations

import socket
import threading

import pytest

from kafkactl.client.connection import _send_parts
from kafkactl.client.producer_batch import ProducerBatch
from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.codec import encode_request, encode_request_parts, frame_bytes
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
