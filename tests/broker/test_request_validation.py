"""Request-level checks Kafka makes before doing anything, on a real broker:

- AlterConfigs / IncrementalAlterConfigs (Kafka's ConfigAdminManager.preprocess): a
  resource named twice, a config key given twice in a resource, a null value (other than an
  incremental DELETE's) are INVALID_REQUEST for that resource and change nothing; the
  default topic resource ("") is INVALID_REQUEST (ZkAdminManager.alterTopicConfigs);
- ListOffsets (KafkaApis, 3.9): a partition named twice is INVALID_REQUEST (every copy),
  MAX_TIMESTAMP (-3) below version 7 and unknown negative timestamps UNSUPPORTED_VERSION,
  each for its partition only."""

from __future__ import annotations

from typing import Any

import pytest

from kafkactl.protocol.api_keys import ApiKey
from tests.conftest import BrokerProcess

from .wire import Wire, batch

TOPIC, BROKER = 2, 4
SET, DELETE, APPEND = 0, 1, 2
INVALID_REQUEST, UNSUPPORTED_VERSION = 42, 35


@pytest.fixture
def broker(module_broker: BrokerProcess) -> BrokerProcess:
    """Each test uses topics of its own: one broker for the module."""
    return module_broker


def _incremental(w: Wire, resources: list[tuple[int, str, list[tuple[str, int, Any]]]]
                 ) -> list[tuple[str, int, str | None]]:
    r = w.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [
        {"resource_type": t, "resource_name": n, "configs": [
            {"name": k, "config_operation": op, "value": v} for k, op, v in ops]}
        for t, n, ops in resources], "validate_only": False})
    return [(x["resource_name"], x["error_code"], x["error_message"]) for x in r["responses"]]


def _alter(w: Wire, resources: list[tuple[int, str, list[tuple[str, Any]]]]
           ) -> list[tuple[str, int, str | None]]:
    r = w.request(ApiKey.ALTER_CONFIGS, 1, {"resources": [
        {"resource_type": t, "resource_name": n, "configs": [
            {"name": k, "value": v} for k, v in cfgs]}
        for t, n, cfgs in resources], "validate_only": False})
    return [(x["resource_name"], x["error_code"], x["error_message"]) for x in r["responses"]]


def _overrides(w: Wire, topic: str) -> dict[str, str]:
    r = w.request(ApiKey.DESCRIBE_CONFIGS, 1, {"resources": [
        {"resource_type": TOPIC, "resource_name": topic, "configuration_keys": None}],
        "include_synonyms": False})["results"][0]
    assert r["error_code"] == 0, r
    return {c["name"]: c["value"] for c in r["configs"] if c["config_source"] == 1}


def _broker_layer(w: Wire) -> dict[str, str]:
    r = w.request(ApiKey.DESCRIBE_CONFIGS, 1, {"resources": [
        {"resource_type": BROKER, "resource_name": "", "configuration_keys": None}],
        "include_synonyms": False})["results"][0]
    assert r["error_code"] == 0, r
    return {c["name"]: c["value"] for c in r["configs"]}


DUP_KEYS = "Error due to duplicate config keys"
ONCE = "Each resource must appear at most once."


def test_incremental_alter_configs_refuses_malformed_resources(broker) -> None:
    with Wire(broker.bootstrap) as w:
        assert w.create_topic("iac")["error_code"] == 0
        assert w.create_topic("iac-ok")["error_code"] == 0
        # a key twice (SET then DELETE): refused, not applied
        assert _incremental(w, [(TOPIC, "iac", [("retention.ms", SET, "100"),
                                                ("retention.ms", DELETE, None)])]) == [
            ("iac", INVALID_REQUEST, DUP_KEYS)]
        # a null value on SET / APPEND; a null DELETE is fine
        assert _incremental(w, [(TOPIC, "iac", [("retention.ms", SET, None),
                                                ("cleanup.policy", APPEND, None),
                                                ("segment.ms", DELETE, None)])]) == [
            ("iac", INVALID_REQUEST, "Null value not supported for : retention.ms, "
                                     "cleanup.policy")]
        # the same resource twice: both copies refused, the other resource applied
        assert _incremental(w, [(TOPIC, "iac", [("retention.ms", SET, "1")]),
                                (TOPIC, "iac-ok", [("retention.ms", SET, "3")]),
                                (TOPIC, "iac", [("retention.ms", SET, "2")])]) == [
            ("iac", INVALID_REQUEST, ONCE), ("iac-ok", 0, None),
            ("iac", INVALID_REQUEST, ONCE)]
        # the default topic resource
        assert _incremental(w, [(TOPIC, "", [("retention.ms", SET, "1")])]) == [
            ("", INVALID_REQUEST, "Default topic resources are not allowed.")]
        # broker resources get the same checks
        assert _incremental(w, [(BROKER, "", [("log.retention.ms", SET, "1000"),
                                              ("log.retention.ms", SET, "2000")])]) == [
            ("", INVALID_REQUEST, DUP_KEYS)]
        assert _incremental(w, [(BROKER, "", [("log.retention.ms", SET, None)])]) == [
            ("", INVALID_REQUEST, "Null value not supported for : log.retention.ms")]
        assert _overrides(w, "iac") == {}
        assert _overrides(w, "iac-ok") == {"retention.ms": "3"}
        assert "log.retention.ms" not in _broker_layer(w)


