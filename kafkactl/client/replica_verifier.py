"""Compare the replicas of partitions (Kafka's ReplicaVerificationTool, as one call): read
each replica's committed batches from its own broker (Fetch with replica_id -2, which a
follower also answers), and compare their offsets and CRCs from the largest log start
offset among them (every replica has what is compared: logs cut by retention or
DeleteRecords start later than 0) up to the smallest high watermark among them. Reads batch
headers only; the records stay undecoded.

A compacted topic's replicas are cleaned each by its own broker's cleaner, at its own
time: one may have dropped superseded records another still holds, and rewritten batches
differ in boundaries and CRCs (a tombstone's delete horizon is stamped in its batch). So
for those the records are compared instead: every offset present in every replica must hold
the same record (timestamp, key, value, headers); an offset one replica cleaned away is
no divergence.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field
from typing import Any

from kafkactl.client.connection import BrokerConnection
from kafkactl.client.kafka_client import KafkaClient
from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.errors import ErrorCode
from kafkactl.record.batch import RecordBatch
from kafkactl.record.memory_records import iter_batches

DEBUGGING_CONSUMER_ID = -2
CHUNK_BYTES = 1 << 20
PROBE_BYTES = 1  # the log start offset probe: one batch at most (the broker's minimum)

Batch = tuple[int, int, int]  # base offset, last offset, CRC
Digests = dict[int, int]  # offset -> CRC-32 of its record's content (compacted topics)


class ReplicaReadError(Exception):
    """A replica's broker refused the read; the message says why (Kafka's error name)."""


@dataclass
class PartitionCheck:
    topic: str
    partition: int
    replicas: list[int]
    checked_from: int = 0  # offsets from here were compared (the largest log start)
    checked_up_to: int = 0  # offsets below this were compared
    batches: int = 0
    diverged_at: int | None = None  # first offset where the replicas differ
    errors: dict[int, str] = field(default_factory=dict)  # broker -> why it was not read
    compared: bool = False  # two or more replicas were read and compared

    @property
    def ok(self) -> bool:
        return self.diverged_at is None and not self.errors

    @property
    def single_replica(self) -> bool:
        """One replica: there is nothing to compare it with (not a failure)."""
        return len(self.replicas) < 2


def _fetch(conn: BrokerConnection, topic: str, partition: int, offset: int,
           max_bytes: int) -> dict[str, Any]:
    """One Fetch of one partition of one replica; the partition's part of the answer."""
    body: dict[str, Any] = {
        "replica_id": DEBUGGING_CONSUMER_ID, "max_wait_ms": 0, "min_bytes": 0,
        "max_bytes": max_bytes, "isolation_level": 0, "session_id": 0,
        "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
        "topics": [{"topic": topic, "partitions": [{
            "partition": partition, "current_leader_epoch": -1, "fetch_offset": offset,
            "last_fetched_epoch": -1, "log_start_offset": -1,
            "partition_max_bytes": max_bytes}]}]}
    resp = conn.request(ApiKey.FETCH, body, version=12)
    part: dict[str, Any] = resp["responses"][0]["partitions"][0]
    return part


def _log_start(client: KafkaClient, broker: int, topic: str, partition: int) -> int:
    """Where one replica's log starts: a Fetch at offset 0 answers with its log start
    offset (with records, or OFFSET_OUT_OF_RANGE when the log starts later)."""
    p = _fetch(client.connection(broker), topic, partition, 0, PROBE_BYTES)
    code, start = p["error_code"], p.get("log_start_offset", -1)
    if code in (ErrorCode.NONE, ErrorCode.OFFSET_OUT_OF_RANGE) and start >= 0:
        return int(start)
    if code == ErrorCode.NONE:
        return 0  # offset 0 was read: the log starts there
    raise ReplicaReadError(ErrorCode(code).name)


def _digest(batch: Any, out: Digests) -> None:
    """Each record of `batch` by offset: a CRC-32 of its timestamp, key, value and headers
    (and whether it is a control record); a magic 0/1 entry by its message CRC."""
    if not isinstance(batch, RecordBatch):
        out[batch.base_offset] = getattr(batch, "crc", 0)
        return
    control = int(batch.is_control)
    for r in batch:
        h = zlib.crc32(struct.pack(">qBi", r.timestamp, control, len(r.headers)))
        for part in (r.key, r.value, *(x for name, v in r.headers
                                         for x in (name.encode(), v))):
            h = zlib.crc32(b"\xff" if part is None else b"\x00%d:" % len(part), h)
            if part is not None:
                h = zlib.crc32(part, h)
        out[r.offset] = h


