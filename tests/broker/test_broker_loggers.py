"""BROKER_LOGGER config resources (KIP-412): DescribeConfigs lists the broker's loggers
with their effective levels, IncrementalAlterConfigs SETs and DELETEs levels at run time,
with Kafka's refusals (RuntimeLoggerManager, ConfigAdminManager) and authorization on the
cluster. confluent-kafka has no BROKER_LOGGER resource type (librdkafka 2.x): kafka-python
is the real client here, the wire protocol the rest."""

from __future__ import annotations

import time
from typing import Any

from kafkactl.protocol.api_keys import ApiKey
from tests.conftest import BrokerProcess

from .wire import Wire

BROKER_LOGGER = 8
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
DYNAMIC_BROKER_LOGGER_CONFIG = 6
INVALID_CONFIG, INVALID_REQUEST, CLUSTER_AUTHORIZATION_FAILED = 40, 42, 31
NETWORK = "kafkactl.broker.network"  # logs "connection N from ..." at DEBUG


def _describe(w: Wire, name: str, keys: list[str] | None = None,
              version: int = 4) -> dict[str, Any]:
    return dict(w.request(ApiKey.DESCRIBE_CONFIGS, version, {
        "resources": [{"resource_type": BROKER_LOGGER, "resource_name": name,
                       "configuration_keys": keys}],
        "include_synonyms": True, "include_documentation": False})["results"][0])


def _levels(w: Wire) -> dict[str, str]:
    r = _describe(w, "0")
    assert r["error_code"] == 0, r
    return {c["name"]: c["value"] for c in r["configs"]}


def _incremental(w: Wire, name: str, ops: list[tuple[str, int, str | None]],
                 validate_only: bool = False) -> dict[str, Any]:
    return dict(w.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {
        "resources": [{"resource_type": BROKER_LOGGER, "resource_name": name, "configs": [
            {"name": k, "config_operation": op, "value": v} for k, op, v in ops]}],
        "validate_only": validate_only})["responses"][0])


def _connections_logged(broker: BrokerProcess) -> int:
    return broker.log().count(" connection ")


def test_describe_set_and_delete_with_kafka_python(broker: BrokerProcess) -> None:
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    resource = ConfigResource(ConfigResourceType.BROKER_LOGGER, "0")

    def describe() -> dict[str, dict[str, Any]]:
        got = admin.describe_configs([resource], config_filter="all")
        return dict(got["broker_logger"]["0"])

    def alter(configs: dict[str, Any]) -> str:
        got = admin.alter_configs([ConfigResource(ConfigResourceType.BROKER_LOGGER, "0",
                                                  configs=configs)], incremental=True)
        return str(got["broker_logger"]["0"])

    try:
        loggers = describe()
        # `kafkactl serve` logs at INFO: the root logger and every logger under it
        assert loggers["root"]["value"] == "INFO"
        assert loggers["kafkactl"]["value"] == "INFO"  # a hierarchy node, listed too
        assert loggers[NETWORK]["value"] == "INFO"
        assert {e["config_source"] for e in loggers.values()} == {
            "DYNAMIC_BROKER_LOGGER_CONFIG"}
        assert not any(e["read_only"] or e["synonyms"] for e in loggers.values())

        assert alter({"kafkactl.broker": "DEBUG"}) == "OK"
        loggers = describe()
        assert loggers["kafkactl.broker"]["value"] == "DEBUG"
        assert loggers[NETWORK]["value"] == "DEBUG"  # inherited
        assert loggers["root"]["value"] == "INFO"
        # the level is live: the broker now logs its connections
        before = _connections_logged(broker)
        with Wire(broker.bootstrap):
            pass
        deadline = time.monotonic() + 10
        while _connections_logged(broker) == before and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _connections_logged(broker) > before, broker.log()

        assert alter({NETWORK: "ERROR", "kafkactl.broker.server": "TRACE"}) == "OK"
        loggers = describe()
        assert (loggers[NETWORK]["value"], loggers["kafkactl.broker.server"]["value"]) == (
            "ERROR", "TRACE")
        # DELETE: the logger follows its parent again
        assert alter({NETWORK: ("DELETE", None)}) == "OK"
        assert describe()[NETWORK]["value"] == "DEBUG"
        assert alter({"kafkactl.broker": ("DELETE", None), "root": "WARN"}) == "OK"
        loggers = describe()
        assert loggers[NETWORK]["value"] == "WARN"
        assert loggers["kafkactl.broker.server"]["value"] == "TRACE"
    finally:
        admin.close()


