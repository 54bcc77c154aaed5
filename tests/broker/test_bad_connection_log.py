"""A burst of malformed requests, one connection each, from one peer: the broker logs the
first of each kind in full and counts the rest (one summary line per peer and minute, written
at the latest when the broker stops), instead of a WARNING line per connection; a good client
is served all along. And the aggregation itself (kafkactl.broker.peer_log), on a fake clock."""

from __future__ import annotations

import logging
import random
import re
import socket
import struct

import pytest

from kafkactl.broker.peer_log import OTHER_PEERS, PeerLogLimiter
from kafkactl.protocol import codec
from kafkactl.protocol.api_keys import ApiKey

from .wire import Wire

BURST = 600


def _bad_frames(n: int) -> list[bytes]:
    """`n` frames each of which makes the broker close the connection: absurd sizes, API
    keys Kafka does not define, versions out of range, truncated bodies."""
    rng = random.Random(30_16)
    metadata = codec.encode_request(ApiKey.METADATA, 9, 7, "fz", {"topics": [{"name": "t"}]})
    frames = []
    for i in range(n):
        kind = i % 4
        if kind == 0:
            frames.append(struct.pack(">i", rng.choice([-rng.randrange(1, 1 << 31),
                                                        rng.randrange(1 << 28, 1 << 31)])))
        elif kind == 1:
            body = struct.pack(">hhih", rng.randrange(200, 1 << 15), 0, i, 1) + b"x"
            frames.append(struct.pack(">i", len(body)) + body)
        elif kind == 2:
            body = struct.pack(">hhih", 3, rng.randrange(13, 1 << 15), i, 1) + b"x"
            frames.append(struct.pack(">i", len(body)) + body)
        else:
            cut = rng.randrange(14, len(metadata) - 6)
            body = metadata[4:cut]
            frames.append(struct.pack(">i", len(body)) + body)
    return frames


def _send_and_wait_close(port: int, frame: bytes) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(frame)
        try:
            while s.recv(65536):
                pass
        except ConnectionResetError:
            pass


def _warnings(text: str) -> list[str]:
    return [line for line in text.splitlines() if " WARNING " in line]


def test_a_burst_of_malformed_connections_logs_a_bounded_number_of_lines(
        broker_factory) -> None:
    broker = broker_factory()  # counts its own log lines
    good = Wire(broker.bootstrap)
    for i, frame in enumerate(_bad_frames(BURST)):
        _send_and_wait_close(broker.port, frame)
        if i % 50 == 0:  # the good client is served throughout
            assert good.request(ApiKey.METADATA, 1, {"topics": []})["brokers"]
    assert good.request(ApiKey.METADATA, 1, {"topics": []})["brokers"]
    good.close()
    during = _warnings(broker.log())
    # the first of each kind in full (a handful of kinds), not one line per connection
    assert 1 <= len(during) <= 9, "\n".join(during)
    assert any("is outside 0.." in line for line in during)  # logged in full, with numbers
    assert broker.stop() == 0
    assert broker.log_path is not None
    text = broker.log_path.read_text(errors="replace")
    lines = _warnings(text)
    summaries = [line for line in lines if "more bad connections" in line]
    assert len(summaries) == 1, "\n".join(lines)
    counted = int(re.search(r"127\.0\.0\.1: (\d+) more bad connections", summaries[0])[1])
    # every bad connection is either a line of its own or in the count
    assert counted + len(lines) - len(summaries) == BURST
    assert "Traceback" not in text


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def captured(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.INFO, logger="test.peer_log")
    return caplog


def _limiter(clock: _Clock, **kw: int) -> PeerLogLimiter:
    return PeerLogLimiter(logging.getLogger("test.peer_log"), logging.WARNING, "bad things",
                          clock=clock, **kw)


def test_first_of_a_kind_in_full_then_one_count_per_peer_and_interval(captured) -> None:
    clock = _Clock()
    lim = _limiter(clock)
    for port in range(1000, 1100):
        lim.event("10.0.0.1", f"10.0.0.1:{port}: request size {port * 7} is too big")
    lim.event("10.0.0.2", "10.0.0.2:5: request size 1 is too big")
    assert [r.getMessage() for r in captured.records] == [
        "10.0.0.1:1000: request size 7000 is too big", "10.0.0.2:5: request size 1 is too big"]
    clock.now += 30
    lim.flush()  # the interval has not ended: nothing yet
    assert len(captured.records) == 2
    clock.now += 31
    lim.flush()
    assert len(captured.records) == 3
    summary = captured.records[-1].getMessage()
    assert summary.startswith("10.0.0.1: 99 more bad things in the last 61 s")
    assert summary.endswith("the last: 10.0.0.1:1099: request size 7693 is too big")
    # the attack goes on: counted (the kind was logged), one summary per interval
    lim.event("10.0.0.1", "10.0.0.1:2000: request size 5 is too big")
    assert len(captured.records) == 3
    clock.now += 60
    lim.flush()
    assert captured.records[-1].getMessage().startswith("10.0.0.1: 1 more bad things")
    # a peer quiet for a whole interval is forgotten: its next event is in full again
    clock.now += 60
    lim.flush()
    n = len(captured.records)
    lim.event("10.0.0.1", "10.0.0.1:3000: request size 9 is too big")
    assert captured.records[n].getMessage() == "10.0.0.1:3000: request size 9 is too big"


def test_kinds_and_peers_are_bounded(captured) -> None:
    clock = _Clock()
    lim = _limiter(clock, max_kinds=3, max_peers=2)
    for i in range(50):
        lim.event("10.0.0.1", f"kind {chr(65 + i % 26)}{chr(65 + i // 26)}: bad")
    assert len(captured.records) == 3  # three kinds in full, the others counted
    for i in range(100):
        lim.event(f"10.1.{i}.1", "same thing")
    # 10.1.0.1 is the second peer; everyone after shares the "other peers" entry
    assert [r.getMessage() for r in captured.records[3:]] == ["same thing", "same thing"]
    assert len(lim._peers) == 3 and OTHER_PEERS in lim._peers
    lim.close()
    assert any(r.getMessage().startswith("10.0.0.1: 47 more bad things")
               for r in captured.records)
    assert any(r.getMessage().startswith("other peers: 98 more bad things")
               for r in captured.records)
