"""The sink's columns checked as Spark's Kafka sink checks them (KafkaWriter.validateQuery:
on the driver, before a task writes a row), its optional `timestamp` column (SPARK-50160),
and the source's fixed schema (KafkaSourceProvider refuses a custom one)."""

from __future__ import annotations

from typing import Any

import pytest

from kafkactl.client.consumer import SimpleConsumer
from kafkactl.client.fetcher import LATEST
from kafkactl.spark.source import HEADERS, SCHEMA
from tests.conftest import BrokerProcess
from tests.spark.conftest import create_topic, produce


@pytest.fixture
def broker(module_broker: BrokerProcess) -> BrokerProcess:
    """Tests here only use topics of their own: one broker for the module."""
    return module_broker


def end_offset(bootstrap: str, topic: str) -> int:
    sc = SimpleConsumer(bootstrap)
    try:
        return sc.list_offsets({(topic, 0): LATEST})[(topic, 0)][0]
    finally:
        sc.close()


def save(df: Any, bootstrap: str, topic: str) -> None:
    (df.write.format("kafkactl").option("kafka.bootstrap.servers", bootstrap)
     .option("topic", topic).option("kafka.linger.ms", "0").mode("append").save())


def test_wrong_typed_headers_or_timestamp_are_refused_before_any_row_is_written(
        spark: Any, broker: Any) -> None:
    """Each frame's rows are good but its last: a headers column of another type than
    array<struct<key:string,value:binary>> (or a timestamp neither timestamp nor double)
    fails the write before a task runs, so nothing of it is in the topic (it failed in the
    task at the first row with headers, its earlier rows written)."""
    b = broker.bootstrap
    create_topic(b, "d1-badcols", 1)
    rows = spark.range(0, 300, numPartitions=1).selectExpr("CAST(id AS STRING) AS value",
                                                           "id = 299 AS last")
    for column, expr in [
            ("headers", "IF(last, 'oops', NULL)"),
            ("headers", "IF(last, map('a', 'b'), NULL)"),
            ("headers", "IF(last, array(named_struct('key', 1, 'value', 'x')), NULL)"),
            ("headers", "IF(last, array(named_struct('key', 'k', 'value', 'x')), NULL)"),
            ("headers", "IF(last, array(named_struct('k', 'k', 'v', X'00')), NULL)"),
            ("timestamp", "IF(last, 1000, NULL)"),
            ("timestamp", "IF(last, '1970-01-01 00:00:01', NULL)")]:
        df = rows.selectExpr("value", f"{expr} AS {column}")
        want = "headers must be array<struct<key:string,value:binary>>" \
            if column == "headers" else "timestamp must be timestamp, or double"
        with pytest.raises(Exception, match=f"column {want}[^\\n]* \\(got "):
            save(df, b, "d1-badcols")
        assert end_offset(b, "d1-badcols") == 0, expr
    # the one headers type, and a null headers column, are taken
    save(rows.selectExpr("value", "IF(last, array(named_struct('key', 'k', 'value', X'01')), "
                                  "NULL) AS headers"), b, "d1-badcols")
    assert end_offset(b, "d1-badcols") == 300


def test_a_null_header_key_is_named_with_its_row(spark: Any, broker: Any) -> None:
    """Java's RecordHeader refuses a null key; the task's error says which row and header
    (it was `TypeError` from deep in the producer)."""
    b = broker.bootstrap
    create_topic(b, "d1-nullkey", 1)
    rows = [("v0", [("a", b"x")]), ("v1", [("a", b"x"), (None, b"y")]), ("v2", None)]
    df = spark.sparkContext.parallelize(rows, 1).toDF(
        "value string, headers array<struct<key string, value binary>>")
    with pytest.raises(Exception, match=r"row 2 of the task has a header with a null key "
                                        r"\(headers\[1\]\): a Kafka header needs a key"):
        save(df, b, "d1-nullkey")


def test_the_timestamp_column_is_the_records_create_time(spark: Any, broker: Any) -> None:
    """As Spark 4's Kafka sink (SPARK-50160): a timestamp, or a double of seconds since the
    epoch (truncated to milliseconds), is the record's timestamp; null is the producer's
    current time. Read back with the source (timestampType 0: CreateTime)."""
    b = broker.bootstrap
    create_topic(b, "d1-ts", 1)
    save(spark.sparkContext.parallelize([("t1000", 1000), ("t-null", None)], 1)
         .toDF("value string, ms long")
         .selectExpr("value", "timestamp_millis(ms) AS timestamp"), b, "d1-ts")
    save(spark.sparkContext.parallelize([("d1.5", 1.5), ("d2.0009", 2.0009)], 1)
         .toDF("value string, timestamp double"), b, "d1-ts")
    got = {r.value.decode(): (r.ms, r.timestampType) for r in
           spark.read.format("kafkactl").option("kafka.bootstrap.servers", b)
           .option("subscribe", "d1-ts").load()
           .selectExpr("value", "unix_millis(timestamp) AS ms", "timestampType").collect()}
    now_ms = got.pop("t-null")
    assert got == {"t1000": (1000, 0), "d1.5": (1500, 0), "d2.0009": (2000, 0)}
    assert now_ms[0] > 1_600_000_000_000 and now_ms[1] == 0  # this century: the write's time
    # before 1970 a Kafka record cannot be (Java's ProducerRecord refuses it): named
    with pytest.raises(Exception, match=r"row 1 of the task has timestamp -1\.0, before "
                                        r"1970-01-01T00:00:00Z"):
        save(spark.sparkContext.parallelize([("neg", -1.0)], 1)
             .toDF("value string, timestamp double"), b, "d1-ts")


def test_a_custom_read_schema_is_refused_up_front(spark: Any, broker: Any) -> None:
    """Spark's Kafka source has a fixed schema; a custom one failed only in the tasks
    (DATA_SOURCE_RETURN_SCHEMA_MISMATCH), after the broker was asked for the offsets."""
    b = broker.bootstrap
    create_topic(b, "d1-schema", 1)
    produce(b, "d1-schema", [(0, None, b"v", [("h", b"x")])])

    def load(schema: str | None, **options: str) -> Any:
        r = spark.read.format("kafkactl")
        if schema is not None:
            r = r.schema(schema)
        return (r.option("kafka.bootstrap.servers", b).option("subscribe", "d1-schema")
                .options(**options).load())

    with pytest.raises(Exception, match=r"the kafkactl source has a fixed schema and cannot "
                                        r"be set with a custom one \(got struct<value:binary>\)"):
        load("value binary").collect()
    # the fixed schema itself, given, is no custom one; the headers column only with
    # includeHeaders=true
    assert [r.value for r in load(SCHEMA).collect()] == [b"v"]
    with pytest.raises(Exception, match="fixed schema"):
        load(f"{SCHEMA}, {HEADERS}").collect()
    assert load(None, includeHeaders="true").collect()[0].headers[0].key == "h"
