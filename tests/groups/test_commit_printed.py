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
from functools import partial
from typing import Any

from tests.groups.helpers import (
    FAST,
    assigned_members,
    create_topic,
    offsets_show,
    read_lines,
    wait_until,
)
from tests.groups.rejoin_helpers import pipe_full

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
    """`consume -G g | head -5`: the records the reader took out of the pipe are committed,
    not what was still in the pipe, nor the 300,000 fetched; the summary counts what was
    written."""
    b = broker_factory(**FAST)
    _seq(b.bootstrap, "headed", 300_000)
    p = _consume(b.bootstrap, "headed", "g")
    assert p.stdout is not None and p.stderr is not None
    head = b""
    while len(head) < 10:  # "1\n" .. "5\n", and not a byte more out of the pipe
        chunk = os.read(p.stdout.fileno(), 10 - len(head))
        assert chunk
        head += chunk
    p.stdout.close()  # head exits
    assert head == b"1\n2\n3\n4\n5\n"
    err = p.stderr.read()
    assert p.wait(60) == 0, err
    assert 5 < _printed(err) < 300_000  # written: what the pipe took
    assert _committed(b.bootstrap, "g", "headed") == 5
    assert _first_line_of_next_run(b.bootstrap, "headed", "g") == b"6\n"


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
        wait_until(partial(pipe_full, p.stdout), 30, "the consumer filling the pipe",
                   interval=0.1)
        p.send_signal(sig)
        rest: list[bytes] = []
        read_lines(p.stdout, rest).join(60)
        err = p.stderr.read()
        assert p.wait(60) == 0, err
        # whole lines: the consumer finishes the record the signal came in, then stops
        assert all(line.endswith(b"\n") for line in rest), rest[-1:]
        lines = len(got) + len(rest)
        assert _printed(err) == lines, (group, err)
        assert _committed(b.bootstrap, group, "slow") == lines
        assert _first_line_of_next_run(b.bootstrap, "slow", group) == b"%d\n" % (lines + 1)


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
    reads a line now and then: the first finishes the record it is in, commits what its
    reader has taken and rejoins (a slow reader does not hold the group up), the second
    takes over from that commit. Across both every record is printed, and the only ones
    printed twice are those the first member's pipe still held when its partition moved
    (its reader goes on to read them; they were not committed, the data-safe side)."""
    b = broker_factory(**FAST)
    create_topic(b.bootstrap, "moved", 2)
    n = 10_000
    pad = "x" * 1000  # 10 MB a partition: more than one fetch of it (8 MiB)
    _seq(b.bootstrap, "moved", n, partition=0, pad=pad)
    _seq(b.bootstrap, "moved", n, partition=1, pad=pad)
    first = _consume(b.bootstrap, "moved", "gr", "-f", "%p %s\n")
    assert first.stdout is not None and first.stderr is not None
    pipe_size = fcntl.fcntl(first.stdout.fileno(), fcntl.F_GETPIPE_SZ)
    outs: list[list[bytes]] = [[first.stdout.readline()], []]
    wait_until(lambda: pipe_full(first.stdout), 30, "the first member filling the pipe",
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
    expected = {b"%d %d%s\n" % (p, i, pad.encode()) for p in (0, 1) for i in range(1, n + 1)}
    printed = [*outs[0], *outs[1]]
    assert set(printed) == expected  # no gap
    line = len(next(iter(expected)))
    assert len(printed) - len(expected) <= pipe_size // line + 1  # what the pipe held


def test_a_transactional_topic_is_committed_past_its_markers(broker_factory: Any) -> None:
    """A partition that ends in a commit marker, an aborted transaction and its abort
    marker: a group reading it to the end (-e), read_committed or read_uncommitted, commits
    the log end offset (lag 0, as Kafka's consumers do), not the offset after the last
    record it printed; and -p or an absolute -o with -G are refused, not ignored."""
    from confluent_kafka import Producer

    b = broker_factory(**FAST)
    r = subprocess.run([sys.executable, "-m", "kafkactl", "produce", "-t", "txt", "-q",
                        "--transactional-id", "committer", "-b", b.bootstrap],
                       input=b"".join(b"%d\n" % i for i in range(10)), capture_output=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    p = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": "aborter"})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(5):
        p.produce("txt", b"aborted-%d" % i, partition=0)
    p.flush(30)
    p.abort_transaction(30)
    end = 10 + 1 + 5 + 1  # records, commit marker, aborted records, abort marker
    for group, level, shown in (("rc", "read_committed", 10),
                                ("ru", "read_uncommitted", 15)):
        c = subprocess.run([sys.executable, "-m", "kafkactl", "consume", "-t", "txt", "-G",
                            group, "--from-beginning", "-e", "--isolation-level", level,
                            "-b", b.bootstrap], capture_output=True, timeout=120)
        assert c.returncode == 0, c.stderr
        assert len(c.stdout.splitlines()) == shown, (level, c.stdout)
        assert _committed(b.bootstrap, group, "txt") == end, level
    for extra in (["-p", "0"], ["-o", "5"]):
        bad = subprocess.run([sys.executable, "-m", "kafkactl", "consume", "-t", "txt", "-G",
                              "x", "-e", *extra, "-b", b.bootstrap], capture_output=True,
                             timeout=60)
        assert bad.returncode == 2, (extra, bad.stderr)
        assert b"-G" in bad.stderr and b"Traceback" not in bad.stderr, bad.stderr
