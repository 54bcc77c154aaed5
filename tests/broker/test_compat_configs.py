"""Topic config validation (issue 12.2) and secret masking in DescribeConfigs (issue 11.14),
each checked with the exact request a client sends."""

from __future__ import annotations

from typing import Any

import pytest

from kafkactl.protocol.api_keys import ApiKey
from tests.conftest import BrokerProcess

from .wire import Wire


@pytest.fixture
def broker(module_broker: BrokerProcess) -> BrokerProcess:
    """Tests given `broker` here only use topics and groups of their own: one broker for the
    module (broker-wide ones use broker_factory)."""
    return module_broker

INVALID_CONFIG = 40
TOPIC, BROKER = 2, 4
BAD = [
    ({"no.such.config": "1"}, "no.such.config"),
    ({"cleanup.policy": "bogus"}, "cleanup.policy"),
    ({"retention.ms": "abc"}, "retention.ms"),
    ({"min.insync.replicas": "0"}, "min.insync.replicas"),
    ({"segment.bytes": str(1 << 40)}, "segment.bytes"),
    ({"unclean.leader.election.enable": "maybe"}, "unclean.leader.election.enable"),
]


def _describe(w: Wire, rtype: int, name: str, version: int = 4) -> dict[str, dict[str, Any]]:
    resp = w.request(ApiKey.DESCRIBE_CONFIGS, version, {
        "resources": [{"resource_type": rtype, "resource_name": name,
                       "configuration_keys": None}],
        "include_synonyms": True, "include_documentation": False})
    res = resp["results"][0]
    assert res["error_code"] == 0, res
    return {c["name"]: c for c in res["configs"]}


def _create(w: Wire, name: str, configs: dict[str, str], validate_only: bool = False
            ) -> dict[str, Any]:
    resp = w.request(ApiKey.CREATE_TOPICS, 7, {
        "topics": [{"name": name, "num_partitions": 1, "replication_factor": 1,
                    "assignments": [], "configs": [{"name": k, "value": v}
                                                   for k, v in configs.items()]}],
        "timeout_ms": 5000, "validate_only": validate_only})
    return resp["topics"][0]


def _alter(w: Wire, name: str, configs: dict[str, str], validate_only: bool = False
           ) -> dict[str, Any]:
    resp = w.request(ApiKey.ALTER_CONFIGS, 2, {
        "resources": [{"resource_type": TOPIC, "resource_name": name, "configs": [
            {"name": k, "value": v} for k, v in configs.items()]}],
        "validate_only": validate_only})
    return resp["responses"][0]


def _incremental(w: Wire, name: str, configs: dict[str, str], validate_only: bool = False
                 ) -> dict[str, Any]:
    resp = w.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {
        "resources": [{"resource_type": TOPIC, "resource_name": name, "configs": [
            {"name": k, "config_operation": 0, "value": v} for k, v in configs.items()]}],
        "validate_only": validate_only})
    return resp["responses"][0]


@pytest.mark.parametrize("configs,key", BAD)
def test_invalid_topic_configs_refused_by_all_three_apis(broker, configs, key) -> None:
    bad, ok = f"bad-{key}", f"ok-{key}"
    with Wire(broker.bootstrap) as w:
        res = _create(w, bad, configs)
        assert res["error_code"] == INVALID_CONFIG and key in res["error_message"], res
        assert _create(w, ok, {})["error_code"] == 0
        for alter in (_alter, _incremental):
            res = alter(w, ok, configs)
            assert res["error_code"] == INVALID_CONFIG and key in res["error_message"], res
        described = _describe(w, TOPIC, ok)
        assert "no.such.config" not in described
        for k, _v in configs.items():
            if k in described:
                assert described[k]["config_source"] == 5, described[k]  # still the default
        meta = w.request(ApiKey.METADATA, 9, {"topics": [{"name": bad}],
                                              "allow_auto_topic_creation": False,
                                              "include_cluster_authorized_operations": False,
                                              "include_topic_authorized_operations": False})
        assert meta["topics"][0]["error_code"] == 3  # `bad` was never created


