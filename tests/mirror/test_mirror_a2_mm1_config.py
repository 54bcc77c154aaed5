"""Kafka's MirrorMaker `--consumer.config` lines work as with Kafka's tool (its
createConsumers / maybeSetDefaultProperty): `exclude.internal.topics` (true: a whitelist
never selects an internal topic; false: it may), the Java assignor classes MirrorMaker
recommended (`partition.assignment.strategy=org.apache.kafka.clients.consumer.
RoundRobinAssignor`), and `enable.auto.commit=false` (what the mirror does anyway; true is
refused, with the reason). And MirrorMaker's comma whitelist (kafka.utils.TopicFilter:
`orders,payments` is `orders|payments`, spaces and surrounding quotes dropped)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kafkactl.client.group import GroupAdmin
from kafkactl.client.kafka_client import KafkaClient
from kafkactl.mirror.config import MirrorConfig, MirrorConfigError, consumer_kwargs
from tests.mirror.helpers import (
    FAST,
    assert_same,
    copied,
    create_topics,
    mirrored,
    produce,
    read_topic,
    run_mirror,
    start_mirror,
)
from tests.polling import wait_until

ROUND_ROBIN = "org.apache.kafka.clients.consumer.RoundRobinAssignor"


def _target_topics(bootstrap: str) -> set[str]:
    from kafkactl.client.admin import AdminClient

    with AdminClient(bootstrap) as admin:
        return set(admin.list_topics(include_internal=True))


def _commit_offsets(bootstrap: str, group: str, topic: str) -> None:
    """A group of the source commits an offset: __consumer_offsets gets records."""
    client = KafkaClient(bootstrap)
    try:
        assert GroupAdmin(client).commit_offsets(group, {(topic, 0): 3}) == {(topic, 0): 0}
    finally:
        client.close()


def test_a_mirrormaker_consumer_config_file_runs_the_mirror(broker_factory: Any,
                                                            tmp_path: Path) -> None:
    """The lines of a MirrorMaker 1 consumer.config, as Kafka's docs and tool wrote them."""
    source, target = broker_factory(**FAST), broker_factory(**FAST)
    create_topics(source.bootstrap, {"mm1.orders": 2})
    produce(source.bootstrap, "mm1.orders", 0, 200, partitions=2)
    config = tmp_path / "consumer.properties"
    config.write_text(f"bootstrap.servers={source.bootstrap}\ngroup.id=mm1-group\n"
                      "exclude.internal.topics=true\n"
                      f"partition.assignment.strategy={ROUND_ROBIN}\n"
                      "enable.auto.commit=false\nauto.offset.reset=earliest\n")
    m = start_mirror(tmp_path, source.bootstrap, target.bootstrap, "--consumer.config",
                     str(config), "--whitelist", r"mm1\..*")
    wait_until(lambda: mirrored(m, 200), 60, f"200 records mirrored:\n{m.log()}")

    def protocol() -> str | None:
        client = KafkaClient(source.bootstrap)
        try:
            group = GroupAdmin(client).describe_group("mm1-group")
        finally:
            client.close()
        return group.protocol if group.state == "Stable" else None

    # the group runs Java's RoundRobinAssignor as kafkactl's roundrobin
    assert wait_until(protocol, 30, f"a stable group:\n{m.log()}") == "roundrobin"
    assert m.terminate() == 0, m.log()
    assert_same(read_topic(source.bootstrap, "mm1.orders"),
                read_topic(target.bootstrap, "mm1.orders"))


