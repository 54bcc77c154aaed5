"""`kafkactl top`'s looks at a cluster and the snapshot two looks make.

A counter (messages in, bytes in and out, committed offsets, CPU seconds) is kept as its
series: one value per source that reported it (a broker's metrics endpoint, a partition's
log end offset, a group's committed offset on a partition). A rate is computed per series
and then summed, each series only when it is in both looks and did not go down: a broker
that did not answer one look, or a partition whose leader did not, is left out of the rate
of that look and of the next (not counted as all its traffic at once when it answers
again), and a counter that went down (a broker restarted, a topic created again) is taken
as reset and left out of that rate. (Prometheus' rate() also detects a reset by a value
that went down; it then counts the new value from zero, which the two looks here cannot
tell from the traffic before the reset.)
"""

from __future__ import annotations

import time
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from kafkactl.protocol.internal_topics import is_internal

# one counter's value per series (a broker's endpoint, a partition, a group's partition)
Series = dict[Hashable, float]

COUNTERS = ("in_msgs", "in_bytes", "out_bytes", "consumed_msgs")


@dataclass
class Look:
    """One look at the cluster: counters are cumulative, compared between two looks."""

    # when its figures were taken: the last answer of the look (time.monotonic)
    at: float
    cluster_id: str | None = None
    controller_id: int = -1
    brokers: list[dict[str, Any]] = field(default_factory=list)
    under_replicated: dict[str, list[int]] = field(default_factory=dict)
    offline: dict[str, list[int]] = field(default_factory=dict)
    # None: not known (no source answered)
    under_replicated_count: int | None = 0
    offline_count: int | None = 0
    # topic -> {"partitions": n, "internal": bool}
    topics: dict[str, dict[str, Any]] = field(default_factory=dict)
    # topic -> counter (COUNTERS) -> its series
    counters: dict[str, dict[str, Series]] = field(default_factory=dict)
    # group -> {"state", "members"[, "error"][, "unanswered": its coordinator did not answer]}
    groups: dict[str, dict[str, Any]] = field(default_factory=dict)
    # group -> its lag per series (a partition)
    lags: dict[str, Series] = field(default_factory=dict)
    # broker key (its metrics endpoint) -> cumulative CPU seconds
    cpu: dict[str, float] = field(default_factory=dict)
    # why the cluster could not be looked at (live view: the brokers are shown down)
    error: str | None = None

    @property
    def answered(self) -> bool:
        """Whether any source answered this look."""
        return self.error is None and any(b["up"] for b in self.brokers)

    def topic(self, name: str) -> dict[str, Any]:
        return self.topics.setdefault(name, {"partitions": 0,
                                             "internal": is_internal(name)})

    def count(self, topic: str, counter: str, series: Hashable, value: float) -> None:
        """One series' value of a topic's counter."""
        self.topic(topic)
        self.counters.setdefault(topic, {}).setdefault(counter, {})[series] = value

    def group(self, name: str) -> dict[str, Any]:
        self.lags.setdefault(name, {})
        return self.groups.setdefault(name, {"state": None, "members": None})


def unreachable(before: Look | None, error: str) -> Look:
    """A look at a cluster that could not be reached: the brokers of the look before, all
    down; its figures not known."""
    look = Look(time.monotonic(), before.cluster_id if before else None,
                under_replicated_count=None, offline_count=None, error=error)
    for b in before.brokers if before is not None else ():
        look.brokers.append({**{k: b[k] for k in ("id", "host", "port") if k in b},
                             "up": False, "controller": False})
    return look


# ---- rates ------------------------------------------------------------------------------------
def counter_rate(now: Mapping[Hashable, float] | None,
                 before: Mapping[Hashable, float] | None, elapsed: float) -> float | None:
    """Per-second increase of a counter over its series: each series' increase between the
    two looks, summed, for the series in both looks whose value did not go down (reset);
    None when no series is usable (or no time passed)."""
    if not now or not before or elapsed <= 0:
        return None
    increases = [now[k] - before[k] for k in now.keys() & before.keys() if now[k] >= before[k]]
    if not increases:
        return None
    return round(sum(increases) / elapsed, 3)


