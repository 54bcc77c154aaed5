"""-X key=value: librdkafka's and Java's names for one setting, typed values, and a clear
refusal (with the closest name) for anything else. The settings map onto the keywords of
the real client classes: checked against their signatures."""

from __future__ import annotations

import inspect

import pytest

from kafkactl.cli import _properties as props
from kafkactl.cli._properties import (
    CONSUMER_TABLE,
    PRODUCER_TABLE,
    PropertyError,
    parse_consumer_properties,
    parse_producer_properties,
)

# The keys issue 30 found refused, with the field and value each must give.
PRODUCER_KEYS = {
    "queue.buffering.max.ms=20": ("linger_ms", 20),
    "linger.ms=7": ("linger_ms", 7),
    "compression.codec=LZ4": ("compression_type", "lz4"),
    "compression.type=zstd": ("compression_type", "zstd"),
    "message.timeout.ms=4000": ("delivery_timeout_ms", 4000),
    "delivery.timeout.ms=5000": ("delivery_timeout_ms", 5000),
    "batch.num.messages=500": ("batch_num_messages", 500),
    "batch.size=65536": ("batch_size", 65536),
    "socket.timeout.ms=3000": ("request_timeout_ms", 3000),
    "request.timeout.ms=3500": ("request_timeout_ms", 3500),
    "message.max.bytes=2000000": ("max_request_size", 2000000),
    "max.request.size=3000000": ("max_request_size", 3000000),
    "acks=-1": ("acks", "all"),
    "request.required.acks=0": ("acks", "0"),
    "client.id=me": ("client_id", "me"),
    "queue.buffering.max.kbytes=1024": ("buffer_memory", 1 << 20),
    "enable.idempotence=false": ("enable_idempotence", False),
    "message.send.max.retries=3": ("retries", 3),
    "partitioner=consistent_random": ("partitioner", "consistent_random"),
    "partitioner=fnv1a_random": ("partitioner", "fnv1a_random"),
    "partitioner.class=org.apache.kafka.clients.producer.RoundRobinPartitioner":
        ("partitioner", "roundrobin"),
}

CONSUMER_KEYS = {
    "fetch.wait.max.ms=100": ("fetch_max_wait_ms", 100),
    "fetch.max.wait.ms=200": ("fetch_max_wait_ms", 200),
    "fetch.min.bytes=10": ("fetch_min_bytes", 10),
    "fetch.max.bytes=1000000": ("fetch_max_bytes", 1000000),
    "max.partition.fetch.bytes=65536": ("max_partition_fetch_bytes", 65536),
    "fetch.message.max.bytes=32768": ("max_partition_fetch_bytes", 32768),
    "auto.offset.reset=smallest": ("auto_offset_reset", "earliest"),
    "auto.offset.reset=latest": ("auto_offset_reset", "latest"),
    "auto.offset.reset=error": ("auto_offset_reset", "none"),
    "group.id=g": ("group_id", "g"),
    "enable.auto.commit=false": ("enable_auto_commit", False),
    "auto.commit.interval.ms=1000": ("auto_commit_interval_ms", 1000),
    "session.timeout.ms=6000": ("session_timeout_ms", 6000),
    "heartbeat.interval.ms=1000": ("heartbeat_interval_ms", 1000),
    "max.poll.interval.ms=60000": ("max_poll_interval_ms", 60000),
    "isolation.level=read_committed": ("isolation_level", 1),
    "isolation.level=read_uncommitted": ("isolation_level", 0),
    "check.crcs=false": ("check_crcs", False),
    "max.poll.records=3": ("max_poll_records", 3),
    "metadata.max.age.ms=2000": ("metadata_max_age_ms", 2000),
    "client.id=c": ("client_id", "c"),
    "socket.timeout.ms=3000": ("request_timeout_ms", 3000),
    "request.timeout.ms=4000": ("request_timeout_ms", 4000),
    "group.instance.id=i1": ("group_instance_id", "i1"),
    "partition.assignment.strategy=roundrobin,range": (
        "partition_assignment_strategy", ("roundrobin", "range")),
    "partition.assignment.strategy=org.apache.kafka.clients.consumer.RangeAssignor": (
        "partition_assignment_strategy", ("range",)),
}


