"""A real broker's partition directory when its log start moves (DeleteRecords, retention)
under idempotent and transactional producers: the producer snapshots of the deleted
segments go with them (Kafka's deleteSegments -> removeAndMarkSnapshotForDeletion, unlinked
after file.delete.delay.ms), `leader-epoch-checkpoint` keeps no epoch below the log start
(Kafka's truncateFromStart: the last one moved to the log start), and a restart, clean or
after SIGKILL, still has the producer state: the idempotent producer's retry of its last
batch is acknowledged with its first offsets and not appended again, a gap is refused, its
next sequence is appended, and no transaction is left open (the LSO is the high
watermark)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.errors import ErrorCode
from tests.polling import wait_until

from .txn_helpers import add_partition
from .wire import Wire, batch

TOPIC = "trimmed"
TOPIC_CONFIGS = {"segment.bytes": "2048", "file.delete.delay.ms": "100"}
TXN_ID = "trimmed-txn"
VALUE = b"v" * 150


class Idempotent:
    def __init__(self, w: Wire) -> None:
        self.pid = w.request(ApiKey.INIT_PRODUCER_ID, 4, {
            "transactional_id": None, "transaction_timeout_ms": 60000})["producer_id"]
        self.seq = 0
        self.last: tuple[bytes, int] | None = None  # the last batch and its offset

    def send(self, w: Wire) -> int:
        data = batch([VALUE], producer_id=self.pid, producer_epoch=0, base_sequence=self.seq)
        r = w.produce(TOPIC, data)
        assert r["error_code"] == 0, r
        self.seq += 1
        self.last = (data, r["base_offset"])
        return int(r["base_offset"])


class Transactional:
    """A transactional producer: one batch a transaction, committed or aborted."""

    def __init__(self, w: Wire) -> None:
        r = w.request(ApiKey.FIND_COORDINATOR, 3, {"key": TXN_ID, "key_type": 1})
        assert r["error_code"] == 0, r
        r = wait_until(lambda: (x := w.request(ApiKey.INIT_PRODUCER_ID, 4, {
            "transactional_id": TXN_ID, "transaction_timeout_ms": 60000, "producer_id": -1,
            "producer_epoch": -1}))["error_code"] == 0 and x, 20, "InitProducerId")
        self.pid, self.epoch, self.seq = int(r["producer_id"]), int(r["producer_epoch"]), 0

    def transaction(self, w: Wire, commit: bool) -> None:
        add_partition(w, TXN_ID, self.pid, self.epoch, TOPIC)
        r = w.request(ApiKey.PRODUCE, 9, {
            "transactional_id": TXN_ID, "acks": 1, "timeout_ms": 5000,
            "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0, "records": batch(
                [VALUE], producer_id=self.pid, producer_epoch=self.epoch,
                base_sequence=self.seq, is_transactional=True)}]}]})
        part = r["responses"][0]["partition_responses"][0]
        assert part["error_code"] == 0, part
        self.seq += 1
        r = w.request(ApiKey.END_TXN, 3, {"transactional_id": TXN_ID, "producer_id": self.pid,
                                          "producer_epoch": self.epoch, "committed": commit})
        assert r["error_code"] == 0, r


def traffic(w: Wire, idem: Idempotent, txn: Transactional, rounds: int) -> None:
    for i in range(rounds):
        for _ in range(3):
            idem.send(w)
        txn.transaction(w, commit=i % 3 != 2)


def snapshot_offsets(d: Path) -> list[int]:
    return sorted(int(p.name.split(".")[0]) for p in d.glob("*.snapshot"))


def segment_bases(d: Path) -> list[int]:
    return sorted(int(p.name.split(".")[0]) for p in d.glob("*.log"))


def epochs_file(d: Path) -> list[tuple[int, int]]:
    lines = (d / "leader-epoch-checkpoint").read_text().split("\n")
    return [(int(e), int(o)) for e, o in (ln.split() for ln in lines[2:2 + int(lines[1])])]


def log_start(w: Wire) -> int:
    r = w.request(ApiKey.LIST_OFFSETS, 7, {
        "replica_id": -1, "isolation_level": 0, "topics": [{"name": TOPIC, "partitions": [
            {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -2}]}]})
    return int(r["topics"][0]["partitions"][0]["offset"])


def settled(d: Path, start: int) -> bool:
    """Nothing of the deleted segments left: every snapshot at or above the first
    segment's base, no `.deleted` file, the epochs trimmed to the log start."""
    bases = segment_bases(d)
    return (bool(bases) and bases[0] <= start
            and all(o >= bases[0] for o in snapshot_offsets(d))
            and not list(d.glob("*.deleted"))
            and epochs_file(d) == [(0, start)])


