"""Lines into a topic in transactions: all of a transaction's records become visible to
read_committed consumers together, or none of them (`kafkactl produce --transactional-id`).

    producer = Producer(bootstrap, transactional_id="loader-1")
    lp = LineProducer(producer, "orders")
    outcome = run_in_transactions(lp, read_records(sys.stdin.buffer, b"\\n"), every=1000)
    outcome.committed, outcome.transactions, outcome.aborted, outcome.interrupted

One transaction per `every` input records (the last one may hold fewer), or one for the
whole input (every=None). On Ctrl-C or any error the open transaction is aborted; the ones
committed before it stay committed, so a rerun can resume from input record
`committed + 1`. A Ctrl-C while a commit is on its way waits for its answer (the
transaction is then either committed or not, never half-known), then stops.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from types import FrameType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kafkactl.client.line_producer import LineProducer


@dataclass
class TransactionOutcome:
    """How a transactional run ended."""

    committed: int = 0  # input records in committed transactions
    transactions: int = 0  # transactions committed
    aborted: int = 0  # records of the transaction that was aborted (0: none was)
    interrupted: bool = False
    error: BaseException | None = None
    abort_error: BaseException | None = None  # the abort itself failed (the coordinator
    # aborts the transaction when it times out)


class _Deferred:
    """Hold off Ctrl-C while a commit is on its way (main thread only)."""

    def __init__(self) -> None:
        self.hit = False
        self._old: object = None

    def __enter__(self) -> _Deferred:
        if threading.current_thread() is threading.main_thread():
            self._old = signal.signal(signal.SIGINT, self._note)
        return self

    def _note(self, _signum: int, _frame: FrameType | None) -> None:
        self.hit = True

    def __exit__(self, *exc: object) -> None:
        if self._old is not None:
            signal.signal(signal.SIGINT, self._old)  # type: ignore[arg-type]


def run_in_transactions(lp: LineProducer, chunks: Iterable[list[bytes]],
                        every: int | None = None, *,
                        abort_timeout: float = 30.0) -> TransactionOutcome:
    """Send the records of `chunks` through `lp` in transactions of `every` records (None:
    one transaction), then stop the producer. Ctrl-C and errors are returned, not raised."""
    if every is not None and every <= 0:
        raise ValueError("--transaction-records must be at least 1")
    producer = lp.producer
    out = TransactionOutcome()
    open_records = 0  # records handed over in the open transaction

    def commit() -> None:
        nonlocal open_records
        with _Deferred() as deferred:
            producer.commit_transaction()
        out.committed += open_records
        out.transactions += 1
        open_records = 0
        if deferred.hit:
            raise KeyboardInterrupt
        producer.begin_transaction()

    def pieces() -> Iterator[list[bytes]]:
        nonlocal open_records
        for chunk in chunks:
            while chunk:
                room = len(chunk) if every is None else every - open_records
                piece, chunk = chunk[:room], chunk[room:]
                yield piece
                open_records += len(piece)
                if every is not None and open_records >= every:
                    commit()

    begun = False
    try:
        producer.init_transactions()
        producer.begin_transaction()
        begun = True
        lp.send_all(pieces())
        if open_records or out.transactions == 0:
            commit()
    except KeyboardInterrupt:
        out.interrupted = True
    except Exception as e:  # noqa: BLE001 - reported with the counts, never raised
        out.error = e
    if out.interrupted or out.error is not None:
        out.aborted = max(lp.read - out.committed, 0) if begun else 0
        if begun:
            try:
                producer.abort_transaction(abort_timeout)
            except KeyboardInterrupt:
                out.interrupted = True
            except Exception as e:  # noqa: BLE001
                out.abort_error = e
    producer.abort()  # stop the sender: nothing is left to deliver
    return out