@pytest.mark.parametrize("item", PRODUCER_KEYS)
def test_producer_names_of_both_clients(item: str) -> None:
    security, settings = parse_producer_properties([item])
    name, value = PRODUCER_KEYS[item]
    assert security == {}
    assert getattr(settings, name) == value
    assert settings.given_as[name] == item.split("=")[0]


@pytest.mark.parametrize("item", CONSUMER_KEYS)
def test_consumer_names_of_both_clients(item: str) -> None:
    security, settings = parse_consumer_properties([item])
    name, value = CONSUMER_KEYS[item]
    assert security == {}
    assert getattr(settings, name) == value


def test_security_properties_pass_through_to_both() -> None:
    items = ["security.protocol=SASL_PLAINTEXT", "sasl.mechanisms=PLAIN",
             "sasl.username=u", "sasl.password=a=b", "linger.ms=1"]
    security, settings = parse_producer_properties(items)
    assert security == {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN",
                        "sasl.username": "u", "sasl.password": "a=b"}
    assert settings.given() == {"linger_ms": 1}
    security, _ = parse_consumer_properties(items[:4])
    assert security["sasl.password"] == "a=b"


def test_the_security_keys_are_the_clients() -> None:
    from kafkactl.client.security import SECURITY_KEYS

    assert props.SECURITY_KEYS == SECURITY_KEYS


def test_the_later_of_two_names_wins_as_in_kcat() -> None:
    _, s = parse_producer_properties(["linger.ms=5", "queue.buffering.max.ms=50"])
    assert s.linger_ms == 50 and s.option("linger_ms") == "-X queue.buffering.max.ms"


@pytest.mark.parametrize(("items", "parse", "message"), [
    (["queue.buffering.max.msx=1"], parse_producer_properties,
     "-X queue.buffering.max.msx: not a producer property kafkactl knows; the closest is "
     "queue.buffering.max.ms"),
    (["fetch.wait.max=1"], parse_consumer_properties,
     "the closest is fetch.wait.max.ms"),
    (["group.id=g"], parse_producer_properties, "-X group.id: a consumer property"),
    (["linger.ms=1"], parse_consumer_properties, "-X linger.ms: a producer property"),
    (["bootstrap.servers=h:1"], parse_producer_properties,
     "-X bootstrap.servers: give it as -b/--bootstrap-server"),
    (["linger.ms"], parse_producer_properties, "must look like key=value"),
    (["=1"], parse_producer_properties, "must look like key=value"),
    (["acks=2"], parse_producer_properties, "-X acks=2: must be one of all, -1, 0, 1"),
    (["compression.codec=brotli"], parse_producer_properties,
     "-X compression.codec=brotli: must be one of none, gzip, snappy, lz4, zstd"),
    (["batch.size=0"], parse_producer_properties, "-X batch.size=0: must be >= 1"),
    (["linger.ms=soon"], parse_producer_properties, "needs a number of milliseconds"),
    (["message.max.bytes=x"], parse_producer_properties, "needs an integer"),
    (["enable.idempotence=maybe"], parse_producer_properties, "must be true or false"),
    (["partitioner=fnv1b"], parse_producer_properties, "-X partitioner=fnv1b: must be"),
    (["isolation.level=serializable"], parse_consumer_properties,
     "must be one of read_uncommitted, read_committed"),
    (["partition.assignment.strategy=cooperative-sticky"], parse_consumer_properties,
     "cooperative-sticky: kafkactl's groups assign with range or roundrobin"),
    (["check.crcs=perhaps"], parse_consumer_properties, "-X check.crcs=perhaps: must be"),
    (["max.poll.records=0"], parse_consumer_properties, "-X max.poll.records=0: must be >= 1"),
    (["max.poll.records=all"], parse_consumer_properties,
     "-X max.poll.records=all: needs an integer"),
])
def test_refusals_name_the_property_and_why(items: list[str], parse, message: str) -> None:
    with pytest.raises(PropertyError) as e:
        parse(items)
    assert message in str(e.value)


def test_fractional_linger_as_librdkafka_takes_it() -> None:
    _, s = parse_producer_properties(["queue.buffering.max.ms=0.5"])
    assert s.linger_ms == 0.5


