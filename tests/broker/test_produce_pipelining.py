"""The network layer's one exception to strict turns per connection (kafkactl.broker.network,
"Ordering"): behind Produce requests whose records are appended and only wait for the high
watermark, the connection's next Produce is handled at once and answered after them.

A scripted handler stands in for the broker, so each answer's completion is in the test's
hands: the answers must come back in request order whatever order their waits end in, a
request of another API must wait its turn, and a Produce behind one that did not append
(a KIP-890 verification still to come) must wait too. The real path (an RF=3 cluster and
librdkafka's five requests in flight) runs in tests/cluster/test_produce_pipelining.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from collections.abc import AsyncIterator, Awaitable

import pytest

from kafkactl.broker.network import ConnectionInfo, HandlerResult, SocketServer

PRODUCE, FETCH = 0, 1


class ScriptedHandler:
    """Request frames are (api key, version, correlation id, flag byte): flag 1 = an
    appended Produce that waits for its future, 2 = a wait that appended nothing, 0 = an
    answer at once. Every handled correlation id is recorded in order."""

    def __init__(self) -> None:
        self.handled: list[int] = []
        self.waits: dict[int, asyncio.Future[None]] = {}

    def handle(self, conn: ConnectionInfo, frame: bytearray) -> HandlerResult:
        api_key, _version, cid, flag = struct.unpack(">hhib", bytes(frame))
        self.handled.append(cid)
        answer = [struct.pack(">ii", 4, cid)]
        if flag == 0:
            return answer
        fut = self.waits[cid] = asyncio.get_running_loop().create_future()
        if flag == 1 and api_key == PRODUCE:
            conn.produce_appended = True
        return self._after(fut, answer)

    @staticmethod
    async def _after(fut: Awaitable[None], answer: list[bytes]) -> list[bytes]:
        await fut
        return answer


def _frame(api_key: int, cid: int, flag: int) -> bytes:
    return struct.pack(">ihhib", 9, api_key, 0, cid, flag)


async def _answers(reader: asyncio.StreamReader, n: int) -> list[int]:
    out = []
    for _ in range(n):
        size, cid = struct.unpack(">ii", await asyncio.wait_for(reader.readexactly(8), 5))
        assert size == 4
        out.append(cid)
    return out


async def _settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)
    await asyncio.sleep(0.05)


@contextlib.asynccontextmanager
async def _connected(handler: ScriptedHandler) -> AsyncIterator[
        tuple[SocketServer, asyncio.StreamReader, asyncio.StreamWriter]]:
    """A SocketServer on `handler` and one client connection to it, both closed after."""
    server = SocketServer(handler, max_request_size=1 << 20, idle_timeout_ms=60_000)
    host, port = await server.start("127.0.0.1", 0)
    reader, writer = await asyncio.open_connection(host, port)
    try:
        yield server, reader, writer
    finally:
        writer.close()
        server.stop_accepting()
        await server.close()


def test_appended_produces_are_handled_at_once_and_answered_in_order() -> None:
    async def run() -> None:
        handler = ScriptedHandler()
        async with _connected(handler) as (server, reader, writer):
            writer.write(b"".join(_frame(PRODUCE, cid, 1) for cid in range(1, 6)))
            await _settle()
            assert handler.handled == [1, 2, 3, 4, 5]  # none waited for another's answer
            for cid in (5, 3, 4):  # their waits end out of order
                handler.waits[cid].set_result(None)
            await _settle()
            assert server.in_flight == 5
            handler.waits[1].set_result(None)
            assert await _answers(reader, 1) == [1]
            await _settle()
            assert server.in_flight == 4  # 3, 4 and 5 stay behind 2
            handler.waits[2].set_result(None)
            assert await _answers(reader, 4) == [2, 3, 4, 5]
            await _settle()
            assert server.in_flight == 0

    asyncio.run(run())


def test_another_api_waits_for_the_pipelined_produces() -> None:
    async def run() -> None:
        handler = ScriptedHandler()
        async with _connected(handler) as (server, reader, writer):
            writer.write(_frame(PRODUCE, 1, 1) + _frame(PRODUCE, 2, 0) + _frame(FETCH, 3, 0)
                         + _frame(PRODUCE, 4, 0))
            await _settle()
            # 2 answers at once (an error, or acks=1) but is written after 1; the Fetch is
            # not handled while a Produce before it is unanswered, nor the Produce after it
            assert handler.handled == [1, 2]
            handler.waits[1].set_result(None)
            assert await _answers(reader, 4) == [1, 2, 3, 4]
            assert handler.handled == [1, 2, 3, 4]

    asyncio.run(run())


@pytest.mark.parametrize("first_flag", [2, 1])
def test_a_produce_behind_one_that_did_not_append_waits(first_flag: int) -> None:
    """Flag 2: the awaitable still has to append (a KIP-890 verification first): the next
    Produce must not overtake it. Flag 1 is the control: the same frames pipelined."""
    async def run() -> None:
        handler = ScriptedHandler()
        async with _connected(handler) as (server, reader, writer):
            writer.write(_frame(PRODUCE, 1, first_flag) + _frame(PRODUCE, 2, 1))
            await _settle()
            assert handler.handled == ([1] if first_flag == 2 else [1, 2])
            handler.waits[1].set_result(None)
            assert await _answers(reader, 1) == [1]
            await _settle()
            assert handler.handled == [1, 2]
            handler.waits[2].set_result(None)
            assert await _answers(reader, 1) == [2]

    asyncio.run(run())


def test_a_failed_wait_closes_the_connection_and_nothing_after_it_is_written() -> None:
    async def run() -> None:
        handler = ScriptedHandler()
        async with _connected(handler) as (server, reader, writer):
            writer.write(b"".join(_frame(PRODUCE, cid, 1) for cid in (1, 2, 3)))
            await _settle()
            handler.waits[3].set_result(None)
            handler.waits[2].set_exception(ConnectionResetError("gone"))
            handler.waits[1].set_result(None)
            assert await _answers(reader, 1) == [1]
            assert await asyncio.wait_for(reader.read(), 5) == b""  # closed after 1
            await _settle()
            assert server.in_flight == 0

    asyncio.run(run())


def test_a_client_gone_mid_pipeline_leaves_nothing_in_flight() -> None:
    async def run() -> None:
        handler = ScriptedHandler()
        async with _connected(handler) as (server, _reader, writer):
            writer.write(b"".join(_frame(PRODUCE, cid, 1) for cid in (1, 2, 3)))
            await _settle()
            assert server.in_flight == 3
            sock = writer.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()  # a reset, not a half-close (which would be answered)
            await _settle()
            assert server.in_flight == 0
            assert all(f.cancelled() for f in handler.waits.values())

    asyncio.run(run())
