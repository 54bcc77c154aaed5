"""The `kafkactl` PySpark data source: `spark.read.format("kafkactl")`, `readStream`, `write`.

Spark 4 finds it by itself (the `pyspark_kafkactl` package installed with kafkactl), so

    spark.read.format("kafkactl").option("kafka.bootstrap.servers", "host:9092")
         .option("subscribe", "events").load()

works in any session whose workers run the Python kafkactl is installed in. `register(spark)`
registers it explicitly, for workers that run another Python (see `register`).

One Spark input partition per topic-partition offset range (split further by
maxRecordsPerPartition and minPartitions); executors fetch their range from the partition
leader with kafkactl's client and hand Spark Arrow record batches.
"""

from __future__ import annotations

import os
import sys
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
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from kafkactl.spark.options import OptionError, parse_bool, parse_read_options
from kafkactl.spark.partition_reader import read_range
from kafkactl.spark.planner import OffsetRange, plan

SCHEMA = ("key binary, value binary, topic string, partition int, offset long, "
          "timestamp timestamp, timestampType int")
HEADERS = "headers array<struct<key string, value binary>>"


def fixed_schema(headers: bool) -> StructType:
    """SCHEMA (and HEADERS) as a StructType, made without a JVM (the planning worker has
    none to parse DDL with)."""
    columns: list[tuple[str, DataType]] = [
        ("key", BinaryType()), ("value", BinaryType()), ("topic", StringType()),
        ("partition", IntegerType()), ("offset", LongType()), ("timestamp", TimestampType()),
        ("timestampType", IntegerType())]
    if headers:
        columns.append(("headers", ArrayType(StructType([
            StructField("key", StringType()), StructField("value", BinaryType())]))))
    return StructType([StructField(n, t) for n, t in columns])


def refuse_custom_schema(schema: StructType, options: Any) -> None:
    """Spark's Kafka source refuses a user-specified schema before it reads
    (KafkaSourceProvider); a Python data source is handed it instead of its own: one that
    differs from the fixed schema is refused here, on the driver, before the broker is
    asked anything (it failed in the tasks, DATA_SOURCE_RETURN_SCHEMA_MISMATCH)."""
    want = fixed_schema(include_headers(options))
    if schema.simpleString() != want.simpleString():  # (nullability aside)
        raise OptionError(
            "the kafkactl source has a fixed schema and cannot be set with a custom one "
            f"(got {schema.simpleString()}): drop .schema(...) and select or cast the "
            f"columns of {want.simpleString()} instead (includeHeaders=true adds headers)")


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
        if not isinstance(partition, RangePartition):
            # no ranges: Spark still runs one task, with a placeholder partition
            return iter(())
        return read_range(self.ro, partition.rng)


def include_headers(options: Any) -> bool:
    for k, v in dict(options).items():
        if k.lower() == "includeheaders":
            return parse_bool("includeHeaders", v)
    return False


class KafkactlDataSource(DataSource):
    """`format("kafkactl")`: Kafka topics through kafkactl's client."""

    @classmethod
    def name(cls) -> str:
        return "kafkactl"

    def schema(self) -> str:
        """Spark's Kafka source schema; the headers column only with includeHeaders=true."""
        return f"{SCHEMA}, {HEADERS}" if include_headers(self.options) else SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        refuse_custom_schema(schema, self.options)
        return KafkactlReader(dict(self.options))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from kafkactl.spark.writer import KafkactlWriter

        refuse_overwrite(overwrite)
        return KafkactlWriter(dict(self.options), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from kafkactl.spark.writer import KafkactlStreamWriter

        return KafkactlStreamWriter(dict(self.options), schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from kafkactl.spark.stream import KafkactlStreamReader

        refuse_custom_schema(schema, self.options)
        return KafkactlStreamReader(dict(self.options))


def refuse_overwrite(overwrite: bool) -> None:
    """A topic cannot be overwritten: mode("overwrite") is refused, as Spark's Kafka sink
    refuses it. (Spark itself refuses the ErrorIfExists and Ignore modes for every Python
    data source before any of its code runs: mode("append") is the one mode that writes.)"""
    if overwrite:
        raise OptionError('save mode Overwrite is not allowed for kafkactl (records are '
                          'appended to a topic, never replaced): use .mode("append")')


def worker_python(spark: Any) -> str:
    """The Python the data source's workers should run: PYSPARK_PYTHON or spark.pyspark.python
    when set, else this interpreter (the one that has kafkactl), as `kafkactl spark-load`
    does. (Spark's own default is whatever `python3` is first on the PATH.)"""
    conf = spark.sparkContext.getConf()
    return (os.environ.get("PYSPARK_PYTHON") or conf.get("spark.pyspark.python", None)
            or sys.executable)


def register(spark: Any, *, ship_sources: bool | None = None) -> None:
    """Register `format("kafkactl")` in this SparkSession, for workers whose Python does not
    find it by itself: the data source's workers run `worker_python(spark)`, and with a
    cluster master (or ship_sources=True) kafkactl's sources go to the executors as a zip,
    like spark-load's --py-files (their Python still needs pyarrow and kafkactl's
    dependencies). Not needed when kafkactl is installed in the workers' Python: Spark
    discovers the data source (pyspark_kafkactl)."""
    sc = spark.sparkContext
    if ship_sources is None:
        ship_sources = not str(sc.master).startswith("local")
    if ship_sources:
        from kafkactl.spark.package import package_zip

        zip_path = str(package_zip())
        if os.path.basename(zip_path) not in {os.path.basename(p)
                                              for p in sc._python_includes or ()}:
            sc.addPyFile(zip_path)
    previous = sc.pythonExec
    sc.pythonExec = worker_python(spark)
    try:
        spark.dataSource.register(KafkactlDataSource)
    finally:
        sc.pythonExec = previous
