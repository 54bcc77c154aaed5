"""kafkactl.broker.eager: a handler's coroutine runs at once up to its first wait, and what is
left of it behaves as the same coroutine run in an asyncio Task would."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import pytest

from kafkactl.broker.eager import eager


async def _no_wait(trace: list[str]) -> dict[str, int]:
    trace.append("ran")
    return {"error_code": 0}


def test_a_coroutine_that_never_waits_is_answered_in_the_call() -> None:
    trace: list[str] = []
    result = eager(_no_wait(trace))
    assert result == {"error_code": 0}
    assert trace == ["ran"]


def test_an_error_before_the_first_wait_is_raised_by_the_call() -> None:
    async def fails() -> None:
        raise ValueError("bad request")

    with pytest.raises(ValueError, match="bad request"):
        eager(fails())


def test_the_part_before_the_first_wait_runs_in_the_call_the_rest_when_awaited() -> None:
    trace: list[str] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[int] = loop.create_future()

        async def handler() -> int:
            trace.append("before")
            value = await fut
            trace.append(f"after {value}")
            await asyncio.sleep(0)  # a bare yield
            trace.append("after sleep(0)")
            second = await asyncio.sleep(0.001, result=5)
            return value + second

        pending = eager(handler())
        assert trace == ["before"]
        assert inspect.isawaitable(pending)
        task = loop.create_task(pending)  # type: ignore[arg-type]
        await asyncio.sleep(0)
        assert not task.done()
        fut.set_result(37)
        assert await task == 42
        assert trace == ["before", "after 37", "after sleep(0)"]

    asyncio.run(main())


def test_a_future_failing_raises_inside_the_coroutine_where_it_waits() -> None:
    async def main() -> str:
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        async def handler() -> str:
            try:
                await fut
            except KeyError as e:
                return f"caught {e}"
            return "not reached"

        pending = eager(handler())
        task = asyncio.get_running_loop().create_task(pending)  # type: ignore[arg-type]
        await asyncio.sleep(0)
        fut.set_exception(KeyError("gone"))
        return await task

    assert asyncio.run(main()) == "caught 'gone'"


def test_cancelling_the_task_cancels_the_coroutine_where_it_waits() -> None:
    trace: list[str] = []

    async def main() -> None:
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        async def handler() -> int:
            try:
                return await fut
            except asyncio.CancelledError:
                trace.append("cancelled inside")
                raise
            finally:
                trace.append("finally")

        pending: Any = eager(handler())
        task = asyncio.get_running_loop().create_task(pending)
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert fut.cancelled()

    asyncio.run(main())
    assert trace == ["cancelled inside", "finally"]


def test_a_future_done_before_the_task_starts_is_not_waited_for() -> None:
    async def main() -> int:
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        async def handler() -> int:
            return await fut + 1

        pending: Any = eager(handler())
        fut.set_result(1)
        return await pending  # awaited directly, not in a new Task

    assert asyncio.run(main()) == 2
