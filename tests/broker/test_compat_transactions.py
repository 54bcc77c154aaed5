"""Transactional producers fail at once with a clear error (issue 12.3).

Until transactions exist, FindCoordinator key type 1 and InitProducerId with a
transactional id answer TRANSACTIONAL_ID_AUTHORIZATION_FAILED, which every client treats
as fatal. Before, COORDINATOR_NOT_AVAILABLE made each client retry until its own timeout.
The deadlines below only catch a hang: each client is given a timeout longer than the
test's, so a retrying client fails the assertion on the error, not on a clock.
"""

from __future__ import annotations

import asyncio

import pytest

from kafkactl.protocol.api_keys import ApiKey
from tests.compat.node_client import run_node
from tests.conftest import BrokerProcess

from .wire import Wire


@pytest.fixture
def broker(module_broker: BrokerProcess) -> BrokerProcess:
    """Tests given `broker` here only use topics and groups of their own: one broker for the
    module (broker-wide ones use broker_factory)."""
    return module_broker

TXN_AUTH_FAILED = 53


def test_find_coordinator_transaction_key_wire(broker) -> None:
    with Wire(broker.bootstrap) as w:
        for version in (1, 3):
            r = w.request(ApiKey.FIND_COORDINATOR, version, {"key": "t", "key_type": 1})
            assert r["error_code"] == TXN_AUTH_FAILED
            assert "transactions are not supported" in r["error_message"]
        r = w.request(ApiKey.FIND_COORDINATOR, 4, {"key_type": 1, "coordinator_keys": ["a"]})
        assert r["coordinators"][0]["error_code"] == TXN_AUTH_FAILED
        r = w.request(ApiKey.INIT_PRODUCER_ID, 4, {
            "transactional_id": "t", "transaction_timeout_ms": 60000,
            "producer_id": -1, "producer_epoch": -1})
        assert r["error_code"] == TXN_AUTH_FAILED and r["producer_id"] == -1
        # the group coordinator is untouched
        r = w.request(ApiKey.FIND_COORDINATOR, 3, {"key": "g", "key_type": 0})
        assert r["error_code"] == 0


def test_aiokafka_transactional_start_fails(broker) -> None:
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import TransactionalIdAuthorizationFailed

    async def main() -> None:
        p = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="aio-t",
                             request_timeout_ms=60000)
        try:
            await asyncio.wait_for(p.start(), 20)
        finally:
            await p.stop()

    with pytest.raises(TransactionalIdAuthorizationFailed):
        asyncio.run(main())


def test_kafka_python_init_transactions_fails(broker) -> None:
    from kafka import KafkaProducer
    from kafka.errors import TransactionalIdAuthorizationFailedError

    p = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="kp-t",
                      max_block_ms=20000)
    try:
        with pytest.raises(TransactionalIdAuthorizationFailedError):
            p.init_transactions()
    finally:
        p.close(timeout=5)


def test_librdkafka_init_transactions_fails(broker) -> None:
    from confluent_kafka import KafkaException, Producer

    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "rd-t"})
    with pytest.raises(KafkaException) as info:
        p.init_transactions(20)
    err = info.value.args[0]
    assert err.code() == TXN_AUTH_FAILED and err.fatal(), err
    assert "transactions are not supported" in err.str()


def test_kafkajs_transaction_fails(broker) -> None:
    (out,) = run_node("transactional.js", broker.bootstrap, timeout=20)
    assert out["ok"] is False and out["retriable"] is False, out
    assert out["name"] == "KafkaJSGroupCoordinatorNotFound", out
