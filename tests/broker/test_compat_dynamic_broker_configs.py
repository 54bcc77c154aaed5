"""Dynamic broker configs (KIP-226, issue 12.9): AlterConfigs / IncrementalAlterConfigs on
BROKER resources for the keys this broker honours, persisted in the data dir, described
with their source and synonyms; read-only keys refused naming the key."""

from __future__ import annotations

import subprocess
from typing import Any

from kafkactl.protocol.api_keys import ApiKey
from tests import zygote

from .wire import Wire, batch

BROKER, TOPIC = 4, 2
DYNAMIC_BROKER, DYNAMIC_DEFAULT, STATIC, DEFAULT = 2, 3, 4, 5
DYNAMIC_TOPIC = 1


def _describe(w: Wire, rtype: int, name: str) -> dict[str, dict[str, Any]]:
    r = w.request(ApiKey.DESCRIBE_CONFIGS, 4, {
        "resources": [{"resource_type": rtype, "resource_name": name,
                       "configuration_keys": None}],
        "include_synonyms": True, "include_documentation": False})["results"][0]
    assert r["error_code"] == 0, r
    return {c["name"]: c for c in r["configs"]}


def _incremental(w: Wire, name: str, ops: list[tuple[str, int, str | None]],
                 validate_only: bool = False) -> dict[str, Any]:
    return w.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {
        "resources": [{"resource_type": BROKER, "resource_name": name, "configs": [
            {"name": k, "config_operation": op, "value": v} for k, op, v in ops]}],
        "validate_only": validate_only})["responses"][0]


def _alter(w: Wire, name: str, configs: dict[str, str]) -> dict[str, Any]:
    return w.request(ApiKey.ALTER_CONFIGS, 2, {
        "resources": [{"resource_type": BROKER, "resource_name": name, "configs": [
            {"name": k, "value": v} for k, v in configs.items()]}],
        "validate_only": False})["responses"][0]


def test_dynamic_broker_configs_apply_persist_and_describe(broker_factory) -> None:
    broker = broker_factory(log_retention_bytes="1000000")  # a static broker config
    with Wire(broker.bootstrap) as w:
        assert w.create_topic("dyn")["error_code"] == 0
        assert w.create_topic("own", configs={"retention.ms": "5000"})["error_code"] == 0
        # cluster-wide default, then a per-broker value that wins over it
        assert _incremental(w, "", [("log.retention.ms", 0, "3600000"),
                                    ("message.max.bytes", 0, "2000000")])["error_code"] == 0
        assert _incremental(w, "0", [("log.retention.ms", 0, "7200000")])["error_code"] == 0
        b = _describe(w, BROKER, "0")
        assert b["log.retention.ms"]["value"] == "7200000"
        assert b["log.retention.ms"]["config_source"] == DYNAMIC_BROKER
        assert b["log.retention.ms"]["read_only"] is False
        assert [(s["value"], s["source"]) for s in b["log.retention.ms"]["synonyms"]][:2] == [
            ("7200000", DYNAMIC_BROKER), ("3600000", DYNAMIC_DEFAULT)]
        assert b["message.max.bytes"]["config_source"] == DYNAMIC_DEFAULT
        assert b["log.retention.bytes"]["config_source"] == STATIC
        assert b["log.dirs"]["read_only"] is True
        d = _describe(w, BROKER, "")
        assert {k: v["value"] for k, v in d.items()} == {
            "log.retention.ms": "3600000", "message.max.bytes": "2000000"}
        # topics without an override follow the new defaults, with the source shown
        t = _describe(w, TOPIC, "dyn")
        assert t["retention.ms"]["value"] == "7200000"
        assert t["retention.ms"]["config_source"] == DYNAMIC_BROKER
        assert t["max.message.bytes"]["value"] == "2000000"
        assert _describe(w, TOPIC, "own")["retention.ms"]["config_source"] == DYNAMIC_TOPIC
        # message.max.bytes is live: a 1.5 MB record now fits
        assert w.produce("dyn", batch([b"x" * 1_500_000]))["error_code"] == 0
    broker.restart()
    with Wire(broker.bootstrap) as w:
        t = _describe(w, TOPIC, "dyn")
        assert t["retention.ms"]["value"] == "7200000"  # persisted across the restart
        # AlterConfigs replaces the whole per-broker layer; DELETE removes a key
        assert _alter(w, "0", {})["error_code"] == 0
        assert _describe(w, TOPIC, "dyn")["retention.ms"]["value"] == "3600000"
        assert _incremental(w, "", [("log.retention.ms", 1, None)])["error_code"] == 0
        b = _describe(w, BROKER, "0")
        assert b["log.retention.ms"]["config_source"] == DEFAULT


