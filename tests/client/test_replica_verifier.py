"""The replica comparison of `kafkactl cluster verify-replicas` at its edges."""

from __future__ import annotations

from typing import Any

from kafkactl.client.replica_verifier import _first_difference, verify_partition
from kafkactl.protocol.errors import ErrorCode


def test_identical_logs_have_no_difference() -> None:
    a = [(0, 9, 111), (10, 19, 222)]
    assert _first_difference(a, list(a)) is None
    assert _first_difference([], []) is None


def test_a_different_crc_or_boundary_is_reported_at_its_offset() -> None:
    a = [(0, 9, 111), (10, 19, 222)]
    assert _first_difference(a, [(0, 9, 111), (10, 19, 999)]) == 10
    assert _first_difference(a, [(0, 4, 111), (5, 19, 222)]) == 0


def test_a_missing_tail_is_reported_where_it_starts() -> None:
    a = [(0, 9, 111), (10, 19, 222)]
    assert _first_difference(a, a[:1]) == 10
    assert _first_difference(a[:1], a) == 10
    assert _first_difference([], a) == 0


# ---- logs that do not start at 0 (retention, DeleteRecords) ----------------------------------
class _Replica:
    """One replica's broker answering the verifier's Fetch (replica_id -2) as a kafkactl
    broker does: its committed batches, OFFSET_OUT_OF_RANGE (with its log start offset)
    outside its log."""

    def __init__(self, start: int, hw: int, crc_salt: bytes = b"") -> None:
        from kafkactl.record.builder import RecordBatchBuilder

        self.start, self.hw = start, hw
        self.batches: list[tuple[int, int, bytes]] = []
        for base in range(start - start % 10, hw, 10):  # batches of 10 records
            b = RecordBatchBuilder(base_offset=base)
            for i in range(10):
                b.append(1_000 + base + i, None, b"v%d" % (base + i) + crc_salt)
            self.batches.append((base, base + 9, b.build()))
        self.fetched_from: list[int] = []

    def request(self, api_key: int, body: dict[str, Any], *, version: int) -> dict[str, Any]:
        p = body["topics"][0]["partitions"][0]
        offset = p["fetch_offset"]
        self.fetched_from.append(offset)
        part: dict[str, Any] = {"partition_index": 0, "high_watermark": self.hw,
                                "log_start_offset": self.start, "records": b""}
        if offset < self.start or offset > self.hw:
            return _fetched(part, ErrorCode.OFFSET_OUT_OF_RANGE)
        out = b""
        for _base, last, data in self.batches:
            if last >= offset and (not out or len(out) + len(data) <= p["partition_max_bytes"]):
                out += data
        return _fetched(dict(part, records=out), ErrorCode.NONE)


def _fetched(part: dict[str, Any], code: ErrorCode) -> dict[str, Any]:
    return {"responses": [{"topic": "t", "partitions": [dict(part, error_code=code)]}]}


class _Client:
    def __init__(self, replicas: dict[int, Any]) -> None:
        self.replicas = replicas

    def connection(self, broker: int) -> Any:
        replica = self.replicas[broker]
        if isinstance(replica, Exception):
            raise replica
        return replica


def test_replicas_whose_logs_start_later_are_compared_from_the_largest_start() -> None:
    """Retention or DeleteRecords cut every replica's log: they are compared from the
    largest log start offset among them (each has it), not from offset 0 (which none has:
    OFFSET_OUT_OF_RANGE, "not compared NOT CHECKED")."""
    replicas = {1: _Replica(start=50, hw=100), 2: _Replica(start=30, hw=100),
                3: _Replica(start=50, hw=90)}
    check = verify_partition(_Client(replicas), "t", 0, [1, 2, 3])  # type: ignore[arg-type]
    assert check.errors == {} and check.ok and check.compared
    assert (check.checked_from, check.checked_up_to, check.batches) == (50, 90, 4)
    assert all(r.fetched_from[1] == 50 for r in replicas.values())  # after the probe at 0


def test_a_divergence_after_the_log_start_is_still_found() -> None:
    replicas = {1: _Replica(start=40, hw=100), 2: _Replica(start=40, hw=100, crc_salt=b"x")}
    check = verify_partition(_Client(replicas), "t", 0, [1, 2])  # type: ignore[arg-type]
    assert check.compared and check.diverged_at == 40


def test_a_replica_that_cannot_be_read_is_said_without_python_class_names() -> None:
    from kafkactl.client.errors import KafkaConnectionError

    replicas: dict[int, Any] = {
        1: _Replica(start=50, hw=100), 2: _Replica(start=50, hw=100),
        3: KafkaConnectionError("broker 3 is not in the cluster metadata"), 4: TimeoutError()}
    check = verify_partition(_Client(replicas), "t", 0, [1, 2, 3, 4])  # type: ignore[arg-type]
    assert check.compared and not check.ok
    assert check.errors == {3: "broker 3 is not in the cluster metadata", 4: "timed out"}
    # a replica that refuses the read: Kafka's error name (and where it was read from)
    moving = _Replica(start=50, hw=100)
    probe = moving.request

    def retention_meanwhile(api_key: int, body: dict[str, Any], *, version: int
                            ) -> dict[str, Any]:
        answer = probe(api_key, body, version=version)
        moving.start = 60  # its log start passed 50 between the probe and the read
        return answer
    moving.request = retention_meanwhile  # type: ignore[method-assign]
    check = verify_partition(_Client({1: _Replica(50, 100), 2: moving}), "t", 0,  # type: ignore[arg-type]
                             [1, 2])
    assert check.errors == {2: "OFFSET_OUT_OF_RANGE reading from offset 50"}
    broken = _Replica(start=50, hw=100)
    broken.request = lambda api_key, body, *, version: _fetched(  # type: ignore[method-assign]
        {"partition_index": 0, "high_watermark": -1, "log_start_offset": -1, "records": b""},
        ErrorCode.NOT_LEADER_OR_FOLLOWER)
    check = verify_partition(_Client({1: _Replica(50, 100), 2: broken}), "t", 0,  # type: ignore[arg-type]
                             [1, 2])
    assert check.errors == {2: "NOT_LEADER_OR_FOLLOWER"}
    assert all("Error" not in why for why in check.errors.values())
