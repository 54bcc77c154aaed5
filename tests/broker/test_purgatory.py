"""FetchPurgatory: a delayed fetch registered with watch() is woken by an append that is
handled before its waiting coroutine first runs (the same event-loop step)."""

from __future__ import annotations

import asyncio

from kafkactl.broker.purgatory import FetchPurgatory, ProducePurgatory
from kafkactl.protocol.errors import ErrorCode


def test_append_before_waiter_runs_still_wakes_the_fetch() -> None:
    async def scenario() -> None:
        p = FetchPurgatory()
        op = p.watch([("t", 0)], min_bytes=10, accumulated=4)
        p.notify_append(("t", 0), 3)
        assert not op.future.done()  # 7 < min_bytes
        p.notify_append(("t", 0), 3)
        assert op.future.done()
        await p.wait_for(op, 3600.0)  # returns at once (pytest-timeout guards a hang)
        assert p.size == 0

    asyncio.run(scenario())


def test_abandoned_op_is_dropped_on_next_append() -> None:
    async def scenario() -> None:
        p = FetchPurgatory()
        op = p.watch([("t", 0)], min_bytes=1, accumulated=0)
        op.complete()  # e.g. its connection closed before the waiter ever ran
        p.notify_append(("t", 0), 1)
        assert p.size == 0
        other = p.watch([("t", 1)], min_bytes=1, accumulated=0)
        p.wake(("t", 1))
        assert other.future.done()
        p.shutdown()
        late = p.watch([("t", 2)], min_bytes=1, accumulated=0)
        assert late.future.done()  # after shutdown nothing waits

    asyncio.run(scenario())


def test_delayed_produce_completes_times_out_or_fails() -> None:
    """acks=all: the high watermark reaching every partition completes it; a partition it
    never reaches answers REQUEST_TIMED_OUT after timeout_s; a leadership move fails that
    partition at once; nothing stays registered afterwards."""
    async def scenario() -> None:
        p = ProducePurgatory()
        op = p.watch({("t", 0): 5, ("t", 1): 3})
        p.high_watermark(("t", 0), 4)  # not yet
        p.high_watermark(("t", 1), 3)
        assert not op.future.done()
        p.high_watermark(("t", 0), 5)
        assert await p.wait_for(op, 3600.0) == {}

        op = p.watch({("t", 0): 9, ("t", 1): 9})
        p.high_watermark(("t", 1), 10)
        assert await p.wait_for(op, 0.05) == {("t", 0): ErrorCode.REQUEST_TIMED_OUT}

        op = p.watch({("t", 0): 12})
        p.fail(("t", 0), ErrorCode.NOT_LEADER_OR_FOLLOWER)
        assert await p.wait_for(op, 3600.0) == {("t", 0): ErrorCode.NOT_LEADER_OR_FOLLOWER}
        assert not p._watchers

        # the ISR shrank below min.insync.replicas between the append and the commit
        op = p.watch({("t", 0): 15, ("t", 1): 15})
        p.high_watermark(("t", 0), 15, enough_replicas=False)
        p.high_watermark(("t", 1), 15)
        assert await p.wait_for(op, 3600.0) == {
            ("t", 0): ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND}
        assert not p._watchers

        op = p.watch({("t", 0): 20})  # its connection closes: the waiter is cancelled
        waiter = asyncio.ensure_future(p.wait_for(op, 3600.0))
        await asyncio.sleep(0)
        waiter.cancel()
        await asyncio.gather(waiter, return_exceptions=True)
        assert not p._watchers
        p.high_watermark(("t", 0), 30)  # a late advance finds nothing to settle

    asyncio.run(scenario())
