"""RecordAccumulator.flush waits for the halves of a batch split while it flushes."""

from __future__ import annotations

import threading

from kafkactl.client.accumulator import RecordAccumulator


def test_flush_waits_for_the_halves_of_a_split_batch() -> None:
    acc = RecordAccumulator(batch_size=1 << 20, linger_ms=0)
    for i in range(4):
        acc.append("t", 0, 1_000 + i, b"k", b"v%d" % i)
    batch = acc.pop_head(("t", 0))
    assert batch is not None
    batch.build()
    finished = threading.Event()

    def flush() -> None:
        acc.flush(10.0, lambda: None)
        finished.set()

    flusher = threading.Thread(target=flush)
    flusher.start()
    acc.split_and_reenqueue(batch)  # the broker said MESSAGE_TOO_LARGE
    assert not finished.wait(0.3), "flush returned while the halves were still pending"
    for half in acc.all_batches():
        acc.pop_head(("t", 0))
        half.complete(0, None)
        acc.done(half)
    assert finished.wait(5.0)
    flusher.join()
