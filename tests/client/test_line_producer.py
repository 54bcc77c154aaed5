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
from tests.cli.kcat_read import kcat_records
from tests.client.null_rows import null_rows
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


@pytest.mark.parametrize("sep", [None, b":"])
def test_null_fields_go_in_bulk_and_failed_records_are_the_raw_lines(
        module_broker: BrokerProcess, monkeypatch: pytest.MonkeyPatch, sep: bytes | None
        ) -> None:
    """-Z and a marker with keep_failed, into three partitions: no record goes through
    send(), the tombstones and null keys land as defined (each key's records in input
    order in its partition), and a record the broker refuses is failed_records()' raw
    line, its batch split by the producer down to it (the split decodes the nulls the bulk
    encoder wrote and encodes them again)."""
    topic = f"null-bulk-{'keyed' if sep else 'plain'}"
    with AdminClient(module_broker.bootstrap) as admin:
        admin.create_topics({topic: (3, 1, {"max.message.bytes": "2000"})})
    big = b"x" * 5000
    lines = [(b"user%d:%d" % (i % 7, i) if sep else b"%d" % i) if i % 3 else
             (b"user%d:" % (i % 7) if sep else b"") for i in range(3000)]
    lines[100:104] = [b"NULL", b":NULL" if sep else b"NULL", b"", big]
    # (not idempotent: an idempotent producer's later batches of the partition would fail
    # out of order after the refused one, as with any input; one batch in flight: the
    # halves of a split one are sent before the next)
    producer = Producer(module_broker.bootstrap, linger_ms=1, retries=0,
                        enable_idempotence=False, max_in_flight=1)
    monkeypatch.setattr(producer, "send", None)  # never called
    lp = LineProducer(producer, topic, key_separator=sep, keep_failed=True, null_empty=True,
                      null_marker=b"NULL")
    outcome = lp.run([lines[:1000], lines[1000:1001], lines[1001:]])
    assert not outcome.interrupted and outcome.error is None
    assert (lp.read, lp.stats.acked, lp.stats.failed) == (3000, 2999, 1)
    assert list(lp.failed_records()) == [big]
    want = null_rows([line for line in lines if line != big], sep, True, b"NULL")
    got = kcat_records(module_broker.bootstrap, topic)
    assert sorted(((k, v) for _, k, v in got), key=repr) == sorted(want, key=repr)
    for p in range(3):
        keys = {k for q, k, _ in got if q == p and k is not None}
        assert [(k, v) for q, k, v in got if q == p and k is not None] == [
            (k, v) for k, v in want if k in keys]


def test_an_input_error_stops_the_run_and_is_returned(module_broker: BrokerProcess) -> None:
    def chunks():  # type: ignore[no-untyped-def]
        yield [b"one", b"two"]
        raise OSError("disk gone")

    lp = LineProducer(Producer(module_broker.bootstrap, linger_ms=1), "input-error",
                      keep_failed=True)
    outcome = lp.run(chunks())
    assert isinstance(outcome.error, OSError) and not lp.input_done
    assert lp.read == lp.stats.acked == 2 and lp.unsent() == []
