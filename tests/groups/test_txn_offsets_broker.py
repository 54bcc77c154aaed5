"""TxnOffsetCommit on a real broker, driven by kafkactl's transactional producer
(send_offsets_to_transaction = AddOffsetsToTxn + TxnOffsetCommit): offsets are pending
until the transaction's marker (OffsetFetch with require_stable answers
UNSTABLE_OFFSET_COMMIT meanwhile, without it the previous offset), committed with the
transaction or dropped with its abort; a broker SIGKILLed mid-transaction reloads them as
pending from __consumer_offsets, and the abort that fences the old producer drops them.
KIP-447's member checks (v3+) refuse a stale generation or an unknown member."""

from __future__ import annotations

from typing import Any

from kafkactl.client.group import GroupConsumer
from kafkactl.client.producer import Producer
from kafkactl.client.transaction_manager import GroupMetadata
from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.errors import ErrorCode as E
from tests.groups.helpers import FAST, connect, create_topic, wait_until

TP = ("tx-in", 0)


def _fetch(bootstrap: str, group: str, stable: bool) -> tuple[int, int]:
    """(partition error, committed offset) of TP with OffsetFetch v7."""
    conn = connect(bootstrap)
    try:
        r = conn.request(ApiKey.OFFSET_FETCH, {
            "group_id": group, "require_stable": stable,
            "topics": [{"name": TP[0], "partition_indexes": [TP[1]]}]}, version=7)
    finally:
        conn.close()
    if r.get("error_code"):  # the group's error (loading, not the coordinator)
        return int(r["error_code"]), -1
    p = r["topics"][0]["partitions"][0]
    return int(p["error_code"]), int(p["committed_offset"])


def _producer(bootstrap: str, txn_id: str) -> Producer:
    p = Producer(bootstrap, transactional_id=txn_id, linger_ms=1)
    p.init_transactions()
    return p


def test_pending_until_the_marker_then_committed_or_dropped(broker_factory: Any) -> None:
    broker = broker_factory(**FAST)
    b = broker.bootstrap
    create_topic(b, "tx-in", 1)
    create_topic(b, "tx-out", 1)
    p = _producer(b, "offsets-1")
    try:
        p.begin_transaction()
        p.send("tx-out", b"x")
        p.send_offsets_to_transaction({TP: 5}, "g-txn")
        assert p.flush(30)
        assert _fetch(b, "g-txn", stable=True) == (E.UNSTABLE_OFFSET_COMMIT, -1)
        assert _fetch(b, "g-txn", stable=False) == (E.NONE, -1)
        p.commit_transaction()
        assert _fetch(b, "g-txn", stable=True) == (E.NONE, 5)
        p.begin_transaction()
        p.send_offsets_to_transaction({TP: 9}, "g-txn")
        p.abort_transaction()
        assert _fetch(b, "g-txn", stable=True) == (E.NONE, 5)
    finally:
        p.close()


def test_a_broker_killed_mid_transaction_reloads_pending_offsets(broker_factory: Any) -> None:
    broker = broker_factory(**FAST)
    b = broker.bootstrap
    create_topic(b, "tx-in", 1)
    p = _producer(b, "offsets-2")
    p.begin_transaction()
    p.send_offsets_to_transaction({TP: 7}, "g-load")
    p.commit_transaction()
    p.begin_transaction()
    p.send_offsets_to_transaction({TP: 12}, "g-load")
    p.abort()  # the producer goes away mid-transaction
    broker.kill()
    broker.start()
    b = broker.bootstrap
    # replayed from the log: 7 committed (its marker is there), 12 pending (no marker)
    wait_until(lambda: _fetch(b, "g-load", stable=False)[0] == E.NONE, 60, "the group loaded")
    assert _fetch(b, "g-load", stable=False) == (E.NONE, 7)
    assert _fetch(b, "g-load", stable=True) == (E.UNSTABLE_OFFSET_COMMIT, -1)
    # a new producer of the id fences the old one: its open transaction is aborted
    q = _producer(b, "offsets-2")
    try:
        wait_until(lambda: _fetch(b, "g-load", stable=True) == (E.NONE, 7), 60,
                   "the aborted offsets dropped")
        q.begin_transaction()
        q.send_offsets_to_transaction({TP: 20}, "g-load")
        q.commit_transaction()
    finally:
        q.close()
    broker.kill()
    broker.start()
    b = broker.bootstrap
    wait_until(lambda: _fetch(b, "g-load", stable=True)[0] == E.NONE, 60, "the group loaded")
    assert _fetch(b, "g-load", stable=True) == (E.NONE, 20)


def test_kip447_member_checks(broker_factory: Any) -> None:
    broker = broker_factory(**FAST)
    b = broker.bootstrap
    create_topic(b, "tx-in", 1)
    member = GroupConsumer("tx-in", group_id="g-member", bootstrap_servers=b,
                           enable_auto_commit=False)
    p = _producer(b, "offsets-3")
    try:
        wait_until(lambda: bool(member.assignment()), 60, "the member's assignment")
        coord = member.coordinator
        p.begin_transaction()
        p.send_offsets_to_transaction({TP: 3}, GroupMetadata(
            "g-member", coord.generation, coord.member_id))
        p.commit_transaction()
        assert _fetch(b, "g-member", stable=True) == (E.NONE, 3)
        for meta, code in ((GroupMetadata("g-member", coord.generation + 5, coord.member_id),
                            "ILLEGAL_GENERATION"),
                           (GroupMetadata("g-member", coord.generation, "nobody"),
                            "UNKNOWN_MEMBER_ID")):
            p.begin_transaction()
            try:
                p.send_offsets_to_transaction({TP: 99}, meta)
                raise AssertionError("a stale member committed")
            except Exception as e:  # noqa: BLE001 - the abortable error names the code
                assert code in str(e), e
            p.abort_transaction()
        assert _fetch(b, "g-member", stable=True) == (E.NONE, 3)
    finally:
        p.close()
        member.close()


def test_txn_offset_commit_without_add_offsets_is_refused(broker_factory: Any) -> None:
    """KIP-890's verification: the producer's transaction does not hold the group's offsets
    partition (no AddOffsetsToTxn): INVALID_TXN_STATE, nothing pending, nothing written."""
    broker = broker_factory(**FAST)
    b = broker.bootstrap
    create_topic(b, "tx-in", 1)
    p = _producer(b, "offsets-4")
    try:
        p.begin_transaction()
        p.send("tx-in", b"x")
        assert p.flush(30)
        txn = p.transactions
        assert txn is not None
        conn = connect(b)
        try:
            wait_until(lambda: conn.request(ApiKey.FIND_COORDINATOR, {
                "key": "g-stray", "key_type": 0}, version=3)["error_code"] == 0, 60,
                "the group's coordinator")  # as a client finds it first
            r = conn.request(ApiKey.TXN_OFFSET_COMMIT, {
                "transactional_id": "offsets-4", "group_id": "g-stray",
                "producer_id": txn.producer_id, "producer_epoch": txn.epoch,
                "generation_id": -1, "member_id": "", "group_instance_id": None,
                "topics": [{"name": TP[0], "partitions": [{
                    "partition_index": TP[1], "committed_offset": 5,
                    "committed_leader_epoch": -1, "committed_metadata": ""}]}]}, version=3)
        finally:
            conn.close()
        assert r["topics"][0]["partitions"][0]["error_code"] == E.INVALID_TXN_STATE
        assert _fetch(b, "g-stray", stable=True) == (E.NONE, -1)
        p.commit_transaction()
        assert _fetch(b, "g-stray", stable=True) == (E.NONE, -1)
    finally:
        p.close()
