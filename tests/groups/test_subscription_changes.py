"""A `kafkactl consume -G` member follows its topics as they change (real broker, real
member processes): partitions added to a topic and topics that come to match its
--topic-pattern are assigned after the next metadata check (metadata.max.age.ms, as Java's
consumer: the leader rejoins when a topic it assigned grew, a pattern member when the
topics matching changed). What those new partitions hold is printed from their start even
with -o latest: they were made after the member started, so nothing in them predates it.

Each test stops the member (SIGSTOP, well within its session) while partitions are added
and records written, so the records exist before the member can see the change: no test
depends on which comes first."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import Any

from kafkactl.client.group.subscription_watch import SubscriptionWatch
from kafkactl.client.kafka_client import KafkaClient
from tests.groups.helpers import FAST, create_topic, kafkactl, read_lines, wait_until
from tests.groups.rejoin_helpers import committed, describe

WATCH = ("-f", "%t %p %s\\n", "-X", "metadata.max.age.ms=500", "-X",
         "auto.commit.interval.ms=200", "-X", "session.timeout.ms=30000")


def _start(bootstrap: str, group: str, topic_args: list[str], client_id: str
           ) -> tuple[subprocess.Popen[bytes], list[bytes]]:
    """`kafkactl consume -G group TOPIC_ARGS -o latest` printing `topic partition value`."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "kafkactl", "consume", "-b", bootstrap, "-G", group,
         *topic_args, "-o", "latest", "-X", f"client.id={client_id}", *WATCH],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    lines: list[bytes] = []
    assert proc.stdout is not None
    read_lines(proc.stdout, lines)
    return proc, lines


def _printed(lines: list[bytes]) -> list[str]:
    return [ln.decode().rstrip("\n") for ln in list(lines)]


def _stop(*procs: subprocess.Popen[bytes]) -> None:
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGINT)
    for p in procs:
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def _values(topic: str, partition: int, tag: str, n: int) -> list[str]:
    return [f"{topic} {partition} {tag}{i}" for i in range(n)]


def test_partitions_added_to_a_topic_are_read_from_their_start(broker_factory: Any) -> None:
    """`grow` has 2 partitions with 5 records each when the member starts at latest (not
    printed). While it is stopped the topic grows to 4 partitions and each of the 4 gets 5
    more: once resumed the member prints exactly those 20, the 10 of the new partitions
    included (it would never be assigned partitions 2 and 3 without the metadata check,
    and would skip their 10 records from latest without the start rule)."""
    b = broker_factory(**FAST)
    create_topic(b.bootstrap, "grow", 2)
    for p in (0, 1):
        _produce_values(b.bootstrap, "grow", p, _values("grow", p, "old", 5))
    proc, lines = _start(b.bootstrap, "g1", ["-t", "grow"], "a")
    try:
        wait_until(lambda: committed(b.bootstrap, "g1", "grow", (0, 1)) == {0: 5, 1: 5},
                   what="the member positioned at the end of partitions 0 and 1")
        os.kill(proc.pid, signal.SIGSTOP)
        try:
            r = kafkactl("topics", "alter", "-t", "grow", "--partitions", "4",
                         "-b", b.bootstrap)
            assert r.returncode == 0, r.stderr
            want: list[str] = []
            for p in range(4):
                values = _values("grow", p, "new", 5)
                _produce_values(b.bootstrap, "grow", p, values)
                want += values
        finally:
            os.kill(proc.pid, signal.SIGCONT)
        wait_until(lambda: len(_printed(lines)) >= len(want), timeout=60,
                   what="the records of all 4 partitions printed")
        wait_until(lambda: committed(b.bootstrap, "g1", "grow", range(4))
                   == {0: 10, 1: 10, 2: 5, 3: 5}, what="the commits of all 4 partitions")
        got = _printed(lines)
        assert sorted(got) == sorted(want), got
        state, members = describe(b.bootstrap, "g1")
        assert state == "Stable"
        assert sorted(p for _t, p in members["a"][1]) == [0, 1, 2, 3]
    finally:
        _stop(proc)