def gauge_change(now: Mapping[Hashable, float], before: Mapping[Hashable, float],
                 elapsed: float) -> float | None:
    """Per-second change of a gauge summed over its series (a group's lag per partition),
    over the series in both looks; None when none is (or no time passed)."""
    if elapsed <= 0:
        return None
    common = now.keys() & before.keys()
    if not common:
        return 0.0 if not now and not before else None
    return round(sum(now[k] - before[k] for k in common) / elapsed, 3)


# ---- two looks: one snapshot --------------------------------------------------------------
def snapshot(now: Look, before: Look | None, source: str, sort: str = "in") -> dict[str, Any]:
    """The JSON document (and what the table shows) from two looks."""
    elapsed = now.at - before.at if before is not None else 0.0
    topics = []
    for name, t in now.topics.items():
        if t.get("internal"):
            continue
        counters = now.counters.get(name, {})
        earlier = before.counters.get(name, {}) if before is not None else {}
        entry: dict[str, Any] = {"topic": name, "partitions": t.get("partitions", 0)}
        for counter in COUNTERS:
            entry[f"{counter}_per_s"] = counter_rate(counters.get(counter),
                                                     earlier.get(counter), elapsed)
        topics.append(entry)
    groups = []
    for name, g in now.groups.items():
        lags = now.lags.get(name, {})
        prev = before.lags.get(name) if before is not None and name in before.groups else None
        # a group whose coordinator did not answer this look: nothing of it is known
        unanswered = bool(g.get("unanswered"))
        change = None if prev is None or unanswered else gauge_change(lags, prev, elapsed)
        trend = None if change is None else ("growing" if change > 0 else
                                             "shrinking" if change < 0 else "steady")
        unknown = g.get("lag_unknown_partitions", 0)
        # a lag that leaves out partitions (their leader did not answer) is a lower bound,
        # flagged; with none known it is not known at all (it read 0)
        lag = None if unanswered or (unknown and not lags) else int(sum(lags.values()))
        group = {"group": name, "state": g.get("state"), "members": g.get("members"),
                 "lag": lag, "lag_unknown_partitions": unknown,
                 "lag_change_per_s": change, "trend": trend}
        if "error" in g:
            group["error"] = g["error"]
        groups.append(group)
    brokers = [dict(b) for b in now.brokers]
    for b in brokers:
        key = b.get("endpoint") or b.get("metrics")
        if key in now.cpu and before is not None and key in before.cpu:
            rate = counter_rate({key: now.cpu[key]}, {key: before.cpu[key]}, elapsed)
            b["cpu_percent"] = None if rate is None else round(rate * 100, 1)
    _sort(topics, groups, sort)
    doc: dict[str, Any] = {
        "time": datetime.now(UTC).isoformat(timespec="seconds"),
        "source": source,
        "interval_s": round(elapsed, 3) if before is not None else None,
        "brokers": brokers,
        "under_replicated": now.under_replicated_count,
        "offline": now.offline_count,
        "topics": topics,
        "groups": groups,
    }
    if now.error is not None:
        doc["error"] = now.error
    if source == "protocol":
        doc["cluster_id"] = now.cluster_id
        doc["controller_id"] = now.controller_id
        doc["under_replicated_partitions"] = now.under_replicated
        doc["offline_partitions"] = now.offline
    return doc


def _sort(topics: list[dict[str, Any]], groups: list[dict[str, Any]], sort: str) -> None:
    if sort == "name":
        topics.sort(key=lambda t: t["topic"])
        groups.sort(key=lambda g: g["group"])
        return
    key = "out_bytes_per_s" if sort == "out" else "in_msgs_per_s"
    if sort == "out" and all(t[key] is None for t in topics):
        key = "consumed_msgs_per_s"
    topics.sort(key=lambda t: (-(t[key] or 0), t["topic"]))
    groups.sort(key=lambda g: (-(g["lag"] or 0), g["group"]))
