"""AlterReplicaLogDirs on a real broker with two log dirs (issue 34): a partition moves to
the other dir while a librdkafka producer keeps writing to it; every acknowledged record is
readable afterwards, the old directory is gone, DescribeLogDirs shows the new one, and a
restart finds the partition there. Without writes, the moved segment files are byte for
byte the ones that were. Bad requests get Kafka's per-partition errors."""

from __future__ import annotations

import json
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest

from tests import zygote
from tests.conftest import BrokerProcess

pytest.importorskip("confluent_kafka")

SMALL_SEGMENTS = 64 * 1024  # many sealed segments to copy
SEGMENTS = 1024 * 1024


def kafkactl(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return zygote.run(list(args), text=True, timeout=timeout)


def two_dir_broker(broker_factory: Any, tmp_path: Path, segment_bytes: int = SMALL_SEGMENTS
                   ) -> tuple[BrokerProcess, list[Path]]:
    dirs = [tmp_path / "disk-a", tmp_path / "disk-b"]
    b = broker_factory(log_dirs=",".join(map(str, dirs)), log_segment_bytes=str(segment_bytes),
                       num_partitions="1", file_delete_delay_ms="200")
    return b, dirs


def where(b: BrokerProcess, topic: str) -> dict[tuple[int, bool], Path]:
    """(partition, future) -> log dir, from `kafkactl log-dirs describe --json`."""
    r = kafkactl("log-dirs", "describe", "-t", topic, "--json", "-b", b.bootstrap)
    assert r.returncode == 0, r.stderr
    return {(x["partition"], x["future"]): Path(d["log_dir"])
            for d in json.loads(r.stdout) for x in d["replicas"] if x["topic"] == topic}


def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 16384})
    for v in values:
        while True:
            try:
                p.produce(topic, v, partition=0)
                break
            except BufferError:
                p.poll(0.1)
    assert p.flush(60) == 0


def consume_all(bootstrap: str, topic: str) -> list[bytes]:
    r = zygote.run(["consume", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-q",
                    "-b", bootstrap], timeout=120)
    assert r.returncode == 0, r.stderr
    return bytes(r.stdout).splitlines()


