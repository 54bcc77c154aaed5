"""`kafkactl consume -G` commits what it printed, never more: one test per way out.

The records are `seq` lines, one partition each unless said, so a partition's committed
offset must equal the number of its records written to stdout: the count the summary line
reports ("Processed a total of N messages"), and, where the test reads the pipe to its end,
the lines the test received. A next run of the group starts right after them.
"""

from __future__ import annotations

import fcntl
import os
import re
import signal
import subprocess
import sys
import termios
from functools import partial
from typing import IO, Any

from tests.groups.helpers import (
    FAST,
    assigned_members,
    create_topic,
    offsets_show,
    read_lines,
    wait_until,
)

SUMMARY = re.compile(r"Processed a total of ([\d,]+) messages")


def _seq(bootstrap: str, topic: str, n: int, partition: int = 0, pad: str = "") -> None:
    data = "".join(f"{i}{pad}\n" for i in range(1, n + 1))
    r = subprocess.run([sys.executable, "-m", "kafkactl", "produce", "-t", topic, "-p",
                        str(partition), "-q", "-b", bootstrap], input=data.encode(),
                       capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr


def _consume(bootstrap: str, topic: str, group: str, *extra: str,
             stdout: Any = subprocess.PIPE) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "kafkactl", "consume", "-t", topic, "-G", group,
         "--from-beginning", "-b", bootstrap, *extra],
        stdout=stdout, stderr=subprocess.PIPE)


def _printed(stderr: bytes) -> int:
    m = SUMMARY.search(stderr.decode())
    assert m, stderr.decode()
    return int(m.group(1).replace(",", ""))


def _committed(bootstrap: str, group: str, topic: str, partition: int = 0) -> int:
    row = offsets_show(bootstrap, group).get((topic, partition))
    return -1 if row is None else int(row["current_offset"])


def _first_line_of_next_run(bootstrap: str, topic: str, group: str) -> bytes:
    r = subprocess.run([sys.executable, "-m", "kafkactl", "consume", "-t", topic, "-G",
                        group, "-c", "1", "-q", "-b", bootstrap], capture_output=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_head_closes_the_pipe(broker_factory: Any) -> None:
    """`consume -G g | head -5`: the records that reached the pipe are committed, not
    the 300,000 fetched."""
    b = broker_factory(**FAST)
    _seq(b.bootstrap, "headed", 300_000)
    p = _consume(b.bootstrap, "headed", "g")
    assert p.stdout is not None and p.stderr is not None
    head = [p.stdout.readline() for _ in range(5)]
    p.stdout.close()  # head exits
    assert head == [b"1\n", b"2\n", b"3\n", b"4\n", b"5\n"]
    err = p.stderr.read()
    assert p.wait(60) == 0, err
    printed = _printed(err)
    assert 5 <= printed < 300_000
    assert _committed(b.bootstrap, "g", "headed") == printed
    assert _first_line_of_next_run(b.bootstrap, "headed", "g") == b"%d\n" % (printed + 1)


def test_signal_with_a_slow_reader(broker_factory: Any) -> None:
    """Ctrl-C (and SIGTERM) while the reader lags and the pipe is full: everything the test
    goes on to read from the pipe is committed, nothing else, and the summary counts it."""
    b = broker_factory(**FAST)
    _seq(b.bootstrap, "slow", 400_000)
    for group, sig in (("gi", signal.SIGINT), ("gt", signal.SIGTERM)):
        p = _consume(b.bootstrap, "slow", group)
        assert p.stdout is not None and p.stderr is not None
        got = [p.stdout.readline() for _ in range(1000)]  # a slow reader: then it stops
        assert got[0] == b"1\n"
        # the consumer is blocked on the full pipe (400,000 lines do not fit in it)
        wait_until(partial(_pipe_full, p.stdout), 30, "the consumer filling the pipe",
                   interval=0.1)
        p.send_signal(sig)
        rest: list[bytes] = []
        read_lines(p.stdout, rest).join(60)
        err = p.stderr.read()
        assert p.wait(60) == 0, err
        # whole lines: the write Ctrl-C cut short may have left part of a record (not
        # counted, not committed: the next run prints it whole)
        lines = len(got) + sum(1 for line in rest if line.endswith(b"\n"))
        assert _printed(err) == lines, (group, err)
        assert _committed(b.bootstrap, group, "slow") == lines
        assert _first_line_of_next_run(b.bootstrap, "slow", group) == b"%d\n" % (lines + 1)


def _pipe_full(stream: IO[bytes]) -> bool:
    """The pipe holds as much as the writer puts in it (its size less a few pages): the
    writer waits for room."""
    fd = stream.fileno()
    size = fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ)
    unread = int.from_bytes(fcntl.ioctl(fd, termios.FIONREAD, b"\0" * 4), sys.byteorder)
    return unread >= size - 3 * os.sysconf("SC_PAGE_SIZE")


