"""Per-topic configs that change what the broker does: compression.type, retention."""

from __future__ import annotations

from kafkactl.record.memory_records import iter_batches
from tests.polling import wait_until

from .wire import Wire, batch


def test_topic_compression_type_recompresses(broker) -> None:
    with Wire(broker.bootstrap) as w:
        assert w.create_topic("gz", configs={"compression.type": "gzip"})["error_code"] == 0
        assert w.produce("gz", batch([b"a" * 100, b"b" * 100]))["error_code"] == 0
        b = next(iter_batches(memoryview(bytes(w.fetch("gz", 0)["records"]))))
        assert b.compression == 1 and b.is_valid()
        assert [bytes(r.value) for r in b] == [b"a" * 100, b"b" * 100]


def test_background_retention_deletes_old_segments(broker_factory) -> None:
    broker = broker_factory(log_retention_check_interval_ms="200")
    with Wire(broker.bootstrap) as w:
        assert w.create_topic("ret", configs={"segment.bytes": "1024",
                                              "retention.ms": "500",
                                              "file.delete.delay.ms": "0"})["error_code"] == 0
        for i in range(20):
            w.produce("ret", batch([b"%d" % i + b"x" * 200]))
        wait_until(lambda: w.fetch("ret", 19)["log_start_offset"] > 0, 20,
                   "retention to delete the oldest segments")