def test_exclude_internal_topics_decides_whether_a_whitelist_selects_them(
        broker_factory: Any, tmp_path: Path) -> None:
    source, target = broker_factory(**FAST), broker_factory(**FAST)
    create_topics(source.bootstrap, {"data": 1})
    produce(source.bootstrap, "data", 0, 20)
    _commit_offsets(source.bootstrap, "app", "data")
    whitelist = "__consumer_offsets|data"
    renames = ["--rename", "__consumer_offsets:source.offsets"]

    # true (Java's default, and kafkactl's): the pattern never selects an internal topic
    m = start_mirror(tmp_path, source.bootstrap, target.bootstrap, "--whitelist", whitelist,
                     *renames, "-G", "excluding", "--consumer-property",
                     "exclude.internal.topics=true", name="excluding")
    # one lookup lists every matching topic: once `data` is copied, it was the only one
    wait_until(lambda: mirrored(m, 20), 60, f"data mirrored:\n{m.log()}")
    status = m.status()
    assert status is not None and set(status["topics"]) == {"data"}, status
    assert "source.offsets" not in _target_topics(target.bootstrap)
    assert m.terminate() == 0, m.log()

    # false: the pattern selects __consumer_offsets too (MirrorMaker users copied it so)
    m = start_mirror(tmp_path, source.bootstrap, target.bootstrap, "--whitelist", whitelist,
                     *renames, "-G", "including", "--consumer-property",
                     "exclude.internal.topics=false", name="including")
    wait_until(lambda: copied(target.bootstrap, "source.offsets", 1), 60,
               f"__consumer_offsets mirrored into source.offsets:\n{m.log()}")
    status = wait_until(lambda: (st := m.status()) and "__consumer_offsets" in st["topics"]
                        and st, 30, f"the status:\n{m.log()}")
    assert set(status["topics"]) == {"__consumer_offsets", "data"}
    assert m.terminate() == 0, m.log()


def test_an_mm1_comma_whitelist_and_blacklist(broker_factory: Any, tmp_path: Path) -> None:
    source, target = broker_factory(**FAST), broker_factory(**FAST)
    topics = {"orders": 1, "payments": 1, "refunds": 1, "other": 1}
    create_topics(source.bootstrap, topics)
    for topic in topics:
        produce(source.bootstrap, topic, 0, 10)
    # spaces and quotes as a shell or a properties file may bring them
    m = start_mirror(tmp_path, source.bootstrap, target.bootstrap, "--whitelist",
                     "'orders, payments,refunds'", "--blacklist", "refunds, nothing")
    wait_until(lambda: mirrored(m, 20), 60, f"orders and payments mirrored:\n{m.log()}")
    status = m.status()
    assert status is not None and set(status["topics"]) == {"orders", "payments"}, status
    assert m.terminate() == 0, m.log()
    assert {"orders", "payments"} <= _target_topics(target.bootstrap)
    assert not {"refunds", "other"} & _target_topics(target.bootstrap)


def test_mm1_lines_the_mirror_cannot_honour_are_refused_before_connecting(
        tmp_path: Path) -> None:
    """Nothing listens at the addresses: each is refused before any connection (exit 2)."""
    def refused(*args: str) -> str:
        r = run_mirror("--source", "127.0.0.1:1", "--target", "127.0.0.1:1", "--whitelist",
                       "x", *args)
        assert r.returncode == 2, (r.returncode, r.stderr)
        return r.stderr

    err = refused("--consumer-property", "enable.auto.commit=true")
    assert "enable.auto.commit=true could lose records" in err, err
    err = refused("--consumer-property",
                  "partition.assignment.strategy=org.apache.kafka.clients.consumer."
                  "CooperativeStickyAssignor")
    assert "CooperativeStickyAssignor is not an assignor kafkactl has" in err, err
    err = refused("--consumer-property", "exclude.internal.topics=maybe")
    assert "exclude.internal.topics must be true or false" in err, err


def test_the_config_reads_the_mm1_lines() -> None:
    assert consumer_kwargs({"enable.auto.commit": "false", "exclude.internal.topics": "false",
                            "partition.assignment.strategy":
                                f"{ROUND_ROBIN}, org.apache.kafka.clients.consumer."
                                "RangeAssignor"}) == {"assignors": ("roundrobin", "range")}
    config = MirrorConfig("a:1", "b:1", whitelist=" 'a,b{1,2}' ",
                          consumer_properties={"exclude.internal.topics": "false"})
    config.validate()
    assert config.whitelist == "a|b{1,2}"
    f = config.topic_filter()
    assert f.matches("a", internal=True) and f.matches("bb") and not f.matches("a,b")
    assert not MirrorConfig("a:1", "b:1", whitelist="a").topic_filter().matches(
        "a", internal=True)
    with pytest.raises(MirrorConfigError, match="--whitelist must not be empty"):
        MirrorConfig("a:1", "b:1", whitelist="''").validate()
