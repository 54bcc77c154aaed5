"""Delayed operations (Kafka's purgatory): a long-poll Fetch waits here until appends to the
partitions it watches bring `min_bytes` (a consumer's, on a replicated partition: until the
high watermark passes that many appended bytes, as Kafka's DelayedFetch counts), or
`max_wait_ms` passes; an acks=all Produce waits until the high watermark passes what it
appended; a DeleteRecords waits until the low watermark (the smallest log start offset over
the live replicas) reaches the requested offset. Appends, high-watermark advances and
followers' fetches wake them directly (no polling loop); the event loop's timer handles the
deadline."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Iterable
from typing import Any, Generic, TypeVar

from kafkactl.protocol.errors import ErrorCode

TopicPartition = tuple[str, int]
Outcome = TypeVar("Outcome")
# the most appends above the high watermark a partition remembers one by one; later ones
# are merged into the last (counted for consumers once the high watermark passes them all)
MAX_UNCOMMITTED_APPENDS = 1024


def _unwatch(watchers: dict[TopicPartition, set[Any]], op: object,
             keys: Iterable[TopicPartition]) -> None:
    """Forget `op` under each of its keys (and keys left with no watcher)."""
    for key in keys:
        ops = watchers.get(key)
        if ops is not None:
            ops.discard(op)
            if not ops:
                del watchers[key]


class DelayedFetch:
    __slots__ = ("future", "min_bytes", "accumulated", "keys", "replica", "read_committed",
                 "forced", "touched")

    def __init__(self, future: asyncio.Future[None], min_bytes: int, accumulated: int,
                 keys: list[TopicPartition], replica: bool = False,
                 read_committed: bool = False) -> None:
        self.future = future
        self.min_bytes = min_bytes
        self.accumulated = accumulated
        self.keys = keys
        self.replica = replica  # a follower's fetch: it reads up to the log end
        # a read_committed consumer: it reads below the LSO, which a high-watermark move
        # or a transaction marker may move by any amount (it reads again to count)
        self.read_committed = read_committed
        # woken by wake() (a partition deleted, truncated, led elsewhere): it answers now,
        # whatever it reads
        self.forced = False
        # the watched partitions that had an append, a high-watermark move or a wake while
        # it waited (a follower's incremental fetch re-reads only these and the ones its
        # first read could not settle: kafkactl/broker/handlers/fetch.py)
        self.touched: set[TopicPartition] = set()

    def complete(self) -> None:
        if not self.future.done():
            self.future.set_result(None)


class _Uncommitted:
    """The appends of a replicated partition above its high watermark: [end offset, bytes],
    oldest first (at most MAX_UNCOMMITTED_APPENDS: later ones merge into the last), and
    where the last one ended (a high watermark past it passed records not seen here)."""

    __slots__ = ("appends", "end")

    def __init__(self, end_offset: int, nbytes: int) -> None:
        self.appends: deque[list[int]] = deque([[end_offset, nbytes]])
        self.end = end_offset

    def add(self, end_offset: int, nbytes: int) -> None:
        appends = self.appends
        if end_offset <= self.end:  # the log was cut back since: those records are gone
            appends.clear()
        if len(appends) >= MAX_UNCOMMITTED_APPENDS:
            last = appends[-1]
            last[0] = end_offset
            last[1] += nbytes
        else:
            appends.append([end_offset, nbytes])
        self.end = end_offset

    def committed(self, high_watermark: int) -> int | None:
        """The bytes of the appends `high_watermark` now passes (counted once: forgotten);
        None when it passes records not seen here (their size is not known)."""
        appends = self.appends
        committed = 0
        while appends and appends[0][0] <= high_watermark:
            committed += appends.popleft()[1]
        return None if high_watermark > self.end else committed


class FetchPurgatory:
    def __init__(self) -> None:
        self._watchers: dict[TopicPartition, set[DelayedFetch]] = {}
        self._all: set[DelayedFetch] = set()
        # replicated partitions: [end offset, bytes] of the appends above the high
        # watermark, oldest first; a high-watermark move counts those it passes for the
        # consumers' fetches (Kafka's DelayedFetch: the bytes between the fetch offset and
        # the high watermark), as an append counts for them on a partition of one replica
        self._uncommitted: dict[TopicPartition, _Uncommitted] = {}
        self.closed = False

    @property
    def size(self) -> int:
        return len(self._all)

    def watch(self, keys: Iterable[TopicPartition], *, min_bytes: int,
              accumulated: int, replica: bool = False,
              read_committed: bool = False) -> DelayedFetch:
        """Register a delayed fetch now, synchronously, in the same step that read the log.

        This must happen before the event loop runs anything else: an append handled between
        the fetch's read and a later registration would wake nobody, and the fetch would sit
        out its whole max_wait_ms with data available.
        """
        loop = asyncio.get_running_loop()
        op = DelayedFetch(loop.create_future(), min_bytes, accumulated, list(keys), replica,
                          read_committed)
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
            _unwatch(self._watchers, op, op.keys)

    async def wait(self, keys: Iterable[TopicPartition], *, min_bytes: int, accumulated: int,
                   timeout_s: float) -> None:
        """Return once enough bytes were appended to `keys`, on timeout, or on shutdown."""
        op = self.watch(keys, min_bytes=min_bytes, accumulated=accumulated)
        await self.wait_for(op, timeout_s)

    def notify_append(self, key: TopicPartition, nbytes: int, *,
                      consumers: bool = True, end_offset: int | None = None) -> None:
        """`nbytes` appended to `key`, ending before `end_offset`: followers' fetches count
        them; consumers' at once when `consumers` (the records are committed at once: one
        replica), else once the high watermark passes `end_offset`
        (`high_watermark_moved`; an append with no `end_offset` is not counted for them)."""
        if not consumers and end_offset is not None:
            self._above_high_watermark(key, end_offset, nbytes)
        watchers = self._watchers.get(key)
        if not watchers:
            return
        for op in list(watchers):
            if op.future.done():  # its waiter never ran (connection closed): drop it
                watchers.discard(op)
                self._all.discard(op)
                continue
            op.touched.add(key)
            if not consumers and not op.replica:
                continue
            op.accumulated += nbytes
            if op.accumulated >= op.min_bytes:
                op.complete()

    def _above_high_watermark(self, key: TopicPartition, end_offset: int, nbytes: int) -> None:
        appends = self._uncommitted.get(key)
        if appends is None:
            self._uncommitted[key] = _Uncommitted(end_offset, nbytes)
        else:
            appends.add(end_offset, nbytes)

    def high_watermark_moved(self, key: TopicPartition,
                             high_watermark: int | None = None) -> None:
        """The high watermark of `key` moved to `high_watermark` (None: it did not, but the
        LSO may have: a transaction marker). A consumer's fetch counts the appended bytes
        it passed and answers once it has `min_bytes` (Kafka's DelayedFetch.tryComplete);
        when it passed records whose size is not known here (appended before this broker
        led, a marker), or the fetch is read_committed (the LSO moves by any amount), the
        fetch wakes to read again (it waits on if it has less than `min_bytes`). Followers'
        fetches keep waiting for appends."""
        committed: int | None = 0
        if high_watermark is not None:
            appends = self._uncommitted.get(key)
            committed = appends.committed(high_watermark) if appends is not None else None
        for op in list(self._watchers.get(key, ())):
            op.touched.add(key)
            if op.replica:
                continue
            if op.read_committed or committed is None:
                op.complete()
            elif committed:
                op.accumulated += committed
                if op.accumulated >= op.min_bytes:
                    op.complete()

    def wake(self, key: TopicPartition) -> None:
        """Complete every fetch watching `key` now (the partition was deleted or truncated)."""
        self._uncommitted.pop(key, None)  # (its log may be cut back, or led elsewhere)
        for op in list(self._watchers.get(key, ())):
            op.touched.add(key)
            op.forced = True
            op.complete()

    def shutdown(self) -> None:
        self.closed = True
        for op in list(self._all):
            op.complete()


class DelayedOffsets(Generic[Outcome]):
    """A request waiting, per partition, for an offset to reach what it needs (Kafka's
    DelayedProduce: the high watermark past the records it appended; DelayedDeleteRecords:
    the low watermark at the offset it asked for). `outcomes` holds what each partition
    ended with (an error, a low watermark); a partition settled with None has none."""

    __slots__ = ("future", "pending", "keys", "outcomes")

    def __init__(self, future: asyncio.Future[None], required: dict[TopicPartition, int]) -> None:
        self.future = future
        self.pending = dict(required)  # partition -> offset its watermark must reach
        self.keys = list(required)
        self.outcomes: dict[TopicPartition, Outcome] = {}

    def settle(self, key: TopicPartition, outcome: Outcome | None = None) -> None:
        if self.pending.pop(key, None) is not None and outcome is not None:
            self.outcomes[key] = outcome
        if not self.pending and not self.future.done():
            self.future.set_result(None)

    def expire(self, outcome: Outcome | None) -> None:
        """The deadline passed: every partition still pending ends with `outcome`."""
        for key in list(self.pending):
            self.settle(key, outcome)


DelayedProduce = DelayedOffsets[ErrorCode]
DelayedDeleteRecords = DelayedOffsets[int]


class OffsetPurgatory(Generic[Outcome]):
    """Requests waiting for a per-partition offset (a watermark) to reach theirs: woken by
    whoever moves it (`reached`), expired by a loop timer (no polling, no task per wait).
    `timed_out` is what a partition the deadline catches ends with."""

    timed_out: Outcome | None = None

    def __init__(self) -> None:
        self._watchers: dict[TopicPartition, set[DelayedOffsets[Outcome]]] = {}

    @property
    def waiting(self) -> bool:
        """Some request waits (hot paths check it: one test when none does)."""
        return bool(self._watchers)

    def watching(self, key: TopicPartition) -> bool:
        return key in self._watchers

    def watch(self, required: dict[TopicPartition, int]) -> DelayedOffsets[Outcome]:
        """Register synchronously, in the step that made the request wait (a follower fetch
        handled later must find it)."""
        op: DelayedOffsets[Outcome] = DelayedOffsets(
            asyncio.get_running_loop().create_future(), required)
        for key in required:
            self._watchers.setdefault(key, set()).add(op)
        return op

    async def wait_for(self, op: DelayedOffsets[Outcome], timeout_s: float
                       ) -> dict[TopicPartition, Outcome]:
        """Each partition's outcome once all are settled or `timeout_s` passed."""
        timer = asyncio.get_running_loop().call_later(timeout_s, op.expire, self.timed_out)
        try:
            await op.future
        finally:
            timer.cancel()
            _unwatch(self._watchers, op, op.keys)
        return dict(op.outcomes)

    def reached(self, key: TopicPartition, offset: int, outcome: Outcome | None) -> None:
        """The watermark of `key` is `offset`: the waiters it reaches settle with `outcome`."""
        for op in list(self._watchers.get(key, ())):
            required = op.pending.get(key)
            if required is not None and offset >= required:
                op.settle(key, outcome)


class ProducePurgatory(OffsetPurgatory[ErrorCode]):
    """acks=all produces wait here; a high-watermark advance (a follower's fetch, an ISR
    change) completes them, a lost leadership fails them. `wait_for` gives the partitions
    that failed: lost leadership, or REQUEST_TIMED_OUT when the high watermark did not get
    there in time."""

    timed_out = ErrorCode.REQUEST_TIMED_OUT

    def high_watermark(self, key: TopicPartition, hw: int, *,
                       enough_replicas: bool = True) -> None:
        """The high watermark of `key` is `hw`: the waiters it passes complete. When the ISR
        shrank below min.insync.replicas after they appended (`enough_replicas` False),
        their records are committed with fewer copies than asked for: they answer
        NOT_ENOUGH_REPLICAS_AFTER_APPEND, as Kafka's checkEnoughReplicasReachOffset does."""
        self.reached(key, hw,
                     None if enough_replicas else ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND)

    def fail(self, key: TopicPartition, error: ErrorCode) -> None:
        """The partition's leadership moved (or it stopped): its waiters fail with `error`."""
        for op in list(self._watchers.pop(key, ())):
            op.settle(key, error)

    def shutdown(self) -> None:
        for key in list(self._watchers):
            self.fail(key, ErrorCode.NOT_LEADER_OR_FOLLOWER)


class DeleteRecordsPurgatory(OffsetPurgatory[int]):
    """DeleteRecords wait here; a follower's fetch that raises the low watermark completes
    them (`low_watermark`), the request's timeout_ms expires them. `wait_for` gives the
    partitions whose low watermark got there, with it; the others timed out."""

    def low_watermark(self, key: TopicPartition, low: int) -> None:
        """The low watermark of `key` is `low`: the waiters it reaches complete."""
        self.reached(key, low, low)

    def shutdown(self) -> None:
        """The broker stops: every waiter answers now, as timed out (for the server's
        shutdown, next to the produce purgatory's)."""
        for op in {op for ops in self._watchers.values() for op in ops}:
            op.expire(None)
