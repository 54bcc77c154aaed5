"""`kafkactl produce` whose broker dies mid-run says so on stderr as it happens (as kcat and
Java's client log it), one line, not one per record or retry, and one more when the broker
is back and the records go on; -q says nothing. Every record is acknowledged in the end."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from typing import Any

import pytest

from tests.conftest import BrokerProcess
from tests.mirror.helpers import create_topics, read_topic


def _lines(n: int, start: int = 0) -> bytes:
    return b"".join(b"r%d\n" % i for i in range(start, start + n))


def _wait_landed(broker: BrokerProcess, topic: str, n: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        got = sum(len(rows) for rows in read_topic(broker.bootstrap, topic).values())
        if got >= n:
            return
        assert time.monotonic() < deadline, f"{got} of {n} records landed"
        time.sleep(0.2)


class Stderr:
    """The producer's stderr, line by line as it comes."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stderr is not None
        self.fd = proc.stderr.fileno()
        self.buf = b""
        self.lines: list[str] = []

    def wait_for(self, text: str, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while True:
            for line in self.lines:
                if text in line:
                    return line
            left = deadline - time.monotonic()
            assert left > 0, f"no {text!r} on stderr: {self.lines}"
            if select.select([self.fd], [], [], min(left, 1.0))[0]:
                piece = os.read(self.fd, 65536)
                assert piece, f"stderr closed: {self.lines}, {self.buf!r}"
                self.buf += piece
                *done, self.buf = self.buf.split(b"\n")
                self.lines += [d.decode() for d in done]

    def rest(self) -> list[str]:
        while piece := os.read(self.fd, 65536):
            self.buf += piece
        self.lines += [d.decode() for d in self.buf.split(b"\n") if d]
        return self.lines


@pytest.mark.parametrize("quiet", [False, True], ids=["told", "quiet"])
def test_a_broker_that_dies_and_comes_back_is_told(broker_factory: Any, quiet: bool) -> None:
    broker: BrokerProcess = broker_factory()
    create_topics(broker.bootstrap, {"outage": 1})
    proc = subprocess.Popen(
        [sys.executable, "-m", "kafkactl", "produce", "-b", broker.bootstrap, "-t", "outage",
         "--linger-ms", "0", *(["-q"] if quiet else [])],
        stdin=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdin is not None
    err = Stderr(proc)
    try:
        proc.stdin.write(_lines(100))
        proc.stdin.flush()
        _wait_landed(broker, "outage", 100)
        broker.kill()
        proc.stdin.write(_lines(100, 100))
        proc.stdin.flush()
        if not quiet:
            line = err.wait_for("unreachable", 60)
            assert line.startswith(f"kafkactl produce: broker {broker.bootstrap} "
                                   "unreachable ("), line
            assert line.endswith("); retrying for up to delivery.timeout.ms (120 s)"), line
        broker.start()
        if not quiet:
            assert err.wait_for("back", 90) == \
                f"kafkactl produce: broker {broker.bootstrap} back: resumed"
        _wait_landed(broker, "outage", 200, 90)
        proc.stdin.close()
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    lines = err.rest()
    told = [ln for ln in lines if ln.startswith("kafkactl produce: ")]
    if quiet:
        assert lines == [], lines
    else:
        # one line when it started (reminders only after REMIND_S), one when it was over
        assert len([ln for ln in told if " unreachable (" in ln]) == 1, lines
        assert len([ln for ln in told if ln.endswith("back: resumed")]) == 1, lines
        assert "200 of 200 records acknowledged" in lines[-1], lines
