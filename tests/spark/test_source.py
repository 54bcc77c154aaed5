"""spark.read.format("kafkactl") against a real broker, in the shared local[2] session."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kafkactl.spark.options import DataLossError, OptionError, parse_read_options
from kafkactl.spark.partition_reader import FetchError, RangeReader
from kafkactl.spark.planner import OffsetRange, plan
from tests.conftest import BrokerProcess
from tests.spark.conftest import create_topic, delete_records, produce


@pytest.fixture
def broker(module_broker: BrokerProcess) -> BrokerProcess:
    """Tests given `broker` here only read topics of their own (no pattern matches another's):
    one broker for the module (the one that kills it has its own)."""
    return module_broker

SCHEMA = ("struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
          "timestamp:timestamp,timestampType:int,"
          "headers:array<struct<key:string,value:binary>>>")


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

    df = read(spark, b, subscribe="events")
    assert df.schema.simpleString() == SCHEMA
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
    with pytest.raises(Exception, match="(?i)startingOfsets.*known options:.*startingOffsets"):
        read(spark, broker.bootstrap, subscribe="t", startingOfsets="earliest").collect()
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
              endingOffsets='{"lines":{"0":33}}')
    rows = df.orderBy("offset").collect()
    assert [(r.offset, r.value, r.key, r.headers) for r in rows] == \
        [(i, b"line-%03d" % i, None, []) for i in range(5, 33)]
    assert len({r.timestamp for r in rows}) == 1 and rows[0].timestampType == 0
