"""Authorized operations with no authorizer (issue 12.10): every operation Kafka supports on
the resource, as a bit field of 1 << AclOperation code; Kafka's sentinel when not asked."""

from __future__ import annotations

import pytest

from kafkactl.protocol.api_keys import ApiKey
from tests.conftest import BrokerProcess

from .wire import Wire


@pytest.fixture
def broker(module_broker: BrokerProcess) -> BrokerProcess:
    """Tests given `broker` here only use topics and groups of their own: one broker for the
    module (broker-wide ones use broker_factory)."""
    return module_broker

OMITTED = -(1 << 31)
# AclOperation: READ 3, WRITE 4, CREATE 5, DELETE 6, ALTER 7, DESCRIBE 8, CLUSTER_ACTION 9,
# DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11, IDEMPOTENT_WRITE 12 (Kafka's supportedOperations)
TOPIC_OPS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))
GROUP_OPS = sum(1 << op for op in (3, 6, 8))
CLUSTER_OPS = sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))


def _metadata(w: Wire, version: int, include: bool) -> dict:
    body = {"topics": [{"name": "ops"}], "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": include}
    if version <= 10:
        body["include_cluster_authorized_operations"] = include
    return w.request(ApiKey.METADATA, version, body)


def test_bit_sets_match_kafka() -> None:
    assert (TOPIC_OPS, GROUP_OPS, CLUSTER_OPS) == (3576, 328, 8096)


def test_metadata_authorized_operations(broker) -> None:
    with Wire(broker.bootstrap) as w:
        assert w.create_topic("ops")["error_code"] == 0
        for version in (8, 10):
            r = _metadata(w, version, True)
            assert r["topics"][0]["topic_authorized_operations"] == TOPIC_OPS
            assert r["cluster_authorized_operations"] == CLUSTER_OPS
            r = _metadata(w, version, False)
            assert r["topics"][0]["topic_authorized_operations"] == OMITTED
            assert r["cluster_authorized_operations"] == OMITTED
        r = _metadata(w, 12, True)
        assert r["topics"][0]["topic_authorized_operations"] == TOPIC_OPS


def test_describe_cluster_authorized_operations(broker) -> None:
    with Wire(broker.bootstrap) as w:
        for include, expected in ((True, CLUSTER_OPS), (False, OMITTED)):
            r = w.request(ApiKey.DESCRIBE_CLUSTER, 1, {
                "include_cluster_authorized_operations": include, "endpoint_type": 1})
            assert r["cluster_authorized_operations"] == expected


def test_describe_groups_authorized_operations(broker) -> None:
    from kafka import KafkaConsumer

    consumer = KafkaConsumer("ops", bootstrap_servers=broker.bootstrap, group_id="g-ops",
                             consumer_timeout_ms=200)
    try:
        for _ in consumer:
            pass
        consumer.commit()
    finally:
        consumer.close()
    with Wire(broker.bootstrap) as w:
        for include, expected in ((True, GROUP_OPS), (False, OMITTED)):
            r = w.request(ApiKey.DESCRIBE_GROUPS, 5, {
                "groups": ["g-ops"], "include_authorized_operations": include})
            assert r["groups"][0]["error_code"] == 0
            assert r["groups"][0]["authorized_operations"] == expected


def test_real_admin_client_sees_operations(broker) -> None:
    from confluent_kafka.admin import AclOperation, AdminClient

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    desc = admin.describe_cluster(request_timeout=10,
                                  include_authorized_operations=True).result(10)
    assert AclOperation.IDEMPOTENT_WRITE in desc.authorized_operations
    assert AclOperation.DESCRIBE_CONFIGS in desc.authorized_operations