def test_a_topic_that_comes_to_match_the_pattern_is_read(broker_factory: Any) -> None:
    """A member of --topic-pattern 'pat-.*' at latest; while it is stopped pat-b is made
    (2 partitions, 3 records each) and pat-a gets 3 more: it prints all 9 once resumed."""
    b = broker_factory(**FAST)
    create_topic(b.bootstrap, "pat-a", 1)
    create_topic(b.bootstrap, "other", 1)
    _produce_values(b.bootstrap, "pat-a", 0, _values("pat-a", 0, "old", 2))
    proc, lines = _start(b.bootstrap, "g2", ["--topic-pattern", "pat-.*"],
                         "a")
    try:
        wait_until(lambda: committed(b.bootstrap, "g2", "pat-a", (0,)) == {0: 2},
                   what="the member positioned at the end of pat-a")
        os.kill(proc.pid, signal.SIGSTOP)
        try:
            create_topic(b.bootstrap, "pat-b", 2)
            want = _values("pat-a", 0, "new", 3)
            _produce_values(b.bootstrap, "pat-a", 0, want)
            for p in (0, 1):
                values = _values("pat-b", p, "new", 3)
                _produce_values(b.bootstrap, "pat-b", p, values)
                want += values
            _produce_values(b.bootstrap, "other", 0, _values("other", 0, "no", 3))
        finally:
            os.kill(proc.pid, signal.SIGCONT)
        wait_until(lambda: len(_printed(lines)) >= len(want), timeout=60,
                   what="the records of pat-a and pat-b printed")
        time.sleep(1)  # (anything else printed would be a failure: give it the chance)
        assert sorted(_printed(lines)) == sorted(want)
    finally:
        _stop(proc)


def test_the_leader_rebalances_the_whole_group_when_a_topic_grows(
        broker_factory: Any) -> None:
    """Two members share `grown` (2 partitions); it grows to 6 while both are stopped, 4
    records to each partition: the group ends with all 6 assigned over both members, and
    the 24 records are printed once, over both."""
    b = broker_factory(**FAST)
    create_topic(b.bootstrap, "grown", 2)
    pa, la = _start(b.bootstrap, "g3", ["-t", "grown"], "a")
    pb, lb = _start(b.bootstrap, "g3", ["-t", "grown"], "b")
    try:
        def both_hold() -> bool:
            state, members = describe(b.bootstrap, "g3")
            return (state == "Stable" and len(members) == 2
                    and all(m[1] for m in members.values()))

        wait_until(both_hold, what="both members holding a partition")
        wait_until(lambda: committed(b.bootstrap, "g3", "grown", (0, 1)) == {0: 0, 1: 0},
                   what="both partitions positioned")
        for p in (pa, pb):
            os.kill(p.pid, signal.SIGSTOP)
        try:
            r = kafkactl("topics", "alter", "-t", "grown", "--partitions", "6",
                         "-b", b.bootstrap)
            assert r.returncode == 0, r.stderr
            want: list[str] = []
            for p in range(6):
                values = _values("grown", p, "v", 4)
                _produce_values(b.bootstrap, "grown", p, values)
                want += values
        finally:
            for p in (pa, pb):
                os.kill(p.pid, signal.SIGCONT)
        wait_until(lambda: len(_printed(la)) + len(_printed(lb)) >= len(want), timeout=60,
                   what="the 24 records printed")
        wait_until(lambda: committed(b.bootstrap, "g3", "grown", range(6))
                   == {p: 4 for p in range(6)}, what="all 6 partitions committed")
        assert sorted(_printed(la) + _printed(lb)) == sorted(want)
        state, members = describe(b.bootstrap, "g3")
        held = sorted(p for m in members.values() for _t, p in m[1])
        assert state == "Stable" and held == list(range(6)), members
    finally:
        _stop(pa, pb)


def test_born_since_start_at_the_edges() -> None:
    """A partition is new when its number is at or above the count its topic had at the
    member's first join (one below: not new), or its topic was not subscribed then; before
    any join nothing is new; a new subscription takes the layout again."""
    watch = SubscriptionWatch(KafkaClient("127.0.0.1:9"))
    assert watch.born_since_start([("t", 0)]) == []
    watch.start_layout = {"t": 3, "empty": 0}
    tps = [("t", 0), ("t", 2), ("t", 3), ("t", 4), ("empty", 0), ("later", 0)]
    assert watch.born_since_start(tps) == [("t", 3), ("t", 4), ("empty", 0), ("later", 0)]
    watch.restart()
    assert watch.born_since_start(tps) == []


def _produce_values(bootstrap: str, topic: str, partition: int, values: list[str]) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for line in values:  # `topic partition value`, as the member prints it
        p.produce(topic, value=line.rsplit(" ", 1)[1].encode(), partition=partition)
    assert p.flush(30) == 0

