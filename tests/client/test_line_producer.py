"""LineProducer against a real broker: delivery accounting, failed records (kept and told
to the callback), and a mirror-shaped round trip through TopicReader."""

from __future__ import annotations

import io

import pytest

from kafkactl.client.admin import AdminClient
from kafkactl.client.consumer import Consumer
from kafkactl.client.delimited import read_records
from kafkactl.client.fetcher import EARLIEST
from kafkactl.client.line_producer import LineProducer, split_keys
from kafkactl.client.producer import Producer
from kafkactl.client.topic_reader import StartOffset, TopicReader
from kafkactl.protocol.errors import MessageTooLargeError
from tests.conftest import BrokerProcess


def read_lines(bootstrap: str, topic: str, sep: bytes | None = None) -> list[bytes]:
    r = TopicReader(Consumer(topic, bootstrap_servers=bootstrap), until_end=True)
    r.seek(StartOffset("earliest", EARLIEST))
    try:
        return b"".join(p.data for chunk in r.lines(key_separator=sep) for p in chunk
                        ).splitlines()
    finally:
        r.consumer.close()


def test_split_keys() -> None:
    assert split_keys([b"a:1", b"plain", b":x", b"b:"], b":") == (
        [b"a", None, b"", b"b"], [b"1", b"plain", b"x", b""])


@pytest.mark.parametrize("sep", [None, b"\t"])
def test_every_line_acknowledged(module_broker: BrokerProcess, sep: bytes | None) -> None:
    topic = f"lines-{'keyed' if sep else 'plain'}"
    lines = [b"k%d\tline %d" % (i % 5, i) for i in range(5000)]
    producer = Producer(module_broker.bootstrap, linger_ms=1)
    lp = LineProducer(producer, topic, partition=0, key_separator=sep)
    outcome = lp.run(read_records(io.BytesIO(b"\n".join(lines) + b"\n"), b"\n"))
    assert not outcome.interrupted and outcome.error is None
    assert lp.read == lp.stats.acked == lp.stats.sent == 5000
    assert lp.stats.failed == 0 and list(lp.failed_records()) == []
    assert read_lines(module_broker.bootstrap, topic, sep) == lines


def test_failed_records_are_kept_and_reported(module_broker: BrokerProcess) -> None:
    with AdminClient(module_broker.bootstrap) as admin:
        admin.create_topics({"small-records": (1, 1, {"max.message.bytes": "2000"})})
    told: list[bytes] = []
    # sync: one record a batch, and the refusal stops the run
    producer = Producer(module_broker.bootstrap, linger_ms=1, retries=0, sync=True)
    lp = LineProducer(producer, "small-records",
                      on_failed=lambda records, error: told.extend(records))
    big = b"x" * 5000
    outcome = lp.run([[b"a", b"b"], [big], [b"c"]])
    assert isinstance(outcome.error, MessageTooLargeError) and not lp.input_done
    assert (lp.read, lp.stats.acked, lp.stats.failed) == (3, 2, 1)
    assert list(lp.failed_records()) == [big] and told == [big]
    assert lp.stats.first_error is outcome.error


def test_an_input_error_stops_the_run_and_is_returned(module_broker: BrokerProcess) -> None:
    def chunks():  # type: ignore[no-untyped-def]
        yield [b"one", b"two"]
        raise OSError("disk gone")

    lp = LineProducer(Producer(module_broker.bootstrap, linger_ms=1), "input-error",
                      keep_failed=True)
    outcome = lp.run(chunks())
    assert isinstance(outcome.error, OSError) and not lp.input_done
    assert lp.read == lp.stats.acked == 2 and lp.unsent() == []