class BackgroundProducer(threading.Thread):
    """Writes numbered records (about 20,000 a second) until stopped; `acked` holds those
    the broker acknowledged (acks=all)."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic = bootstrap, topic
        self.acked: list[bytes] = []
        self.failed: list[str] = []
        self.stop = threading.Event()

    def run(self) -> None:
        from confluent_kafka import Producer

        def done(err: Any, msg: Any) -> None:
            if err is None:
                self.acked.append(msg.value())
            else:
                self.failed.append(str(err))

        # batches of at most 16 KiB (Java's default batch.size): the logs here have small
        # segments, and a batch larger than segment.bytes is refused (RECORD_LIST_TOO_LARGE)
        p = Producer({"bootstrap.servers": self.bootstrap, "acks": "all", "linger.ms": 2,
                      "batch.size": 16384})
        i = 0
        while not self.stop.is_set():
            try:
                p.produce(self.topic, b"live-%08d-" % i + b"x" * 200, partition=0,
                          on_delivery=done)
                i += 1
            except BufferError:
                p.poll(0.05)
            p.poll(0.005 if i % 100 == 0 else 0)
        p.flush(60)


def test_a_partition_moves_while_a_producer_writes(broker_factory: Any,
                                                   tmp_path: Path) -> None:
    b, dirs = two_dir_broker(broker_factory, tmp_path, SEGMENTS)
    produce(b.bootstrap, "moving", [b"old-%08d-" % i + b"y" * 300 for i in range(20000)])
    src = where(b, "moving")[(0, False)]
    dest = next(d.absolute() for d in dirs if d.absolute() != src)
    writer = BackgroundProducer(b.bootstrap, "moving")
    writer.start()
    try:
        r = kafkactl("log-dirs", "move", "-t", "moving", "-p", "0", "--dir", str(dest),
                     "--broker", "0", "--wait", "-b", b.bootstrap)
        assert r.returncode == 0, r.stderr
        assert "Done." in r.stdout
    finally:
        writer.stop.set()
        writer.join(120)
    assert writer.failed == []
    assert len(writer.acked) > 0
    assert where(b, "moving") == {(0, False): dest}
    assert not (src / "moving-0").exists()  # the old dir is gone (renamed, then removed)
    assert [p.name for p in dest.iterdir() if p.name.endswith("-future")] == []
    expected = [b"old-%08d-" % i + b"y" * 300 for i in range(20000)] + writer.acked
    got = consume_all(b.bootstrap, "moving")
    assert set(expected) <= set(got)  # every acknowledged record is there
    assert got[:20000] == expected[:20000]
    b.restart()
    assert where(b, "moving") == {(0, False): dest}
    assert consume_all(b.bootstrap, "moving") == got
    produce(b.bootstrap, "moving", [b"after-restart"])
    assert consume_all(b.bootstrap, "moving")[-1] == b"after-restart"


def test_the_moved_segments_are_the_same_bytes(broker_factory: Any, tmp_path: Path) -> None:
    b, dirs = two_dir_broker(broker_factory, tmp_path)
    produce(b.bootstrap, "still", [b"r-%06d" % i * 20 for i in range(5000)])
    src = where(b, "still")[(0, False)]
    dest = next(d.absolute() for d in dirs if d.absolute() != src)
    before = {p.name: p.read_bytes() for p in (src / "still-0").iterdir()
              if p.suffix in (".log", ".txnindex") or p.name == "leader-epoch-checkpoint"}
    assert sum(name.endswith(".log") for name in before) >= 3
    r = kafkactl("log-dirs", "move", "-t", "still", "--dir", str(dest), "--broker", "0",
                 "--wait", "-b", b.bootstrap)
    assert r.returncode == 0, r.stderr
    after = {p.name: p.read_bytes() for p in (dest / "still-0").iterdir() if p.name in before}
    assert after == before
    # the replica is there already: nothing to do
    r = kafkactl("log-dirs", "move", "-t", "still", "-p", "0", "--dir", str(dest), "--broker",
                 "0", "--wait", "-b", b.bootstrap)
    assert r.returncode == 0 and "Done." in r.stdout, r.stderr


def test_bad_moves_get_kafkas_errors(broker_factory: Any, tmp_path: Path) -> None:
    b, dirs = two_dir_broker(broker_factory, tmp_path)
    produce(b.bootstrap, "t", [b"x"])
    for args, error in (
            (["-t", "t", "-p", "0", "--dir", str(tmp_path / "elsewhere")], "LOG_DIR_NOT_FOUND"),
            (["-t", "t", "-p", "7", "--dir", str(dirs[0])], "REPLICA_NOT_AVAILABLE"),
            (["-t", "nope", "-p", "0", "--dir", str(dirs[0])], "REPLICA_NOT_AVAILABLE")):
        r = kafkactl("log-dirs", "move", *args, "--broker", "0", "-b", b.bootstrap)
        assert r.returncode == 1 and error in r.stderr, (args, r.stderr)
    r = kafkactl("log-dirs", "describe", "-b", b.bootstrap)
    assert r.returncode == 0 and "t" in r.stdout  # the broker serves on


def test_a_move_a_stop_interrupted_is_dropped_at_start(broker_factory: Any,
                                                       tmp_path: Path) -> None:
    """A `-future` dir left by a stop during a move: the replica it was copying is whole
    where it was, so the next start deletes the copy (and never serves it)."""
    from tests.polling import wait_until

    dirs = [tmp_path / "disk-a", tmp_path / "disk-b"]
    for d in dirs:
        d.mkdir()
    future = dirs[1] / "left-0.0123456789abcdef-future"
    future.mkdir()
    (future / "00000000000000000000.log").write_bytes(b"half a copy")
    b = broker_factory(log_dirs=",".join(map(str, dirs)), log_retention_check_interval_ms="100")
    wait_until(lambda: not future.exists(), 30, "the -future dir deleted")
    r = kafkactl("log-dirs", "describe", "--json", "-b", b.bootstrap)
    assert r.returncode == 0 and "left" not in r.stdout, r.stdout
