"""Random transactional histories on a real log against a model: after every step the
partition's open transactions, LSO and .txnindex entries are the model's; after a
truncation they are rebuilt; after a crash (every .txnindex lost, every segment
recovered) they are rebuilt identical; a snapshot taken anywhere restores them."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkactl.broker.partition import Partition
from kafkactl.log.config import LogConfig
from kafkactl.log.log import Log
from kafkactl.log.txn_index import AbortedTxn
from kafkactl.log.validator import validate_batches
from kafkactl.record.batch import RecordBatchBuilder
from tests.hypothesis_profiles import examples

PIDS = (101, 102, 103)
CONFIG = LogConfig(segment_bytes=700)

ops = st.lists(st.one_of(
    st.tuples(st.just("data"), st.sampled_from(PIDS), st.integers(1, 3), st.booleans()),
    st.tuples(st.just("marker"), st.sampled_from(PIDS), st.booleans()),
    st.tuples(st.just("snapshot")),
    st.tuples(st.just("truncate"), st.integers(1, 4)),
), min_size=1, max_size=40)


class Model:
    def __init__(self) -> None:
        self.ongoing: dict[int, int] = {}
        self.aborted: list[AbortedTxn] = []
        self.history: list[tuple[int, tuple]] = []  # (offset, event) to replay truncations

    def data(self, pid: int, first: int, txn: bool) -> None:
        if txn and pid not in self.ongoing:
            self.ongoing[pid] = first

    def marker(self, pid: int, offset: int, commit: bool) -> None:
        first = self.ongoing.pop(pid, None)
        if first is not None and not commit:
            lso = min(self.ongoing.values()) if self.ongoing else offset + 1
            self.aborted.append(AbortedTxn(pid, first, offset, lso))


def _produce(part: Partition, pid: int, seq: int, n: int, txn: bool) -> int:
    b = RecordBatchBuilder(producer_id=pid, producer_epoch=0, base_sequence=seq,
                           is_transactional=txn)
    for i in range(n):
        b.append(1_700_000_000_000 + i, b"k", b"v" * 60)
    buf = memoryview(bytearray(b.build()))
    infos = validate_batches(buf, max_message_bytes=1 << 20, timestamp_type="CreateTime",
                             max_timestamp_difference_ms=2**63 - 1,
                             now_ms=int(time.time() * 1000), produce_version=9,
                             single_batch=True)
    return part.append_as_leader(buf, infos, log_append_time=None).first_offset


def _replay_model(events: list[tuple[int, tuple]], end: int) -> Model:
    m = Model()
    for offset, ev in events:
        if offset >= end:
            break
        m.history.append((offset, ev))
        if ev[0] == "data":
            m.data(ev[1], offset, ev[2])
        else:
            m.marker(ev[1], offset, ev[2])
    return m


def _check(part: Partition, m: Model) -> None:
    assert part.producer_state.ongoing == m.ongoing
    expected_lso = min([part.high_watermark, *m.ongoing.values()])
    assert part.last_stable_offset == expected_lso
    assert part.log.aborted_transactions() == m.aborted


@settings(max_examples=examples(40), deadline=None)
@given(ops)
def test_transactional_histories_match_the_model(history: list[tuple]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp) / "t-0"
        part = Partition("t", 0, Log(d, CONFIG))
        m = Model()
        seqs = dict.fromkeys(PIDS, 0)
        for op in history:
            if op[0] == "data":
                _, pid, n, txn = op
                if not txn and pid in m.ongoing:
                    continue  # INVALID_TXN_STATE (tested elsewhere)
                first = _produce(part, pid, seqs[pid], n, txn)
                seqs[pid] += n
                m.history.append((first, ("data", pid, txn)))
                m.data(pid, first, txn)
            elif op[0] == "marker":
                _, pid, commit = op
                offset = part.append_control_batch(pid, 0, 0, commit)
                m.history.append((offset, ("marker", pid, commit)))
                m.marker(pid, offset, commit)
            elif op[0] == "snapshot":
                part.take_snapshot()
            else:
                back = min(op[1], len(m.history))
                if back == 0:
                    continue
                cut = m.history[-back][0]
                part.truncate_to(cut)
                m = _replay_model(m.history, cut)
                seqs = dict.fromkeys(PIDS, 0)
                for pid in PIDS:  # sequences as the producer state has them now
                    entry = part.producer_state.producers.get(pid)
                    seqs[pid] = entry.last_seq + 1 if entry is not None and entry.batches \
                        else 0
            _check(part, m)
        # a crash: every .txnindex lost, every segment recovered, snapshots kept
        for f in d.glob("*.txnindex"):
            f.unlink()
        again = Partition("t", 0, Log(d, CONFIG, recovery_point=0, needs_recovery=True))
        again.load_producer_state()
        _check(again, m)