def test_alter_configs_refuses_malformed_resources(broker) -> None:
    with Wire(broker.bootstrap) as w:
        assert w.create_topic("ac", configs={"retention.ms": "5000"})["error_code"] == 0
        assert _alter(w, [(TOPIC, "ac", [("retention.ms", "1"), ("retention.ms", "2")])]) \
            == [("ac", INVALID_REQUEST, DUP_KEYS)]
        assert _alter(w, [(TOPIC, "ac", [("retention.ms", None), ("segment.ms", None)])]) \
            == [("ac", INVALID_REQUEST, "Null value not supported for : retention.ms, "
                                        "segment.ms")]
        assert _alter(w, [(TOPIC, "ac", [("retention.ms", "1")]),
                          (TOPIC, "ac", [("retention.ms", "2")])]) == [
            ("ac", INVALID_REQUEST, ONCE), ("ac", INVALID_REQUEST, ONCE)]
        assert _alter(w, [(TOPIC, "", [("retention.ms", "1")])]) == [
            ("", INVALID_REQUEST, "Default topic resources are not allowed.")]
        assert _overrides(w, "ac") == {"retention.ms": "5000"}
        # a well-formed one still replaces the overrides
        assert _alter(w, [(TOPIC, "ac", [("segment.ms", "60000")])]) == [("ac", 0, None)]
        assert _overrides(w, "ac") == {"segment.ms": "60000"}


def _list_offsets(w: Wire, version: int, topic: str,
                  partitions: list[tuple[int, int]]) -> list[tuple[int, int, int]]:
    r = w.request(ApiKey.LIST_OFFSETS, version, {
        "replica_id": -1, "isolation_level": 0, "topics": [{"name": topic, "partitions": [
            {"partition_index": p, "current_leader_epoch": -1, "timestamp": ts,
             "max_num_offsets": 1} for p, ts in partitions]}]})
    return [(p["partition_index"], p["error_code"], p["offset"])
            for p in r["topics"][0]["partitions"]]


def test_list_offsets_refuses_repeated_partitions_and_unsupported_timestamps(broker) -> None:
    with Wire(broker.bootstrap) as w:
        assert w.create_topic("lo", partitions=2)["error_code"] == 0
        assert w.produce("lo", batch([b"a", b"b", b"c"]))["error_code"] == 0
        # MAX_TIMESTAMP needs version 7
        for version in (1, 5, 6):
            assert _list_offsets(w, version, "lo", [(0, -3), (1, -1)]) == [
                (0, UNSUPPORTED_VERSION, -1), (1, 0, 0)], version
        assert _list_offsets(w, 7, "lo", [(0, -3)]) == [(0, 0, 0)]  # one timestamp: the first
        # a negative timestamp Kafka has no meaning for (or not at these versions)
        assert _list_offsets(w, 7, "lo", [(0, -4), (1, -7)]) == [
            (0, UNSUPPORTED_VERSION, -1), (1, UNSUPPORTED_VERSION, -1)]
        # a partition named twice: every copy refused, the other partition answered
        assert _list_offsets(w, 7, "lo", [(0, -1), (1, -2), (0, -2)]) == [
            (0, INVALID_REQUEST, -1), (1, 0, 0), (0, INVALID_REQUEST, -1)]
        # also across two entries of the same topic
        r = w.request(ApiKey.LIST_OFFSETS, 5, {
            "replica_id": -1, "isolation_level": 0, "topics": [
                {"name": "lo", "partitions": [{"partition_index": 1,
                                               "current_leader_epoch": -1, "timestamp": -1}]},
                {"name": "lo", "partitions": [{"partition_index": 1,
                                               "current_leader_epoch": -1, "timestamp": -1}]}]})
        assert [p["error_code"] for t in r["topics"] for p in t["partitions"]] == [
            INVALID_REQUEST, INVALID_REQUEST]


def test_list_offsets_v0_knows_latest_and_earliest_only(broker) -> None:
    with Wire(broker.bootstrap) as w:
        assert w.create_topic("lo0")["error_code"] == 0
        assert w.produce("lo0", batch([b"a", b"b"]))["error_code"] == 0
        r = w.request(ApiKey.LIST_OFFSETS, 0, {"replica_id": -1, "topics": [
            {"name": "lo0", "partitions": [
                {"partition_index": 0, "timestamp": ts, "max_num_offsets": 1}
                for ts in (-3, -1)]}]})
        assert [(p["error_code"], p["old_style_offsets"])
                for p in r["topics"][0]["partitions"]] == [(UNSUPPORTED_VERSION, []), (0, [2])]
