"""Executor side of a read: fetch one OffsetRange from the partition leader, as Arrow batches.

A range is complete only when every offset in [start, end) has been fetched: a broker that
dies, a log that ends early or a leader that moved past the range's start makes the task
fail (Spark retries it), never end short. The one exception is failOnDataLoss=false, which
skips deleted records (and a deleted topic's) with a warning, as Spark's connector does.
Damaged data (a batch that fails its CRC check) fails the task whatever failOnDataLoss
says, as Kafka's consumer raises CorruptRecordException: DamagedDataError.
"""

from __future__ import annotations

import array
import itertools
import logging
import time
from collections.abc import Iterator
from typing import Any

from kafkactl.client.errors import (
    STALE_LEADER,
    ClientError,
    KafkaConnectionError,
    KafkaTimeoutError,
    NoBrokersAvailable,
)
from kafkactl.client.fetcher import (
    EARLIEST,
    LATEST,
    CorruptFetchError,
    PartitionFetch,
    parse_fetch_response,
    uniform_columns,
)
from kafkactl.protocol.errors import ErrorCode, error_name
from kafkactl.record.batch import header_key_text
from kafkactl.record.errors import RecordError
from kafkactl.spark.options import DATA_LOSS_HINT, DataLossError, ReadOptions
from kafkactl.spark.planner import OffsetRange

log = logging.getLogger("kafkactl.spark")

OFFSET_OUT_OF_RANGE = 1
PARTITION_FETCH_BYTES = 8 * 1024 * 1024
SHORT_LOG_RETRIES = 5


class FetchError(ClientError):
    """A Fetch for a range failed in a way a retry of the task may fix (or not): the
    leader could not be reached for kafkaConsumer.pollTimeoutMs."""


class FetchRefusedError(FetchError):
    """The leader answers the range's Fetch with an error code (named in the message, as
    ErrorCode names it) that no retry fixes, or for kafkaConsumer.pollTimeoutMs: the
    broker is reachable, it refuses."""


class DamagedDataError(ClientError):
    """The range's data is damaged: a batch that fails its CRC check, a record that does
    not decode, a batch header that cannot be framed, or the leader's CORRUPT_MESSAGE.
    The message names the topic, partition and offset. Not data loss: failOnDataLoss=false
    does not skip it (Kafka's consumer raises CorruptRecordException)."""


class TopicDeletedError(DataLossError):
    """The topic was deleted while its range was read (failOnDataLoss=true)."""


CHECK_CRCS_HINT = "kafka.check.crcs=false reads it unchecked"


class _TopicGone(Exception):
    """The range's topic (or partition) is not in the cluster's metadata any more (an
    internal signal of RangeReader: it ends the range or raises TopicDeletedError)."""


def arrow_schema(include_headers: bool = True) -> Any:
    import pyarrow as pa

    fields = [
        ("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()),
        ("partition", pa.int32()), ("offset", pa.int64()),
        ("timestamp", pa.timestamp("us", tz="UTC")), ("timestampType", pa.int32()),
        ("headers", pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))),
    ]
    return pa.schema(fields if include_headers else fields[:-1])


def binary_column(views: list[Any]) -> Any:
    """bytes-like values (None = null) -> an Arrow binary array, joined in C."""
    import pyarrow as pa

    n = len(views)
    mask = None
    if None in views:
        if views.count(None) == n:
            return pa.nulls(n, pa.binary())
        mask = pa.array([v is not None for v in views])
        views = [b"" if v is None else v for v in views]
    data = b"".join(views)
    if len(data) >= 2**31:
        return pa.array([bytes(v) for v in views], pa.large_binary()).cast(pa.binary())
    offsets = array.array("i", [0])
    offsets.extend(itertools.accumulate(map(len, views)))
    arr = pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets),
                                                 pa.py_buffer(data)])
    if mask is not None:
        import pyarrow.compute as pc

        arr = pc.if_else(mask, arr, pa.scalar(None, pa.binary()))
    return arr


