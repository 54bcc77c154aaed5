"""A connection muted for a quota's throttle (KIP-219) stays muted until the latest end of
the throttles its answers carried. Pipelined acks=all Produces complete one by one, each
answer with its throttle: before, each replaced the mute's timer without cancelling it, so
the first (shorter) timer unmuted the connection early and a producer with acks=all on a
replicated topic ran at about twice its producer_byte_rate."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from kafkactl.broker.network import ConnectionInfo, KafkaConnection


class _Probe(KafkaConnection):
    """The mute's state alone: no socket, no handler."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:  # noqa: D107
        self.loop = loop
        self.info = ConnectionInfo(connection_id=1, peer="test", listener="PLAINTEXT")
        self.server = SimpleNamespace(pool=SimpleNamespace(paused=False, exempt=None))
        self.transport = None
        self._closed = False
        self._muted = None
        self._backlog_full = False
        self._delayed_close = None
        self._reading_paused = False
        self.drains = 0

    def _drain(self) -> None:
        self.drains += 1


def _mute(c: _Probe, ms: int) -> None:
    c.info.throttle_ms = ms
    c._mute_if_throttled()


def test_a_shorter_throttle_keeps_the_later_end_and_a_longer_one_extends_it() -> None:
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        c = _Probe(loop)
        start = loop.time()
        _mute(c, 200)
        first = c._muted
        assert first is not None and abs(first.when() - (start + 0.2)) < 0.05
        _mute(c, 50)  # ends before the mute does: nothing changes
        assert c._muted is first and not first.cancelled()
        _mute(c, 400)  # ends after: one timer, at the later end
        assert c._muted is not first and first.cancelled()
        assert c._muted is not None and c._muted.when() >= first.when() + 0.15
        assert c.info.throttle_ms == 0 and c.drains == 0
        c._muted.cancel()

    asyncio.run(scenario())