def test_max_messages(broker_factory: Any) -> None:
    """`-c N` commits N, though the fetch brought the whole partition."""
    b = broker_factory(**FAST)
    _seq(b.bootstrap, "counted", 50_000)
    r = subprocess.run([sys.executable, "-m", "kafkactl", "consume", "-t", "counted", "-G",
                        "gc", "--from-beginning", "-c", "1234", "-b", b.bootstrap],
                       capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count(b"\n") == 1234 and _printed(r.stderr) == 1234
    assert _committed(b.bootstrap, "gc", "counted") == 1234
    # a keyed -f format takes the per-record path at the cut: the same count
    r = subprocess.run([sys.executable, "-m", "kafkactl", "consume", "-t", "counted", "-G",
                        "gc", "-c", "10", "-f", "%o %s\n", "-b", b.bootstrap],
                       capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == b"1234 1235"
    assert _committed(b.bootstrap, "gc", "counted") == 1244


def test_rebalance_mid_stream(broker_factory: Any) -> None:
    """A second member joins while the first is blocked writing to a full pipe and its reader
    reads a line now and then: the first finishes the record it is in, commits what it
    wrote and rejoins (a slow reader does not hold the group up), the second takes over
    from that commit, and across both every record is printed exactly once."""
    b = broker_factory(**FAST)
    create_topic(b.bootstrap, "moved", 2)
    n = 10_000
    pad = "x" * 1000  # 10 MB a partition: more than one fetch of it (8 MiB)
    _seq(b.bootstrap, "moved", n, partition=0, pad=pad)
    _seq(b.bootstrap, "moved", n, partition=1, pad=pad)
    first = _consume(b.bootstrap, "moved", "gr", "-f", "%p %s\n")
    assert first.stdout is not None and first.stderr is not None
    outs: list[list[bytes]] = [[first.stdout.readline()], []]
    wait_until(lambda: _pipe_full(first.stdout), 30, "the first member filling the pipe",
               interval=0.1)
    second = _consume(b.bootstrap, "moved", "gr", "-f", "%p %s\n")
    assert second.stdout is not None and second.stderr is not None

    def slow_read_then_settled() -> bool:  # a line per check: a slow reader
        outs[0].append(first.stdout.readline())  # type: ignore[union-attr]
        return assigned_members(b.bootstrap, "gr") == 2

    wait_until(slow_read_then_settled, 60, "both members assigned", interval=0.2)
    assert len(outs[0]) < 1000  # the first member had far from everything printed
    threads = [read_lines(first.stdout, outs[0]), read_lines(second.stdout, outs[1])]
    wait_until(lambda: len(outs[0]) + len(outs[1]) >= 2 * n, 120,
               "every record printed by one of the two", interval=0.2)
    wait_until(lambda: all(_committed(b.bootstrap, "gr", "moved", p) == n for p in (0, 1)),
               30, "the periodic commits reaching the ends", interval=0.5)
    for p in (first, second):
        p.send_signal(signal.SIGINT)
    errs = []
    for p in (first, second):
        errs.append(p.stderr.read().decode())  # type: ignore[union-attr]
        assert p.wait(60) == 0, errs[-1]
    for t in threads:
        t.join(30)
    assert outs[1], f"the second member got no partition: {errs}"
    expected = sorted(b"%d %d%s\n" % (p, i, pad.encode()) for p in (0, 1)
                      for i in range(1, n + 1))
    assert sorted([*outs[0], *outs[1]]) == expected  # once each: no gap, no repeat