def to_arrow(topic: str, partition: int, offsets: list[int], timestamps: list[int],
             tstypes: list[int], keys: list[Any], values: list[Any],
             headers: list[Any] | None) -> Any:
    """The records as one Arrow batch; without the headers column when `headers` is None
    (includeHeaders=false, Spark's default)."""
    import pyarrow as pa

    n = len(offsets)
    schema = arrow_schema(headers is not None)
    ts = pa.array(timestamps, pa.int64()).cast(pa.timestamp("ms")).cast(
        pa.timestamp("us")).cast(pa.timestamp("us", tz="UTC"))
    columns = [
        binary_column(keys), binary_column(values),
        pa.array([topic] * n, pa.string()) if n else pa.array([], pa.string()),
        pa.array([partition] * n, pa.int32()), pa.array(offsets, pa.int64()), ts,
        pa.array(tstypes, pa.int32())]
    if headers is not None:
        hdr_type = schema.field("headers").type
        if any(headers):
            # a key column is a string: a header key that is not UTF-8 is read as Spark
            # reads it (Java's lenient decode, U+FFFD), not refused by Arrow
            columns.append(pa.array([[(k if k.isascii() else header_key_text(k),
                                       None if v is None else bytes(v)) for k, v in h]
                                     for h in headers], hdr_type))
        else:
            columns.append(pa.array([[]] * n, hdr_type))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def records_of(pf: PartitionFetch, start: int, end: int,
               check_crcs: bool = True) -> tuple[list[Any], ...]:
    """Column lists of the records with start <= offset < end (CRC checked per batch unless
    kafka.check.crcs=false)."""
    offsets: list[int] = []
    timestamps: list[int] = []
    tstypes: list[int] = []
    keys: list[Any] = []
    values: list[Any] = []
    headers: list[Any] = []
    try:
        _take(pf, start, end, check_crcs, offsets, timestamps, tstypes, keys, values,
              headers)
    except CorruptFetchError as e:  # a header that cannot be framed
        raise DamagedDataError(f"topic {pf.topic} partition {pf.partition}: damaged data "
                               f"at offset {e.offset}: {e}") from None
    except RecordError as e:  # a record that does not decode
        at = max(offsets[-1] + 1 if offsets else start, start)
        raise DamagedDataError(f"topic {pf.topic} partition {pf.partition}: damaged record "
                               f"at offset {at}: {e}") from None
    return offsets, timestamps, tstypes, keys, values, headers


def _take(pf: PartitionFetch, start: int, end: int, check_crcs: bool,
          offsets: list[int], timestamps: list[int], tstypes: list[int], keys: list[Any],
          values: list[Any], headers: list[Any]) -> None:
    """records_of's loop: appends the columns of the records in [start, end)."""
    for b in pf.batches():
        if b.base_offset >= end:
            break
        if check_crcs and not b.is_valid():
            first = max(b.base_offset, start)
            raise DamagedDataError(
                f"topic {pf.topic} partition {pf.partition}: damaged batch at offset "
                f"{b.base_offset} (CRC mismatch): nothing from offset {first} on can be "
                f"read; {CHECK_CRCS_HINT}")
        tstype = int(b.timestamp_type)
        fast = uniform_columns(b, start)
        if fast is not None:  # null keys, no headers, contiguous offsets, one timestamp
            first, ts, vals = fast
            vals = vals[:max(0, end - first)]
            k = len(vals)
            offsets.extend(range(first, first + k))
            timestamps.extend([ts] * k)
            tstypes.extend([tstype] * k)
            keys.extend([None] * k)
            values.extend(vals)
            headers.extend([()] * k)
            continue
        for r in b:
            o = r.offset
            if o < start:
                continue
            if o >= end:
                break
            offsets.append(o)
            timestamps.append(r.timestamp)
            tstypes.append(tstype)
            keys.append(r.key)
            values.append(r.value)
            headers.append(r.headers)


