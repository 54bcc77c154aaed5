"""`df.write.format("kafkactl")` and `writeStream`: each Spark task produces its rows with
kafkactl's Producer.

Columns, as Spark's Kafka sink takes them: `value` (binary or string, required), `key`
(optional), `topic` (optional when the `topic` option is set; the option, when set,
overrides the column, as in Spark), `partition` (optional int; else the key's partition),
`headers` (optional array<struct<key string, value binary>>). Other columns are ignored. A
task reports success only after every record it sent is acknowledged (acks=all by default);
like Spark's Kafka sink the write is at-least-once (a retried task sends its rows again).
Only mode("append") writes: Spark refuses the ErrorIfExists (default) and Ignore modes for
every Python data source, and a topic cannot be overwritten.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import DataSourceStreamWriter, DataSourceWriter, WriterCommitMessage
from pyspark.sql.types import BinaryType, IntegerType, StringType, StructType

from kafkactl.client.producer import Producer, properties_to_kwargs
from kafkactl.client.security import SECURITY_KEYS
from kafkactl.spark.options import WRITE_OPTIONS, OptionError, canonical_options, security_from


@dataclass
class WriteResult(WriterCommitMessage):
    records: int


def _check_schema(schema: StructType, default_topic: str | None) -> None:
    fields = {f.name: f.dataType for f in schema.fields}
    if "value" not in fields:
        raise OptionError("writing to kafkactl needs a value column (binary or string)")
    for name in ("key", "value", "topic"):
        if name in fields and not isinstance(fields[name], BinaryType | StringType):
            raise OptionError(f"column {name} must be binary or string "
                              f"(got {fields[name].simpleString()})")
    if "partition" in fields and not isinstance(fields["partition"], IntegerType):
        raise OptionError("column partition must be int")
    if "topic" not in fields and not default_topic:
        raise OptionError("writing to kafkactl needs a topic column or the topic option")


def _bytes(v: Any) -> bytes | None:
    if v is None or isinstance(v, bytes):
        return v
    if isinstance(v, str):
        return v.encode("utf-8")
    return bytes(v)


class KafkactlWriter(DataSourceWriter):
    known_options = WRITE_OPTIONS

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        opts = canonical_options(options, self.known_options)
        bootstrap = opts.get("kafka.bootstrap.servers") or opts.get("bootstrap")
        if not bootstrap:
            raise OptionError("option kafka.bootstrap.servers (or bootstrap) is required")
        self.bootstrap: str = bootstrap
        self.topic = opts.get("topic")
        self.props = {k[len("kafka."):]: v for k, v in opts.items()
                      if k.startswith("kafka.") and k != "kafka.bootstrap.servers"}
        # bad producer or security properties fail on the driver
        properties_to_kwargs({k: v for k, v in self.props.items() if k not in SECURITY_KEYS})
        security_from({k: v for k, v in self.props.items() if k in SECURITY_KEYS})
        _check_schema(schema, self.topic)
        self.columns = [f.name for f in schema.fields]

    def write(self, iterator: Iterator[Any]) -> WriteResult:
        producer = Producer.from_properties(
            {"bootstrap.servers": self.bootstrap, "client.id": "kafkactl-spark-writer",
             **self.props})
        errors: list[BaseException] = []

        def on_delivery(_md: Any, err: BaseException | None) -> None:
            if err is not None and not errors:
                errors.append(err)

        n = 0
        try:
            has = set(self.columns)
            for row in iterator:
                # the topic option overrides the topic column (Spark's Kafka sink)
                topic = self.topic or (row["topic"] if "topic" in has else None)
                if not topic:
                    raise OptionError("a row has a null topic and no topic option is set")
                headers = None
                if "headers" in has and row["headers"]:
                    headers = [(h["key"], _bytes(h["value"])) for h in row["headers"]]
                producer.send(
                    topic if isinstance(topic, str) else topic.decode("utf-8"),
                    _bytes(row["value"]), _bytes(row["key"]) if "key" in has else None,
                    partition=row["partition"] if "partition" in has else None,
                    headers=headers, on_delivery=on_delivery)
                n += 1
                if errors:
                    break
            if not producer.flush():
                raise TimeoutError("the producer did not deliver every record in time")
        except BaseException:
            producer.abort()
            raise
        producer.close()
        if errors:
            raise errors[0]
        return WriteResult(n)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        return None

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        return None


class KafkactlStreamWriter(KafkactlWriter, DataSourceStreamWriter):
    """`writeStream.format("kafkactl")`: each micro-batch's tasks produce their rows; a batch
    commits once every task's records are acknowledged (at-least-once, as Spark's sink)."""

    known_options = WRITE_OPTIONS + ("checkpointLocation",)

    def commit(self, messages: list[WriterCommitMessage | None],  # type: ignore[override]
               batchId: int) -> None:  # noqa: N803 - Spark's parameter name
        return None

    def abort(self, messages: list[WriterCommitMessage | None],  # type: ignore[override]
              batchId: int) -> None:  # noqa: N803
        return None
