"""`spark.readStream.format("kafkactl")`: micro-batches of per-partition offset ranges.

Offsets are Spark's Kafka connector's JSON, `{"topic": {"0": 42, "1": 17}}` (the next offset
to read per partition), kept by Spark in the query's checkpoint: a restarted query resumes
exactly where its last committed micro-batch ended. Partitions that appear later (new
topics matching subscribePattern, partitions added to a topic) are read from their log
start. `maxOffsetsPerTrigger` caps a micro-batch, shared between partitions in proportion
to what each has waiting; `minOffsetsPerTrigger` holds a micro-batch back until that many
offsets wait or `maxTriggerDelay` (15m) has passed since the last one (Spark's semantics:
the first trigger of a run is never held); Trigger.AvailableNow stops at the offsets current
when it starts.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from kafkactl.client.consumer import SimpleConsumer
from kafkactl.client.fetcher import EARLIEST, LATEST
from kafkactl.spark.options import ReadOptions, TopicPartition, parse_read_options
from kafkactl.spark.partition_reader import read_range
from kafkactl.spark.planner import (
    OffsetRange,
    end_of_log,
    lost_data,
    resolve_offsets,
    split_ranges,
    topic_partitions,
)

OffsetJson = dict[str, dict[str, int]]


def to_json(offsets: dict[TopicPartition, int]) -> OffsetJson:
    out: OffsetJson = {}
    for (t, p), off in sorted(offsets.items()):
        out.setdefault(t, {})[str(p)] = off
    return out


def from_json(doc: OffsetJson) -> dict[TopicPartition, int]:
    return {(t, int(p)): int(off) for t, parts in doc.items() for p, off in parts.items()}


def cap(start: dict[TopicPartition, int], latest: dict[TopicPartition, int],
        max_rows: int) -> dict[TopicPartition, int]:
    """End offsets reading at most `max_rows` offsets in all, shared in proportion to what
    each partition has waiting (the remainder goes to the first partitions in order)."""
    waiting = {tp: max(0, latest[tp] - start.get(tp, latest[tp])) for tp in latest}
    total = sum(waiting.values())
    if total <= max_rows:
        return dict(latest)
    share = {tp: n * max_rows // total for tp, n in waiting.items()}
    left = max_rows - sum(share.values())
    for tp in sorted(waiting):
        if left <= 0:
            break
        extra = min(left, waiting[tp] - share[tp])
        share[tp] += extra
        left -= extra
    return {tp: start.get(tp, latest[tp]) + share[tp] for tp in latest}


class StreamPartition(InputPartition):
    def __init__(self, rng: OffsetRange) -> None:
        super().__init__(rng)
        self.rng = rng


class KafkactlStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: dict[str, str]) -> None:
        self.ro: ReadOptions = parse_read_options(options, streaming=True)
        self._target: dict[TopicPartition, int] | None = None  # Trigger.AvailableNow
        self._last_trigger: float | None = None  # monotonic seconds (minOffsetsPerTrigger)

    def _client(self) -> SimpleConsumer:
        sc: SimpleConsumer = self.ro.consumer("kafkactl-spark-stream")
        return sc

    def _hold_back(self, begin: dict[TopicPartition, int],
                   latest: dict[TopicPartition, int]) -> bool:
        """minOffsetsPerTrigger: too few offsets wait and maxTriggerDelay has not passed
        since the last micro-batch (never under Trigger.AvailableNow: it must finish)."""
        least = self.ro.min_offsets_per_trigger
        if not least or self._target is not None:
            return False
        now = time.monotonic()
        waiting = sum(max(0, off - begin.get(tp, off)) for tp, off in latest.items())
        if (self._last_trigger is not None and waiting < least
                and (now - self._last_trigger) * 1000 < self.ro.max_trigger_delay_ms):
            return True
        self._last_trigger = now
        return False

    def _bounds(self, sc: SimpleConsumer
                ) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
        tps = topic_partitions(sc, self.ro)
        if not tps:
            return {}, {}
        first = {tp: v[0] for tp, v in sc.list_offsets({tp: EARLIEST for tp in tps}).items()}
        last = {tp: v[0] for tp, v in sc.list_offsets({tp: LATEST for tp in tps}).items()}
        return first, last

    def initialOffset(self) -> OffsetJson:
        sc = self._client()
        try:
            tps = topic_partitions(sc, self.ro)
            start, _ = resolve_offsets(sc, self.ro, tps, streaming=True)
            return to_json(start)
        finally:
            sc.close()

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.ro.max_offsets_per_trigger:
            return ReadMaxRows(self.ro.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        sc = self._client()
        try:
            self._target = self._bounds(sc)[1]
        finally:
            sc.close()

    def latestOffset(self, start: OffsetJson, limit: ReadLimit) -> OffsetJson:
        begin = from_json(start)
        sc = self._client()
        try:
            first, latest = self._bounds(sc)
            for tp in latest:
                begin.setdefault(tp, first[tp])  # a partition that appeared since: log start
                if latest[tp] < begin[tp]:
                    lost_data(self.ro, f"topic {tp[0]} partition {tp[1]}: the query's offset "
                              f"{begin[tp]} is past the "
                              f"{end_of_log(sc, tp, begin[tp], latest[tp])}")
        finally:
            sc.close()
        if self._hold_back(begin, latest):
            return start
        if self._target is not None:  # AvailableNow: never past the offsets it started at
            latest = {tp: min(off, self._target.get(tp, first[tp]))
                      for tp, off in latest.items()}
        if isinstance(limit, ReadMaxRows):
            latest = cap(begin, latest, limit.max_rows)
        end = {tp: max(latest[tp], begin[tp]) for tp in latest}  # never backwards
        for tp, off in begin.items():  # partitions gone from the metadata keep their offset
            end.setdefault(tp, off)
        return to_json(end)

    def partitions(self, start: OffsetJson, end: OffsetJson) -> Sequence[InputPartition]:
        begin, stop = from_json(start), from_json(end)
        sc = self._client()
        ranges_from: dict[TopicPartition, int] = {}
        try:
            first, latest = self._bounds(sc)
            for tp, e in stop.items():
                s = begin.get(tp, first.get(tp, 0))
                if tp in first and s < first[tp]:
                    lost_data(self.ro, f"topic {tp[0]} partition {tp[1]}: offset {s} is below "
                                       f"the log start offset {first[tp]}")
                    s = first[tp]
                if tp in latest and e > latest[tp]:
                    lost_data(self.ro, f"topic {tp[0]} partition {tp[1]}: offset {e} is past "
                                       f"the {end_of_log(sc, tp, e, latest[tp])}")
                    e = latest[tp]
                if tp in first and e > s:
                    ranges_from[tp] = s
                    stop[tp] = e
        finally:
            sc.close()
        return [StreamPartition(r) for r in split_ranges(
            ranges_from, {tp: stop[tp] for tp in ranges_from},
            self.ro.max_records_per_partition, self.ro.min_partitions)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        if not isinstance(partition, StreamPartition):
            return iter(())
        return read_range(self.ro, partition.rng)

    def commit(self, end: OffsetJson) -> None:
        return None
