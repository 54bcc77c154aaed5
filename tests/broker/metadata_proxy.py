"""MetadataProxy: a TCP proxy in front of a real broker that rewrites the answer about one
topic in Metadata responses, following a script of error codes, as other brokers answer:
a broker that lost an auto-creation race (older kafkactl: TOPIC_ALREADY_EXISTS), one the
new topic has not reached yet (UNKNOWN_TOPIC_OR_PARTITION), one still making it
(LEADER_NOT_AVAILABLE). Every request still goes to the real broker (which really creates
the topic); only those answers are replaced, then everything passes through. Brokers in
Metadata answers are given the proxy's address, so clients keep talking through it."""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from typing import Any

from kafkactl.protocol import codec
from kafkactl.protocol.api_keys import ApiKey

_HEADER = struct.Struct(">hhi")


def _recv_exact(sock: socket.socket, n: int) -> bytes | None:
    data = bytearray()
    while len(data) < n:
        try:
            chunk = sock.recv(n - len(data))
        except OSError:
            return None
        if not chunk:
            return None
        data += chunk
    return bytes(data)


def _read_frame(sock: socket.socket) -> bytes | None:
    head = _recv_exact(sock, 4)
    if head is None:
        return None
    return _recv_exact(sock, struct.unpack(">i", head)[0])


class MetadataProxy:
    def __init__(self, upstream: tuple[str, int], topic: str, script: list[int]) -> None:
        self.upstream = upstream
        self.topic = topic
        self.script = list(script)  # error codes to answer, one per Metadata response
        self.rewritten = 0
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._sockets: list[socket.socket] = [self._listener]
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def close(self) -> None:
        for s in self._sockets:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.upstream)
            self._sockets += [client, server]
            pending: dict[int, tuple[int, int]] = {}  # correlation id -> (api key, version)
            threading.Thread(target=self._requests, args=(client, server, pending),
                             daemon=True).start()
            threading.Thread(target=self._responses, args=(server, client, pending),
                             daemon=True).start()

    def _requests(self, client: socket.socket, server: socket.socket,
                  pending: dict[int, tuple[int, int]]) -> None:
        while (frame := _read_frame(client)) is not None:
            api_key, version, cid = _HEADER.unpack_from(frame)
            pending[cid] = (api_key, version)
            try:
                server.sendall(struct.pack(">i", len(frame)) + frame)
            except OSError:
                break
        server.close()

    def _responses(self, server: socket.socket, client: socket.socket,
                   pending: dict[int, tuple[int, int]]) -> None:
        while (frame := _read_frame(server)) is not None:
            cid = struct.unpack_from(">i", frame)[0]
            api_key, version = pending.pop(cid, (-1, -1))
            out = struct.pack(">i", len(frame)) + frame
            if api_key == ApiKey.METADATA:
                body = codec.decode_response(api_key, version, memoryview(frame))
                self._rewrite(body)
                out = codec.frame_bytes(codec.encode_response(api_key, version, cid, body))
            try:
                client.sendall(out)
            except OSError:
                break
        client.close()

    def _rewrite(self, body: dict[str, Any]) -> None:
        for b in body.get("brokers") or ():
            b["host"], b["port"] = "127.0.0.1", self.port
        for t in body.get("topics") or ():
            if t.get("name") != self.topic:
                continue
            with self._lock:
                if not self.script:
                    return
                code = self.script.pop(0)
                self.rewritten += 1
            t.update(error_code=code, partitions=[])
