"""OutageNotices: a producer that loses its broker says so at once, once, then at most
every REMIND_S while it lasts, and says when a retried batch got through; never before the
cluster was reached (the run's error tells that), never a line per retry."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from kafkactl.client.cluster import BrokerMetadata
from kafkactl.client.errors import KafkaConnectionError, NoBrokersAvailable
from kafkactl.client.outage import MIN_GAP_S, REMIND_S, OutageNotices, reason


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _producer() -> Any:
    callbacks: list[Any] = []
    return SimpleNamespace(
        sender=SimpleNamespace(delivery_timeout=120.0, on_connection_error=None),
        client=SimpleNamespace(metadata_seen=False, bootstrap_servers=[("h", 1), ("g", 2)],
                               cluster=SimpleNamespace(brokers={
                                   0: BrokerMetadata(0, "h", 1, None)})),
        callbacks=callbacks, add_batch_callback=callbacks.append)


def _refused() -> KafkaConnectionError:
    try:
        raise KafkaConnectionError("cannot connect to broker h:1: Connection refused") \
            from ConnectionRefusedError(111, "Connection refused")
    except KafkaConnectionError as e:
        return e


def _batch(attempts: int) -> Any:
    return SimpleNamespace(attempts=attempts)


def test_one_line_when_it_starts_a_reminder_while_it_lasts_one_when_it_is_over() -> None:
    producer, clock, said = _producer(), Clock(), []
    OutageNotices(producer, said.append, clock=clock)
    tell = producer.sender.on_connection_error
    tell(0, _refused())  # the cluster was never reached: the run's error says it
    assert said == []
    producer.client.metadata_seen = True
    for _ in range(100):  # every retry
        tell(0, _refused())
        clock.now += 0.1
    assert said == ["kafkactl produce: broker h:1 unreachable (Connection refused); "
                    "retrying for up to delivery.timeout.ms (120 s)"]
    clock.now += REMIND_S - 10
    tell(0, KafkaConnectionError("broker h:1 closed the connection"))
    assert said[1:] == [f"kafkactl produce: broker h:1 still unreachable after "
                        f"{REMIND_S:.0f} s (closed the connection); retrying"]
    on_batch = producer.callbacks[0]
    on_batch(_batch(1), 5, None)  # a batch sent once: not the outage's end
    on_batch(_batch(3), -1, KafkaConnectionError("x"))  # failed: neither
    assert len(said) == 2
    on_batch(_batch(2), 7, None)
    assert said[2:] == ["kafkactl produce: broker h:1 back: resumed"]
    on_batch(_batch(2), 8, None)
    assert len(said) == 3
    # another outage right after: told once MIN_GAP_S passed since the last line
    tell(0, _refused())
    assert len(said) == 3
    clock.now += MIN_GAP_S
    tell(0, _refused())
    assert said[3:] == [said[0]]


def test_no_broker_answering_names_the_bootstrap_servers() -> None:
    producer, said = _producer(), []
    producer.client.metadata_seen = True
    OutageNotices(producer, said.append, prefix="p")
    producer.sender.on_connection_error(-1, NoBrokersAvailable(
        "no broker answered at h:1,g:2 (cannot connect to broker h:1: Connection refused; "
        "cannot connect to broker g:2: Connection refused). Is `kafkactl serve` running "
        "there?"))
    assert said == ["p: every broker (h:1,g:2) unreachable (Connection refused); retrying "
                    "for up to delivery.timeout.ms (120 s)"]


def test_reason_is_short() -> None:
    assert reason(_refused()) == "Connection refused"
    assert reason(None) == "connection lost"
    assert reason(KafkaConnectionError("request to h:1 timed out after 30 s. Retry"),
                  "broker h:1") == "request to h:1 timed out after 30 s"