class RangeReader:
    """Fetches [start, end) of one partition, one Fetch ahead of the caller."""

    def __init__(self, ro: ReadOptions, rng: OffsetRange,
                 fetch_bytes: int = PARTITION_FETCH_BYTES) -> None:
        self.ro = ro
        self.rng = rng
        self.tp = (rng.topic, rng.partition)
        sizes = {k: fetch_bytes for k, prop in (("max_partition_bytes",
                                                 "max.partition.fetch.bytes"),
                                                ("max_bytes", "fetch.max.bytes"))
                 if prop not in ro.consumer_properties}
        self.sc = ro.consumer("kafkactl-spark-executor", **sizes)
        self.sc.client.request_timeout = min(self.sc.client.request_timeout,
                                             ro.poll_timeout_ms / 1000.0)
        self._pending: tuple[Any, Any, int] | None = None

    def _send(self, offset: int) -> None:
        node = self.sc._leaders([self.tp])
        leader = next(iter(node))
        if leader < 0:
            if self._topic_gone():
                raise _TopicGone()
            raise KafkaConnectionError(f"no leader for {self.tp[0]}-{self.tp[1]}")
        conn, req = self.sc.send_fetch(leader, {self.tp: offset})
        self._pending = (conn, req, offset)

    def _receive(self, offset: int) -> PartitionFetch:
        if self._pending is None or self._pending[2] != offset:
            self._pending = None
            self._send(offset)
        assert self._pending is not None
        conn, req, _ = self._pending
        self._pending = None
        resp = conn.wait(req, self.sc.client.request_timeout + 0.5)
        for pf in parse_fetch_response(resp, {self.tp: offset}):
            if (pf.topic, pf.partition) == self.tp:
                return pf
        raise FetchError(f"the Fetch response has no {self.tp[0]}-{self.tp[1]}")

    def _bounds(self) -> tuple[int, int]:
        """(log start offset, log end offset) of the partition now."""
        first = self.sc.list_offsets({self.tp: EARLIEST})[self.tp][0]
        return first, self.sc.list_offsets({self.tp: LATEST})[self.tp][0]

    def _topic_gone(self) -> bool:
        """Whether the range's topic-partition is absent from the metadata, asked again
        now (a broker answers UNKNOWN_TOPIC_OR_PARTITION for a partition it does not
        lead or host yet too: only the metadata says the topic is gone)."""
        t, p = self.tp
        tm = self.sc.client.refresh_metadata([t]).topics.get(t)
        return (tm is None or tm.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                or (not tm.error_code and p not in tm.partitions))

    def _missing(self, pos: int, message: str,
                 error: type[DataLossError] = DataLossError) -> None:
        t, p = self.tp
        text = (f"topic {t} partition {p}: offsets {pos}..{self.rng.end - 1} of the planned "
                f"range {self.rng.start}..{self.rng.end - 1} cannot be read: {message}")
        if self.ro.fail_on_data_loss:
            raise error(f"{text}; {DATA_LOSS_HINT} them")
        log.warning("%s; skipped (failOnDataLoss=false)", text)

    def _deleted(self, pos: int) -> None:
        """The topic was deleted: data loss (Spark's connector: failOnDataLoss covers a
        deleted topic), the range ends here (what was read is kept) or the task fails."""
        self._missing(pos, f"the topic {self.tp[0]} was deleted", TopicDeletedError)

    def _refused(self, pos: int, code: int, detail: str = "") -> FetchRefusedError:
        t, p = self.tp
        return FetchRefusedError(
            f"reading {t}-{p} at offset {pos} (range {self.rng.start}..{self.rng.end - 1}): "
            f"the broker answers {error_name(code)} (error code {code}){detail}")

    # C901: the read loop's exits (end, data loss, a deleted topic, damage, broker error
    # codes, poll timeout, no progress) together
    def batches(self) -> Iterator[Any]:  # noqa: C901
        t, p = self.tp
        pos, end = self.rng.start, self.rng.end
        timeout = self.ro.poll_timeout_ms / 1000.0
        last_progress = time.monotonic()
        empty = 0
        try:
            while pos < end:
                try:
                    pf = self._receive(pos)
                except _TopicGone:
                    self._deleted(pos)
                    return
                except (KafkaConnectionError, KafkaTimeoutError, NoBrokersAvailable) as e:
                    self._pending = None
                    self.sc.client.cluster.invalidate(t)
                    for c in self.sc.client.connections():
                        c.close()
                    if time.monotonic() - last_progress > timeout:
                        raise FetchError(f"reading {t}-{p} at offset {pos} (range "
                                         f"{self.rng.start}..{end - 1}): {e}") from e
                    time.sleep(self.sc.client.retry_backoff * 5)
                    continue
                code = pf.error_code
                if code == OFFSET_OUT_OF_RANGE:
                    first, last = self._bounds()
                    if pos < first:
                        self._missing(pos, f"the log now starts at offset {first}")
                        pos = first
                        continue
                    if pos >= last:
                        self._missing(pos, f"the log now ends at offset {last}")
                        return
                    if time.monotonic() - last_progress > timeout:  # in range after all:
                        raise FetchError(f"reading {t}-{p} at offset {pos}: the leader "
                                         f"answers OFFSET_OUT_OF_RANGE for {timeout:.0f} s")
                    self.sc.client.cluster.invalidate(t)  # a stale leader? ask again
                    time.sleep(self.sc.client.retry_backoff)
                    continue
                if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and self._topic_gone():
                    self._deleted(pos)
                    return
                if code in STALE_LEADER:
                    self.sc.client.cluster.invalidate(t)
                    if time.monotonic() - last_progress > timeout:
                        raise self._refused(pos, code, f" for {timeout:.0f} s")
                    time.sleep(self.sc.client.retry_backoff)
                    continue
                if code == ErrorCode.CORRUPT_MESSAGE:  # the leader's log is damaged there
                    raise DamagedDataError(f"topic {t} partition {p}: damaged data at offset "
                                           f"{pos}: the broker answers CORRUPT_MESSAGE (its "
                                           "log is damaged at that offset)")
                if code:
                    raise self._refused(pos, code)
                try:
                    nxt = pf.next_offset()
                except CorruptFetchError as e:  # a header that cannot be framed, at pos
                    raise DamagedDataError(f"topic {t} partition {p}: damaged data at offset "
                                           f"{e.offset}: {e}") from None
                if nxt <= pos:
                    empty += 1
                    if 0 <= pf.high_watermark <= pos:  # the log ends before the range does:
                        if empty >= SHORT_LOG_RETRIES:  # after so many answers, not a time
                            self._missing(pos, f"the log ends at offset {pf.high_watermark} "
                                               "(truncated since the read was planned?)")
                            return
                        continue  # (each answer waited fetch.max.wait.ms for records)
                    if time.monotonic() - last_progress > timeout:
                        raise FetchError(f"reading {t}-{p}: no records at offset {pos} for "
                                         f"{timeout:.0f} s (high watermark "
                                         f"{pf.high_watermark})")
                    continue
                empty = 0
                if nxt < end:  # the next Fetch travels while this chunk converts
                    try:
                        self._send(nxt)
                    except (KafkaConnectionError, KafkaTimeoutError, NoBrokersAvailable,
                            _TopicGone):
                        self._pending = None  # _receive sends it again (and retries)
                offsets, stamps, types, keys, values, headers = records_of(
                    pf, pos, end, self.ro.check_crcs)
                pos = nxt
                last_progress = time.monotonic()
                if offsets:
                    yield to_arrow(t, p, offsets, stamps, types, keys, values,
                                   headers if self.ro.include_headers else None)
        finally:
            self.sc.close()


def read_range(ro: ReadOptions, rng: OffsetRange) -> Iterator[Any]:
    """Arrow record batches of the range (the data source's read())."""
    yield from RangeReader(ro, rng).batches()
