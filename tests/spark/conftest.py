"""One SparkSession for all Spark tests (local[2]; starting one takes seconds), and helpers
that fill topics through kafkactl's own client against the real broker fixture."""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from kafkactl.client.admin import AdminClient
from kafkactl.client.kafka_client import KafkaClient
from kafkactl.client.producer import Producer
from kafkactl.protocol.api_keys import ApiKey
from tests.jvm_archive import spark_jvm_options


# spark-submit --conf for the JVMs of a Spark run a test starts (tests/jvm_options.py; the
# driver and the executors map their classes from the cached archive when there is one:
# tests/jvm_archive.py)
def jvm_confs() -> list[str]:
    options = " ".join(spark_jvm_options())
    return ["--conf", "spark.driver.extraJavaOptions=" + options,
            "--conf", "spark.executor.extraJavaOptions=" + options]


def spark_missing() -> str | None:
    """Why the Spark tests cannot run here (None when they can)."""
    for mod in ("pyspark", "pyarrow"):
        if importlib.util.find_spec(mod) is None:
            return f"{mod} is not installed (pip install '.[spark]')"
    if not (shutil.which("java") or os.environ.get("JAVA_HOME")):
        return "no Java runtime (java on PATH or JAVA_HOME) for Spark"
    return None


@pytest.fixture
def spark_installed() -> None:
    """Skips the test when Spark cannot run here; for tests that run Spark in processes of
    their own (spark-submit) and so need no SparkSession in this one."""
    reason = spark_missing()
    if reason is not None:
        pytest.skip(reason)


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    reason = spark_missing()
    if reason is not None:
        print(f"\nskipping the Spark tests: {reason}", file=sys.stderr)
        pytest.skip(reason)
    os.environ["PYSPARK_PYTHON"] = sys.executable  # executors import this kafkactl
    from pyspark.sql import SparkSession

    from kafkactl.spark.source import register

    session = (SparkSession.builder.master("local[2]").appName("kafkactl-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.driver.extraJavaOptions", " ".join(spark_jvm_options()))
               # Spark's own execution strategy, not kafkactl's: no Java source generated
               # and compiled (Janino) per query, no adaptive re-planning. The Spark tests'
               # JVM CPU 25-26 -> 17-23 s; the spark-submit runs keep Spark's defaults.
               .config("spark.sql.codegen.wholeStage", "false")
               .config("spark.sql.codegen.factoryMode", "NO_CODEGEN")
               .config("spark.sql.adaptive.enabled", "false")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    yield session
    session.stop()


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    with AdminClient(bootstrap) as admin:
        err = admin.create_topics({name: (partitions, 1, {})})[name]
        assert err is None, err


def produce(bootstrap: str, topic: str, records: list[tuple[int, bytes | None, bytes, Any]],
            *, timestamp_ms: int | None = None) -> None:
    """records: (partition, key, value, headers or None), sent and acknowledged."""
    p = Producer(bootstrap, linger_ms=0)
    try:
        futs = [p.send(topic, v, k, partition=part, headers=h, timestamp_ms=timestamp_ms)
                for part, k, v, h in records]
        assert p.flush(30)
        for f in futs:
            f.result()
    finally:
        p.close()


def delete_records(bootstrap: str, topic: str, partition: int, before: int) -> None:
    """DeleteRecords: move the log start offset of topic-partition to `before`."""
    client = KafkaClient(bootstrap)
    try:
        client.ensure_topics([topic], allow_auto_create=False)
        leader = client.cluster.leader_for(topic, partition)
        resp = client.connection(leader).request(ApiKey.DELETE_RECORDS, {
            "topics": [{"name": topic, "partitions": [
                {"partition_index": partition, "offset": before}]}], "timeout_ms": 10000})
        part = resp["topics"][0]["partitions"][0]
        assert part["error_code"] == 0 and part["low_watermark"] == before, part
    finally:
        client.close()
