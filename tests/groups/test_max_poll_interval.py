"""max.poll.interval.ms for `kafkactl consume -G` whose output is blocked, as Java's
heartbeat thread keeps it: a member whose reader takes nothing for longer than that leaves
the group (its partitions go to the other members) and rejoins once the reader reads again,
from the group's commits; a rebalance that starts while it is blocked does not get it
expelled: it keeps heartbeating until it rejoins (up to max.poll.interval.ms)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from tests.groups.helpers import RawMember, assignment, create_topic, read_lines, wait_until
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


def test_a_blocked_member_leaves_after_max_poll_interval_and_rejoins_when_read(
        broker_factory: Any, tmp_path: Path) -> None:
    """A's reader stops reading while the group is stable; past max.poll.interval.ms A
    leaves the group, B reads A's partition to its end (lag 0); once A's reader reads
    again, A rejoins and prints only what comes after the group's commits."""
    b = broker_factory(**BROKER)
    create_topic(b.bootstrap, "stuck", 2)
    n = 40_000  # lines of a few bytes: several pipes full
    a = member(b.bootstrap, "sg", "stuck", "a", "-f", "%p %o\\n", *FAST_SESSION,
               "-X", "max.poll.interval.ms=8000")
    assert a.stdout is not None and a.stderr is not None
    out_b = tmp_path / "b.out"
    second = member(b.bootstrap, "sg", "stuck", "b", "-f", "%p %o\\n", *FAST_SESSION,
                    stdout=out_b.open("wb"))
    got_a: list[bytes] = []
    reader = None
    try:
        wait_until(lambda: holds(b.bootstrap, "sg", "a") and holds(b.bootstrap, "sg", "b"),
                   60, "A and B holding a partition each")
        for p in (0, 1):
            produce(b.bootstrap, "stuck", p, 0, n)
        wait_until(lambda: pipe_full(a.stdout), 60,  # type: ignore[arg-type]
                   "A filling its pipe")
        # A's partitions go to B: the group's lag goes to 0 while A's reader sleeps
        wait_until(lambda: committed(b.bootstrap, "sg", "stuck", [0, 1]) == {0: n, 1: n},
                   90, "B reading both partitions to their ends")
        assert pipe_full(a.stdout)  # A's reader has taken nothing yet
        backlog = unread(a.stdout)  # all A wrote before it left
        reader = read_lines(a.stdout, got_a)  # the reader wakes up
        wait_until(lambda: holds(b.bootstrap, "sg", "a") and holds(b.bootstrap, "sg", "b"),
                   60, "A rejoining once its reader reads")
        for p in (0, 1):
            produce(b.bootstrap, "stuck", p, n, 100)
        wait_until(lambda: len(set(offsets_of(b"".join(got_a)))
                               | set(offsets_of(read_file(out_b)))) >= 2 * (n + 100), 90,
                   "every record printed by one of the two")
    finally:
        errs = stop_members(a, second)
    if reader is not None:
        reader.join(30)
    data_a = b"".join(got_a)
    before = offsets_of(data_a[:backlog])
    after = offsets_of(lines_from(data_a, backlog))
    printed_b = set(offsets_of(read_file(out_b)))
    assert "max.poll.interval.ms" in errs[0], errs[0]
    assert before, "A printed nothing before it was blocked"
    # after its rejoin A printed only records produced after the group's commits (n)
    assert after and not [(p, o) for p, o in after if o < n], (after[:5], errs)
    assert len(after) == len(set(after)) == 100, errs
    # what both printed was in A's pipe when it left (B read from A's last commit)
    assert set(after).isdisjoint(printed_b)
    history = commit_history(b.bootstrap, "sg", "stuck")
    for p in (0, 1):
        assert non_decreasing(history[p]), (p, history[p])
        assert history[p][-1] == n + 100
    assert "Traceback" not in "".join(errs), errs


def test_a_rebalance_while_the_output_is_blocked_does_not_expel_the_member(
        broker_factory: Any, tmp_path: Path) -> None:
    """A is in the middle of a record larger than its pipe, whose reader takes nothing,
    when B joins: A cannot rejoin until the reader reads, but keeps heartbeating, so the
    coordinator keeps it in the group past its session timeout (measured by the broker:
    a member of another group with twice A's session expires first), and once the reader
    reads A rejoins with the same member id."""
    b = broker_factory(**BROKER)
    create_topic(b.bootstrap, "blk", 2)
    create_topic(b.bootstrap, "clock", 1)
    size, n = 200_000, 4
    for p in (0, 1):
        produce(b.bootstrap, "blk", p, 0, n, size)
    a = member(b.bootstrap, "bg", "blk", "a", "-f", "%p %o %s\\n", *FAST_SESSION,
               "-X", "max.poll.interval.ms=120000")
    assert a.stdout is not None
    out_b = tmp_path / "b.out"
    second: subprocess.Popen[bytes] | None = None
    clock: RawMember | None = None
    got_a: list[bytes] = []
    reader = None
    try:
        wait_until(lambda: pipe_full(a.stdout), 60,  # type: ignore[arg-type]
                   "A filling its pipe in the middle of a record")
        a_id = describe(b.bootstrap, "bg")[1]["a"][0]
        second = member(b.bootstrap, "bg", "blk", "b", "-f", "%p %o %s\\n", *FAST_SESSION,
                        stdout=out_b.open("wb"))
        wait_until(lambda: describe(b.bootstrap, "bg")[0] == "PreparingRebalance", 60,
                   "B's join starting a rebalance")
        # the broker's clock: a member of another group whose session (12 s) starts now
        clock = RawMember(b.bootstrap, "bg-clock", ["clock"], session_ms=12000,
                          rebalance_ms=12000)
        assert clock.join()["error_code"] == 0
        assert clock.sync({clock.member_id: assignment([("clock", 0)])})["error_code"] == 0
        wait_until(lambda: not describe(b.bootstrap, "bg-clock")[1], 60,
                   "the broker expiring the 12 s session of the other group's member")
        state, members = describe(b.bootstrap, "bg")
        assert members.get("a", ("", []))[0] == a_id, (state, members)  # not expelled
        reader = read_lines(a.stdout, got_a)  # the reader wakes up
        wait_until(lambda: holds(b.bootstrap, "bg", "a") and holds(b.bootstrap, "bg", "b"),
                   60, "the rebalance completing with A once it rejoins")
        assert describe(b.bootstrap, "bg")[1]["a"][0] == a_id  # the same member
        wait_until(lambda: len(set(offsets_of(b"".join(got_a)))
                               | set(offsets_of(read_file(out_b)))) == 2 * n, 60,
                   "every record printed by one of the two")
    finally:
        if clock is not None:
            clock.close()
        errs = stop_members(a, *([second] if second is not None else []))
    if reader is not None:
        reader.join(30)
    assert "lost its partitions" not in errs[0], errs[0]
    assert "Traceback" not in "".join(errs), errs
