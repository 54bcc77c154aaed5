"""The `kafkactl` PySpark data source: `spark.read.format("kafkactl")`, `readStream`, `write`.

Register it once per session with `register(spark)` (the loader does), then:

    spark.read.format("kafkactl").option("kafka.bootstrap.servers", "host:9092")
         .option("subscribe", "events").load()

One Spark input partition per topic-partition offset range (split further by
maxRecordsPerPartition); executors fetch their range from the partition leader with
kafkactl's client and hand Spark Arrow record batches.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.types import StructType

from kafkactl.spark.options import parse_read_options
from kafkactl.spark.partition_reader import read_range
from kafkactl.spark.planner import OffsetRange, plan

SCHEMA = ("key binary, value binary, topic string, partition int, offset long, "
          "timestamp timestamp, timestampType int, "
          "headers array<struct<key string, value binary>>")


class RangePartition(InputPartition):
    """One OffsetRange as a Spark input partition."""

    def __init__(self, rng: OffsetRange) -> None:
        super().__init__(rng)
        self.rng = rng


class KafkactlReader(DataSourceReader):
    def __init__(self, options: dict[str, str]) -> None:
        self.ro = parse_read_options(options)
        self.ranges, self.start, self.end = plan(self.ro)

    def partitions(self) -> Sequence[InputPartition]:
        return [RangePartition(r) for r in self.ranges]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, RangePartition)
        return read_range(self.ro, partition.rng)


class KafkactlDataSource(DataSource):
    """`format("kafkactl")`: Kafka topics through kafkactl's client."""

    @classmethod
    def name(cls) -> str:
        return "kafkactl"

    def schema(self) -> str:
        return SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return KafkactlReader(dict(self.options))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from kafkactl.spark.writer import KafkactlWriter

        return KafkactlWriter(dict(self.options), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from kafkactl.spark.writer import KafkactlStreamWriter

        return KafkactlStreamWriter(dict(self.options), schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from kafkactl.spark.stream import KafkactlStreamReader

        return KafkactlStreamReader(dict(self.options))


def register(spark: Any) -> None:
    """Make `format("kafkactl")` available in this SparkSession."""
    spark.dataSource.register(KafkactlDataSource)