def _read_replica(client: KafkaClient, broker: int, topic: str, partition: int,
                  start: int = 0, digests: Digests | None = None) -> tuple[list[Batch], int]:
    """(batches, high watermark) of one replica's committed log from offset `start` (the
    batch holding `start` is the first); with `digests`, its records' digests too."""
    conn = client.connection(broker)
    offset, hw, out = start, -1, []
    while True:
        p = _fetch(conn, topic, partition, offset, CHUNK_BYTES)
        if p["error_code"] != ErrorCode.NONE:
            raise ReplicaReadError(f"{ErrorCode(p['error_code']).name} reading from "
                                   f"offset {offset}")
        hw = p["high_watermark"]
        progressed = False
        for b in iter_batches(memoryview(p.get("records") or b"")):
            if b.last_offset < offset:
                continue
            out.append((b.base_offset, b.last_offset, getattr(b, "crc", 0)))
            if digests is not None:
                _digest(b, digests)
            offset = b.last_offset + 1
            progressed = True
        if offset >= hw or not progressed:
            return out, hw


def _why(e: Exception) -> str:
    """Why a replica could not be read, for the report (no Python class names)."""
    text = str(e)
    if text:
        return text
    return "timed out" if isinstance(e, TimeoutError) else "no answer"


def verify_partition(client: KafkaClient, topic: str, partition: int,
                     replicas: list[int], compacted: bool = False) -> PartitionCheck:
    """Compare the replicas of one partition; `compacted` (cleanup.policy has compact):
    by record, as the module doc says."""
    check = PartitionCheck(topic, partition, list(replicas))
    if check.single_replica:
        return check  # nothing to read: no other copy to compare it with
    starts: dict[int, int] = {}
    for broker in replicas:
        try:
            starts[broker] = _log_start(client, broker, topic, partition)
        except Exception as e:  # a replica that cannot be read is reported, not fatal
            check.errors[broker] = _why(e)
    if len(starts) < 2:
        return check
    start = max(starts.values())  # every replica has the offsets from here
    logs: dict[int, tuple[list[Batch], int]] = {}
    digests: dict[int, Digests] = {}
    for broker in starts:
        try:
            mine: Digests | None = {} if compacted else None
            logs[broker] = _read_replica(client, broker, topic, partition, start, mine)
            if mine is not None:
                digests[broker] = mine
        except Exception as e:
            check.errors[broker] = _why(e)
    if len(logs) < 2:
        return check
    upto = min(hw for _batches, hw in logs.values())
    check.compared = True
    check.checked_from = min(start, upto)
    check.checked_up_to = upto
    views = {b: [x for x in batches if x[1] < upto] for b, (batches, _hw) in logs.items()}
    reference = next(iter(views.values()))
    check.batches = len(reference)
    if compacted:
        check.diverged_at = _first_record_difference(
            [{o: d for o, d in mine.items() if start <= o < upto}
             for b, mine in digests.items() if b in logs])
        return check
    differences = [d for d in (_first_difference(reference, other)
                               for other in views.values()) if d is not None]
    check.diverged_at = min(differences) if differences else None
    return check


def _first_record_difference(replicas: list[Digests]) -> int | None:
    """The first offset every replica holds whose record is not the same in all (None:
    they agree wherever they all hold one)."""
    common = set.intersection(*(set(d) for d in replicas))
    first = replicas[0]
    wrong = [o for o in common if any(d[o] != first[o] for d in replicas[1:])]
    return min(wrong) if wrong else None


def _first_difference(a: list[Batch], b: list[Batch]) -> int | None:
    """The first offset where two replicas' batch lists differ (None: identical)."""
    for mine, theirs in zip(a, b, strict=False):
        if mine != theirs:
            return min(mine[0], theirs[0])
    if len(a) != len(b):
        return (a if len(a) > len(b) else b)[min(len(a), len(b))][0]
    return None
