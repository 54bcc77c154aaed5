"""df.write.format("kafkactl"), read back with `kafkactl consume`."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests import zygote
from tests.conftest import BrokerProcess
from tests.spark.conftest import create_topic


@pytest.fixture
def broker(module_broker: BrokerProcess) -> BrokerProcess:
    """Tests here only use topics of their own: one broker for the module."""
    return module_broker


def test_write_then_consume(spark: Any, broker: Any) -> None:
    b = broker.bootstrap
    create_topic(b, "written", 2)
    create_topic(b, "other", 1)
    rows = [(f"k{i}".encode(), f"v{i}", None if i == 7 else i % 2,
             [("h", b"x%d" % i)] if i == 3 else [], "other" if i == 7 else None)
            for i in range(8)]
    df = spark.createDataFrame(rows, "key binary, value string, partition int, "
                                     "headers array<struct<key string, value binary>>, "
                                     "topic string")
    (df.write.format("kafkactl").option("kafka.bootstrap.servers", b)
     .option("topic", "written").option("kafka.linger.ms", "0").mode("append").save())

    def consume(topic: str) -> list[dict[str, Any]]:
        out = zygote.run(["consume", "-b", b, "-t", topic, "--from-beginning", "-e", "-J",
                          "-q"], text=True, timeout=60, check=True).stdout
        return sorted((json.loads(line) for line in out.splitlines()),
                      key=lambda r: r["payload"])

    # the topic option overrides the topic column, as in Spark's Kafka sink
    got = consume("written")
    assert [(r["key"], r["payload"]) for r in got] == [(f"k{i}", f"v{i}") for i in range(8)]
    assert [r["partition"] for r in got][:7] == [i % 2 for i in range(7)]
    assert "x3" in json.dumps(got[3].get("headers"))  # (kcat's -J layout of headers)
    # without the option, the column names each row's topic
    (df.where("topic IS NOT NULL").write.format("kafkactl").option("kafka.bootstrap.servers", b)
     .option("kafka.linger.ms", "0").mode("append").save())
    assert [(r["key"], r["payload"]) for r in consume("other")] == [("k7", "v7")]


def test_write_refuses_bad_columns_and_options(spark: Any, broker: Any) -> None:
    df = spark.createDataFrame([(1,)], "value int")
    with pytest.raises(Exception, match="column value must be binary or string"):
        df.write.format("kafkactl").option("bootstrap", broker.bootstrap).option(
            "topic", "t").mode("append").save()
    df = spark.createDataFrame([("v",)], "value string")
    with pytest.raises(Exception, match="(?i)unknown option 'kafka.lnger.ms'.*known options"):
        df.write.format("kafkactl").option("bootstrap", broker.bootstrap).option(
            "topic", "t").option("kafka.lnger.ms", "1").mode("append").save()
    with pytest.raises(Exception, match="needs a topic column or the topic option"):
        df.write.format("kafkactl").option("bootstrap", broker.bootstrap).mode(
            "append").save()


def test_save_modes_as_spark_kafka_sink(spark: Any, broker: Any) -> None:
    """A topic is appended to, never replaced: mode("overwrite") is refused with what to do
    (Spark's Kafka sink refuses it too); Spark itself refuses the default ErrorIfExists
    mode for every Python data source, its message naming Append."""
    b = broker.bootstrap
    create_topic(b, "modes", 1)
    df = spark.createDataFrame([("v",)], "value string")

    def writer() -> Any:  # (mode() changes the writer it is called on)
        return df.write.format("kafkactl").option("bootstrap", b).option("topic", "modes")

    with pytest.raises(Exception, match=r'save mode Overwrite is not allowed for kafkactl.*'
                                        r'use \.mode\("append"\)'):
        writer().mode("overwrite").save()
    with pytest.raises(Exception, match='(?s)ErrorIfExists.*"Append"'):
        writer().save()
    writer().mode("append").save()
    out = zygote.run(["consume", "-b", b, "-t", "modes", "--from-beginning", "-e", "-q"],
                     text=True, timeout=60, check=True).stdout
    assert out.splitlines() == ["v"]