def retention(w: Wire, retention_bytes: str) -> None:
    r = w.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [{
        "resource_type": 2, "resource_name": TOPIC, "configs": [
            {"name": "retention.bytes", "config_operation": 0, "value": retention_bytes}]}],
        "validate_only": False})
    assert r["responses"][0]["error_code"] == 0, r


def wait_settled(d: Path, start: Any, what: str) -> int:
    """Wait for `settled` at the log start `start()` returns; that start. On a timeout,
    say what is left."""
    try:
        return int(wait_until(lambda: (s := start()) is not None and settled(d, s) and s,
                              20, what))
    except AssertionError as e:
        raise AssertionError(f"{e}: log start {start()}, segments {segment_bases(d)}, "
                             f"snapshots {snapshot_offsets(d)}, epochs {epochs_file(d)}, "
                             f".deleted {sorted(p.name for p in d.glob('*.deleted'))}"
                             ) from None


def check_producer_state(w: Wire, idem: Idempotent) -> None:
    assert idem.last is not None
    data, offset = idem.last
    again = w.produce(TOPIC, data)  # the retry of the last batch: a duplicate
    assert (again["error_code"], again["base_offset"]) == (0, offset), again
    gap = w.produce(TOPIC, batch([VALUE], producer_id=idem.pid, producer_epoch=0,
                                 base_sequence=idem.seq + 1))
    assert gap["error_code"] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, gap
    end = w.fetch(TOPIC, log_start(w))["high_watermark"]
    assert idem.send(w) == end
    fetched: dict[str, Any] = w.fetch(TOPIC, log_start(w))
    assert fetched["last_stable_offset"] == fetched["high_watermark"], fetched


def test_deleted_segments_take_their_snapshots_and_epochs_with_them(broker_factory) -> None:  # type: ignore[no-untyped-def]
    b = broker_factory(log_retention_check_interval_ms="100")
    d = b.data_dir / f"{TOPIC}-0"
    with Wire(b.bootstrap) as w:
        assert w.create_topic(TOPIC, configs=TOPIC_CONFIGS)["error_code"] == 0
        idem = Idempotent(w)
        txn = Transactional(w)
        traffic(w, idem, txn, 12)
        bases = segment_bases(d)
        assert len(bases) >= 6
        before = snapshot_offsets(d)
        assert before and epochs_file(d) == [(0, 0)]

        # DeleteRecords into the active segment: the older segments go, with their snapshots
        start = bases[-1] + 1
        r = w.request(ApiKey.DELETE_RECORDS, 2, {"topics": [{"name": TOPIC, "partitions": [
            {"partition_index": 0, "offset": start}]}], "timeout_ms": 5000})
        assert r["topics"][0]["partitions"][0]["error_code"] == 0, r
        wait_settled(d, lambda: start, "the deleted segments' files gone")
        assert [o for o in before if o < bases[-1]]  # there were snapshots to delete
        assert bases[-1] in snapshot_offsets(d)  # the first segment's stays
        check_producer_state(w, idem)

        # retention down to the active segment: the snapshot at the base of the one
        # before it, kept until now for recovery, goes with it
        traffic(w, idem, txn, 12)
        before = snapshot_offsets(d)
        active = segment_bases(d)[-1]
        retention(w, "1")
        start = wait_settled(d, lambda: active if log_start(w) == active else None,
                             "retention's deleted segments' files gone")
        retention(w, "-1")
        assert [o for o in before if o < start]
        assert snapshot_offsets(d) == [start]
        check_producer_state(w, idem)
        txn.transaction(w, commit=True)

    for stop in (b.kill, b.stop):  # SIGKILL (replayed from a snapshot), then clean
        stop()
        b.start()
        with Wire(b.bootstrap) as w:
            wait_until(lambda w=w: log_start(w) == start, 20, "the partition loaded")
            assert settled(d, start)
            check_producer_state(w, idem)
