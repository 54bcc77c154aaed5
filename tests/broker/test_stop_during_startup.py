"""A stop requested while the broker is still starting (a start-up step waiting on a
ZooKeeper that went away) cancels the start-up instead of waiting for it: SIGTERM stops a
broker promptly whatever it is doing. The end-to-end case is in
tests/cluster/test_broker_registration.py (ZooKeeper restarted, then gone for good)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from kafkactl.broker.config import BrokerConfig
from kafkactl.broker.server import BrokerStartupError, KafkaServer


def _server(tmp_path: Path) -> KafkaServer:
    return KafkaServer(BrokerConfig.build(flags={"log.dirs": str(tmp_path / "data")}))


def test_a_stop_during_start_up_cancels_it(tmp_path: Path) -> None:
    server = _server(tmp_path)
    cancelled = []

    async def stuck() -> None:  # e.g. a ZooKeeper call with ZooKeeper away
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    async def main() -> bool:
        server.startup = stuck  # type: ignore[method-assign]
        asyncio.get_running_loop().call_later(0.05, server.request_stop, "SIGTERM")
        return await asyncio.wait_for(server.startup_unless_stopped(), 10)

    assert asyncio.run(main()) is False
    assert cancelled == [True]


def test_a_start_up_that_finishes_runs_on_and_its_errors_are_raised(tmp_path: Path) -> None:
    server = _server(tmp_path)

    async def quick() -> None:
        await asyncio.sleep(0)

    async def failing() -> None:
        raise BrokerStartupError("cannot create log dir")

    async def main() -> None:
        server.startup = quick  # type: ignore[method-assign]
        assert await server.startup_unless_stopped() is True
        server.startup = failing  # type: ignore[method-assign]
        with pytest.raises(BrokerStartupError, match="cannot create log dir"):
            await server.startup_unless_stopped()

    asyncio.run(main())
