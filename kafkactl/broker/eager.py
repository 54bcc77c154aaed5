"""Eager handlers: run a handler's coroutine at once, in the caller, up to its first real wait.

Most requests of an async handler never wait: an AddPartitionsToTxn or an EndTxn whose
`__transaction_state` partition has an ISR of one is written and answered in one go. Run as
an asyncio Task, each still paid for the Task, a turn of the event loop before it started
and a coroutine around it. `eager(coro)` runs the coroutine until it finishes or first
suspends (what asyncio's `eager_task_factory` does from Python 3.12 on):

- it finished: its result is returned as is, and the request is answered in the same turn;
- it suspended on a future: an awaitable is returned that goes on driving the same coroutine
  from that point, with asyncio's own rules (the future's result or exception is taken by
  the coroutine itself; a cancellation reaches it where it waits).

An exception raised before the first wait propagates from `eager` itself, as it would have
from the awaited coroutine.
"""

from __future__ import annotations

from collections.abc import Coroutine, Generator
from typing import Any, TypeVar

T = TypeVar("T")


class _Blocked:
    """Waits, inside the driving Task, for the future the inner coroutine suspended on."""

    __slots__ = ("future",)

    def __init__(self, future: Any) -> None:
        self.future = future

    def __await__(self) -> Generator[Any, None, None]:
        future = self.future
        if future is None:  # a bare yield (asyncio.sleep(0)): one turn of the loop
            yield None
            return
        if not future.done():
            future._asyncio_future_blocking = True  # what the Task checks, as Future does
            yield future


async def _resume(coro: Coroutine[Any, Any, T], future: Any) -> T:
    while True:
        try:
            await _Blocked(future)
        except BaseException as exc:  # noqa: BLE001 - the Task's cancellation goes inside
            try:
                future = coro.throw(exc)
            except StopIteration as stop:
                return stop.value
            continue
        try:
            future = coro.send(None)
        except StopIteration as stop:
            return stop.value


def eager(coro: Coroutine[Any, Any, T]) -> T | Coroutine[Any, Any, T]:
    """The coroutine's result if it completes without waiting, else an awaitable of it."""
    try:
        future = coro.send(None)
    except StopIteration as stop:
        return stop.value
    return _resume(coro, future)

