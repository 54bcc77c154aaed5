"""Random histories of idempotent and transactional producers on a compacted log, cleaned
pass after pass: what a read_committed reader ends with never changes, the producer state a
replica would rebuild from the cleaned log alone is the one it would rebuild from the log
before cleaning (each active producer's epoch and last sequence, and its last batch's
offsets: the retry of its last batch is still a duplicate), the .txnindex files are what
recovery rebuilds, and every empty batch left holds an active producer's last record.
The cleaner's fold of the producer state (LastRecordsReplay) is the producer state's own
replay."""

from __future__ import annotations

import itertools
import tempfile
import time
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkactl.broker.partition import Partition
from kafkactl.log.cleaner import LogCleaner
from kafkactl.log.config import LogConfig
from kafkactl.log.log import Log
from kafkactl.log.producer_state import LastRecordsReplay, ProducerStateManager
from kafkactl.log.txn_index import parse_entries, rebuild_txn_indexes, segment_txn_events
from kafkactl.record.batch import RecordBatch
from tests.hypothesis_profiles import examples
from tests.log.helpers import FakeTime
from tests.log.test_cleaner_active_producers import committed, produce

PIDS = (11, 12, 13)
KEYS = (b"a", b"b", b"c", b"d")
DAY_MS = 86_400_000  # producer.id.expiration.ms
CONFIG = LogConfig.from_properties({
    "cleanup.policy": "compact", "segment.bytes": "600", "delete.retention.ms": "0",
    "min.cleanable.dirty.ratio": "0.01"})

ops = st.lists(st.one_of(
    st.tuples(st.just("idempotent"), st.sampled_from(PIDS),
              st.lists(st.sampled_from(KEYS), min_size=1, max_size=3)),
    st.tuples(st.just("txn"), st.sampled_from(PIDS),
              st.lists(st.sampled_from(KEYS), min_size=1, max_size=3), st.booleans()),
    st.tuples(st.just("plain"), st.lists(st.sampled_from(KEYS), min_size=1, max_size=3)),
    st.tuples(st.just("clean")),
), min_size=1, max_size=30)


def replayed(lg: Log, now_ms: int) -> dict[int, tuple[int, int, int, int]]:
    """Producer id -> (epoch, last sequence, its last batch's first and last offsets), as a
    producer state replayed from the log's batch headers alone has them."""
    ps = ProducerStateManager(lg.dir, time_ms=lambda: now_ms)
    ps.replay(itertools.chain.from_iterable(
        segment_txn_events(seg, idempotent=True) for seg in lg.segments))
    out = {}
    for pid, e in ps.producers.items():
        last = e.last_batch
        assert last is not None
        out[pid] = (e.epoch, last.last_seq, last.first_offset, last.last_offset)
    return out


def txnindex(d: Path) -> dict[str, list]:
    return {p.name: parse_entries(p.read_bytes()) for p in sorted(d.glob("*.txnindex"))}


@settings(max_examples=examples(60), deadline=None)
@given(ops)
def test_cleaning_keeps_what_readers_and_producers_need(history: list[tuple]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp) / "c-0"
        part = Partition("c", 0, Log(d, CONFIG))
        seqs = dict.fromkeys(PIDS, 0)
        now = int(time.time() * 1000)
        passes = itertools.count(1)

        def clean() -> None:
            part.log.roll()
            LogCleaner(time=FakeTime(now + next(passes) * 1000)).clean(part.log, force=True)

        for n, op in enumerate(history):
            value = b"v%d-" % n + b"x" * 40
            if op[0] == "idempotent":
                produce(part, [(k, value) for k in op[2]], pid=op[1], seq=seqs[op[1]])
                seqs[op[1]] += len(op[2])
            elif op[0] == "txn":
                produce(part, [(k, value) for k in op[2]], pid=op[1], seq=seqs[op[1]],
                        txn=True)
                seqs[op[1]] += len(op[2])
                part.append_control_batch(op[1], 0, 0, commit=op[3])
            elif op[0] == "plain":
                produce(part, [(k, value) for k in op[1]])
            else:
                view, state = committed(part), replayed(part.log, now)
                clean()
                assert committed(part) == view
                assert replayed(part.log, now) == state
        view, state = committed(part), replayed(part.log, now)
        for _ in range(3):  # until nothing changes: markers past their horizon go too
            clean()
            assert committed(part) == view
            assert replayed(part.log, now) == state
        # every empty batch left is an active producer's last one
        empties = [(b.producer_id, b.last_offset) for b in part.log.iter_batches(0)
                   if isinstance(b, RecordBatch) and b.record_count == 0]
        assert all(state[pid][3] == last for pid, last in empties), (empties, state)
        entries = txnindex(d)
        rebuild_txn_indexes(part.log.segments, 0, d, 0)
        assert txnindex(d) == entries
        part.log.close()


events = st.lists(st.tuples(
    st.sampled_from((-1, 1, 2)),  # producer id
    st.integers(0, 2),  # epoch
    st.sampled_from((-1, 0, 7)),  # base sequence
    st.integers(1, 3),  # records
    st.sampled_from((0, 1, DAY_MS - 1, DAY_MS, DAY_MS + 1)),  # age at `now`
    st.booleans(),  # transactional
    st.sampled_from((-1, -1, 0, 1, 2)),  # marker: -1 data, else commit | epoch << 1
), max_size=25)


@settings(max_examples=examples(300), deadline=None)
@given(events)
def test_the_cleaners_fold_is_the_producer_state_replay(history: list[tuple]) -> None:
    """LastRecordsReplay (the cleaner's one-scan fold) says what ProducerStateManager.replay
    followed by last_records_of_active_producers says, expiration included."""
    now = 1_700_000_000_000
    out = []
    offset = 0
    for pid, epoch, seq, n, age, txn, marker in history:
        out.append((pid, epoch, seq, offset, offset + n - 1, now - age, int(txn), marker))
        offset += n
    ps = ProducerStateManager(Path("unused"), time_ms=lambda: now)
    ps.replay(out)
    fold = LastRecordsReplay()
    for event in out:
        fold.feed(event)
    assert fold.last_records(now) == ps.last_records_of_active_producers()
