"""Driver side of a read: which topic-partitions, which offset range of each, how many tasks.

Resolves the subscription through metadata and every symbolic offset (earliest, latest, a
timestamp) through ListOffsets once, so that each Spark task gets a fixed, replayable range
[start, end): a retried task reads exactly the same records.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kafkactl.client.consumer import SimpleConsumer
from kafkactl.client.fetcher import EARLIEST, LATEST
from kafkactl.protocol.errors import ErrorCode
from kafkactl.spark.options import (
    DATA_LOSS_HINT,
    DataLossError,
    OptionError,
    ReadOptions,
    TopicPartition,
    UnauthorizedTopicError,
    UnknownTopicError,
)

log = logging.getLogger("kafkactl.spark")


@dataclass(frozen=True, slots=True)
class OffsetRange:
    """Records [start, end) of one partition: one Spark input partition."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


def topic_partitions(sc: SimpleConsumer, ro: ReadOptions, *,
                     missing_ok: bool = False) -> list[TopicPartition]:
    """The existing partitions the options name, sorted; metadata from the cluster.
    A subscribed topic that does not exist raises UnknownTopicError (skipped with a
    warning when `missing_ok`); one the credentials may not Describe raises
    TOPIC_AUTHORIZATION_FAILED (even when `missing_ok`: it may well exist); a pattern
    that matches nothing gives no partitions (the broker leaves out the topics the
    credentials may not Describe)."""
    if ro.pattern is not None:
        rx = re.compile(ro.pattern)
        cluster = sc.client.refresh_metadata(None)
        return sorted((name, p) for name, tm in cluster.topics.items()
                      if not tm.is_internal and rx.fullmatch(name) for p in tm.partitions)
    topics = list(ro.subscribe) or sorted({t for t, _ in ro.assign})
    cluster = sc.client.refresh_metadata(topics)
    refuse_unauthorized(cluster.topics, topics)
    out: list[TopicPartition] = []
    missing = []
    for t in topics:
        tm = cluster.topics.get(t)
        if tm is None or tm.error_code or not tm.partitions:
            missing.append(t)
            continue
        out.extend((t, p) for p in tm.partitions)
    if missing and ro.subscribe:
        if not missing_ok:
            raise UnknownTopicError(missing)
        for t in missing:
            log.warning("topic %s does not exist: nothing to read from it", t)
    if ro.assign:
        wanted = set(ro.assign)
        for t, p in sorted(wanted - set(out)):
            lost_data(ro, f"topic {t} partition {p} named in assign does not exist")
        out = [tp for tp in out if tp in wanted]
    return sorted(out)


def refuse_unauthorized(metadata: Mapping[str, Any], topics: Iterable[str]) -> None:
    """Raise UnauthorizedTopicError naming every one of `topics` whose metadata (topic
    name -> TopicMetadata) says TOPIC_AUTHORIZATION_FAILED."""
    refused = [t for t in topics if getattr(metadata.get(t), "error_code", 0)
               == ErrorCode.TOPIC_AUTHORIZATION_FAILED]
    if refused:
        raise UnauthorizedTopicError(refused)


def in_subscription(ro: ReadOptions, tp: TopicPartition) -> bool:
    if ro.assign:
        return tp in ro.assign
    if ro.subscribe:
        return tp[0] in ro.subscribe
    return bool(ro.pattern is not None and re.fullmatch(ro.pattern, tp[0]))


def lost_data(ro: ReadOptions, message: str) -> None:
    if ro.fail_on_data_loss:
        raise DataLossError(f"{message}; {DATA_LOSS_HINT} what is missing")
    log.warning("%s; skipped (failOnDataLoss=false)", message)


