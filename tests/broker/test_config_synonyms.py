"""DescribeConfigs' synonyms as Kafka's ConfigHelper lists them (configSynonyms): a topic
config's override, then its broker key (ServerTopicConfigSynonyms) and that key's
synonyms (log.retention.ms, .minutes, .hours) in each broker layer: dynamic per broker,
dynamic cluster default, server.properties, default; everything before the first entry
of the broker key itself dropped, as Kafka drops it. Unset keys without a default are
null, not ""."""

from __future__ import annotations

from typing import Any

from kafkactl.protocol.api_keys import ApiKey
from tests.conftest import BrokerProcess

from .wire import Wire

TOPIC, BROKER = 2, 4
TOPIC_CONFIG, DYNAMIC_BROKER, DYNAMIC_DEFAULT, STATIC, DEFAULT = 1, 2, 3, 4, 5
STATIC_OVERRIDES = {"log.retention.hours": "48", "log.roll.hours": "24",
                    "message.max.bytes": "2000000"}


def _describe(w: Wire, rtype: int, name: str) -> dict[str, dict[str, Any]]:
    r = w.request(ApiKey.DESCRIBE_CONFIGS, 4, {
        "resources": [{"resource_type": rtype, "resource_name": name,
                       "configuration_keys": None}],
        "include_synonyms": True, "include_documentation": False})["results"][0]
    assert r["error_code"] == 0, r
    return {c["name"]: c for c in r["configs"]}


def _synonyms(entry: dict[str, Any]) -> list[tuple[str, str | None, int]]:
    return [(s["name"], s["value"], s["source"]) for s in entry["synonyms"]]


def _incremental(w: Wire, name: str, key: str, value: str) -> None:
    r = w.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {
        "resources": [{"resource_type": BROKER, "resource_name": name, "configs": [
            {"name": key, "config_operation": 0, "value": value}]}],
        "validate_only": False})["responses"][0]
    assert r["error_code"] == 0, r


def test_topic_synonyms_seen_by_real_clients(broker_factory) -> None:
    """librdkafka asks for synonyms (a dict by name there): segment.bytes has its broker
    default, max.message.bytes the static message.max.bytes, min.cleanable.dirty.ratio
    the broker key Kafka names for it."""
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

    broker: BrokerProcess = broker_factory(**{k.replace(".", "_"): v
                                              for k, v in STATIC_OVERRIDES.items()})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("cc", 1, 1, config={"retention.ms": "5000"})])["cc"].result(10)
    resource = ConfigResource(ResourceType.TOPIC, "cc")
    entries = admin.describe_configs([resource])[resource].result(10)

    def synonyms(key: str) -> dict[str, tuple[str | None, int]]:
        return {n: (s.value, int(s.source)) for n, s in entries[key].synonyms.items()}

    assert synonyms("segment.bytes") == {"log.segment.bytes": ("1073741824", DEFAULT)}
    assert int(entries["max.message.bytes"].source) == STATIC
    assert "message.max.bytes" in synonyms("max.message.bytes")
    assert synonyms("min.cleanable.dirty.ratio") == {
        "log.cleaner.min.cleanable.ratio": ("0.5", DEFAULT)}
    assert synonyms("cleanup.policy") == {"log.cleanup.policy": ("delete", DEFAULT)}
    assert synonyms("retention.ms") == {"retention.ms": ("5000", TOPIC_CONFIG)}

    # kafka-python keeps the list as sent (not a dict by name)
    from kafka.admin import ConfigResource as KpResource
    from kafka.admin import ConfigResourceType, KafkaAdminClient

    kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        got = kp.describe_configs([KpResource(ConfigResourceType.TOPIC, "cc")],
                                  include_synonyms=True, config_filter="all")["topic"]["cc"]
    finally:
        kp.close()
    assert got["max.message.bytes"]["synonyms"] == [
        {"name": "message.max.bytes", "value": "2000000", "source": "STATIC_BROKER_CONFIG"},
        {"name": "message.max.bytes", "value": "1048588", "source": "DEFAULT_CONFIG"}]
    assert got["segment.bytes"]["config_source"] == "DEFAULT_CONFIG"


