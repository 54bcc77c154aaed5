"""Writing a response to a connection: bytes parts and file regions (log segment bytes a
fetch answers with).

A region of a plaintext connection goes zero-copy with os.sendfile once the transport's own
buffer is empty; a small region (SMALL_REGION_BYTES or less) is cheaper copied with pread and
joined with the bytes around it. TLS cannot run through sendfile: on a TLS connection every
region is copied into the encrypted stream. What the socket cannot take at once is sent by
`send_region` when it can (loop.sendfile, or a writer callback on loops without it: uvloop).

A region whose file turns out shorter than the region (a segment truncated under a fetch) is
reported as SHRANK: the caller closes the connection, as the response cannot be completed.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from typing import Any, Protocol

# Regions up to this size are copied with pread (cheaper than a sendfile round trip).
SMALL_REGION_BYTES = 16 * 1024
# What the helpers below return when the file is shorter than the region.
SHRANK = -1
SHRANK_REASON = "log segment shrank while being sent; closing"


class FileRegionLike(Protocol):
    fd: int
    position: int
    length: int


ResponseParts = Sequence[Any]  # bytes-like parts and FileRegion parts, size prefix included


class _RegionFile:
    """The minimal file object loop.sendfile() needs around a raw descriptor: fileno and
    seek for os.sendfile; readinto for asyncio's copying fallback, which it takes when the
    first os.sendfile fails (a peer gone mid-fetch: it used to end in an AttributeError
    logged with a traceback)."""

    mode = "rb"

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._position = 0

    def fileno(self) -> int:
        return self._fd

    def seek(self, offset: int, whence: int = 0) -> int:
        self._position = offset
        return offset

    def readinto(self, buffer: memoryview | bytearray) -> int:
        n = os.preadv(self._fd, [buffer], self._position)
        self._position += n
        return n


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def write_parts(transport: asyncio.Transport, parts: ResponseParts, sock_fd: int,
                zero_copy: bool) -> tuple[int, int] | None:
    """Write `parts` as far as the socket takes them without waiting. None when all went;
    else (i, sent): region parts[i] needs the socket to drain, `sent` bytes of it went
    (SHRANK: its file is shorter than the region), parts after it are not written."""
    chunks: list[Any] = []
    for i, part in enumerate(parts):
        if isinstance(part, bytes | bytearray | memoryview):
            chunks.append(part)
            continue
        length = part.length
        if length <= 0:
            continue
        if length <= SMALL_REGION_BYTES or not zero_copy:
            chunks.append(os.pread(part.fd, length, part.position))
            continue
        if chunks:
            transport.write(b"".join(chunks))
            chunks = []
        sent = 0
        if transport.get_write_buffer_size() == 0 and sock_fd >= 0:
            sent = sendfile_now(sock_fd, part.fd, part.position, length)
        if sent < length:
            return i, sent
    if chunks:
        transport.write(chunks[0] if len(chunks) == 1 else b"".join(chunks))
    return None


def sendfile_now(sock_fd: int, fd: int, position: int, length: int) -> int:
    """os.sendfile until the region is sent or the socket is full: the bytes sent, or
    SHRANK."""
    sent = 0
    while sent < length:
        try:
            n = os.sendfile(sock_fd, fd, position + sent, length - sent)
        except (BlockingIOError, InterruptedError):
            break
        if n == 0:  # the file is shorter than the region (truncated under us)
            return SHRANK
        sent += n
    return sent


async def send_region(loop: asyncio.AbstractEventLoop, transport: asyncio.Transport,
                      sock_fd: int, fd: int, position: int, length: int,
                      native_sendfile: bool) -> int:
    """Send a region, waiting for the socket as needed: the bytes sent (short, or SHRANK,
    if the file is shorter than the region)."""
    if native_sendfile:
        return await loop.sendfile(transport, _RegionFile(fd), position, length)  # type: ignore[arg-type]
    return await _sendfile_when_writable(loop, transport, sock_fd, fd, position, length)


async def _sendfile_when_writable(loop: asyncio.AbstractEventLoop, transport: asyncio.Transport,
                                  sock_fd: int, fd: int, position: int, length: int) -> int:
    """loop.sendfile() for a loop without it (uvloop): os.sendfile whenever the socket can
    take more, once the transport's own buffer is empty. The socket is watched through a
    duplicate descriptor (the transport owns the original)."""
    watched = os.dup(sock_fd)
    sent = 0
    try:
        while sent < length:
            if transport.get_write_buffer_size() == 0:
                n = sendfile_now(sock_fd, fd, position + sent, length - sent)
                if n == SHRANK:
                    return SHRANK
                sent += n
                if sent >= length:
                    break
            writable = loop.create_future()
            loop.add_writer(watched, _wake, writable)
            try:
                await writable
            finally:
                loop.remove_writer(watched)
    finally:
        os.close(watched)
    return sent
