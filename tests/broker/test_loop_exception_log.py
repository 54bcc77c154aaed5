"""What the broker's event loop says of an exception nobody retrieved: the task's
coroutine and the traceback (it said "Task exception was never retrieved: AssertionError:"
and nothing else, which a tester could not trace); an OSError asyncio reports from its own
callbacks (no task: a connection the peer reset) stays one line."""

from __future__ import annotations

import asyncio
import logging

import pytest

from kafkactl.broker.network import SocketServer


async def _authenticate_and_fail() -> None:
    raise AssertionError("protocol is gone")


def test_an_unretrieved_task_exception_names_its_task_and_traceback(
        caplog: pytest.LogCaptureFixture) -> None:
    loop = asyncio.new_event_loop()
    try:
        task = loop.create_task(_authenticate_and_fail())
        loop.run_until_complete(asyncio.wait([task]))
        exc = task.exception()
        with caplog.at_level(logging.WARNING, logger="kafkactl.broker.network"):
            SocketServer._loop_exception(None, loop, {  # type: ignore[arg-type]
                "message": "Task exception was never retrieved", "exception": exc,
                "task": task})
            SocketServer._loop_exception(None, loop, {  # type: ignore[arg-type]
                "message": "Exception in callback", "exception": ConnectionResetError(104,
                                                                          "reset")})
    finally:
        loop.close()
    first, second = caplog.records
    assert "_authenticate_and_fail" in first.getMessage()
    assert "AssertionError: protocol is gone" in first.getMessage()
    assert first.exc_info is not None and first.exc_info[1] is exc
    assert second.exc_info is None and "ConnectionResetError" in second.getMessage()
