"""The memory of all in-flight requests together, capped by `queued.max.request.bytes`
(Kafka's key and its MemoryPool's job; Kafka's default is -1, unbounded, and -1 or 0 still
mean that here; kafkactl's default is 100 MiB, see kafkactl.broker.config).

In flight means read and not yet handed to a handler: incomplete frames (what their
buffers hold) and complete frames waiting for their turn. Over the cap, the network layer
stops reading from every socket but one: the connection with the oldest incomplete frame, so
that a request in progress always finishes (at most one request past the cap, as Kafka's
pool allows). Below 7/8 of the cap, reading resumes everywhere. Requests that never finish
are closed by the read deadline (socket.request.read.timeout.ms), which frees their memory.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import Protocol

log = logging.getLogger(__name__)

PRESSURE_LOG_INTERVAL_S = 10.0  # at most one WARNING per interval; the rest at DEBUG


class PooledConnection(Protocol):
    @property
    def reading_frame(self) -> bool: ...

    @property
    def frame_started(self) -> float: ...

    def update_reading(self) -> None: ...


class RequestMemoryPool:
    def __init__(self, max_bytes: int, connections: Iterable[PooledConnection]) -> None:
        self.max_bytes = max_bytes if max_bytes > 0 else 1 << 62
        self._resume_below = self.max_bytes - self.max_bytes // 8
        self._connections = connections
        self.queued_bytes = 0
        self.paused = False
        self.exempt: PooledConnection | None = None  # reads on while paused
        self._last_warning = -PRESSURE_LOG_INTERVAL_S

    def account(self, delta: int) -> None:
        queued = self.queued_bytes + delta
        self.queued_bytes = queued
        if delta > 0:
            if queued > self.max_bytes and not self.paused:
                self._pause()
        elif self.paused and queued <= self._resume_below:
            self._resume()

    def _pause(self) -> None:
        self.paused = True
        now = time.monotonic()
        level = logging.DEBUG
        if now - self._last_warning >= PRESSURE_LOG_INTERVAL_S:
            level, self._last_warning = logging.WARNING, now
        log.log(level, "in-flight requests hold %d bytes, over queued.max.request.bytes=%d: "
                "reading from sockets is paused until requests complete",
                self.queued_bytes, self.max_bytes)
        self._choose_exempt()
        for conn in list(self._connections):
            conn.update_reading()

    def _resume(self) -> None:
        self.paused = False
        self.exempt = None
        log.debug("in-flight requests hold %d bytes (queued.max.request.bytes=%d): reading "
                  "resumed", self.queued_bytes, self.max_bytes)
        for conn in list(self._connections):
            conn.update_reading()

    def frame_finished(self, conn: PooledConnection) -> None:
        """`conn`'s incomplete frame is complete (or gone): if it was the one allowed to
        read on while paused, pass that on to the oldest incomplete frame."""
        if self.exempt is conn:
            self._choose_exempt()

    def _choose_exempt(self) -> None:
        old, best = self.exempt, None
        if self.paused:
            for conn in self._connections:
                if conn.reading_frame and (best is None
                                           or conn.frame_started < best.frame_started):
                    best = conn
        self.exempt = best
        if old is not None and old is not best:
            old.update_reading()
        if best is not None and best is not old:
            best.update_reading()