def _by_timestamp(name: str, spec: dict[TopicPartition, int] | None, ts: int | None,
                  tps: list[TopicPartition]) -> dict[TopicPartition, int] | None:
    """The timestamp of each partition (startingTimestamp wins over the per-partition JSON,
    as in Spark), or None when neither option is set."""
    if ts is not None:
        return {tp: ts for tp in tps}
    if spec is None:
        return None
    left = sorted(set(tps) - set(spec))
    if left:
        raise OptionError(f"option {name} gives no timestamp for "
                          f"{', '.join(f'{t}-{p}' for t, p in left)}: it must name every "
                          "partition of the subscription (or use "
                          f"{name.replace('OffsetsByTimestamp', 'Timestamp')})")
    return {tp: spec[tp] for tp in tps}


# C901: one bound check per case, as Spark's connector makes them
def resolve_offsets(sc: SimpleConsumer, ro: ReadOptions,  # noqa: C901
                    tps: list[TopicPartition], *, streaming: bool = False
                    ) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
    """Concrete (start, end) offsets per partition, checked against the log's bounds."""
    named: set[TopicPartition] = set()
    for spec in (ro.starting, ro.ending, ro.starting_by_timestamp, ro.ending_by_timestamp):
        if isinstance(spec, dict):
            named |= set(spec)
    existing = set(tps)
    for tp in sorted(named - existing):
        if not in_subscription(ro, tp):
            raise OptionError(f"offsets name {tp[0]}-{tp[1]}, which is not in the subscription")
        lost_data(ro, f"topic {tp[0]} partition {tp[1]} named in the offsets does not exist")
    if not tps:
        return {}, {}
    earliest = {tp: v[0] for tp, v in sc.list_offsets({tp: EARLIEST for tp in tps}).items()}
    latest = {tp: v[0] for tp, v in sc.list_offsets({tp: LATEST for tp in tps}).items()}

    def by_time(times: dict[TopicPartition, int], *, starting: bool) -> dict[TopicPartition, int]:
        found = sc.list_offsets(times)
        out = {}
        for tp in tps:
            off = found[tp][0]
            if off < 0:  # no record at or after the timestamp
                if starting and ro.starting_timestamp_strategy == "error":
                    raise OptionError(
                        f"topic {tp[0]} partition {tp[1]} has no record at or after the "
                        f"starting timestamp {times[tp]}; set "
                        "startingOffsetsByTimestampStrategy=latest to start at its end instead")
                off = latest[tp]
            out[tp] = off
        return out

    def pick(spec: int | dict[TopicPartition, int], default: int) -> dict[TopicPartition, int]:
        out = {}
        for tp in tps:
            v = spec.get(tp, default) if isinstance(spec, dict) else spec
            out[tp] = earliest[tp] if v == EARLIEST else latest[tp] if v == LATEST else v
        return out

    start_times = _by_timestamp("startingOffsetsByTimestamp", ro.starting_by_timestamp,
                                ro.starting_timestamp, tps)
    start = (by_time(start_times, starting=True) if start_times is not None
             else pick(ro.starting, LATEST if streaming else EARLIEST))
    if streaming:
        end = dict(latest)
    else:
        end_times = _by_timestamp("endingOffsetsByTimestamp", ro.ending_by_timestamp,
                                  ro.ending_timestamp, tps)
        end = (by_time(end_times, starting=False) if end_times is not None
               else pick(ro.ending, LATEST))
    for tp in tps:
        t, p = tp
        asked = start[tp]
        if asked <= end[tp] < earliest[tp]:
            # the whole range was deleted (or is empty): with failOnDataLoss=false nothing of
            # it is left to read (zero rows, as Spark's connector returns), not an error in
            # the options (the start moved up past the end)
            if asked < end[tp]:
                lost_data(ro, f"topic {t} partition {p}: offsets {asked}..{end[tp] - 1} are "
                          f"all below the log start offset {earliest[tp]} (the whole range "
                          "is gone)")
            start[tp] = end[tp] = earliest[tp]
            continue
        if start[tp] < earliest[tp]:
            lost_data(ro, f"topic {t} partition {p}: starting offset {start[tp]} is below the log "
                      f"start offset {earliest[tp]} (records {start[tp]}..{earliest[tp] - 1} "
                      "are gone)")
            start[tp] = earliest[tp]
        if start[tp] > latest[tp]:
            lost_data(ro, f"topic {t} partition {p}: starting offset {start[tp]} is past the "
                      f"{end_of_log(sc, tp, start[tp], latest[tp])}")
            start[tp] = latest[tp]
        if end[tp] > latest[tp]:
            lost_data(ro, f"topic {t} partition {p}: ending offset {end[tp]} is past the "
                      f"{end_of_log(sc, tp, end[tp], latest[tp])}")
            end[tp] = latest[tp]
        if end[tp] < start[tp]:
            raise OptionError(f"topic {t} partition {p}: ending offset {end[tp]} is before the "
                              f"starting offset {start[tp]}")
    return start, end


