"""spark.read.format("kafkactl") against a real broker, in the shared local[2] session."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kafkactl.spark.options import DataLossError, OptionError, parse_read_options
from kafkactl.spark.partition_reader import FetchError, RangeReader
from kafkactl.spark.planner import OffsetRange, plan, split_ranges
from tests.conftest import BrokerProcess
from tests.spark.conftest import create_topic, delete_records, produce


@pytest.fixture
def broker(module_broker: BrokerProcess) -> BrokerProcess:
    """Tests given `broker` here only read topics of their own (no pattern matches another's):
    one broker for the module (the one that kills it has its own)."""
    return module_broker

SCHEMA = ("struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
          "timestamp:timestamp,timestampType:int>")
HEADERS_SCHEMA = SCHEMA[:-1] + ",headers:array<struct<key:string,value:binary>>>"


def read(spark: Any, bootstrap: str, **options: str) -> Any:
    r = spark.read.format("kafkactl").option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def offsets_by_partition(df: Any) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for row in df.select("partition", "offset").collect():
        out.setdefault(row.partition, []).append(row.offset)
    return {p: sorted(v) for p, v in out.items()}


def test_batch_read_three_partitions(spark: Any, broker: Any) -> None:
    b = broker.bootstrap
    create_topic(b, "events", 3)
    sizes = {0: 10, 1: 11, 2: 12}
    recs = []
    for p, n in sizes.items():
        for i in range(n):
            headers = [("h1", b"x"), ("h2", None)] if (p, i) == (1, 5) else None
            recs.append((p, None if i == 0 else f"k{p}-{i}".encode(), f"v{p}-{i}".encode(),
                         headers))
    produce(b, "events", recs, timestamp_ms=1_700_000_000_123)

    # Spark's Kafka source: the headers column only with includeHeaders=true
    assert read(spark, b, subscribe="events").schema.simpleString() == SCHEMA
    assert "headers" not in read(spark, b, subscribe="events").collect()[0].asDict()
    df = read(spark, b, subscribe="events", includeHeaders="true")
    assert df.schema.simpleString() == HEADERS_SCHEMA
    rows = df.collect()
    assert len(rows) == 33
    assert offsets_by_partition(df) == {p: list(range(n)) for p, n in sizes.items()}
    by_pos = {(r.partition, r.offset): r for r in rows}
    r = by_pos[(1, 5)]
    assert (r.key, r.value, r.topic) == (b"k1-5", b"v1-5", "events")
    assert [(h.key, h.value) for h in r.headers] == [("h1", b"x"), ("h2", None)]
    assert by_pos[(2, 0)].key is None and by_pos[(2, 0)].headers == []
    assert r.timestampType == 0
    assert r.timestamp.timestamp() == 1_700_000_000.123  # pyspark: naive local time

    # explicit per-partition offsets, -2 = earliest, -1 = latest
    df = read(spark, b, subscribe="events",
              startingOffsets=json.dumps({"events": {"0": 2, "1": -2, "2": 5}}),
              endingOffsets=json.dumps({"events": {"0": 4, "1": 3, "2": -1}}))
    assert offsets_by_partition(df) == {0: [2, 3], 1: [0, 1, 2], 2: list(range(5, 12))}

    # maxRecordsPerPartition splits each range into tasks; no record is read twice
    df = read(spark, b, subscribe="events", maxRecordsPerPartition="4")
    assert df.rdd.getNumPartitions() == 9
    assert offsets_by_partition(df) == {p: list(range(n)) for p, n in sizes.items()}

    # assign + subscribePattern select the same partitions
    df = read(spark, b, assign=json.dumps({"events": [0, 2]}))
    assert sorted(offsets_by_partition(df)) == [0, 2]
    assert read(spark, b, subscribePattern="ev.*").count() == 33


def test_found_by_spark_without_register(spark: Any, broker: Any) -> None:
    """Spark 4 finds the data source by itself (pyspark_kafkactl, SPARK-45917), as the
    README promises: a session nobody called register() in reads format("kafkactl"). (The
    shared session registered it; a new session of the same Spark context has only the
    data sources Spark found itself.)"""
    b = broker.bootstrap
    create_topic(b, "discovered", 1)
    produce(b, "discovered", [(0, None, b"found", None)])
    fresh = spark.newSession()
    assert fresh.sparkContext is spark.sparkContext
    rows = (fresh.read.format("kafkactl").option("kafka.bootstrap.servers", b)
            .option("subscribe", "discovered").load().collect())
    assert [(r.offset, r.value) for r in rows] == [(0, b"found")]


def test_timestamps_select_offsets(spark: Any, broker: Any) -> None:
    b = broker.bootstrap
    create_topic(b, "timed", 1)
    for i in range(10):
        produce(b, "timed", [(0, None, f"v{i}".encode(), None)], timestamp_ms=1000 + i)
    df = read(spark, b, subscribe="timed", startingTimestamp="1005", endingTimestamp="1008")
    assert offsets_by_partition(df) == {0: [5, 6, 7]}
    assert [r.value for r in df.orderBy("offset").collect()] == [b"v5", b"v6", b"v7"]


def test_unknown_option_is_refused(spark: Any, broker: Any) -> None:
    with pytest.raises(OptionError) as e:
        parse_read_options({"bootstrap": "x:1", "subscribe": "t", "startingOfsets": "earliest"})
    assert "'startingOfsets'" in str(e.value) and "startingOffsets" in str(e.value)
    # Spark lowercases option names before a Python data source sees them: the message
    # names the known option the user meant, as documented
    with pytest.raises(Exception, match="unknown option 'startingofsets' for format kafkactl "
                                        r"\('startingofsets': did you mean startingOffsets\?"):
        read(spark, broker.bootstrap, subscribe="t", startingOfsets="earliest").collect()
    with pytest.raises(Exception, match="option 'kafka.auto.offset.reset' is not supported: "
                                        "set the source option startingOffsets instead"):
        read(spark, broker.bootstrap, subscribe="t",
             **{"kafka.auto.offset.reset": "earliest"}).collect()
    with pytest.raises(OptionError, match="exactly one of"):
        parse_read_options({"bootstrap": "x:1", "subscribe": "t", "assign": '{"t":[0]}'})
    with pytest.raises(OptionError, match="latest .* not allowed"):
        parse_read_options({"bootstrap": "x:1", "subscribe": "t", "startingOffsets": "latest"})


def test_offsets_out_of_range_follow_fail_on_data_loss(spark: Any, broker: Any) -> None:
    b = broker.bootstrap
    create_topic(b, "lossy", 2)
    produce(b, "lossy", [(p, None, f"v{i}".encode(), None) for p in (0, 1) for i in range(10)])
    delete_records(b, "lossy", 0, 5)
    below = json.dumps({"lossy": {"0": 2, "1": 0}})
    with pytest.raises(Exception, match="topic lossy partition 0: starting offset 2 is below "
                                        "the log start offset 5"):
        read(spark, b, subscribe="lossy", startingOffsets=below).collect()
    df = read(spark, b, subscribe="lossy", startingOffsets=below, failOnDataLoss="false")
    assert offsets_by_partition(df) == {0: list(range(5, 10)), 1: list(range(10))}

    missing = json.dumps({"lossy": {"0": 5, "7": 0}})
    ro = parse_read_options({"bootstrap": b, "subscribe": "lossy", "startingOffsets": missing})
    with pytest.raises(DataLossError, match="topic lossy partition 7 named in the offsets "
                                            "does not exist"):
        plan(ro)
    ro.fail_on_data_loss = False
    ranges, _, _ = plan(ro)
    assert ranges == [OffsetRange("lossy", 0, 5, 10), OffsetRange("lossy", 1, 0, 10)]


def test_a_range_is_never_returned_short(broker_factory: Any) -> None:
    pytest.importorskip("pyarrow")
    broker = broker_factory()  # killed mid-read: not the shared one
    b = broker.bootstrap
    create_topic(b, "short", 1)
    produce(b, "short", [(0, None, b"x" * 1000, None) for _ in range(300)])
    ro = parse_read_options({"bootstrap": b, "subscribe": "short",
                             "kafkaConsumer.pollTimeoutMs": "3000"})

    # a planned range the log does not (or no longer) hold: fail, or skip when asked to
    with pytest.raises(DataLossError, match=r"topic short partition 0: offsets 300\.\.399"):
        list(RangeReader(ro, OffsetRange("short", 0, 0, 400)).batches())
    ro.fail_on_data_loss = False
    got = list(RangeReader(ro, OffsetRange("short", 0, 0, 400)).batches())
    assert sum(x.num_rows for x in got) == 300
    ro.fail_on_data_loss = True

    # records deleted after the range was planned: fail naming them, or skip them
    delete_records(b, "short", 0, 100)
    with pytest.raises(DataLossError, match=r"offsets 0\.\.299 .* the log now starts at "
                                            r"offset 100"):
        list(RangeReader(ro, OffsetRange("short", 0, 0, 300)).batches())
    ro.fail_on_data_loss = False
    got = list(RangeReader(ro, OffsetRange("short", 0, 0, 300)).batches())
    assert [o for x in got for o in x.column("offset").to_pylist()] == list(range(100, 300))
    ro.fail_on_data_loss = True

    # the broker dies mid-read: the task fails, it does not end early
    reader = RangeReader(ro, OffsetRange("short", 0, 100, 300), fetch_bytes=16 * 1024)
    it = reader.batches()
    first = next(it)
    assert 0 < first.num_rows < 200
    broker.kill()
    with pytest.raises(FetchError, match=r"reading short-0 at offset \d+"):
        for _ in it:
            pass


def test_uniform_line_batches_take_the_columnar_path(spark: Any, broker: Any) -> None:
    """Null-key, header-less, same-length records (what `kafkactl produce` writes) are sliced
    out per batch; the range bounds still cut inside a batch."""
    from kafkactl.client.producer import Producer

    b = broker.bootstrap
    create_topic(b, "lines", 1)
    p = Producer(b, linger_ms=1000, batch_size=1_000_000)
    p.send_values("lines", [b"line-%03d" % i for i in range(40)], partition=0)
    assert p.flush(30)
    p.close()
    from kafkactl.client.consumer import SimpleConsumer
    from kafkactl.client.fetcher import uniform_columns

    sc = SimpleConsumer(b)
    try:
        pf = sc.fetch({("lines", 0): 0})[0]
        assert [uniform_columns(x, 0) is not None for x in pf.batches()] == [True]
    finally:
        sc.close()
    df = read(spark, b, subscribe="lines", startingOffsets='{"lines":{"0":5}}',
              endingOffsets='{"lines":{"0":33}}', includeHeaders="true")
    rows = df.orderBy("offset").collect()
    assert [(r.offset, r.value, r.key, r.headers) for r in rows] == \
        [(i, b"line-%03d" % i, None, []) for i in range(5, 33)]
    assert len({r.timestamp for r in rows}) == 1 and rows[0].timestampType == 0


def test_missing_topic_is_a_driver_error_and_an_empty_topic_reads_empty(
        spark: Any, broker: Any) -> None:
    """subscribe to a topic that does not exist: a clear error when the query is planned (no
    AssertionError from a worker); an existing topic without records, a pattern that
    matches nothing: an empty DataFrame."""
    b = broker.bootstrap
    with pytest.raises(Exception, match="topic nosuch does not exist") as e:
        read(spark, b, subscribe="nosuch").collect()
    assert "AssertionError" not in str(e.value)
    create_topic(b, "empty", 2)
    assert read(spark, b, subscribe="empty").collect() == []
    assert read(spark, b, subscribePattern="matches-nothing-.*").count() == 0


def test_spark_connector_options_carry_over(spark: Any, broker: Any) -> None:
    """The options of Spark's Kafka connector, with its semantics: per-partition timestamps,
    the no-match strategy, minPartitions, group ids and kafka.* consumer settings."""
    b = broker.bootstrap
    create_topic(b, "carry", 2)
    for i in range(10):
        produce(b, "carry", [(p, None, f"v{p}-{i}".encode(), None) for p in (0, 1)],
                timestamp_ms=2000 + i)

    by_ts = json.dumps({"carry": {"0": 2003, "1": 2007}})
    end_ts = json.dumps({"carry": {"0": 2005, "1": 9999}})  # no match at the end: latest
    df = read(spark, b, subscribe="carry", startingOffsetsByTimestamp=by_ts,
              endingOffsetsByTimestamp=end_ts)
    assert offsets_by_partition(df) == {0: [3, 4], 1: [7, 8, 9]}
    # startingTimestamp wins over startingOffsetsByTimestamp and startingOffsets
    df = read(spark, b, subscribe="carry", startingTimestamp="2008",
              startingOffsetsByTimestamp=by_ts, startingOffsets="earliest")
    assert offsets_by_partition(df) == {0: [8, 9], 1: [8, 9]}
    with pytest.raises(Exception, match="must name every partition"):
        read(spark, b, subscribe="carry",
             startingOffsetsByTimestamp=json.dumps({"carry": {"0": 2003}})).collect()

    # a starting timestamp past every record: an error (Spark's default strategy), or the
    # end of the partition with startingOffsetsByTimestampStrategy=latest
    with pytest.raises(Exception, match="no record at or after the starting timestamp 9999"):
        read(spark, b, subscribe="carry", startingTimestamp="9999").collect()
    assert read(spark, b, subscribe="carry", startingTimestamp="9999",
                startingOffsetsByTimestampStrategy="latest").count() == 0

    # minPartitions divides the ranges in proportion to their sizes
    df = read(spark, b, subscribe="carry", minPartitions="5")
    assert df.rdd.getNumPartitions() >= 5
    assert offsets_by_partition(df) == {0: list(range(10)), 1: list(range(10))}
    df = read(spark, b, subscribe="carry", minPartitions="1")
    assert df.rdd.getNumPartitions() == 2

    # group ids and Kafka consumer settings are accepted as Spark's connector accepts them
    df = read(spark, b, subscribe="carry", groupIdPrefix="etl",
              **{"kafka.group.id": "etl-1", "kafka.max.partition.fetch.bytes": "64",
                 "kafka.fetch.max.wait.ms": "100", "kafka.isolation.level": "read_committed",
                 "kafka.client.id": "nightly", "kafka.session.timeout.ms": "30000",
                 "kafka.check.crcs": "true"})
    assert offsets_by_partition(df) == {0: list(range(10)), 1: list(range(10))}
    with pytest.raises(Exception, match="option kafka.isolation.level must be"):
        read(spark, b, subscribe="carry", **{"kafka.isolation.level": "dirty"}).collect()


def test_split_ranges_min_partitions_as_spark() -> None:
    """Spark's KafkaOffsetRangeCalculator: pieces in proportion to each range's size."""
    start = {("t", 0): 0, ("t", 1): 0, ("t", 2): 0}
    end = {("t", 0): 100, ("t", 1): 10, ("t", 2): 0}
    got = split_ranges(start, end, None, 4)
    assert [(r.partition, r.start, r.end) for r in got] == [
        (0, 0, 25), (0, 25, 50), (0, 50, 75), (0, 75, 100), (1, 0, 10)]
    assert split_ranges(start, end, None, 2) == [OffsetRange("t", 0, 0, 100),
                                                 OffsetRange("t", 1, 0, 10)]
    # maxRecordsPerPartition first, then minPartitions
    assert len(split_ranges(start, end, 50, 8)) >= 8
