"""A delivery callback that raises does not keep the rest of its batch from completing:
every record's future resolves (with its offset), the later records' callbacks and the
batch callbacks still run, and the error is logged (Java's ProducerBatch runs each callback
in a try). Before, records after the raising one never resolved (result() without a
timeout hung) though they were in the log. A real broker."""

from __future__ import annotations

from typing import Any

from kafkactl.client.producer import Producer


def test_a_raising_callback_leaves_the_batch_complete(broker: Any) -> None:
    called: list[int] = []
    batches: list[int] = []

    def boom(_md: Any, _err: Any) -> None:
        raise RuntimeError("user callback bug")

    def note(i: int) -> Any:
        return lambda md, err: called.append(i)

    with Producer(broker.bootstrap, linger_ms=50) as p:
        p.add_batch_callback(lambda batch, base, err: batches.append(base))
        futures = [p.send("cb", b"r%d" % i, key=b"x",
                          on_delivery=boom if i == 3 else note(i)) for i in range(10)]
        assert p.flush(30)
        offsets = [f.result(10).offset for f in futures]
    assert offsets == list(range(offsets[0], offsets[0] + 10))
    assert called == [0, 1, 2, 4, 5, 6, 7, 8, 9]
    assert batches  # the batch callbacks ran too
