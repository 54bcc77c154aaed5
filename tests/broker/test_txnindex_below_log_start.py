"""A .txnindex entry whose transaction began in a segment DeleteRecords removed: its first
offset (and an entry's last stable offset) lies below the first segment left. A healthy,
cleanly stopped log is healthy to `kafkactl recover --dry-run` (it read the log from the
first segment with no transaction open and reported these entries as damaged), and a start
that recovers every segment keeps them as they are (it rewrote them the same way): the
producer snapshot at the first segment's base (kept with its segment) says which
transactions were open there, and without one an entry the log cannot contradict (an offset
below that base) is kept. Real broker, raw transactional producers."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from kafkactl.log.checkpoint import RECOVERY_POINT_CHECKPOINT
from kafkactl.log.manager import CLEAN_SHUTDOWN_MARKER
from kafkactl.log.txn_index import parse_entries
from kafkactl.protocol.api_keys import ApiKey
from tests.groups.helpers import kafkactl
from tests.polling import wait_until

from .txn_helpers import add_partition, wait_markers
from .wire import Wire, batch

TOPIC = "trimmed-txns"
VALUE = b"v" * 300  # ~3 batches a segment of 1024 bytes


class Txn:
    """A transactional producer speaking the wire protocol."""

    def __init__(self, w: Wire, txn_id: str) -> None:
        self.txn_id = txn_id
        r = w.request(ApiKey.FIND_COORDINATOR, 3, {"key": txn_id, "key_type": 1})
        assert r["error_code"] == 0, r
        r = wait_until(lambda: (x := w.request(ApiKey.INIT_PRODUCER_ID, 4, {
            "transactional_id": txn_id, "transaction_timeout_ms": 60000, "producer_id": -1,
            "producer_epoch": -1}))["error_code"] == 0 and x, 20, "InitProducerId")
        self.pid, self.epoch, self.seq = int(r["producer_id"]), int(r["producer_epoch"]), 0
        self.added = False

    def send(self, w: Wire) -> int:
        if not self.added:
            add_partition(w, self.txn_id, self.pid, self.epoch, TOPIC)
            self.added = True
        r = w.request(ApiKey.PRODUCE, 9, {
            "transactional_id": self.txn_id, "acks": 1, "timeout_ms": 5000,
            "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0, "records": batch(
                [VALUE], producer_id=self.pid, producer_epoch=self.epoch,
                base_sequence=self.seq, is_transactional=True)}]}]})
        part = r["responses"][0]["partition_responses"][0]
        assert part["error_code"] == 0, part
        self.seq += 1
        return int(part["base_offset"])

    def end(self, w: Wire, commit: bool) -> None:
        r = w.request(ApiKey.END_TXN, 3, {"transactional_id": self.txn_id,
                                          "producer_id": self.pid,
                                          "producer_epoch": self.epoch, "committed": commit})
        assert r["error_code"] == 0, r
        self.added = False


def plain(w: Wire, n: int) -> None:
    for _ in range(n):
        assert w.produce(TOPIC, batch([VALUE]))["error_code"] == 0


def txnindex(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.glob("*.txnindex"))}


def dry_run(d: Path) -> Any:
    return kafkactl("recover", "--dry-run", str(d))


def test_entries_of_transactions_begun_below_the_first_segment_are_healthy(
        broker_factory: Any, tmp_path: Path) -> None:
    b = broker_factory()
    d = b.data_dir / f"{TOPIC}-0"
    with Wire(b.bootstrap) as w:
        assert w.create_topic(TOPIC, configs={"segment.bytes": "1024",
                                              "file.delete.delay.ms": "100"})[
            "error_code"] == 0
        long, short = Txn(w, "long-txn"), Txn(w, "short-txn")
        began = long.send(w)  # a transaction left open across the DeleteRecords point
        plain(w, 4)
        cut = short.send(w)  # aborted while the long one is open: its LSO is `began`
        short.end(w, commit=False)
        plain(w, 3)
        long.send(w)
        long.end(w, commit=False)  # its entry's first offset is `began`
        plain(w, 12)  # later segments (their roll snapshots come after the first's)
        wait_markers(b.data_dir, TOPIC, 2)
        r = w.request(ApiKey.DELETE_RECORDS, 2, {"topics": [{"name": TOPIC, "partitions": [
            {"partition_index": 0, "offset": cut}]}], "timeout_ms": 5000})
        assert r["topics"][0]["partitions"][0]["error_code"] == 0, r
    b.stop()  # (deletes the `.deleted` files)
    first = min(int(p.name.split(".")[0]) for p in d.glob("*.log"))
    assert began < first <= cut
    entries = [e for data in txnindex(d).values() for e in parse_entries(data)]
    assert sorted((e.producer_id, e.first_offset, e.last_stable_offset) for e in entries) \
        == sorted([(short.pid, cut, began), (long.pid, began, max(
            e.last_offset for e in entries) + 1)]), entries
    files = txnindex(d)

    # the snapshot at the first segment's base stayed with it: recover reads from there
    assert (d / f"{first:020d}.snapshot").exists()
    r = dry_run(d)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "nothing to repair" in r.stdout

    # without any snapshot, the entries cannot be contradicted by the log
    copy = tmp_path / f"{TOPIC}-0"
    shutil.copytree(d, copy)
    for snap in copy.glob("*.snapshot"):
        snap.unlink()
    r = dry_run(copy)
    assert r.returncode == 0, r.stdout + r.stderr

    # a start that recovers every segment (no snapshot, no recovery point) keeps them too
    for snap in d.glob("*.snapshot"):
        snap.unlink()
    (b.data_dir / RECOVERY_POINT_CHECKPOINT).unlink()
    (b.data_dir / CLEAN_SHUTDOWN_MARKER).unlink(missing_ok=True)
    b.start()
    with Wire(b.bootstrap) as w:
        wait_until(lambda: w.fetch(TOPIC, cut)["error_code"] == 0, 20, "the partition loaded")
    assert txnindex(d) == files
    b.stop()
