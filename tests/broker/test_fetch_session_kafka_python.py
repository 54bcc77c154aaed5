"""kafka-python 3.x consumers keep incremental fetch sessions (its FetchSessionHandler):
against a real broker, one reading a topic of several partitions, while records keep coming
to some of them, gets every record exactly once through a session the broker created (its
NumIncrementalFetchSessions metric and the client's session id say so)."""

from __future__ import annotations

import time
import urllib.request
from typing import Any

import pytest

from tests.conftest import free_port
from tests.polling import wait_until

from .wire import Wire, batch

kafka = pytest.importorskip("kafka")

TOPIC = "kp"
PARTITIONS = 6


def _sessions(port: int) -> float:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read()
    for line in text.decode().splitlines():
        if line.startswith("kafka_server_fetchsessioncache_numincrementalfetchsessions "):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError("no NumIncrementalFetchSessions metric")


def test_a_kafka_python_consumer_reads_every_record_once_through_a_session(
        broker_factory: Any) -> None:
    metrics_port = free_port()
    b = broker_factory(extra_args=["--metrics", f"127.0.0.1:{metrics_port}"])
    sent: list[bytes] = []
    with Wire(b.bootstrap) as w:
        assert w.create_topic(TOPIC, partitions=PARTITIONS)["error_code"] == 0
        for p in range(PARTITIONS):
            for i in range(20):
                value = f"p{p}-r{i}".encode()
                assert w.produce(TOPIC, batch([value]), partition=p)["error_code"] == 0
                sent.append(value)
    consumer = kafka.KafkaConsumer(TOPIC, bootstrap_servers=b.bootstrap, group_id=None,
                                   auto_offset_reset="earliest", fetch_max_wait_ms=100,
                                   enable_auto_commit=False)
    got: list[bytes] = []
    try:
        def drain() -> bool:
            for records in consumer.poll(timeout_ms=200).values():
                got.extend(r.value for r in records)
            return len(got) >= len(sent)

        wait_until(drain, 60, "the first records", interval=0)
        # more records, to two partitions only, while the consumer fetches incrementally
        with Wire(b.bootstrap) as w:
            for i in range(30):
                for p in (1, 4):
                    value = f"late-p{p}-{i}".encode()
                    assert w.produce(TOPIC, batch([value]), partition=p)["error_code"] == 0
                    sent.append(value)
        wait_until(drain, 60, "the late records", interval=0)
        # nothing more comes (a duplicate would): a few more fetches find nothing
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            drain()
        handlers = consumer._fetcher._session_handlers  # noqa: SLF001 - the client's view
        assert handlers and all(h.next_metadata.session_id != 0 and
                                h.next_metadata.epoch > 1 for h in handlers.values()), {
            n: (h.next_metadata.session_id, h.next_metadata.epoch)
            for n, h in handlers.items()}
        assert _sessions(metrics_port) == 1
    finally:
        consumer.close()
    assert sorted(got) == sorted(sent), (len(got), len(sent))
