"""kafkactl.broker.transfer on a socket pair: bytes and file regions arrive in order, by
both send paths (loop.sendfile and the writer-callback one uvloop uses), and a region whose
file is shorter than it reports SHRANK."""

from __future__ import annotations

import asyncio
import os
import socket
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

from kafkactl.broker import transfer


@dataclass
class Region:
    fd: int
    position: int
    length: int


def _drain_into(sock: socket.socket, out: bytearray, size: int) -> threading.Thread:
    def run() -> None:
        while len(out) < size:
            chunk = sock.recv(1 << 16)
            if not chunk:
                return
            out.extend(chunk)
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


async def _send(parts: list[object], native: bool, size: int) -> tuple[bytes, int]:
    """Write `parts` through a transport on one end of a socket pair; the bytes the other
    end received and the last send_region result (0 if none was needed)."""
    loop = asyncio.get_running_loop()
    ours, theirs = socket.socketpair()
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8192)
    transport, _ = await loop.connect_accepted_socket(asyncio.Protocol, ours)
    received = bytearray()
    reader = _drain_into(theirs, received, size)
    result = 0
    try:
        pending = transfer.write_parts(transport, parts, ours.fileno(), zero_copy=True)
        while pending is not None:
            i, sent = pending
            if sent == transfer.SHRANK:
                result = sent
                break
            part = parts[i]
            assert isinstance(part, Region)
            result = await transfer.send_region(loop, transport, ours.fileno(), part.fd,
                                                part.position + sent, part.length - sent, native)
            if result < part.length - sent:
                break
            rest = parts[i + 1:]
            pending = transfer.write_parts(transport, rest, ours.fileno(), zero_copy=True)
            parts = rest
        while transport.get_write_buffer_size():
            await asyncio.sleep(0.01)
    finally:
        transport.close()
        await asyncio.to_thread(reader.join, 10)
        theirs.close()
    return bytes(received), result


@pytest.mark.parametrize("native", [True, False], ids=["loop.sendfile", "writer-callback"])
def test_bytes_and_regions_arrive_in_order(tmp_path: Path, native: bool) -> None:
    body = os.urandom(3 << 20)
    path = tmp_path / "segment"
    path.write_bytes(body)
    fd = os.open(path, os.O_RDONLY)
    try:
        parts: list[object] = [b"head", Region(fd, 10, 100), bytearray(b"mid"),
                               Region(fd, 1000, len(body) - 1000), b"tail"]
        want = b"head" + body[10:110] + b"mid" + body[1000:] + b"tail"
        got, _ = asyncio.run(_send(parts, native, len(want)))
    finally:
        os.close(fd)
    assert got == want


@pytest.mark.parametrize("native", [True, False], ids=["loop.sendfile", "writer-callback"])
def test_a_region_past_the_end_of_its_file_comes_up_short(tmp_path: Path, native: bool) -> None:
    path = tmp_path / "segment"
    path.write_bytes(b"x" * (2 << 20))
    fd = os.open(path, os.O_RDONLY)
    try:
        # the first 2 MiB exist; the region claims 3 MiB
        got, result = asyncio.run(_send([Region(fd, 0, 3 << 20)], native, 2 << 20))
    finally:
        os.close(fd)
    assert got == b"x" * (2 << 20)
    assert result == transfer.SHRANK or result < 3 << 20


def test_sendfile_now_reports_a_file_shorter_than_the_region(tmp_path: Path) -> None:
    path = tmp_path / "segment"
    path.write_bytes(b"abc")
    fd = os.open(path, os.O_RDONLY)
    ours, theirs = socket.socketpair()
    try:
        assert transfer.sendfile_now(ours.fileno(), fd, 0, 10) == transfer.SHRANK
        assert theirs.recv(10) == b"abc"
    finally:
        os.close(fd)
        ours.close()
        theirs.close()


def test_asyncios_copying_fallback_reads_the_region(tmp_path: Path) -> None:
    """When the first os.sendfile fails (a consumer gone mid-fetch), loop.sendfile falls
    back to copying through the file object's readinto: the region file reads the region
    (it had no readinto: an AttributeError, logged with a traceback for every such peer)."""
    data = os.urandom(100_000)
    path = tmp_path / "seg"
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)

    async def run() -> tuple[int, bytes]:
        loop = asyncio.get_running_loop()
        ours, theirs = socket.socketpair()
        transport, _ = await loop.connect_accepted_socket(asyncio.Protocol, ours)
        received = bytearray()
        reader = _drain_into(theirs, received, 60_000)
        try:
            sent = await loop._sendfile_fallback(  # type: ignore[attr-defined]
                transport, transfer._RegionFile(fd), 1_000, 60_000)
            await asyncio.to_thread(reader.join, 10)
        finally:
            transport.close()
            theirs.close()
        return sent, bytes(received)

    try:
        sent, received = asyncio.run(run())
    finally:
        os.close(fd)
    assert sent == 60_000 and received == data[1_000:61_000]
