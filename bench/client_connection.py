"""Blocking socket vs asyncio for the client connection: pipelined requests/s, same codec.

    python bench/client_connection.py BOOTSTRAP [N]

Sends N ApiVersions requests with up to 64 in flight, over (a) kafkactl's BrokerConnection
(blocking socket + select) and (b) an asyncio StreamReader/Writer client doing the same
framing, and prints requests/s and the ratio. This is the measurement behind choosing
blocking sockets for kafkactl.client (see kafkactl/client/connection.py).
"""

from __future__ import annotations

import asyncio
import struct
import sys
import time

from kafkactl.client.connection import BrokerConnection
from kafkactl.client.kafka_client import parse_bootstrap
from kafkactl.client.wire import decode_response, encode_request
from kafkactl.protocol.api_keys import ApiKey

BODY = {"client_software_name": "bench", "client_software_version": "1"}


def blocking(host: str, port: int, n: int, window: int) -> float:
    conn = BrokerConnection(host, port)
    conn.connect()
    t = time.perf_counter()
    sent = done = 0
    while done < n:
        while sent < n and sent - done < window:
            conn.send(ApiKey.API_VERSIONS, BODY, version=3)
            sent += 1
        done += conn.poll(1.0)
    dt = time.perf_counter() - t
    conn.close()
    return n / dt


async def _asyncio(host: str, port: int, n: int, window: int) -> float:
    reader, writer = await asyncio.open_connection(host, port)
    t = time.perf_counter()
    sem = asyncio.Semaphore(window)

    async def read_all() -> None:
        for _ in range(n):
            size = struct.unpack(">i", await reader.readexactly(4))[0]
            decode_response(ApiKey.API_VERSIONS, 3, memoryview(await reader.readexactly(size)))
            sem.release()

    rd = asyncio.create_task(read_all())
    for i in range(n):
        await sem.acquire()
        writer.write(encode_request(ApiKey.API_VERSIONS, 3, i + 1, "bench", BODY))
        if i % window == 0:
            await writer.drain()
    await rd
    dt = time.perf_counter() - t
    writer.close()
    return n / dt


def main() -> None:
    host, port = parse_bootstrap(sys.argv[1])[0]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 20000
    for window in (1, 64):
        b = blocking(host, port, n, window)
        a = asyncio.run(_asyncio(host, port, n, window))
        print(f"in flight {window:>2}: blocking {b:10,.0f} req/s   asyncio {a:10,.0f} req/s   "
              f"blocking/asyncio = {b / a:.2f}x")


if __name__ == "__main__":
    main()
