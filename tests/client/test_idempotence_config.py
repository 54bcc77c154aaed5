"""Idempotence by Kafka's producer rules (3.2+): on by default, off by default when acks,
retries or max.in.flight.requests.per.connection rule it out, refused with Kafka's message
when asked for with one of them. `retries=0` with the default idempotence used to fail
hundreds of records OUT_OF_ORDER_SEQUENCE_NUMBER after one refused batch (the gap in the
partition's sequence was never closed)."""

from __future__ import annotations

import pytest

from kafkactl.client.admin import AdminClient
from kafkactl.client.errors import ConfigError
from kafkactl.client.line_producer import LineProducer
from kafkactl.client.producer import Producer, idempotence
from tests import zygote
from tests.conftest import BrokerProcess

RETRIES = "Must set retries to non-zero when using the idempotent producer."
ACKS = ("Must set acks to all in order to use the idempotent producer. Otherwise we cannot "
        "guarantee idempotence.")
IN_FLIGHT = ("Must set max.in.flight.requests.per.connection to at most 5 when using the "
             "idempotent producer.")


@pytest.mark.parametrize(("acks", "retries", "in_flight", "default"), [
    (-1, 2147483647, 5, True), (-1, 1, 1, True),
    (-1, 0, 5, False), (1, 5, 5, False), (0, 5, 5, False), (-1, 5, 6, False),
])
def test_the_default_follows_the_other_settings(acks: int, retries: int, in_flight: int,
                                                default: bool) -> None:
    assert idempotence(None, acks, retries, in_flight) is default
    assert idempotence(False, acks, retries, in_flight) is False


@pytest.mark.parametrize(("acks", "retries", "in_flight", "said"), [
    (-1, 0, 5, RETRIES), (1, 5, 5, ACKS), (-1, 5, 6, IN_FLIGHT),
])
def test_asked_for_against_them_is_refused(acks: int, retries: int, in_flight: int,
                                           said: str) -> None:
    with pytest.raises(ConfigError) as e:
        idempotence(True, acks, retries, in_flight)
    assert str(e.value) == said
    with pytest.raises(ConfigError, match="Must set retries"):  # a transactional producer
        Producer("127.0.0.1:9", retries=0, transactional_id="t")  # is idempotent


def test_retries_0_loses_only_the_refused_record(module_broker: BrokerProcess) -> None:
    """One record too large for the topic among 3,000, retries=0: that record fails, the
    others land (idempotence is off by default with retries=0, as in Kafka)."""
    b = module_broker.bootstrap
    with AdminClient(b) as admin:
        admin.create_topics({"retries-0": (3, 1, {"max.message.bytes": "2000"})})
    lines = [b"user%d:%d" % (i % 7, i) for i in range(3000)]
    lines[103] = b"x" * 5000
    producer = Producer(b, linger_ms=1, retries=0, max_in_flight=5)
    try:
        lp = LineProducer(producer, "retries-0", key_separator=b":", keep_failed=True)
        lp.run([lines[:1000], lines[1000:1001], lines[1001:]])
    finally:
        producer.close()
    assert (lp.stats.acked, lp.stats.failed) == (2999, 1)
    assert list(lp.failed_records()) == [lines[103]]


def test_produce_refuses_idempotence_with_retries_0() -> None:
    r = zygote.run(["produce", "-b", "127.0.0.1:9", "-t", "t", "-X", "retries=0", "-X",
                    "enable.idempotence=true"], input=b"x\n", text=False, timeout=30)
    assert r.returncode == 2
    assert r.stderr.decode() == f"error: {RETRIES}\n"
