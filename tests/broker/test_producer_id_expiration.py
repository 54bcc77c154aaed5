"""Idle producer ids expire on their own (KIP-854; Kafka's removeExpiredProducers, scheduled
every producer.id.expiration.check.interval.ms over every log), not only when the partition
is written to next: after its last batch, no produce reaches the partition, and
`kafkactl transactions describe-producers` stops listing the idle producer while it keeps
the one still within producer.id.expiration.ms. Real broker, raw idempotent produce."""

from __future__ import annotations

import json
import time
from typing import Any

from kafkactl.protocol.api_keys import ApiKey
from tests.groups.helpers import kafkactl
from tests.polling import wait_until

from .wire import Wire, batch

TOPIC = "idle-producers"
HOUR_MS = 3_600_000


def producers(bootstrap: str) -> set[int]:
    r = kafkactl("transactions", "describe-producers", "-b", bootstrap, "--topic", TOPIC,
                 "--partition", "0", "--json")
    assert r.returncode == 0, r.stderr
    return {int(p["producer_id"]) for p in json.loads(r.stdout)}


def test_an_idle_producer_expires_without_a_produce(broker_factory: Any) -> None:
    b = broker_factory(producer_id_expiration_ms=str(HOUR_MS),
                       producer_id_expiration_check_interval_ms="100")
    with Wire(b.bootstrap) as w:
        assert w.create_topic(TOPIC)["error_code"] == 0
        pids = [int(w.request(ApiKey.INIT_PRODUCER_ID, 4, {
            "transactional_id": None, "transaction_timeout_ms": 60000})["producer_id"])
            for _ in range(2)]
        recent, idle = pids
        now = int(time.time() * 1000)
        r = w.produce(TOPIC, batch([b"recent"], producer_id=recent, producer_epoch=0,
                                   base_sequence=0, timestamp=now))
        assert r["error_code"] == 0, r
        # the last write to the partition: a batch whose timestamp is two hours old (the
        # producer's last activity as Kafka counts it)
        r = w.produce(TOPIC, batch([b"idle"], producer_id=idle, producer_epoch=0,
                                   base_sequence=0, timestamp=now - 2 * HOUR_MS))
        assert r["error_code"] == 0, r
    wait_until(lambda: producers(b.bootstrap) == {recent}, 30,
               "the idle producer expired with no produce")
