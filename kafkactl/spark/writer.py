"""`df.write.format("kafkactl")` and `writeStream`: each Spark task produces its rows with
kafkactl's Producer.

Columns, as Spark's Kafka sink takes them: `value` (binary or string, required), `key`
(optional), `topic` (optional when the `topic` option is set; the option, when set,
overrides the column, as in Spark), `partition` (optional int; else the key's partition),
`headers` (optional array<struct<key string, value binary>>), `timestamp` (optional timestamp,
or double: seconds since the epoch; the record's CreateTime, null for the producer's
current time: Spark 4's Kafka sink, SPARK-50160). A column of another type is refused on
the driver, before any task runs, as Spark refuses it. Other columns are ignored. A
task reports success only after every record it sent is acknowledged (acks=all by default);
like Spark's Kafka sink the write is at-least-once (a retried task sends its rows again).
Only mode("append") writes: Spark refuses the ErrorIfExists (default) and Ignore modes for
every Python data source, and a topic cannot be overwritten.

With option("transactional", "true") the write is all-or-nothing for read_committed
consumers instead, and a retried task's rows land once: each task attempt writes in a Kafka
transaction the driver commits when Spark commits the job (txn_write.py).
"""

from __future__ import annotations

import contextlib
import hashlib
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from pyspark.sql.datasource import DataSourceStreamWriter, DataSourceWriter, WriterCommitMessage
from pyspark.sql.types import (
    BinaryType,
    DataType,
    DoubleType,
    IntegerType,
    StringType,
    StructType,
    TimestampType,
)

from kafkactl.client.producer import Producer, parse_acks, properties_to_kwargs
from kafkactl.client.security import SECURITY_KEYS
from kafkactl.spark.options import (
    WRITE_OPTIONS,
    OptionError,
    canonical_options,
    parse_bool,
    security_from,
)
from kafkactl.spark.txn_write import (
    DEFAULT_TIMEOUT_MS,
    PreparedWrite,
    TxnTarget,
    abort_all,
    attempt_transactional_id,
    commit_all,
    fence_leftovers,
)


@dataclass
class WriteResult(WriterCommitMessage):
    records: int


# the one type of the headers column (Spark's KafkaRecordToRowConverter.headersType), as
# DataType.simpleString() spells it (nullability aside, as Spark's DataTypeUtils.sameType)
HEADERS_TYPE = "array<struct<key:string,value:binary>>"
# a Kafka record's timestamp is an int64 of milliseconds, and never negative
MAX_TIMESTAMP_MS = 2**63 - 1
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class RecordError(ValueError):
    """A row cannot be made a Kafka record (a null header key, a negative timestamp)."""


def _check_schema(schema: StructType, default_topic: str | None) -> None:
    """Spark's KafkaWriter.validateQuery: every column the sink takes, of a type it takes,
    checked on the driver before a task writes a row (a wrong type found in a task would
    fail it after its earlier rows were written)."""
    fields: dict[str, DataType] = {f.name: f.dataType for f in schema.fields}
    if "value" not in fields:
        raise OptionError("writing to kafkactl needs a value column (binary or string)")
    for name in ("key", "value", "topic"):
        if name in fields and not isinstance(fields[name], BinaryType | StringType):
            raise OptionError(f"column {name} must be binary or string "
                              f"(got {fields[name].simpleString()})")
    if "partition" in fields and not isinstance(fields["partition"], IntegerType):
        raise OptionError("column partition must be int")
    if "headers" in fields and fields["headers"].simpleString() != HEADERS_TYPE:
        raise OptionError(f"column headers must be {HEADERS_TYPE} (got "
                          f"{fields['headers'].simpleString()}), as Spark's Kafka sink takes it")
    if "timestamp" in fields and not isinstance(fields["timestamp"], TimestampType | DoubleType):
        raise OptionError("column timestamp must be timestamp, or double (seconds since "
                          f"1970-01-01T00:00:00Z) (got {fields['timestamp'].simpleString()})")
    if "topic" not in fields and not default_topic:
        raise OptionError("writing to kafkactl needs a topic column or the topic option")


def _headers(items: Any, row: int) -> list[tuple[str, bytes | None]] | None:
    """A row's headers column as the producer's (key, value) pairs. `row` counts the task's
    rows from 1, for the error: Kafka refuses a header without a key (Java's RecordHeader
    throws on a null key)."""
    if not items:
        return None
    out = []
    for i, h in enumerate(items):
        if h is None or h["key"] is None:
            what = "a null header" if h is None else "a header with a null key"
            raise RecordError(f"row {row} of the task has {what} (headers[{i}]): a Kafka "
                              "header needs a key; fix or filter out such rows")
        out.append((h["key"], _bytes(h["value"])))
    return out


