"""max.poll.records for `kafkactl consume -G`, against a real broker: a member writes at
most that many records before it polls again (500 unless -X says), and what it commits is
exactly what it printed, however a poll's records were cut. So a slow reader of the pipe
does not keep the member from polling for max.poll.interval.ms (it would leave the group
and rejoin, a rebalance each time)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import Any

import pytest

from tests.groups.helpers import FAST, create_topic, kafkactl, wait_until
from tests.groups.rejoin_helpers import committed, describe, holds, member, offsets_of, produce


def _consume(bootstrap: str, group: str, topic: str, *extra: str
             ) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "kafkactl", "consume", "-t", topic, "-G", group,
         "--from-beginning", "-f", "%p %o\\n", "-b", bootstrap, *extra],
        capture_output=True, timeout=120)


def test_committed_is_what_was_printed(broker_factory: Any) -> None:
    """-X max.poll.records=3 and -c K for K one below, at and above 3 and far above, over
    three partitions whose batches hold more than 3 records: each run prints K records,
    continuing where the last one stopped, and the group's offsets are exactly after the
    records printed, partition by partition."""
    b = broker_factory(**FAST)
    create_topic(b.bootstrap, "mpr", 3)
    for p in range(3):
        produce(b.bootstrap, "mpr", p, 0, 40)
    printed: list[tuple[int, int]] = []
    for k in (2, 3, 4, 10, 1, 3):
        r = _consume(b.bootstrap, "g", "mpr", "-X", "max.poll.records=3", "-c", str(k))
        assert r.returncode == 0, r.stderr
        got = offsets_of(r.stdout)
        assert len(got) == k, r.stdout
        printed += got
        assert f"Processed a total of {k} messages".encode() in r.stderr
        offsets = committed(b.bootstrap, "g", "mpr", range(3))
        for p in range(3):  # the offsets printed of each partition: 0 up to its commit
            mine = sorted(o for q, o in printed if q == p)
            assert mine == list(range(max(offsets.get(p, 0), 0))), (k, p, printed, offsets)
    assert len(set(printed)) == len(printed) == 23


@pytest.mark.parametrize("value, why", [("0", "must be >= 1"), ("-3", "must be >= 1"),
                                        ("many", "needs an integer"),
                                        ("2.5", "needs an integer")])
def test_a_limit_that_is_no_count_of_records_is_refused(value: str, why: str) -> None:
    r = kafkactl("consume", "-t", "any", "-G", "g", "-X", f"max.poll.records={value}",
                 "-b", "127.0.0.1:9")
    assert r.returncode == 2, r.stderr
    assert f"-X max.poll.records={value}: {why}" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def test_a_slow_reader_keeps_its_member_in_the_group(broker_factory: Any) -> None:
    """10 MB in one partition (a fetch brings 8 MiB of it), max.poll.interval.ms 6 s, and a
    reader taking 32 KiB every 0.2 s: the member polls after each 100 records (~11 KB, less
    than one read takes) written, so it polls at every read and never goes 6 s without a
    poll however slow the machine: it stays the same member, and never leaves the group
    (with the whole fetch written before the next poll, 256 reads, it would leave after 6 s
    and rejoin, again and again). What it committed is what the reader took."""
    b = broker_factory(**FAST)
    create_topic(b.bootstrap, "slowly", 1)
    produce(b.bootstrap, "slowly", 0, 0, 100_000, 100)
    a = member(b.bootstrap, "sr", "slowly", "a", "-f", "%p %o %s\\n",
               "-X", "max.poll.records=100", "-X", "max.poll.interval.ms=6000",
               "-X", "session.timeout.ms=6000",
               "-X", "heartbeat.interval.ms=500")
    assert a.stdout is not None and a.stderr is not None
    taken = bytearray()
    try:
        wait_until(lambda: holds(b.bootstrap, "sr", "a"), 60, "the member joining")
        first = describe(b.bootstrap, "sr")[1]["a"][0]
        fd = a.stdout.fileno()
        until = time.monotonic() + 15
        while time.monotonic() < until:
            taken += os.read(fd, 32768)
            time.sleep(0.2)
            state, members = describe(b.bootstrap, "sr")
            assert state == "Stable" and members["a"][0] == first, (state, members)
        a.send_signal(signal.SIGTERM)
        while chunk := os.read(fd, 1 << 20):
            taken += chunk
        err = a.stderr.read().decode()
        assert a.wait(60) == 0, err
    finally:
        if a.poll() is None:
            a.kill()
            a.wait()
    assert "max.poll.interval.ms" not in err and "lost its partitions" not in err, err
    whole = bytes(taken[:taken.rfind(b"\n") + 1])
    got = offsets_of(whole)
    assert got == [(0, o) for o in range(len(got))]
    assert 8 * 32768 < len(whole) < 8 << 20  # read slowly: far from a fetch's worth
    assert committed(b.bootstrap, "sr", "slowly", [0]) == {0: len(got)}
