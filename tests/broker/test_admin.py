"""Admin APIs through real admin clients: topics, partitions, configs, delete records."""

from __future__ import annotations

from confluent_kafka import TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
)

from .wire import Wire, batch


def _code(future: object) -> int:
    return int(future.exception(10).args[0].code())  # type: ignore[attr-defined]


def test_topic_lifecycle_with_confluent_admin(broker) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    fs = admin.create_topics([NewTopic("adm", 2, 1, config={"retention.ms": "12345"}),
                              NewTopic("bad/name", 1, 1), NewTopic("rf3", 1, 3)])
    assert fs["adm"].result(10) is None
    assert _code(fs["bad/name"]) == 17  # INVALID_TOPIC_EXCEPTION
    assert _code(fs["rf3"]) == 38  # INVALID_REPLICATION_FACTOR
    assert _code(admin.create_topics([NewTopic("adm", 1, 1)])["adm"]) == 36  # already exists

    res = ConfigResource(ConfigResource.Type.TOPIC, "adm")
    configs = admin.describe_configs([res])[res].result(10)
    assert configs["retention.ms"].value == "12345"
    assert configs["segment.bytes"].value == str(1 << 30)

    fut = admin.incremental_alter_configs([ConfigResource(
        ConfigResource.Type.TOPIC, "adm", incremental_configs=[
            ConfigEntry("cleanup.policy", "compact",
                        incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE)])])
    fut[res].result(10) if res in fut else list(fut.values())[0].result(10)
    configs = admin.describe_configs([res])[res].result(10)
    assert configs["cleanup.policy"].value == "compact"
    assert configs["retention.ms"].value == str(7 * 24 * 3600 * 1000)

    assert admin.create_partitions([NewPartitions("adm", 5)])["adm"].result(10) is None
    md = admin.list_topics(timeout=10)
    assert len(md.topics["adm"].partitions) == 5
    assert _code(admin.create_partitions([NewPartitions("adm", 3)])["adm"]) == 37

    assert admin.delete_topics(["adm"])["adm"].result(10) is None
    assert "adm" not in admin.list_topics(timeout=10).topics


def test_topic_configs_survive_restart(broker) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("keep", 3, 1, config={"max.message.bytes": "5000"})])[
        "keep"].result(10)
    broker.restart()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    res = ConfigResource(ConfigResource.Type.TOPIC, "keep")
    assert admin.describe_configs([res])[res].result(10)["max.message.bytes"].value == "5000"
    assert len(admin.list_topics(timeout=10).topics["keep"].partitions) == 3
    with Wire(broker.bootstrap) as w:
        assert w.produce("keep", batch([b"x" * 6000]))["error_code"] == 10  # MESSAGE_TOO_LARGE


def test_delete_records(broker) -> None:
    with Wire(broker.bootstrap) as w:
        for i in range(10):
            w.produce("dr", batch([b"%d" % i]))
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    fut = admin.delete_records([TopicPartition("dr", 0, 6)])
    result = list(fut.values())[0].result(10)
    assert result.low_watermark == 6
    with Wire(broker.bootstrap) as w:
        assert w.fetch("dr", 2)["error_code"] == 1  # OFFSET_OUT_OF_RANGE
        assert w.fetch("dr", 6)["log_start_offset"] == 6
