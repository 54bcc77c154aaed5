"""FetchPurgatory: a delayed fetch registered with watch() is woken by an append that is
handled before its waiting coroutine first runs (the same event-loop step)."""

from __future__ import annotations

import asyncio

from kafkactl.broker.purgatory import FetchPurgatory


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
