"""What a broker's data dir holds about transactions, read from its segment files: the
batches of a partition (control markers decoded) and the `__transaction_state` records of a
transactional id. The broker writes through the OS, so a running broker's appends are
visible here."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafkactl.broker.coordinator.group_metadata_manager import partition_for
from kafkactl.broker.coordinator.transaction_state_manager import TXN_TOPIC, decode_txn_record
from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.errors import ErrorCode
from kafkactl.record.batch import RecordBatch
from tests.polling import wait_until

STATES = {0: "Empty", 1: "Ongoing", 2: "PrepareCommit", 3: "PrepareAbort",
          4: "CompleteCommit", 5: "CompleteAbort", 6: "Dead", 7: "PrepareEpochFence"}


@dataclass
class Batch:
    base_offset: int
    producer_id: int
    producer_epoch: int
    transactional: bool
    control: bool
    values: list[bytes | None]
    marker: str | None = None  # "COMMIT" / "ABORT" for a control batch
    coordinator_epoch: int = -1


def batches(data_dir: Path, topic: str, partition: int = 0) -> list[Batch]:
    out: list[Batch] = []
    pdir = data_dir / f"{topic}-{partition}"
    for seg in sorted(pdir.glob("*.log")):
        data = memoryview(seg.read_bytes())
        pos = 0
        while pos + 61 <= len(data):
            size = int.from_bytes(data[pos + 8:pos + 12], "big") + 12
            if pos + size > len(data):
                break  # being written
            b = RecordBatch(data, pos)
            records = list(b)
            entry = Batch(b.base_offset, b.producer_id, b.producer_epoch, b.is_transactional,
                          b.is_control, [None if r.value is None else bytes(r.value)
                                         for r in records])
            if b.is_control and records and records[0].key is not None:
                key = bytes(records[0].key)
                entry.marker = "COMMIT" if int.from_bytes(key[2:4], "big") == 1 else "ABORT"
                value = bytes(records[0].value or b"")
                entry.coordinator_epoch = int.from_bytes(value[2:6], "big", signed=True)
            out.append(entry)
            pos += size
    return out


def markers(data_dir: Path, topic: str, partition: int = 0) -> list[tuple[str, int, int]]:
    """(COMMIT|ABORT, producer id, producer epoch) of each control batch, in log order."""
    return [(b.marker or "", b.producer_id, b.producer_epoch)
            for b in batches(data_dir, topic, partition) if b.control]


def data_values(data_dir: Path, topic: str, partition: int = 0) -> list[bytes | None]:
    return [v for b in batches(data_dir, topic, partition) if not b.control for v in b.values]


def committed_values(data_dir: Path, topic: str, partition: int = 0) -> list[bytes | None]:
    """The values a read_committed consumer must see, worked out from the log: a
    transactional batch counts once its producer's next marker is a COMMIT."""
    bs = batches(data_dir, topic, partition)
    out: list[bytes | None] = []
    for i, b in enumerate(bs):
        if b.control:
            continue
        if not b.transactional:
            out.extend(b.values)
            continue
        end = next((m for m in bs[i + 1:] if m.control and m.producer_id == b.producer_id),
                   None)
        if end is not None and end.marker == "COMMIT":
            out.extend(b.values)
    return out


def txn_records(data_dir: Path, transactional_id: str, num_partitions: int = 50
                ) -> list[dict[str, Any] | None]:
    """The TransactionLogValue records of one id, in order (None: a tombstone), with the
    status as a state name under "state"."""
    p = partition_for(transactional_id, num_partitions)
    out: list[dict[str, Any] | None] = []
    for b in batches_raw(data_dir, TXN_TOPIC, p):
        for r in b:
            if r.key is None:
                continue
            e = decode_txn_record(r.key, r.value)
            if e.transactional_id != transactional_id:
                continue
            if e.value is not None:
                e.value["state"] = STATES[e.value["transaction_status"]]
            out.append(e.value)
    return out


def txn_states(data_dir: Path, transactional_id: str) -> list[str | None]:
    return [None if v is None else v["state"] for v in txn_records(data_dir, transactional_id)]


def batches_raw(data_dir: Path, topic: str, partition: int) -> list[RecordBatch]:
    out: list[RecordBatch] = []
    pdir = data_dir / f"{topic}-{partition}"
    for seg in sorted(pdir.glob("*.log")):
        data = memoryview(seg.read_bytes())
        pos = 0
        while pos + 61 <= len(data):
            size = int.from_bytes(data[pos + 8:pos + 12], "big") + 12
            if pos + size > len(data):
                break
            out.append(RecordBatch(data, pos))
            pos += size
    return out


def wait_markers(data_dir: Path, topic: str, count: int, timeout: float = 20.0,
                 partition: int = 0) -> list[tuple[str, int, int]]:
    """The partition's markers once there are at least `count` of them."""
    from tests.polling import wait_until

    found: list[tuple[str, int, int]] = []

    def enough() -> bool:
        found[:] = markers(data_dir, topic, partition)
        return len(found) >= count

    wait_until(enough, timeout, f"{count} marker(s) on {topic}-{partition}")
    return found


def add_partition(w: Any, transactional_id: str, producer_id: int, producer_epoch: int,
                  topic: str, partition: int = 0) -> None:
    """AddPartitionsToTxn v3 over the raw connection `w` (tests/broker/wire.py's Wire),
    asked again while the previous transaction's markers are on their way
    (CONCURRENT_TRANSACTIONS), until the partition is in the transaction."""
    def added() -> bool:
        r = w.request(ApiKey.ADD_PARTITIONS_TO_TXN, 3, {
            "v3_and_below_transactional_id": transactional_id,
            "v3_and_below_producer_id": producer_id,
            "v3_and_below_producer_epoch": producer_epoch,
            "v3_and_below_topics": [{"name": topic, "partitions": [partition]}]})
        code = r["results_by_topic_v3_and_below"][0]["results_by_partition"][0][
            "partition_error_code"]
        assert code in (0, ErrorCode.CONCURRENT_TRANSACTIONS), r
        return code == 0

    wait_until(added, 20, "AddPartitionsToTxn")
