"""A `kafkactl consume -G` member that lost its membership (expelled while stopped, or out
of the group while the reader of its pipe took nothing) and gets a partition back resumes
it from the group's committed offset, never from where it was before (Java's consumer:
onPartitionsLost forgets the positions). So nothing the other member printed and committed
meanwhile is printed again, and the group's committed offsets never move backwards.

(kafkactl's assignors are eager, range and roundrobin: no cooperative-sticky case.)"""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path
from typing import Any

from tests.groups.helpers import create_topic, read_lines, wait_until
from tests.groups.rejoin_helpers import (
    BROKER,
    FAST_SESSION,
    commit_history,
    committed,
    describe,
    holds,
    lines_from,
    member,
    non_decreasing,
    offsets_of,
    pipe_full,
    produce,
    read_file,
    stop_members,
    unread,
)


def test_a_member_stopped_beyond_its_session_resumes_from_the_commits(
        broker_factory: Any, tmp_path: Path) -> None:
    """A holds z1-0; SIGSTOP beyond its session: the group expels it and B prints and
    commits what is produced meanwhile; SIGCONT: A rejoins, gets z1-0 back (it sorts
    first) and goes on from B's commit, printing none of B's records again."""
    b = broker_factory(**BROKER)
    create_topic(b.bootstrap, "z1", 1)
    produce(b.bootstrap, "z1", 0, 0, 1000)
    out_a, out_b = tmp_path / "a.out", tmp_path / "b.out"
    a = member(b.bootstrap, "zg3", "z1", "a", "-f", "%p %o\\n", *FAST_SESSION,
               stdout=out_a.open("wb"))
    second: subprocess.Popen[bytes] | None = None
    try:
        wait_until(lambda: len(offsets_of(read_file(out_a))) == 1000, 60,
                   "A printing the first 1000 records")
        wait_until(lambda: committed(b.bootstrap, "zg3", "z1", [0]) == {0: 1000}, 30,
                   "A committing them")
        second = member(b.bootstrap, "zg3", "z1", "b", "-f", "%p %o\\n", *FAST_SESSION,
                        stdout=out_b.open("wb"))
        wait_until(lambda: len(describe(b.bootstrap, "zg3")[1]) == 2
                   and holds(b.bootstrap, "zg3", "a"), 60, "B joining, A keeping z1-0")
        a.send_signal(signal.SIGSTOP)
        try:
            produce(b.bootstrap, "z1", 0, 1000, 1000)
            wait_until(lambda: holds(b.bootstrap, "zg3", "b"), 60,
                       "the group expelling the stopped A and giving z1-0 to B")
            wait_until(lambda: committed(b.bootstrap, "zg3", "z1", [0]) == {0: 2000}, 60,
                       "B printing and committing 1000-1999")
        finally:
            a.send_signal(signal.SIGCONT)
        wait_until(lambda: holds(b.bootstrap, "zg3", "a"), 60, "A rejoining with z1-0")
        produce(b.bootstrap, "z1", 0, 2000, 1000)
        wait_until(lambda: (0, 2999) in offsets_of(read_file(out_a)), 60,
                   "A printing what came after its rejoin")
    finally:
        errs = stop_members(a, *([second] if second is not None else []))
    printed_a = offsets_of(read_file(out_a))
    printed_b = offsets_of(read_file(out_b))
    assert printed_a[:1000] == [(0, o) for o in range(1000)], errs
    after = printed_a[1000:]
    # B committed 2000 before A rejoined: A prints none of 1000-1999 again
    assert not [o for _p, o in after if o < 2000], (after[:5], errs)
    assert after == [(0, o) for o in range(2000, 3000)], errs
    assert printed_b == [(0, o) for o in range(1000, 2000)], errs
    history = commit_history(b.bootstrap, "zg3", "z1")[0]
    assert non_decreasing(history), history
    assert history[-1] == 3000
    assert "Traceback" not in "".join(errs), errs


def test_a_member_out_of_the_group_while_its_reader_sleeps_resumes_from_the_commits(
        broker_factory: Any, tmp_path: Path) -> None:
    """A's reader takes nothing (`| (sleep; cat)`) while A is in the middle of a record
    (larger than the pipe) and a rebalance starts: A is out of the group (it left after
    max.poll.interval.ms; it used to be expelled after its session) and B prints and
    commits everything. Once the reader reads again, A finishes that record, rejoins, and
    prints its partition from B's commit: nothing B committed before comes again."""
    b = broker_factory(**BROKER)
    create_topic(b.bootstrap, "mp", 2)
    size, n = 200_000, 12
    for p in (0, 1):
        produce(b.bootstrap, "mp", p, 0, n, size)
    a = member(b.bootstrap, "mpi", "mp", "a", "-f", "%p %o %s\\n", *FAST_SESSION,
               "-X", "max.poll.interval.ms=10000")
    assert a.stdout is not None
    out_b = tmp_path / "b.out"
    second: subprocess.Popen[bytes] | None = None
    got_a: list[bytes] = []
    reader = None
    try:
        wait_until(lambda: pipe_full(a.stdout), 60,  # type: ignore[arg-type]
                   "A filling its pipe in the middle of its first record")
        second = member(b.bootstrap, "mpi", "mp", "b", "-f", "%p %o %s\\n", *FAST_SESSION,
                        stdout=out_b.open("wb"))
        wait_until(lambda: committed(b.bootstrap, "mpi", "mp", [0, 1]) == {0: n, 1: n},
                   90, "B alone, printing and committing both partitions")
        assert pipe_full(a.stdout)  # A's reader has taken nothing yet
        backlog = unread(a.stdout)  # all A wrote before it went out
        reader = read_lines(a.stdout, got_a)  # the reader wakes up
        wait_until(lambda: holds(b.bootstrap, "mpi", "a"), 60, "A rejoining")
        for p in (0, 1):
            produce(b.bootstrap, "mp", p, n, n, size)
        wait_until(lambda: len(set(offsets_of(b"".join(got_a)))
                               | set(offsets_of(read_file(out_b)))) == 4 * n, 90,
                   "every record printed by one of the two")
    finally:
        errs = stop_members(a, *([second] if second is not None else []))
    if reader is not None:
        reader.join(30)
    data_a = b"".join(got_a)
    rest = lines_from(data_a, backlog)
    before = offsets_of(data_a[:len(data_a) - len(rest)])  # (with the record it was in)
    after = offsets_of(rest)
    printed_b = offsets_of(read_file(out_b))
    # after the record A was in when it went out, A printed only what came after B's
    # commits (n in both partitions), each once
    assert before and before[0][1] == 0, before[:3]
    assert not [(p, o) for p, o in after if o < n], (after[:5], errs)
    assert len(after) == len(set(after)) == n, (after, errs)
    assert set(after).isdisjoint(printed_b), errs
    history = commit_history(b.bootstrap, "mpi", "mp")
    for p in (0, 1):
        assert non_decreasing(history[p]), (p, history[p])
    assert "Traceback" not in "".join(errs), errs