def _timestamp_ms(v: Any, row: int) -> int | None:
    """A row's timestamp column as the record's CreateTime in milliseconds, as Spark's sink
    makes it (the column cast to a timestamp, its microseconds divided by 1000): a double
    is seconds since the epoch. None (null) leaves the producer's current time. PySpark
    hands a timestamp to Python as a naive datetime in the worker's local time zone."""
    if v is None:
        return None
    try:
        if isinstance(v, datetime):
            micros = ((v if v.tzinfo is not None else v.astimezone()) - EPOCH) \
                // timedelta(microseconds=1)
        else:
            micros = int(v * 1_000_000)  # (truncated, as Spark's cast of a double)
    except (OverflowError, ValueError, OSError):  # NaN, infinity, out of the OS's range
        raise RecordError(f"row {row} of the task has timestamp {v!r}: not a time a Kafka "
                          "record can carry; null takes the current time") from None
    ms = micros // 1000 if micros >= 0 else -(-micros // 1000)  # (Java's long division)
    if not 0 <= ms <= MAX_TIMESTAMP_MS:
        where = "before 1970-01-01T00:00:00Z" if ms < 0 else "past the largest Kafka timestamp"
        raise RecordError(f"row {row} of the task has timestamp {v!r}, {where}: a Kafka "
                          "record's timestamp is 0..2^63-1 ms since then; null takes the "
                          "current time")
    return ms


def _bytes(v: Any) -> bytes | None:
    if v is None or isinstance(v, bytes):
        return v
    if isinstance(v, str):
        return v.encode("utf-8")
    return bytes(v)


class KafkactlWriter(DataSourceWriter):
    known_options = WRITE_OPTIONS
    stream = False

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        opts = canonical_options(options, self.known_options)
        bootstrap = opts.get("kafka.bootstrap.servers") or opts.get("bootstrap")
        if not bootstrap:
            raise OptionError("option kafka.bootstrap.servers (or bootstrap) is required")
        self.bootstrap: str = bootstrap
        self.topic = opts.get("topic")
        self.props = {k[len("kafka."):]: v for k, v in opts.items()
                      if k.startswith("kafka.") and k not in NOT_PRODUCER_OPTIONS}
        # bad producer or security properties fail on the driver
        kwargs = properties_to_kwargs(
            {k: v for k, v in self.props.items() if k not in SECURITY_KEYS})
        security_from({k: v for k, v in self.props.items() if k in SECURITY_KEYS})
        _check_schema(schema, self.topic)
        self.columns = [f.name for f in schema.fields]
        self.txn: TxnTarget | None = None
        if parse_bool("transactional", opts.get("transactional", "false")):
            self.txn = _txn_target(opts, bootstrap, kwargs, tuple(sorted(
                (k, v) for k, v in self.props.items() if k in SECURITY_KEYS)), self.stream)
            if "transactionalIdPrefix" in opts and not self.stream:
                # a run before this one may have died. (Not for a stream: Spark makes a
                # stream's writer again for each commit, its tasks' transactions open by
                # then; a restarted query's tasks fence the ids they take over, and its
                # first commit the others.)
                fence_leftovers(self.txn)
        elif "transactionalIdPrefix" in opts or "kafka.transaction.timeout.ms" in opts:
            raise OptionError("options transactionalIdPrefix and kafka.transaction.timeout.ms "
                              "need option transactional=true")

    def write(self, iterator: Iterator[Any]) -> WriteResult | PreparedWrite:
        txn_id = None if self.txn is None else attempt_transactional_id(self.txn.prefix)
        producer = Producer.from_properties(
            {"bootstrap.servers": self.bootstrap, "client.id": "kafkactl-spark-writer",
             **self.props},
            **({} if self.txn is None else {"transactional_id": txn_id,
                                            "transaction_timeout_ms": self.txn.timeout_ms}))
        errors: list[BaseException] = []

        def on_delivery(_md: Any, err: BaseException | None) -> None:
            if err is not None and not errors:
                errors.append(err)

        n = 0
        try:
            if txn_id is not None:
                producer.init_transactions()  # fences an older producer of the id
                producer.begin_transaction()
            has = set(self.columns)
            for row in iterator:
                # the topic option overrides the topic column (Spark's Kafka sink)
                topic = self.topic or (row["topic"] if "topic" in has else None)
                if not topic:
                    raise OptionError("a row has a null topic and no topic option is set")
                producer.send(
                    topic if isinstance(topic, str) else topic.decode("utf-8"),
                    _bytes(row["value"]), _bytes(row["key"]) if "key" in has else None,
                    partition=row["partition"] if "partition" in has else None,
                    headers=_headers(row["headers"], n + 1) if "headers" in has else None,
                    timestamp_ms=(_timestamp_ms(row["timestamp"], n + 1)
                                  if "timestamp" in has else None),
                    on_delivery=on_delivery)
                n += 1
                if errors:
                    break
            if not producer.flush():
                raise TimeoutError("the producer did not deliver every record in time")
            if errors:
                raise errors[0]
            if producer.transactions is not None and producer.transactions.error is not None:
                raise producer.transactions.error
        except BaseException:
            if producer.transactions is not None:
                _abort_now(producer)
            producer.abort()
            raise
        txn = producer.transactions
        producer.close()  # the transaction stays open: the driver ends it
        if txn is None:
            return WriteResult(n)
        if not txn.partitions:
            return PreparedWrite(n)  # no row: nothing for the coordinator to commit
        return PreparedWrite(n, txn.transactional_id, txn.producer_id, txn.epoch)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        if self.txn is not None:
            commit_all(self.txn, messages)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        if self.txn is not None:
            abort_all(self.txn, messages)


