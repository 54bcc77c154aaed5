"""The inter-broker connection's response framing (kafkactl.cluster.broker_connection
._ResponseReader): frames small enough for the scratch buffer are copied out of it, larger
ones are received straight into a buffer of their own. Whatever way the bytes arrive (one
byte per read, every split point, many frames in one read), the frames come out whole and
in order; at the edges of the scratch buffer (a frame one below, at and one above what it
holds); and a size out of range or an end mid-frame fails the waiting request. A real
follower's fetches over this connection run in tests/cluster/test_replication.py."""

from __future__ import annotations

import asyncio
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkactl.cluster.broker_connection import _SCRATCH, MAX_RESPONSE_BYTES, _ResponseReader


def _frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def _feed(reader: _ResponseReader, data: bytes, reads: list[int]) -> None:
    """Deliver `data` in reads of the given sizes (each capped by what the protocol's
    buffer has room for, as a socket read is), then the rest."""
    pos = 0
    sizes = iter(reads)
    while pos < len(data):
        buf = reader.get_buffer(-1)
        assert len(buf) > 0, "the protocol offered no room to read into"
        n = min(next(sizes, len(data)), len(buf), len(data) - pos)
        n = max(n, 1)
        buf[:n] = data[pos:pos + n]
        reader.buffer_updated(n)
        pos += n


def _frames(reader: _ResponseReader) -> list[bytes]:
    async def drain() -> list[bytes]:
        out = []
        while reader._frames:
            out.append(bytes(await reader.next_frame()))
        return out
    return asyncio.run(drain())


def _body(n: int, seed: int = 0) -> bytes:
    return bytes((i * 31 + seed) & 0xFF for i in range(n))


EDGES = [4, 5, 100, _SCRATCH - 9, _SCRATCH - 8, _SCRATCH - 5, _SCRATCH - 4, _SCRATCH - 3,
         _SCRATCH, _SCRATCH + 1, 3 * _SCRATCH + 7]


@pytest.mark.parametrize("size", EDGES)
@pytest.mark.parametrize("step", [1, 3, 4096, 1 << 30])
def test_frames_at_the_scratch_buffers_edges_come_out_whole(size: int, step: int) -> None:
    if step == 1 and size > _SCRATCH:
        step = 997  # one byte per read of a 200 KiB frame only slows the test
    bodies = [_body(size, 1), _body(7, 2), _body(size, 3)]
    reader = _ResponseReader()
    _feed(reader, b"".join(_frame(b) for b in bodies), [step] * 10_000_000)
    assert _frames(reader) == bodies
    assert reader._big is None and reader._filled == 0


@given(st.lists(st.binary(min_size=4, max_size=3 * _SCRATCH // 2), min_size=1, max_size=6),
       st.lists(st.integers(1, 2 * _SCRATCH), max_size=40))
def test_any_split_of_any_frames_gives_the_same_frames(bodies: list[bytes],
                                                       reads: list[int]) -> None:
    reader = _ResponseReader()
    _feed(reader, b"".join(_frame(b) for b in bodies), reads)
    assert _frames(reader) == bodies


@pytest.mark.parametrize("size", [3, -1, MAX_RESPONSE_BYTES + 1])
def test_a_size_out_of_range_fails_the_request(size: int) -> None:
    async def run() -> None:
        reader = _ResponseReader()
        _feed(reader, struct.pack(">i", size) + b"xxxx", [])
        with pytest.raises(EOFError, match="out of range"):
            await reader.next_frame()
    asyncio.run(run())


def test_an_end_mid_frame_fails_the_waiting_request_after_the_whole_frames() -> None:
    async def run() -> None:
        reader = _ResponseReader()
        whole = _body(10)
        _feed(reader, _frame(whole) + _frame(_body(2 * _SCRATCH))[:_SCRATCH + 10], [])
        waiting = asyncio.ensure_future(reader.next_frame())
        assert bytes(await waiting) == whole
        waiting = asyncio.ensure_future(reader.next_frame())
        await asyncio.sleep(0)
        assert not waiting.done()  # the big frame is incomplete: the request waits
        reader.eof_received()
        with pytest.raises(EOFError):
            await waiting
    asyncio.run(run())