def test_read_only_and_invalid_broker_configs_refused(broker) -> None:
    with Wire(broker.bootstrap) as w:
        for key, value in (("log.dirs", "/tmp/x"), ("broker.id", "7"),
                           ("log.retention.hours", "1")):
            r = _incremental(w, "0", [(key, 0, value)])
            assert r["error_code"] == 40 and key in r["error_message"], r
        r = _incremental(w, "", [("log.cleanup.policy", 0, "bogus")])
        assert r["error_code"] == 40 and "log.cleanup.policy" in r["error_message"], r
        r = _incremental(w, "0", [("log.retention.ms", 0, "1000")], validate_only=True)
        assert r["error_code"] == 0
        assert _describe(w, BROKER, "0")["log.retention.ms"]["config_source"] == DEFAULT
        r = _incremental(w, "9", [("log.retention.ms", 0, "1000")])
        assert r["error_code"] == 42  # not this broker


def _cli(broker, *args: str) -> subprocess.CompletedProcess[str]:
    return zygote.run(["configs", *args, "--bootstrap-server", broker.bootstrap], text=True,
                      timeout=60)


def test_configs_cli_with_kafka_configs_flags(broker) -> None:
    with Wire(broker.bootstrap) as w:
        assert w.create_topic("cli")["error_code"] == 0
    r = _cli(broker, "alter", "--entity-type", "topics", "--entity-name", "cli",
             "--add-config", "retention.ms=5000,cleanup.policy=[compact,delete]")
    assert r.returncode == 0 and "Completed updating config for topic cli." in r.stdout, r
    r = _cli(broker, "describe", "--entity-type", "topics", "--entity-name", "cli")
    assert "Dynamic configs for topic cli are:" in r.stdout
    assert "  cleanup.policy=compact,delete sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:" \
        in r.stdout
    r = _cli(broker, "alter", "--entity-type", "brokers", "--entity-default",
             "--add-config", "log.retention.ms=3600000")
    assert "Completed updating default config for brokers in the cluster." in r.stdout, r
    r = _cli(broker, "alter", "--broker", "0", "--add-config", "log.segment.bytes=2000000")
    assert r.returncode == 0, r
    r = _cli(broker, "describe", "--entity-type", "brokers", "--entity-name", "0")
    assert r.stdout.splitlines() == [
        "Dynamic configs for broker 0 are:",
        "  log.segment.bytes=2000000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:"
        "log.segment.bytes=2000000, DEFAULT_CONFIG:log.segment.bytes=1073741824}"]
    r = _cli(broker, "describe", "--broker-defaults")
    assert "  log.retention.ms=3600000 sensitive=false" in r.stdout
    r = _cli(broker, "alter", "--broker", "0", "--add-config", "log.dirs=/elsewhere")
    assert r.returncode == 1 and "log.dirs" in r.stderr, r
    r = _cli(broker, "alter", "--broker", "0", "--delete-config", "log.segment.bytes")
    assert r.returncode == 0, r
    r = _cli(broker, "describe", "--broker", "0", "--all")
    assert "  log.segment.bytes=1073741824 sensitive=false" in r.stdout
    r = _cli(broker, "describe", "--entity-type", "users")
    assert r.returncode != 0 and "topics, brokers or broker-loggers" in r.stderr


def test_listener_prefixed_keys_are_dynamic_and_stored_only_keys_say_so(broker) -> None:
    """A listener-prefixed key set per broker is described as dynamic (not read-only), a
    key stored but not acted on carries the note in its documentation, and
    connection.failed.authentication.delay.ms is a read-only key with Kafka's default."""
    key = "listener.name.plaintext.max.connections"
    with Wire(broker.bootstrap) as w:
        assert _incremental(w, "0", [(key, 0, "500"),
                                     ("num.io.threads", 0, "4")])["error_code"] == 0
        b = _describe(w, BROKER, "0")
    assert b[key]["value"] == "500" and b[key]["read_only"] is False
    assert b[key]["documentation"] is None  # acted on (tests/broker/test_max_connections.py)
    assert "Stored only" in b["num.io.threads"]["documentation"]
    assert b["log.retention.ms"]["documentation"] is None  # acted on: no note
    delay = b["connection.failed.authentication.delay.ms"]
    assert delay["value"] == "100" and delay["read_only"] is True
    assert delay["config_source"] == DEFAULT
