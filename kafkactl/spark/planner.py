"""Driver side of a read: which topic-partitions, which offset range of each, how many tasks.

Resolves the subscription through metadata and every symbolic offset (earliest, latest, a
timestamp) through ListOffsets once, so that each Spark task gets a fixed, replayable range
[start, end): a retried task reads exactly the same records.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from kafkactl.client.consumer import SimpleConsumer
from kafkactl.client.fetcher import EARLIEST, LATEST
from kafkactl.spark.options import DataLossError, OptionError, ReadOptions, TopicPartition

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


def topic_partitions(sc: SimpleConsumer, ro: ReadOptions) -> list[TopicPartition]:
    """The existing partitions the options name, sorted; metadata from the cluster."""
    if ro.pattern is not None:
        rx = re.compile(ro.pattern)
        cluster = sc.client.refresh_metadata(None)
        return sorted((name, p) for name, tm in cluster.topics.items()
                      if not tm.is_internal and rx.fullmatch(name) for p in tm.partitions)
    topics = list(ro.subscribe) or sorted({t for t, _ in ro.assign})
    cluster = sc.client.refresh_metadata(topics)
    out: list[TopicPartition] = []
    for t in topics:
        tm = cluster.topics.get(t)
        if tm is None or tm.error_code or not tm.partitions:
            if ro.subscribe:
                log.warning("topic %s does not exist: nothing to read from it", t)
            continue
        out.extend((t, p) for p in tm.partitions)
    if ro.assign:
        wanted = set(ro.assign)
        for t, p in sorted(wanted - set(out)):
            lost_data(ro, f"topic {t} partition {p} named in assign does not exist")
        out = [tp for tp in out if tp in wanted]
    return sorted(out)


def in_subscription(ro: ReadOptions, tp: TopicPartition) -> bool:
    if ro.assign:
        return tp in ro.assign
    if ro.subscribe:
        return tp[0] in ro.subscribe
    return bool(ro.pattern is not None and re.fullmatch(ro.pattern, tp[0]))


def lost_data(ro: ReadOptions, message: str) -> None:
    if ro.fail_on_data_loss:
        raise DataLossError(message + "; set failOnDataLoss=false to skip what is missing")
    log.warning("%s; skipped (failOnDataLoss=false)", message)


def resolve_offsets(sc: SimpleConsumer, ro: ReadOptions, tps: list[TopicPartition],
                    *, streaming: bool = False
                    ) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
    """Concrete (start, end) offsets per partition, checked against the log's bounds."""
    named = set(ro.starting) if isinstance(ro.starting, dict) else set()
    if isinstance(ro.ending, dict):
        named |= set(ro.ending)
    existing = set(tps)
    for tp in sorted(named - existing):
        if not in_subscription(ro, tp):
            raise OptionError(f"offsets name {tp[0]}-{tp[1]}, which is not in the subscription")
        lost_data(ro, f"topic {tp[0]} partition {tp[1]} named in the offsets does not exist")
    if not tps:
        return {}, {}
    earliest = {tp: v[0] for tp, v in sc.list_offsets({tp: EARLIEST for tp in tps}).items()}
    latest = {tp: v[0] for tp, v in sc.list_offsets({tp: LATEST for tp in tps}).items()}

    def by_time(ts: int) -> dict[TopicPartition, int]:
        found = sc.list_offsets({tp: ts for tp in tps})
        return {tp: (latest[tp] if found[tp][0] < 0 else found[tp][0]) for tp in tps}

    def pick(spec: int | dict[TopicPartition, int], ts: int | None,
             default: int) -> dict[TopicPartition, int]:
        if ts is not None:
            return by_time(ts)
        out = {}
        for tp in tps:
            v = spec.get(tp, default) if isinstance(spec, dict) else spec
            out[tp] = earliest[tp] if v == EARLIEST else latest[tp] if v == LATEST else v
        return out

    start = pick(ro.starting, ro.starting_timestamp, LATEST if streaming else EARLIEST)
    end = pick(ro.ending, ro.ending_timestamp, LATEST) if not streaming else dict(latest)
    for tp in tps:
        t, p = tp
        if start[tp] < earliest[tp]:
            lost_data(ro, f"topic {t} partition {p}: starting offset {start[tp]} is below the log "
                      f"start offset {earliest[tp]} (records {start[tp]}..{earliest[tp] - 1} "
                      "are gone)")
            start[tp] = earliest[tp]
        if start[tp] > latest[tp]:
            lost_data(ro, f"topic {t} partition {p}: starting offset {start[tp]} is past the log "
                      f"end offset {latest[tp]}")
            start[tp] = latest[tp]
        if end[tp] > latest[tp]:
            lost_data(ro, f"topic {t} partition {p}: ending offset {end[tp]} is past the log end "
                      f"offset {latest[tp]}")
            end[tp] = latest[tp]
        if end[tp] < start[tp]:
            raise OptionError(f"topic {t} partition {p}: ending offset {end[tp]} is before the "
                              f"starting offset {start[tp]}")
    return start, end


def split_ranges(start: dict[TopicPartition, int], end: dict[TopicPartition, int],
                 max_records: int | None) -> list[OffsetRange]:
    """One range per partition, cut into pieces of at most `max_records` offsets."""
    out: list[OffsetRange] = []
    for tp in sorted(start):
        s, e = start[tp], end[tp]
        if e <= s:
            continue
        step = max_records or (e - s)
        out.extend(OffsetRange(tp[0], tp[1], a, min(a + step, e)) for a in range(s, e, step))
    return out


def plan(ro: ReadOptions) -> tuple[list[OffsetRange], dict[TopicPartition, int],
                                   dict[TopicPartition, int]]:
    """(ranges, start offsets, end offsets) for a batch read."""
    sc = SimpleConsumer(ro.bootstrap, client_id="kafkactl-spark-driver",
                        security=ro.client_security())
    try:
        tps = topic_partitions(sc, ro)
        start, end = resolve_offsets(sc, ro, tps)
        return split_ranges(start, end, ro.max_records_per_partition), start, end
    finally:
        sc.close()
