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


class _Handler:
    """Counts the requests handed to it; answers later (an acks=all Produce)."""

    def __init__(self) -> None:
        self.handled = 0

    def handle(self, conn: ConnectionInfo, frame: bytearray) -> object:
        self.handled += 1
        return None  # (the answer's writing is not under test)


def _queued_produces(c: _Probe, n: int) -> None:
    from collections import deque

    c._backlog = deque(bytearray(b"\x00\x00\x00\x09rest") for _ in range(n))
    c._arrivals = deque(0.0 for _ in range(n))
    c._backlog_bytes = c._charged = sum(len(f) for f in c._backlog)
    c._held = 0
    c._write_paused = c._close_after_drain = False
    c._pending, c._pipelining = 1, True  # an appended Produce waits for its answer


def test_a_throttled_connection_gets_no_produce_pipelining() -> None:
    """Pipelined Produces behind an appended one are handled at once; once the connection
    has been throttled they wait for the answers ahead of them, as Kafka handles one request
    of a connection at a time. Before: the Produces a muted client had queued were all
    appended in one burst when the mute ended, before any of their throttles was known,
    and an acks=all producer on a replicated topic ran at 3x its producer_byte_rate."""
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        for throttled, handled in ((False, 3), (True, 0)):
            c = _Probe(loop)
            handler = _Handler()
            c.server = SimpleNamespace(pool=SimpleNamespace(paused=False, exempt=None,
                                                            account=lambda delta: None),
                                       handler=handler, in_flight=0)
            c.transport = SimpleNamespace(pause_reading=lambda: None,
                                          resume_reading=lambda: None)  # type: ignore
            c._quota_bound = False
            if throttled:
                _mute(c, 100)
                c._muted.cancel()  # the mute is over: the queued Produces may go on
                c._muted = None
            _queued_produces(c, 3)
            KafkaConnection._drain(c)
            assert handler.handled == handled, throttled

    asyncio.run(scenario())
