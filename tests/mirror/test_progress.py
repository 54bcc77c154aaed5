"""ProgressTracker: a commit never passes a record the target has not acknowledged."""

from __future__ import annotations

from kafkactl.mirror.progress import ProgressTracker, acknowledge

TP = ("t", 0)


def test_nothing_is_committable_past_an_unacknowledged_record() -> None:
    tracker = ProgressTracker()
    first = tracker.open_chunk(TP, 10, 13)
    second = tracker.open_chunk(TP, 13, 15)
    tracker.seal(first, 3)
    tracker.seal(second, 2)
    assert tracker.committable() == {TP: 10}
    with tracker.lock:  # the second chunk is acknowledged first (another target partition)
        acknowledge([(second, 13), (second, 14)])
    assert tracker.committable() == {TP: 10}
    with tracker.lock:
        acknowledge([(first, 10), (first, 11)])
    assert tracker.committable() == {TP: 10}
    with tracker.lock:
        acknowledge([(first, 12)])
    assert tracker.committable() == {TP: 15}


def test_an_acknowledgement_before_the_chunk_is_sealed_does_not_complete_it() -> None:
    tracker = ProgressTracker()
    chunk = tracker.open_chunk(TP, 0, 5)
    with tracker.lock:
        acknowledge([(chunk, 0)])  # the sender is faster than the stream
    assert tracker.committable() == {TP: 0}
    tracker.seal(chunk, 2)
    assert tracker.committable() == {TP: 0}
    with tracker.lock:
        acknowledge([(chunk, 1)])
    assert tracker.committable() == {TP: 5}


def test_a_chunk_cut_short_commits_up_to_the_cut() -> None:
    tracker = ProgressTracker()
    chunk = tracker.open_chunk(TP, 0, 10)
    with tracker.lock:
        acknowledge([(chunk, 0), (chunk, 1)])
    tracker.seal(chunk, 2, next_offset=2)  # offset 2 was refused: fetch it again
    assert tracker.committable() == {TP: 2}


def test_committed_partitions_are_not_committed_again_and_forget_drops() -> None:
    tracker = ProgressTracker()
    tracker.seal(tracker.open_chunk(TP, 0, 4), 0)  # only control records: nothing sent
    tracker.seal(tracker.open_chunk(("u", 1), 7, 9), 1)
    assert tracker.committable({TP}) == {TP: 4}
    tracker.mark_committed({TP: 4})
    assert tracker.committable({TP}) == {}
    tracker.forget({TP})
    assert tracker.committable() == {("u", 1): 7}


def test_a_copied_batch_is_one_entry_object_and_a_split_half_names_its_first_record() -> None:
    from kafkactl.client.producer_batch import ProducerBatch
    from kafkactl.mirror.progress import CopiedBatch, first_record

    tracker = ProgressTracker()
    chunk = tracker.open_chunk(TP, 100, 110)
    tracker.seal(chunk, 10)
    batch = ProducerBatch("t", 0, 1 << 20, 0)
    for i in range(10):
        batch.append(i, None, b"v%d" % i)
    batch.entries = [CopiedBatch(chunk, 100)] * 10
    batch.build()
    first, second = batch.split()
    assert first_record(second.entries, second.first_index) == (chunk, 105)
    second.build()
    _left, right = second.split()  # records 105, 106 | 107, 108, 109
    assert first_record(right.entries, right.first_index) == (chunk, 107)
    assert first_record(first.entries, first.first_index) == (chunk, 100)
    with tracker.lock:
        assert acknowledge(first.entries) == {chunk: 5}
        acknowledge(second.entries)
    assert tracker.committable() == {TP: 110}


def test_a_refused_record_is_committable_once_every_batch_is_answered() -> None:
    """Records 10-19 in two chunks; 15 is refused (the mirror stops at it), the others
    are acknowledged, some of them after it."""
    from kafkactl.mirror.progress import refuse

    tracker = ProgressTracker()
    first = tracker.open_chunk(TP, 10, 13)
    second = tracker.open_chunk(TP, 13, 20)
    tracker.seal(first, 3)
    tracker.seal(second, 7)
    with tracker.lock:
        acknowledge([(first, 10), (first, 11), (first, 12), (second, 13)])
        refuse([(second, 15)])
        acknowledge([(second, 14), (second, 16), (second, 17), (second, 18), (second, 19)])
    assert tracker.committable() == {TP: 13}  # the refused record's chunk never completes
    # the producer flushed (every batch answered): up to the refused record
    assert tracker.committable(settled=True) == {TP: 15}


def test_settled_does_not_pass_an_unsealed_chunk_or_the_first_refused_record() -> None:
    from kafkactl.mirror.progress import CopiedBatch, refuse

    tracker = ProgressTracker()
    chunk = tracker.open_chunk(TP, 0, 10)  # sending it failed half-way: never sealed
    with tracker.lock:
        refuse([CopiedBatch(chunk, 0)], first_index=6)
    assert tracker.committable(settled=True) == {TP: 0}
    tracker.seal(chunk, 10)
    with tracker.lock:
        refuse([(chunk, 8), (chunk, 9)])  # later in the partition: the first one stays
        refuse([(chunk, 3), (chunk, 4)])  # earlier: it is the first now
    assert tracker.committable(settled=True) == {TP: 3}
    # another source partition in the same refused target batch stops at its own first
    other = tracker.open_chunk(("u", 0), 50, 60)
    tracker.seal(other, 10)
    with tracker.lock:
        refuse([(chunk, 5), (other, 52), (other, 53)])
    assert tracker.committable(settled=True) == {TP: 3, ("u", 0): 52}


def test_the_refusal_reported_is_where_the_stream_stops() -> None:
    """Two refused records of one source partition found in either order (a careful copy
    can find the later one first): the stream stops at the earlier and names it; another
    partition's refusal stops that partition without replacing the one reported."""
    from types import SimpleNamespace

    from kafkactl.mirror.exactly_once import ExactlyOnceStream

    for order in ((12, 5), (5, 12)):
        s = ExactlyOnceStream.__new__(ExactlyOnceStream)
        s.config = SimpleNamespace(abort_on_send_failure=True)  # type: ignore[assignment]
        s.stop_at, s.failure, s.skips = {}, None, {}
        for offset in order:
            s._refuse(("keyed", 0), offset, "keyed", f"too large at {offset}")
        s._refuse(("other", 0), 1, "other", "denied")
        assert s.stop_at == {("keyed", 0): 5, ("other", 0): 1}
        assert s.failure is not None
        assert (s.failure.topic, s.failure.offset, s.failure.error) == \
            ("keyed", 5, "too large at 5")
