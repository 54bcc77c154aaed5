"""Delayed operations (Kafka's purgatory): a long-poll Fetch waits here until appends to the
partitions it watches bring `min_bytes`, or `max_wait_ms` passes. Appends wake it directly
(no polling loop); the event loop's timer handles the deadline."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

TopicPartition = tuple[str, int]


class DelayedFetch:
    __slots__ = ("future", "min_bytes", "accumulated", "keys")

    def __init__(self, future: asyncio.Future[None], min_bytes: int, accumulated: int,
                 keys: list[TopicPartition]) -> None:
        self.future = future
        self.min_bytes = min_bytes
        self.accumulated = accumulated
        self.keys = keys

    def complete(self) -> None:
        if not self.future.done():
            self.future.set_result(None)


class FetchPurgatory:
    def __init__(self) -> None:
        self._watchers: dict[TopicPartition, set[DelayedFetch]] = {}
        self._all: set[DelayedFetch] = set()
        self.closed = False

    @property
    def size(self) -> int:
        return len(self._all)

    def watch(self, keys: Iterable[TopicPartition], *, min_bytes: int,
              accumulated: int) -> DelayedFetch:
        """Register a delayed fetch now, synchronously, in the same step that read the log.

        This must happen before the event loop runs anything else: an append handled between
        the fetch's read and a later registration would wake nobody, and the fetch would sit
        out its whole max_wait_ms with data available.
        """
        loop = asyncio.get_running_loop()
        op = DelayedFetch(loop.create_future(), min_bytes, accumulated, list(keys))
        if self.closed:
            op.complete()
            return op
        for key in op.keys:
            self._watchers.setdefault(key, set()).add(op)
        self._all.add(op)
        return op

    async def wait_for(self, op: DelayedFetch, timeout_s: float) -> None:
        """Wait until `op` (from watch()) completes or `timeout_s` passes; then unregister it."""
        timer = asyncio.get_running_loop().call_later(timeout_s, op.complete)
        try:
            await op.future
        finally:
            timer.cancel()
            self._all.discard(op)
            for key in op.keys:
                watchers = self._watchers.get(key)
                if watchers is not None:
                    watchers.discard(op)
                    if not watchers:
                        del self._watchers[key]

    async def wait(self, keys: Iterable[TopicPartition], *, min_bytes: int, accumulated: int,
                   timeout_s: float) -> None:
        """Return once enough bytes were appended to `keys`, on timeout, or on shutdown."""
        op = self.watch(keys, min_bytes=min_bytes, accumulated=accumulated)
        await self.wait_for(op, timeout_s)

    def notify_append(self, key: TopicPartition, nbytes: int) -> None:
        watchers = self._watchers.get(key)
        if not watchers:
            return
        for op in list(watchers):
            if op.future.done():  # its waiter never ran (connection closed): drop it
                watchers.discard(op)
                self._all.discard(op)
                continue
            op.accumulated += nbytes
            if op.accumulated >= op.min_bytes:
                op.complete()

    def wake(self, key: TopicPartition) -> None:
        """Complete every fetch watching `key` now (the partition was deleted or truncated)."""
        for op in list(self._watchers.get(key, ())):
            op.complete()

    def shutdown(self) -> None:
        self.closed = True
        for op in list(self._all):
            op.complete()