class KafkactlStreamWriter(KafkactlWriter, DataSourceStreamWriter):
    """`writeStream.format("kafkactl")`: each micro-batch's tasks produce their rows; a batch
    commits once every task's records are acknowledged (at-least-once, as Spark's sink), or,
    transactional, once the driver committed every task's transaction (a micro-batch
    replayed after the driver died within its commit is written again)."""

    known_options = WRITE_OPTIONS + ("checkpointLocation",)
    stream = True

    def commit(self, messages: list[WriterCommitMessage | None],  # type: ignore[override]
               batchId: int) -> None:  # noqa: N803 - Spark's parameter name
        if self.txn is not None:
            commit_all(self.txn, messages)

    def abort(self, messages: list[WriterCommitMessage | None],  # type: ignore[override]
              batchId: int) -> None:  # noqa: N803
        if self.txn is not None:
            abort_all(self.txn, messages)


# kafka.* options that are not producer properties: the writer's own
NOT_PRODUCER_OPTIONS = ("kafka.bootstrap.servers", "kafka.transaction.timeout.ms")


def _txn_target(opts: Mapping[str, str], bootstrap: str, kwargs: Mapping[str, Any],
                security: tuple[tuple[str, str], ...], stream: bool) -> TxnTarget:
    if kwargs.get("enable_idempotence") is False or parse_acks(kwargs.get("acks", "all")) != -1:
        raise OptionError("option transactional=true needs kafka.acks=all and "
                          "kafka.enable.idempotence=true (Kafka's rule)")
    raw = opts.get("kafka.transaction.timeout.ms", str(DEFAULT_TIMEOUT_MS))
    try:
        timeout_ms = int(raw)
    except ValueError:
        raise OptionError(f"option kafka.transaction.timeout.ms needs milliseconds "
                          f"(got {raw!r})") from None
    if timeout_ms <= 0:
        raise OptionError(f"option kafka.transaction.timeout.ms must be > 0 (got {timeout_ms})")
    prefix = opts.get("transactionalIdPrefix")
    if not prefix and stream:
        # the same for every writer Spark makes of the query, and after a restart
        where = opts.get("checkpointLocation")
        if not where:
            raise OptionError("a transactional stream needs option transactionalIdPrefix or "
                              "checkpointLocation (its transactional ids are named after it)")
        prefix = "kafkactl-spark-" + hashlib.sha256(where.encode()).hexdigest()[:16]
    return TxnTarget(bootstrap, prefix or f"kafkactl-spark-{uuid.uuid4().hex[:16]}",
                     timeout_ms, security)


def _abort_now(producer: Producer) -> None:
    """A failed attempt: abort its transaction now rather than at its timeout (an
    InitProducerId on the id aborts it and fences the attempt's requests still in flight).
    The driver's sweep or the timeout does it when this cannot."""
    assert producer.transactions is not None
    with contextlib.suppress(Exception):  # best effort: the error being raised matters
        producer.transactions.init()