def test_kafkas_refusals_change_nothing(module_broker: BrokerProcess) -> None:
    with Wire(module_broker.bootstrap) as w:
        before = _levels(w)
        for name, code, said in (
                ("", INVALID_REQUEST, "Broker id must not be empty"),
                ("x", INVALID_REQUEST, "Broker id must be an integer, but it is: x"),
                ("7", INVALID_REQUEST, "Unexpected broker id, expected 0 but received 7")):
            r = _describe(w, name)
            assert (r["error_code"], r["error_message"]) == (code, said), r
        r = _describe(w, "0", keys=["root", NETWORK])
        assert [(c["name"], c["value"], c["config_source"], c["read_only"], c["synonyms"])
                for c in r["configs"]] == [
            (NETWORK, "INFO", DYNAMIC_BROKER_LOGGER_CONFIG, False, []),
            ("root", "INFO", DYNAMIC_BROKER_LOGGER_CONFIG, False, [])]
        r = _describe(w, "0", keys=["root"], version=0)
        assert r["configs"][0]["is_default"] is False

        good = (NETWORK, SET, "DEBUG")  # refused with the bad one: all or nothing
        for name, ops, code, said in (
                ("7", [good], INVALID_REQUEST, "Unexpected node id. Expected 0, but received 7"),
                ("0", [good, ("no.such.logger", SET, "DEBUG")], INVALID_CONFIG,
                 "Logger no.such.logger does not exist!"),
                ("0", [good, ("kafkactl", SET, "OFF")], INVALID_CONFIG,
                 "Cannot set the log level of kafkactl to OFF as it is not a supported log "
                 "level. Valid log levels are DEBUG, ERROR, FATAL, INFO, TRACE, WARN"),
                ("0", [good, ("kafkactl", SET, "debug")], INVALID_CONFIG, None),
                ("0", [good, ("kafkactl", APPEND, "DEBUG")], INVALID_REQUEST,
                 "APPEND operation is not allowed for the BROKER_LOGGER resource"),
                ("0", [good, ("kafkactl", SUBTRACT, "DEBUG")], INVALID_REQUEST,
                 "SUBTRACT operation is not allowed for the BROKER_LOGGER resource"),
                ("0", [good, ("root", DELETE, None)], INVALID_REQUEST,
                 "Removing the log level of the root logger is not allowed"),
                ("0", [good, ("kafkactl", SET, None)], INVALID_REQUEST,
                 "Null value not supported for : kafkactl"),
                ("0", [good, (NETWORK, DELETE, None)], INVALID_REQUEST,
                 "Error due to duplicate config keys")):
            r = _incremental(w, name, ops)
            assert r["error_code"] == code, (ops, r)
            if said is not None:
                assert r["error_message"] == said, r
        assert _incremental(w, "0", [good], validate_only=True)["error_code"] == 0
        # the legacy AlterConfigs never altered log levels in Kafka
        r = w.request(ApiKey.ALTER_CONFIGS, 2, {
            "resources": [{"resource_type": BROKER_LOGGER, "resource_name": "0",
                           "configs": [{"name": NETWORK, "value": "DEBUG"}]}],
            "validate_only": False})["responses"][0]
        assert r["error_code"] == INVALID_REQUEST and "BROKER_LOGGER" in r["error_message"], r
        assert _levels(w) == before


def test_cluster_authorization_needed(broker_factory) -> None:
    """ANONYMOUS is not a super user: DESCRIBE_CONFIGS / ALTER_CONFIGS on the cluster."""
    broker = broker_factory(authorizer_class_name="kafka.security.authorizer.AclAuthorizer",
                            super_users="User:admin")
    with Wire(broker.bootstrap) as w:
        r = _describe(w, "0")
        assert (r["error_code"], r["configs"]) == (CLUSTER_AUTHORIZATION_FAILED, []), r
        r = _incremental(w, "0", [(NETWORK, SET, "DEBUG")])
        assert r["error_code"] == CLUSTER_AUTHORIZATION_FAILED, r