def end_of_log(sc: SimpleConsumer, tp: TopicPartition, offset: int, latest: int) -> str:
    """What `latest` (ListOffsets LATEST) is, for an error about `offset` past it: the log
    end offset (the high watermark) reading read_uncommitted; reading read_committed the
    last stable offset, which an open transaction holds below the high watermark (asked
    for here, on this error's path only). The batch planner's and the streaming reader's
    (kafkactl.spark.stream) words for the bound."""
    if sc.isolation_level != 1:
        return f"log end offset {latest}"
    level, sc.isolation_level = sc.isolation_level, 0  # the high watermark
    try:
        high = sc.list_offsets({tp: LATEST})[tp][0]
    finally:
        sc.isolation_level = level
    if latest < high and offset <= high:
        return (f"last stable offset {latest} (a transaction is open on the partition: "
                "read_committed reads stop before its first record until it commits or "
                f"aborts; the log end offset is {high})")
    if latest < high:
        return (f"log end offset {high} (read_committed reads stop earlier, at the last "
                f"stable offset {latest}: a transaction is open on the partition)")
    return f"log end offset {latest}"


def split_ranges(start: dict[TopicPartition, int], end: dict[TopicPartition, int],
                 max_records: int | None, min_partitions: int | None = None
                 ) -> list[OffsetRange]:
    """One range per partition, cut into pieces of at most `max_records` offsets; then, when
    that makes fewer than `min_partitions` ranges, the ranges are cut further in proportion
    to their sizes (Spark's KafkaOffsetRangeCalculator: a range of a fraction f of all the
    offsets gets max(1, round(f * min_partitions)) pieces of near-equal size)."""
    out: list[OffsetRange] = []
    for tp in sorted(start):
        s, e = start[tp], end[tp]
        if e <= s:
            continue
        step = max_records or (e - s)
        out.extend(OffsetRange(tp[0], tp[1], a, min(a + step, e)) for a in range(s, e, step))
    if not min_partitions or len(out) >= min_partitions:
        return out
    total = sum(r.size for r in out)
    pieces: list[OffsetRange] = []
    for r in out:
        n = min(r.size, max(1, int(r.size / total * min_partitions + 0.5)))  # Scala's round
        a, left = r.start, r.size
        for i in range(n):
            size = left // (n - i)  # the last pieces take the remainder
            pieces.append(OffsetRange(r.topic, r.partition, a, a + size))
            a, left = a + size, left - size
    return pieces


def plan(ro: ReadOptions) -> tuple[list[OffsetRange], dict[TopicPartition, int],
                                   dict[TopicPartition, int]]:
    """(ranges, start offsets, end offsets) for a batch read."""
    sc = ro.consumer("kafkactl-spark-driver")
    try:
        tps = topic_partitions(sc, ro)
        start, end = resolve_offsets(sc, ro, tps)
        return (split_ranges(start, end, ro.max_records_per_partition, ro.min_partitions),
                start, end)
    finally:
        sc.close()