def test_producer_settings_are_producer_keywords() -> None:
    from kafkactl.client.producer import Producer

    every = [f"{name}=1" for name in ("linger.ms", "batch.size", "buffer.memory",
                                      "delivery.timeout.ms", "max.block.ms", "retries",
                                      "retry.backoff.ms", "request.timeout.ms",
                                      "max.in.flight", "metadata.max.age.ms",
                                      "batch.num.messages")]
    every += ["max.request.size=1000", "acks=1", "compression.type=gzip", "client.id=x",
              "enable.idempotence=true", "partitioner=random", "transactional.id=t",
              "transaction.timeout.ms=1"]
    _, s = parse_producer_properties(every)
    kwargs = s.producer_kwargs()
    assert "batch_num_messages" not in kwargs  # accepted, not applied
    params = inspect.signature(Producer).parameters
    assert set(kwargs) <= set(params), set(kwargs) - set(params)
    covered = {s.field for s in PRODUCER_TABLE.values()} - {"batch_num_messages"}
    assert covered == set(kwargs)


def test_consumer_settings_are_consumer_and_group_keywords() -> None:
    from kafkactl.client.consumer import Consumer
    from kafkactl.client.group.consumer import GroupConsumer

    items = [next(k for k in CONSUMER_KEYS if CONSUMER_KEYS[k][0] == s.field)
             for s in {id(s): s for s in CONSUMER_TABLE.values()}.values()]
    _, s = parse_consumer_properties(items)
    consumer = s.consumer_kwargs()
    group = s.group_kwargs()
    assert set(consumer) <= set(inspect.signature(Consumer).parameters)
    assert set(group) <= set(inspect.signature(GroupConsumer).parameters)
    assert group["rebalance_timeout_ms"] == 60000 and group["assignors"] == ("roundrobin", "range")
    # every setting lands in one of the two, but group.id, which the command decides
    assert set(s.given()) - set(consumer) - set(group) == {
        "group_id", "max_poll_interval_ms", "partition_assignment_strategy"}


def test_only_a_near_miss_gets_a_closest_name() -> None:
    with pytest.raises(PropertyError) as e:
        parse_producer_properties(["lingr.ms=1"])
    assert str(e.value).endswith("; the closest is linger.ms")
    for far in ("zzz", "foo.bar"):  # (difflib's nearest were batch.size, fetch.min.bytes)
        with pytest.raises(PropertyError) as e:
            parse_consumer_properties([f"{far}=1"])
        assert str(e.value) == (f"-X {far}: not a consumer property kafkactl knows "
                                "(--help lists them)")


def test_produce_flags_and_x_must_agree() -> None:
    import typer

    from kafkactl.cli.produce import _producer_kwargs

    _, s = parse_producer_properties(["queue.buffering.max.ms=100", "compression.codec=gzip",
                                      "message.max.bytes=2000000", "request.required.acks=1"])
    none = {"--compression": None, "--acks": None, "--batch-size": None,
            "--linger-ms": None, "--partitioner": None}
    kwargs = _producer_kwargs(s, none)
    assert (kwargs["linger_ms"], kwargs["compression_type"], kwargs["max_request_size"],
            kwargs["acks"], kwargs["batch_size"]) == (100, "gzip", 2000000, "1", 1_000_000)
    # the same value through both is fine; -1 and all are one value
    kwargs = _producer_kwargs(s, {**none, "--linger-ms": 100.0, "--acks": "1",
                                  "--compression": "GZIP"})
    assert kwargs["linger_ms"] == 100.0
    with pytest.raises(typer.Exit) as e:
        _producer_kwargs(s, {**none, "--linger-ms": 5.0})
    assert e.value.exit_code == 2
    # defaults fit the batch when -X does not say
    _, s = parse_producer_properties([])
    kwargs = _producer_kwargs(s, {**none, "--batch-size": 4_000_000})
    assert kwargs["max_request_size"] == 4_000_000 + 1024
    assert kwargs["buffer_memory"] == 64 << 20
    _, s = parse_producer_properties(["message.max.bytes=5000", "buffer.memory=9000000"])
    kwargs = _producer_kwargs(s, none)
    assert (kwargs["max_request_size"], kwargs["buffer_memory"]) == (5000, 9000000)
