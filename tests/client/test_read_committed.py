"""The consumer's read_committed filter (Kafka's Fetcher): given a fetched range and the
response's aborted transactions, the batches of an aborted transaction are dropped from
its first offset up to its producer's ABORT marker; committed transactions' batches and
non-transactional ones stay; control batches are never handed out (read_uncommitted
either). The bytes are real v2 batches as a broker stores them."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkactl.client.fetcher import PartitionFetch
from kafkactl.record.batch import RecordBatchBuilder
from tests.hypothesis_profiles import examples


def _data(offset: int, values: list[bytes], producer_id: int = -1) -> bytes:
    b = RecordBatchBuilder(producer_id=producer_id, producer_epoch=0 if producer_id >= 0 else -1,
                           base_sequence=0 if producer_id >= 0 else -1,
                           is_transactional=producer_id >= 0, base_offset=offset)
    for v in values:
        b.append(1_000, None, v)
    return b.build()


def _marker(offset: int, producer_id: int, commit: bool) -> bytes:
    b = RecordBatchBuilder(producer_id=producer_id, producer_epoch=0, is_transactional=True,
                           is_control=True, base_offset=offset)
    b.append(1_000, b"\x00\x00" + (b"\x00\x01" if commit else b"\x00\x00"),
             b"\x00\x00\x00\x00\x00\x00")
    return b.build()


# offsets: 0-1 plain; 2-3 producer 5 (aborted); 4 producer 6 (committed); 5 plain;
# 6 producer 5 (aborted); 7 ABORT(5); 8 COMMIT(6); 9 producer 5 again (a new transaction,
# committed); 10 COMMIT(5)
LOG = b"".join([
    _data(0, [b"p0", b"p1"]),
    _data(2, [b"a2", b"a3"], producer_id=5),
    _data(4, [b"c4"], producer_id=6),
    _data(5, [b"p5"]),
    _data(6, [b"a6"], producer_id=5),
    _marker(7, 5, commit=False),
    _marker(8, 6, commit=True),
    _data(9, [b"c9"], producer_id=5),
    _marker(10, 5, commit=True),
])


def _values(pf: PartitionFetch) -> list[bytes]:
    return [bytes(r.value) for r in pf.records_iter() if r.value is not None]


def test_read_committed_drops_aborted_transactions_and_markers() -> None:
    pf = PartitionFetch("t", 0, 0, 11, 11, 0, memoryview(LOG), 0, aborted=[(5, 2)])
    assert _values(pf) == [b"p0", b"p1", b"c4", b"p5", b"c9"]
    assert pf.next_offset() == 11


def test_read_uncommitted_sees_every_data_record_never_a_marker() -> None:
    pf = PartitionFetch("t", 0, 0, 11, 11, 0, memoryview(LOG), 0, aborted=None)
    assert _values(pf) == [b"p0", b"p1", b"a2", b"a3", b"c4", b"p5", b"a6", b"c9"]


def test_fetch_offset_inside_an_aborted_transaction() -> None:
    pf = PartitionFetch("t", 0, 0, 11, 11, 0, memoryview(LOG), 3, aborted=[(5, 2)])
    assert _values(pf) == [b"c4", b"p5", b"c9"]


def test_an_aborted_transaction_of_another_producer_leaves_a_committed_one() -> None:
    pf = PartitionFetch("t", 0, 0, 11, 11, 0, memoryview(LOG), 0, aborted=[(6, 4)])
    # producer 6's "abort" never gets an ABORT marker here: everything of it from 4 is
    # dropped; producer 5's batches are kept (its transaction is not listed as aborted)
    assert _values(pf) == [b"p0", b"p1", b"a2", b"a3", b"p5", b"a6", b"c9"]


# ---- property: any interleaving of transactions, plain writes and markers -------------------

# an action: ("plain",), ("write", producer), ("end", producer, commit)
_ACTION = st.one_of(
    st.just(("plain",)),
    st.tuples(st.just("write"), st.integers(1, 3)),
    st.tuples(st.just("end"), st.integers(1, 3), st.booleans()),
)


def _build(actions: list[tuple[Any, ...]]) -> tuple[bytes, list[tuple[int, int]],
                                                    list[bytes], list[bytes]]:
    """The log a broker writes for `actions` (every transaction ended by the last of
    them), the aborted transactions a read_committed Fetch of all of it carries (producer,
    first offset, as the broker's .txnindex gives them), and the values read_committed
    and read_uncommitted consumers must see."""
    out: list[bytes] = []
    offset = 0
    open_txn: dict[int, tuple[int, list[bytes]]] = {}  # producer -> (first offset, values)
    aborted: list[tuple[int, int]] = []
    everything: list[bytes] = []
    visible: list[bytes] = []
    for n, action in enumerate(actions):
        if action[0] == "plain":
            v = b"p%d" % n
            out.append(_data(offset, [v]))
            everything.append(v)
            visible.append(v)
            offset += 1
        elif action[0] == "write":
            pid = action[1]
            v = b"t%d-%d" % (pid, n)
            out.append(_data(offset, [v], producer_id=pid))
            everything.append(v)
            visible.append(v)
            first, values = open_txn.get(pid, (offset, []))
            open_txn[pid] = (first, [*values, v])
            offset += 1
        elif action[1] in open_txn:
            pid, commit = action[1], action[2]
            first, values = open_txn.pop(pid)
            out.append(_marker(offset, pid, commit))
            offset += 1
            if not commit:
                aborted.append((pid, first))
                dropped = set(values)
                visible = [v for v in visible if v not in dropped]
    assert not open_txn
    return b"".join(out), aborted, visible, everything


@settings(max_examples=examples(300))
@given(st.lists(_ACTION, max_size=40), st.booleans())
def test_any_interleaving_read_committed_sees_exactly_the_committed(
        actions: list[tuple[Any, ...]], commit_last: bool) -> None:
    ended = [*actions, *(("end", pid, commit_last) for pid in (1, 2, 3))]
    log, aborted, visible, everything = _build(ended)
    pf = PartitionFetch("t", 0, 0, 0, 0, 0, memoryview(log), 0, aborted=aborted or None)
    assert _values(pf) == visible
    raw = PartitionFetch("t", 0, 0, 0, 0, 0, memoryview(log), 0, aborted=None)
    assert _values(raw) == everything
