"""Replication throttling (Kafka's ReplicationQuotaManager, KIP-73).

Two quotas per broker, in bytes per second, set as dynamic broker configs:
`leader.replication.throttled.rate` bounds what this broker sends, as a leader, to the
followers of its throttled replicas; `follower.replication.throttled.rate` bounds what it
fetches, as a follower, for its throttled replicas. Which replicas are throttled is a
topic config on each side: `leader.replication.throttled.replicas` and
`follower.replication.throttled.replicas`, a list of `partition:broker` (the replica of
that partition on that broker) or `*` (every replica of the topic). A broker applies the
leader list's entries that name itself when it leads, the follower list's when it follows.

The rate is measured as Kafka's Rate is: bytes over `replication.quota.window.num` samples
of `replication.quota.window.size.seconds` (default 11 of 1 s), the elapsed time counted as
at least all samples but one. While the rate is over the quota, the throttled partitions of
replicas that are not in sync are left out (the leader answers them with no records; the
follower does not ask for them); unthrottled partitions and in-sync replicas are never held
back, and bytes already read are never dropped. Without a rate set nothing is measured.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
WINDOW_NUM = "replication.quota.window.num"
WINDOW_SIZE_S = "replication.quota.window.size.seconds"
ALL = "*"
_ENTRY = re.compile(r"^\s*(\d+)\s*:\s*(\d+)\s*$")


def parse_throttled_replicas(value: str) -> tuple[bool, dict[int, set[int]]]:
    """(every replica, {partition: brokers}) of a throttled-replicas list; ValueError names
    an entry that is not `partition:broker`."""
    value = value.strip()
    if value == ALL:
        return True, {}
    out: dict[int, set[int]] = {}
    for item in filter(None, (s.strip() for s in value.split(","))):
        m = _ENTRY.match(item)
        if m is None:
            raise ValueError(f"{item!r} is not partition:broker")
        out.setdefault(int(m.group(1)), set()).add(int(m.group(2)))
    return False, out


@dataclass
class Rate:
    """Bytes per second over `samples` windows of `window_s` seconds (Kafka's Rate with a
    SampledStat: the elapsed time counts at least `samples - 1` full windows)."""

    samples: int = 11
    window_s: float = 1.0
    clock: Callable[[], float] = time.monotonic
    _windows: list[list[float]] = field(default_factory=list)  # [start, bytes], oldest first

    def record(self, amount: float) -> None:
        now = self.clock()
        if not self._windows or now >= self._windows[-1][0] + self.window_s:
            self._windows.append([now, 0.0])
            if len(self._windows) > self.samples:
                del self._windows[0]
        self._windows[-1][1] += amount

    def measure(self) -> float:
        now = self.clock()
        horizon = now - self.samples * self.window_s
        while self._windows and self._windows[0][0] + self.window_s <= horizon:
            del self._windows[0]
        if not self._windows:
            return 0.0
        elapsed = now - self._windows[0][0]
        full = int(elapsed // self.window_s)
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_s
        return sum(w[1] for w in self._windows) / max(elapsed, 1e-9)


class ReplicationQuota:
    """One side's quota on one broker: `props` are the broker's live configs (dynamic
    changes land in them), `topic_overrides(topic)` a topic's config overrides."""

    def __init__(self, broker_id: int, rate_key: str, replicas_key: str,
                 props: Mapping[str, str],
                 topic_overrides: Callable[[str], Mapping[str, str] | None],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.broker_id = broker_id
        self.rate_key = rate_key
        self.replicas_key = replicas_key
        self.props = props
        self.topic_overrides = topic_overrides
        self.rate = Rate(max(1, _int(props.get(WINDOW_NUM), 11)),
                         max(0.001, float(_int(props.get(WINDOW_SIZE_S), 1))), clock)
        self._parsed: dict[str, tuple[bool, frozenset[int]]] = {}  # list value -> this broker's
        self.throttled_bytes = 0  # bytes recorded against the quota (a metric)

    @classmethod
    def leader(cls, broker_id: int, props: Mapping[str, str],
               topic_overrides: Callable[[str], Mapping[str, str] | None]) -> ReplicationQuota:
        return cls(broker_id, LEADER_RATE, LEADER_REPLICAS, props, topic_overrides)

    @classmethod
    def follower(cls, broker_id: int, props: Mapping[str, str],
                 topic_overrides: Callable[[str], Mapping[str, str] | None]
                 ) -> ReplicationQuota:
        return cls(broker_id, FOLLOWER_RATE, FOLLOWER_REPLICAS, props, topic_overrides)

    def bound(self) -> int | None:
        """The quota in bytes/s; None: unlimited (unset, empty or not above zero)."""
        value = _int(self.props.get(self.rate_key), 0)
        return value if value > 0 else None

    def is_throttled(self, topic: str, partition: int) -> bool:
        """Is this broker's replica of (topic, partition) in the topic's throttled list?"""
        overrides = self.topic_overrides(topic)
        value = overrides.get(self.replicas_key, "") if overrides else ""
        if not value:
            return False
        parsed = self._parsed.get(value)
        if parsed is None:
            try:
                every, by_partition = parse_throttled_replicas(value)
            except ValueError:
                every, by_partition = False, {}  # refused when set: never stored
            parsed = (every, frozenset(p for p, brokers in by_partition.items()
                                       if self.broker_id in brokers))
            if len(self._parsed) > 1024:
                self._parsed.clear()
            self._parsed[value] = parsed
        return parsed[0] or partition in parsed[1]

    def is_exceeded(self) -> bool:
        bound = self.bound()
        return bound is not None and self.rate.measure() > bound

    def should_throttle(self, topic: str, partition: int, in_sync: bool) -> bool:
        """Leave (topic, partition) out now: a replica not in sync, throttled, while the
        quota is exceeded (Kafka's shouldLeaderThrottle / shouldFollowerThrottle)."""
        return not in_sync and self.bound() is not None and \
            self.is_throttled(topic, partition) and self.is_exceeded()

    def record(self, topic: str, partition: int, size: int) -> None:
        """`size` bytes replicated for (topic, partition): counted if it is throttled."""
        if size > 0 and self.bound() is not None and self.is_throttled(topic, partition):
            self.rate.record(size)
            self.throttled_bytes += size


def _int(value: str | None, default: int) -> int:
    try:
        return int(value) if value else default
    except ValueError:
        return default
