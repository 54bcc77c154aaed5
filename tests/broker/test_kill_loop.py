"""kill -9 loop: one idempotent acks=all producer (confluent-kafka) keeps sending while the
broker is SIGKILLed and restarted several times. Every acknowledged record must be stored
exactly once: 0 lost, 0 duplicated (the restarted broker rebuilds producer state from its
snapshots and the log, so the producer's retries of unacknowledged batches are recognised).
Small by default; KAFKACTL_KILL_LOOP_CYCLES / _RECORDS make it a soak."""

from __future__ import annotations

import os
import time
from collections import Counter

from tests.broker._damage import consume_kafka_python, kafkactl
from tests.conftest import BrokerProcess

CYCLES = int(os.environ.get("KAFKACTL_KILL_LOOP_CYCLES", "4"))
RECORDS_PER_CYCLE = int(os.environ.get("KAFKACTL_KILL_LOOP_RECORDS", "3000"))
PARTITIONS = 2


def test_kill_9_loop_loses_and_duplicates_nothing(broker: BrokerProcess) -> None:
    from confluent_kafka import KafkaException, Producer

    r = kafkactl("topics", "create", "-t", "kill", "--partitions", str(PARTITIONS),
                 "-b", broker.bootstrap)
    assert r.returncode == 0, r.stderr
    acked: list[str] = []
    failed: list[str] = []

    def on_delivery(err: object, msg: object) -> None:
        value = msg.value().decode()  # type: ignore[attr-defined]
        (failed if err else acked).append(value)

    producer = Producer({
        "bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "acks": "all",
        "linger.ms": 5, "batch.num.messages": 200, "message.timeout.ms": 120000,
        "retry.backoff.ms": 50, "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 500,
        "log_level": 0,
    })
    tried = 0
    for cycle in range(CYCLES):
        for i in range(RECORDS_PER_CYCLE):
            value = f"c{cycle}-{i:06d}"
            while True:
                try:
                    producer.produce("kill", value.encode(), partition=i % PARTITIONS,
                                     on_delivery=on_delivery)
                    break
                except BufferError:
                    producer.poll(0.05)
            tried += 1
            producer.poll(0)
        # kill -9 once part of this cycle is acknowledged and the rest is in flight
        target = len(acked) + len(failed) + RECORDS_PER_CYCLE // 3
        deadline = time.monotonic() + 60
        while len(acked) + len(failed) < target:
            assert time.monotonic() < deadline, "the producer made no progress"
            producer.poll(0.01)
        broker.kill()
        broker.start()
    try:
        remaining = producer.flush(180)
    except KafkaException as e:  # pragma: no cover - reported below
        raise AssertionError(f"producer failed: {e}") from e
    assert remaining == 0
    assert len(acked) + len(failed) == tried

    stored = Counter()
    for p in range(PARTITIONS):
        stored.update(v for _o, v in consume_kafka_python(broker.bootstrap, "kill",
                                                         partition=p, timeout=120))
    lost = [v for v in acked if v not in stored]
    duplicated = [v for v, n in stored.items() if n > 1]
    print(f"\nkill -9 loop: {CYCLES} kills, tried {tried}, acknowledged {len(acked)}, "
          f"failed {len(failed)}, stored {sum(stored.values())}, survived "
          f"{len(acked) - len(lost)}, lost {len(lost)}, duplicated {len(duplicated)}")
    assert not lost, lost[:10]
    assert not duplicated, duplicated[:10]
    assert len(acked) >= tried * 0.9  # the retries got through after each restart
    assert "Traceback" not in broker.log(), broker.log()
