"""A log dir whose disk fills up: a real tmpfs mounted as one of the broker's log.dirs.

Produces to partitions in the full dir fail with KAFKA_STORAGE_ERROR (a retriable error)
and change nothing; every other API and the partitions in the other dir keep working; once
space is freed the same produce succeeds at the same offset, without a restart; and after a
clean stop (also with the disk still full) and after kill -9 every acknowledged record is
there exactly once in logs that `kafkactl dump-log` finds valid.
"""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.errors import ErrorCode
from kafkactl.record.memory_records import iter_batches
from tests import zygote

from .wire import Wire, batch

TMPFS_SIZE = 4 * 1024 * 1024
SEGMENT_BYTES = 256 * 1024
RECORDS_PER_BATCH = 4
VALUE_SIZE = 500


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A small tmpfs mounted for this test (unmounted afterwards)."""
    mnt = tmp_path / "small-disk"
    mnt.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={TMPFS_SIZE}", "tmpfs",
                           str(mnt)], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs (needs root / CAP_SYS_ADMIN): "
                    f"{proc.stderr.strip() or proc.returncode}")
    try:
        yield mnt
    finally:
        if subprocess.run(["umount", str(mnt)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def fill_disk(mnt: Path, leave: int = 0) -> Path:
    """Write a ballast file until the tmpfs has `leave` bytes (or nothing) left."""
    ballast = mnt / f"ballast-{len(list(mnt.glob('ballast-*')))}"
    st = os.statvfs(mnt)
    want = max(0, st.f_bavail * st.f_frsize - leave)
    chunk = b"\xee" * (64 * 1024)
    with open(ballast, "wb", buffering=0) as f:
        try:
            while want > 0:
                want -= f.write(chunk[:want])
            if leave == 0:
                while True:
                    f.write(chunk)
        except OSError as e:
            assert e.errno == errno.ENOSPC
    return ballast


def free_disk(mnt: Path) -> None:
    for p in mnt.glob("ballast-*"):
        p.unlink()


class IdempotentSender:
    """Numbered values sent as idempotent batches over the raw wire protocol; remembers
    every acknowledged (offset, value) and the batch of the last failed attempt."""

    def __init__(self, w: Wire, topic: str) -> None:
        self.topic = topic
        self.pid = w.request(ApiKey.INIT_PRODUCER_ID, 4, {
            "transactional_id": None, "transaction_timeout_ms": 60000})["producer_id"]
        self.seq = 0
        self.next_value = 0
        self.acked: list[tuple[int, bytes]] = []
        self.pending: tuple[bytes, list[bytes]] | None = None  # a batch not acknowledged yet
        self.last_acked: tuple[bytes, int] | None = None  # (batch, base offset)

    def _new_batch(self) -> tuple[bytes, list[bytes]]:
        values = [b"%08d" % (self.next_value + i) + b"." * (VALUE_SIZE - 8)
                  for i in range(RECORDS_PER_BATCH)]
        raw = batch(values, producer_id=self.pid, producer_epoch=0, base_sequence=self.seq)
        return raw, values

    def send(self, w: Wire) -> dict:
        """Send the pending batch (a retry) or a new one; returns the partition response."""
        if self.pending is None:
            self.pending = self._new_batch()
        raw, values = self.pending
        r = w.produce(self.topic, raw)
        if r["error_code"] == 0:
            self.acked += [(r["base_offset"] + i, v) for i, v in enumerate(values)]
            self.seq += len(values)
            self.next_value += len(values)
            self.pending = None
            self.last_acked = (raw, r["base_offset"])
        return r

    def resend_last_acked(self, w: Wire) -> None:
        """A retry of an acknowledged batch is a duplicate: same offset, nothing appended."""
        assert self.last_acked is not None
        raw, base = self.last_acked
        r = w.produce(self.topic, raw)
        assert (r["error_code"], r["base_offset"]) == (0, base)

    def until_error(self, w: Wire, limit: int = 5000) -> dict:
        for _ in range(limit):
            r = self.send(w)
            if r["error_code"] != 0:
                return r
        raise AssertionError(f"no produce failed after {limit} batches")


def read_all(w: Wire, topic: str) -> list[tuple[int, bytes]]:
    out: list[tuple[int, bytes]] = []
    offset = 0
    while True:
        f = w.fetch(topic, offset)
        assert f["error_code"] == 0, f
        if offset >= f["high_watermark"]:
            return out
        batches = list(iter_batches(memoryview(bytes(f["records"]))))
        assert batches, f"no whole batch at offset {offset}"
        for b in batches:
            assert b.is_valid()
            out += [(r.offset, bytes(r.value)) for r in b if r.offset >= offset]
            offset = b.last_offset + 1


def assert_exactly(w: Wire, sender: IdempotentSender) -> None:
    got = read_all(w, sender.topic)
    assert got == sender.acked  # every acknowledged record, once, at its offset, in order
    assert [o for o, _ in got] == list(range(len(got)))


def assert_dump_log_clean(partition_dir: Path) -> None:
    logs = sorted(str(p) for p in partition_dir.glob("*.log"))
    assert logs
    proc = zygote.run(["dump-log", "--deep-iteration", *logs], text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "invalid bytes" not in proc.stdout
    assert "isvalid: false" not in proc.stdout


def test_full_log_dir_fails_produces_cleanly_and_loses_nothing(tmpfs: Path, broker_factory,
                                                              tmp_path: Path) -> None:
    disk = tmp_path / "big-disk"
    broker = broker_factory(
        log_dirs=f"{disk},{tmpfs}", log_segment_bytes=str(SEGMENT_BYTES),
        log_index_size_max_bytes="16384", offsets_topic_num_partitions="1",
        auto_create_topics_enable="false")
    with Wire(broker.bootstrap) as w:
        # least-loaded placement: "other" goes to the first dir, "full" to the tmpfs
        assert w.create_topic("other")["error_code"] == 0
        assert w.create_topic("full")["error_code"] == 0
        assert (disk / "other-0").is_dir() and (tmpfs / "full-0").is_dir()
        sender = IdempotentSender(w, "full")
        for _ in range(10):
            assert sender.send(w)["error_code"] == 0

        # Fill the tmpfs: a ballast file, then produced data (rolling segments) until a
        # produce fails.
        fill_disk(tmpfs, leave=3 * SEGMENT_BYTES // 2)
        err = sender.until_error(w)
        assert err["error_code"] == ErrorCode.KAFKA_STORAGE_ERROR, err
        assert err["base_offset"] == -1
        assert len(list((tmpfs / "full-0").glob("*.log"))) >= 2  # it rolled on the way
        leo = len(sender.acked)
        for _ in range(3):  # retries fail the same way and change nothing
            assert sender.send(w)["error_code"] == ErrorCode.KAFKA_STORAGE_ERROR

        # Everything else keeps working: fetch of the full partition, the other dir,
        # metadata, a consumer group's offsets.
        assert_exactly(w, sender)
        assert w.fetch("full", 0)["high_watermark"] == leo
        other = w.produce("other", batch([b"elsewhere"]))
        assert (other["error_code"], other["base_offset"]) == (0, 0)
        md = w.request(ApiKey.METADATA, 12, {
            "topics": [{"name": "full"}, {"name": "other"}], "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False})
        assert [(t["name"], t["error_code"]) for t in md["topics"]] == [("full", 0),
                                                                         ("other", 0)]

    # A regular client with retries off sees the retriable storage error.
    errors: list[KafkaError] = []
    p = Producer({"bootstrap.servers": broker.bootstrap, "message.send.max.retries": 0,
                  "enable.idempotence": False, "linger.ms": 0})
    p.produce("full", value=b"x" * 2000, partition=0,
              on_delivery=lambda e, m: errors.append(e))
    assert p.flush(20) == 0
    assert errors and errors[0] is not None
    assert errors[0].code() == KafkaError.KAFKA_STORAGE_ERROR

    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g",
                  "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition("other", 0, 1)], asynchronous=False)
        assert c.committed([TopicPartition("other", 0)], timeout=20)[0].offset == 1
    finally:
        c.close()

    log_text = broker.log()
    assert "No space left on device" in log_text and str(tmpfs) in log_text
    assert "Traceback" not in log_text

    # Free the space: the same (idempotent) batch now succeeds at the same offset.
    free_disk(tmpfs)
    with Wire(broker.bootstrap) as w:
        again = sender.send(w)
        assert (again["error_code"], again["base_offset"]) == (0, leo)
        for _ in range(5):
            assert sender.send(w)["error_code"] == 0
        assert_exactly(w, sender)

    # Clean restart.
    assert broker.stop() == 0
    assert (tmpfs / ".kafka_cleanshutdown").exists()
    broker.start()
    with Wire(broker.bootstrap) as w:
        assert_exactly(w, sender)
        sender.resend_last_acked(w)
        assert sender.send(w)["error_code"] == 0

        # Full again: a client with its default retries keeps the record until space is
        # freed, then it is delivered (no error reached the application).
        fill_disk(tmpfs)
        assert sender.until_error(w)["error_code"] == ErrorCode.KAFKA_STORAGE_ERROR
        reports: list[tuple[KafkaError | None, int, bytes]] = []
        p = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": False,
                      "linger.ms": 0, "message.timeout.ms": 60000})
        retried = b"r" * 8000  # more than the page the .log may still have room in
        p.produce("full", value=retried, partition=0,
                  on_delivery=lambda e, m: reports.append((e, m.offset(), m.value())))
        p.poll(1.0)
        assert reports == []  # still retrying
        free_disk(tmpfs)
        assert p.flush(20) == 0
        assert [(e, v) for e, _, v in reports] == [(None, retried)]
        sender.acked = sorted(sender.acked + [(reports[0][1], retried)])
        assert sender.send(w)["error_code"] == 0
        assert_exactly(w, sender)

        # Full again, then a clean stop while the disk is still full: it must exit.
        fill_disk(tmpfs)
        assert sender.until_error(w)["error_code"] == ErrorCode.KAFKA_STORAGE_ERROR
    assert broker.stop() == 0
    assert "broker stopped cleanly" in broker.log()
    free_disk(tmpfs)
    broker.start()
    with Wire(broker.bootstrap) as w:
        assert_exactly(w, sender)
        assert sender.send(w)["error_code"] == 0  # the failed batch, retried

        # Full again, then kill -9.
        fill_disk(tmpfs)
        assert sender.until_error(w)["error_code"] == ErrorCode.KAFKA_STORAGE_ERROR
    broker.kill()
    # It starts (recovering the full dir) with the disk still full, and serves it.
    broker.start()
    with Wire(broker.bootstrap) as w:
        assert_exactly(w, sender)
        assert sender.send(w)["error_code"] == ErrorCode.KAFKA_STORAGE_ERROR
    free_disk(tmpfs)
    with Wire(broker.bootstrap) as w:
        sender.resend_last_acked(w)
        leo = len(sender.acked)
        last = sender.send(w)  # the batch that failed before the kill
        assert (last["error_code"], last["base_offset"]) == (0, leo)
        assert_exactly(w, sender)
    assert broker.stop() == 0
    assert "Traceback" not in broker.log()
    assert_dump_log_clean(tmpfs / "full-0")


def partition_dirs(log_dir: Path, topic: str) -> list[str]:
    return sorted(p.name for p in log_dir.glob(f"{topic}-*")
                  if p.name[len(topic) + 1:].isdigit())


def test_topic_creation_on_a_full_disk_is_all_or_nothing(tmpfs: Path, broker_factory) -> None:
    """CreateTopics on a full log dir answers KAFKA_STORAGE_ERROR and leaves no half-made
    topic (no partitions served, no directories left behind); once space is freed the
    same request creates the topic whole."""
    broker = broker_factory(log_dirs=str(tmpfs), log_segment_bytes=str(SEGMENT_BYTES),
                            log_index_size_max_bytes="16384",
                            offsets_topic_num_partitions="1",
                            auto_create_topics_enable="false")
    fill_disk(tmpfs)
    with Wire(broker.bootstrap) as w:
        r = w.create_topic("t3", partitions=3)
        assert r["error_code"] == ErrorCode.KAFKA_STORAGE_ERROR, r
        assert partition_dirs(tmpfs, "t3") == []  # undone ones are renamed *-delete
        md = w.request(ApiKey.METADATA, 12, {
            "topics": [{"name": "t3"}], "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False})
        assert md["topics"][0]["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        free_disk(tmpfs)
        assert w.create_topic("t3", partitions=3)["error_code"] == 0
        assert partition_dirs(tmpfs, "t3") == ["t3-0", "t3-1", "t3-2"]
        assert w.produce("t3", batch([b"after"]), partition=2)["error_code"] == 0
    assert "Traceback" not in broker.log()
