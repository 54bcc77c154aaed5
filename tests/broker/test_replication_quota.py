"""The replication quota's parts (kafkactl/broker/replication_quota.py) and the throttles a
reassignment sets (kafkactl/cluster/reassignment_plan.py), on a clock the test moves: the
windowed rate as Kafka's Rate measures it, which replicas a broker throttles, that in-sync
replicas and unthrottled partitions are never held back, and what `--throttle` sets."""

from __future__ import annotations

import pytest

from kafkactl.broker.replication_quota import (
    FOLLOWER_RATE,
    FOLLOWER_REPLICAS,
    LEADER_RATE,
    LEADER_REPLICAS,
    WINDOW_NUM,
    WINDOW_SIZE_S,
    Rate,
    ReplicationQuota,
    parse_throttled_replicas,
)
from kafkactl.cluster.reassignment_plan import reassignment_throttles


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_parse_throttled_replicas() -> None:
    assert parse_throttled_replicas("*") == (True, {})
    assert parse_throttled_replicas(" 0:1, 0:2 ,3:1") == (False, {0: {1, 2}, 3: {1}})
    assert parse_throttled_replicas("") == (False, {})
    with pytest.raises(ValueError, match="'0-1' is not partition:broker"):
        parse_throttled_replicas("0:1,0-1")


def test_the_rate_counts_at_least_all_windows_but_one() -> None:
    clock = Clock()
    rate = Rate(samples=3, window_s=1.0, clock=clock)
    rate.record(400)
    assert rate.measure() == pytest.approx(200)  # 400 bytes over at least 2 s
    clock.now += 2.5
    rate.record(100)
    assert rate.measure() == pytest.approx(500 / 2.5)
    clock.now += 2.0  # the first window (1000..1001) has left the 3 s horizon
    assert rate.measure() == pytest.approx(100 / 2.0)


def _quota(props: dict[str, str], topics: dict[str, dict[str, str]], clock: Clock,
           broker_id: int = 2) -> ReplicationQuota:
    return ReplicationQuota(broker_id, FOLLOWER_RATE, FOLLOWER_REPLICAS, props, topics.get,
                            clock)


def test_only_this_brokers_listed_replicas_are_throttled() -> None:
    topics = {"a": {FOLLOWER_REPLICAS: "0:2,1:3"}, "b": {FOLLOWER_REPLICAS: "*"}, "c": {}}
    q = _quota({FOLLOWER_RATE: "100"}, topics, Clock())
    assert q.is_throttled("a", 0) and not q.is_throttled("a", 1)
    assert q.is_throttled("b", 7)
    assert not q.is_throttled("c", 0) and not q.is_throttled("unknown", 0)


def test_over_the_quota_only_throttled_replicas_out_of_sync_wait() -> None:
    clock = Clock()
    props = {FOLLOWER_RATE: "1000", WINDOW_NUM: "2", WINDOW_SIZE_S: "1"}
    topics = {"a": {FOLLOWER_REPLICAS: "0:2"}}
    q = _quota(props, topics, clock)
    q.record("other", 0, 10_000)  # an unthrottled partition's bytes are not counted
    assert not q.is_exceeded()
    q.record("a", 0, 1500)  # 1500 B over at least 1 s: over 1000 B/s
    assert q.is_exceeded()
    assert q.should_throttle("a", 0, in_sync=False)
    assert not q.should_throttle("a", 0, in_sync=True)  # an in-sync replica never waits
    assert not q.should_throttle("other", 0, in_sync=False)
    clock.now += 3.0  # the window has passed
    assert not q.should_throttle("a", 0, in_sync=False)
    props[FOLLOWER_RATE] = ""  # a dynamic change lands in the live props: unlimited
    q.record("a", 0, 10**9)
    assert not q.should_throttle("a", 0, in_sync=False)


def test_a_leader_quota_reads_its_own_keys() -> None:
    q = ReplicationQuota.leader(1, {LEADER_RATE: "10", FOLLOWER_RATE: "0"},
                                {"t": {LEADER_REPLICAS: "0:1"}}.get)
    assert q.bound() == 10 and q.is_throttled("t", 0)
    no_topics: dict[str, dict[str, str]] = {}
    assert ReplicationQuota.follower(1, {LEADER_RATE: "10"}, no_topics.get).bound() is None


def test_the_throttles_of_a_reassignment() -> None:
    current = {("t", 0): [1, 2], ("t", 1): [2, 3], ("u", 0): [1], ("t", 2): [3, 1]}
    targets = {("t", 0): [1, 4], ("t", 1): [3, 2], ("u", 0): [2], ("t", 2): [3, 1]}
    th = reassignment_throttles(targets, current)
    # every current replica of a moving partition leads-throttled; each new one follows
    assert th.leader == {"t": "0:1,0:2,1:2,1:3", "u": "0:1"}
    assert th.follower == {"t": "0:4", "u": "0:2"}
    assert th.brokers == [1, 2, 3, 4]
