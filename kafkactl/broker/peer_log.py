"""PeerLogLimiter: log lines about misbehaving peers, aggregated per peer and interval.

A fuzzer or a password guesser makes one bad connection after another; a line for each
floods the log (thousands of lines a second) and buries everything else. Per peer address
(the IP, not ip:port: every connection has a new port) and kind of event (the message with
its numbers blanked, so "request size 2147483647 ..." and "request size 999999999 ..." are
one kind), the first occurrence is logged in full. Later ones in the same interval are
counted, and one summary line per peer says how many there were, by kind, and quotes the
last one. A peer quiet for a whole interval starts afresh (its next event is logged in full).

Bounded: at most `max_kinds` kinds per peer (more are counted under the peer's "other
events") and `max_peers` peers (more share one "other peers" entry), so neither memory nor
lines grow with what a hostile client sends. Lines per peer and interval: at most
`max_kinds` + 1.

Runs on the broker's event loop: summaries are written by a timer (`loop.call_later`, at
most about two intervals after the interval began) when there is a running loop, else at
the peer's next event; `close()` writes what is still counted.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field

_NUMBERS = re.compile(r"\d+")
_PEER_PREFIX = re.compile(r"^\S+:\d+: ")  # "127.0.0.1:5555: " (the peer is the key)
_KIND_CHARS = 120
OTHER_PEERS = "other peers"
OTHER_KIND = "other events"


def _kind(message: str) -> str:
    """What a message is about: its start without the peer's address, numbers blanked
    (ports, sizes, offsets), cut at a word boundary."""
    text = _NUMBERS.sub("N", _PEER_PREFIX.sub("", message))
    if len(text) > _KIND_CHARS:
        text = text[:_KIND_CHARS].rsplit(" ", 1)[0] + " ..."
    return text


@dataclass
class _PeerEntry:
    window_start: float
    logged_kinds: set[str] = field(default_factory=set)
    counts: dict[str, int] = field(default_factory=dict)  # kind -> events not logged
    last: str = ""

    @property
    def suppressed(self) -> int:
        return sum(self.counts.values())


class PeerLogLimiter:
    def __init__(self, logger: logging.Logger, level: int, what: str, *,
                 interval: float = 60.0, max_kinds: int = 8, max_peers: int = 1024,
                 clock: Callable[[], float] = time.monotonic) -> None:
        """`what` names the events in summaries ("bad connections", "failed
        authentications")."""
        self.logger = logger
        self.level = level
        self.what = what
        self.interval = interval
        self.max_kinds = max_kinds
        self.max_peers = max_peers
        self.clock = clock
        self._peers: dict[str, _PeerEntry] = {}
        self._timer: asyncio.TimerHandle | None = None

    def event(self, peer: str, message: str, level: int | None = None) -> None:
        """One event from `peer` (an address): logged in full (at `level`, by default the
        limiter's) if it is the first of its kind from this peer, else counted."""
        now = self.clock()
        entry = self._peers.get(peer)
        if entry is not None and now - entry.window_start >= self.interval:
            self._summarise(peer, entry, now)
            entry = self._peers.get(peer)
        if entry is None:
            if len(self._peers) >= self.max_peers:
                peer = OTHER_PEERS
                entry = self._peers.get(peer)
            if entry is None:
                entry = self._peers[peer] = _PeerEntry(now)
        kind = _kind(message)
        if kind not in entry.logged_kinds and len(entry.logged_kinds) < self.max_kinds:
            entry.logged_kinds.add(kind)
            self.logger.log(self.level if level is None else level, "%s", message)
            self._schedule()
            return
        if kind not in entry.logged_kinds:
            kind = OTHER_KIND
        entry.counts[kind] = entry.counts.get(kind, 0) + 1
        entry.last = message
        self._schedule()

    def flush(self, *, final: bool = False) -> None:
        """Write the summaries of every interval that has ended (of every interval, if
        `final`); forget quiet peers."""
        now = self.clock()
        for peer, entry in list(self._peers.items()):
            if final or now - entry.window_start >= self.interval:
                self._summarise(peer, entry, now)

    def _summarise(self, peer: str, entry: _PeerEntry, now: float) -> None:
        """The interval of `peer` has ended: a summary line if events were counted (and a
        new interval in which every further event is counted), else forget the peer."""
        n = entry.suppressed
        if n == 0:
            del self._peers[peer]
            return
        kinds = ", ".join(f"{count} x {kind!r}" for kind, count in
                          sorted(entry.counts.items(), key=lambda kv: -kv[1])[:4])
        self.logger.log(self.level, "%s: %d more %s in the last %.0f s, not logged one by "
                        "one (%s); the last: %s", peer, n, self.what, now - entry.window_start,
                        kinds, entry.last)
        entry.window_start = now
        entry.counts.clear()  # the kinds logged stay logged: from now on they are counted

    def _schedule(self) -> None:
        if self._timer is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop: summaries are written at the peer's next event
        self._timer = loop.call_later(self.interval, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self.flush()
        if self._peers:
            self._schedule()

    def close(self) -> None:
        """Write what is still counted (at shutdown) and stop the timer."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.flush(final=True)