def test_synonyms_in_every_layer_in_kafkas_order(broker_factory) -> None:
    broker: BrokerProcess = broker_factory(**{k.replace(".", "_"): v
                                              for k, v in STATIC_OVERRIDES.items()})
    with Wire(broker.bootstrap) as w:
        assert w.create_topic("own", configs={"retention.ms": "5000"})["error_code"] == 0
        assert w.create_topic("plain")["error_code"] == 0

        # the broker: log.retention.ms unset is null, with no synonym (Kafka drops the
        # log.retention.hours entries before it); log.retention.hours its two layers
        b = _describe(w, BROKER, "0")
        assert b["log.retention.ms"]["value"] is None
        assert b["log.retention.ms"]["config_source"] == DEFAULT
        assert _synonyms(b["log.retention.ms"]) == []
        assert b["log.retention.ms"]["config_type"] == 5  # LONG, whatever the value
        assert _synonyms(b["log.retention.hours"]) == [
            ("log.retention.hours", "48", STATIC), ("log.retention.hours", "168", DEFAULT)]
        assert b["log.retention.hours"]["config_source"] == STATIC
        assert b["advertised.listeners"]["value"] is None
        assert _synonyms(b["log.segment.bytes"]) == [
            ("log.segment.bytes", "1073741824", DEFAULT)]
        assert b["log.preallocate"]["value"] == "false"  # a topic default's broker key

        # topics: the broker key's layers after the topic's own override
        t = _describe(w, TOPIC, "own")
        assert _synonyms(t["segment.bytes"]) == [("log.segment.bytes", "1073741824", DEFAULT)]
        assert _synonyms(t["max.message.bytes"]) == [
            ("message.max.bytes", "2000000", STATIC), ("message.max.bytes", "1048588", DEFAULT)]
        assert t["max.message.bytes"]["config_source"] == STATIC
        assert _synonyms(t["retention.ms"]) == [("retention.ms", "5000", TOPIC_CONFIG)]
        assert _synonyms(t["segment.ms"]) == []  # log.roll.ms unset: as Kafka, no synonym
        assert t["segment.ms"]["value"] == str(24 * 3600 * 1000)
        assert _synonyms(t["min.insync.replicas"]) == [("min.insync.replicas", "1", DEFAULT)]
        assert _synonyms(t["compression.gzip.level"]) == [
            ("compression.gzip.level", "-1", DEFAULT)]
        assert _synonyms(t["leader.replication.throttled.replicas"]) == []  # none in Kafka

        # dynamic layers on top
        _incremental(w, "", "log.retention.ms", "3600000")
        _incremental(w, "0", "log.retention.ms", "7200000")
        _incremental(w, "", "compression.type", "gzip")
        layers = [("log.retention.ms", "7200000", DYNAMIC_BROKER),
                  ("log.retention.ms", "3600000", DYNAMIC_DEFAULT),
                  ("log.retention.hours", "48", STATIC),
                  ("log.retention.hours", "168", DEFAULT)]
        t = _describe(w, TOPIC, "own")
        assert _synonyms(t["retention.ms"]) == [("retention.ms", "5000", TOPIC_CONFIG),
                                                *layers]
        assert t["retention.ms"]["config_source"] == TOPIC_CONFIG
        p = _describe(w, TOPIC, "plain")
        assert _synonyms(p["retention.ms"]) == layers
        assert (p["retention.ms"]["value"], p["retention.ms"]["config_source"]) == (
            "7200000", DYNAMIC_BROKER)
        assert _synonyms(p["compression.type"]) == [("compression.type", "gzip", DYNAMIC_DEFAULT),
                                                    ("compression.type", "producer", DEFAULT)]
        assert p["compression.type"]["config_source"] == DYNAMIC_DEFAULT
        b = _describe(w, BROKER, "0")
        assert b["log.retention.ms"]["value"] == "7200000"
        assert _synonyms(b["log.retention.ms"]) == layers
        # log.retention.hours: the log.retention.ms entries before it are dropped
        assert _synonyms(b["log.retention.hours"]) == layers[2:]
        d = _describe(w, BROKER, "")  # the cluster default: its own layer only
        assert _synonyms(d["log.retention.ms"]) == [("log.retention.ms", "3600000",
                                                     DYNAMIC_DEFAULT)]

