"""The request handler's busy-time meter of an awaited handler (request_percentage quotas):
the time its steps run counts, the waits between them do not; its result, its exception and
a cancellation pass through as they would through a plain await."""

from __future__ import annotations

import asyncio
import time

import pytest

from kafkactl.broker.eager import eager
from kafkactl.broker.request_handler import _Busy

SPIN_S = 0.02
WAIT_S = 0.3


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


async def _work_wait_work(gate: asyncio.Future[int]) -> int:
    _spin(SPIN_S)
    value = await gate
    _spin(SPIN_S)
    return value + 1


def test_steps_count_and_the_wait_does_not() -> None:
    async def main() -> tuple[int, float]:
        gate: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().call_later(WAIT_S, gate.set_result, 41)
        busy = _Busy(_work_wait_work(gate), 0.0)
        return await busy, busy.busy_s

    result, busy_s = asyncio.run(main())
    assert result == 42
    assert 2 * SPIN_S <= busy_s < WAIT_S  # both steps; not the 0.3 s wait


def test_an_eager_handlers_rest_and_its_exception() -> None:
    async def failing(gate: asyncio.Future[None]) -> None:
        await gate
        raise ValueError("refused")

    async def main() -> None:
        gate: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        pending = eager(failing(gate))
        asyncio.get_running_loop().call_soon(gate.set_result, None)
        with pytest.raises(ValueError, match="refused"):
            await _Busy(pending, 0.001)

    asyncio.run(main())


def test_a_cancellation_reaches_the_handler() -> None:
    seen: list[str] = []

    async def handler(gate: asyncio.Future[None]) -> None:
        try:
            await gate
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise

    async def main() -> None:
        gate: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        task = asyncio.ensure_future(_Busy(handler(gate), 0.0))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert seen == ["cancelled"]