def test_known_kafka_topic_keys_accepted_and_described_with_types(broker) -> None:
    with Wire(broker.bootstrap) as w:
        res = _create(w, "kt", {"min.insync.replicas": "2",
                                "unclean.leader.election.enable": "true",
                                "leader.replication.throttled.replicas": "0:0"})
        assert res["error_code"] == 0, res
        d = _describe(w, TOPIC, "kt")
        assert d["min.insync.replicas"]["value"] == "2"
        assert d["min.insync.replicas"]["config_source"] == 1  # DYNAMIC_TOPIC_CONFIG
        assert d["min.insync.replicas"]["config_type"] == 3  # INT
        assert d["retention.ms"]["config_type"] == 5  # LONG
        assert d["cleanup.policy"]["config_type"] == 7  # LIST
        assert d["preallocate"]["config_type"] == 1  # BOOLEAN
        assert d["min.cleanable.dirty.ratio"]["config_type"] == 6  # DOUBLE
        assert d["message.downconversion.enable"]["value"] == "true"  # a default shown


def test_validate_only_validates_and_changes_nothing(broker) -> None:
    with Wire(broker.bootstrap) as w:
        assert _create(w, "vo", {"retention.ms": "1000"}, validate_only=True)["error_code"] == 0
        assert _create(w, "vo", {"retention.ms": "x"}, validate_only=True)["error_code"] == 40
        meta = w.request(ApiKey.METADATA, 9, {"topics": [{"name": "vo"}],
                                              "allow_auto_topic_creation": False,
                                              "include_cluster_authorized_operations": False,
                                              "include_topic_authorized_operations": False})
        assert meta["topics"][0]["error_code"] == 3  # not created by validate_only
        assert _create(w, "vo", {})["error_code"] == 0
        for alter in (_alter, _incremental):
            assert alter(w, "vo", {"retention.ms": "1234"}, validate_only=True)[
                "error_code"] == 0
            assert alter(w, "vo", {"no.such.config": "1"}, validate_only=True)[
                "error_code"] == INVALID_CONFIG
        assert _describe(w, TOPIC, "vo")["retention.ms"]["value"] == str(7 * 24 * 3600 * 1000)


def test_real_client_sees_invalid_config(broker) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    fut = admin.create_topics([NewTopic("cc", 1, 1, config={"cleanup.policy": "bogus"})])["cc"]
    err = fut.exception(10).args[0]
    assert err.code() == INVALID_CONFIG and "cleanup.policy" in err.str()


SECRETS = {
    "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule required "
                        "username=\"u\" password=\"hunter2\";",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": "x required password=\"hunter2\";",
    "listener.name.ssl.ssl.keystore.key": "-----BEGIN PRIVATE KEY-----hunter2",
    "ssl.keystore.key": "-----BEGIN PRIVATE KEY-----hunter2",
    "ssl.key.password": "hunter2",
    "ssl.keystore.password": "hunter2",
    "ssl.truststore.password": "hunter2",
    "ssl.keystore.certificate.chain": "-----BEGIN CERTIFICATE-----hunter2",
    "delegation.token.secret.key": "hunter2",
}


# Keys that set up TLS/SASL stop the broker at start-up until security exists (issue 11
# item 13), so a live broker can only be given the secrets that merely get ignored; the
# others are checked on the key classification DescribeConfigs uses.
STARTABLE = ("ssl.key.password", "ssl.keystore.password", "ssl.truststore.password",
             "delegation.token.secret.key")


def test_every_password_key_is_classified_sensitive() -> None:
    from kafkactl.broker.config import is_sensitive

    for key in SECRETS:
        assert is_sensitive(key), key
    for key in ("log.dir", "num.partitions", "listeners", "ssl.enabled.protocols"):
        assert not is_sensitive(key), key


def test_describe_configs_never_returns_secrets(broker_factory) -> None:
    args: list[str] = []
    for k in STARTABLE:
        args += ["--override", f"{k}={SECRETS[k]}"]
    broker = broker_factory(extra_args=args)
    with Wire(broker.bootstrap) as w:
        for version in (0, 1, 4):
            resp = w.request(ApiKey.DESCRIBE_CONFIGS, version, {
                "resources": [{"resource_type": BROKER, "resource_name": "0",
                               "configuration_keys": None}],
                "include_synonyms": True, "include_documentation": False})
            raw = repr(resp)
            assert "hunter2" not in raw
            configs = {c["name"]: c for c in resp["results"][0]["configs"]}
            for key in STARTABLE:
                assert configs[key]["value"] is None, key
                assert configs[key]["is_sensitive"] is True, key
                if version >= 3:
                    assert configs[key]["config_type"] == 9  # PASSWORD
            assert configs["log.dir"]["value"] is not None  # ordinary keys still shown
