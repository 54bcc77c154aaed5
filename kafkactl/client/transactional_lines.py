"""Lines into a topic in transactions: all of a transaction's records become visible to
read_committed consumers together, or none of them (`kafkactl produce --transactional-id`).

    producer = Producer(bootstrap, transactional_id="loader-1")
    lp = LineProducer(producer, "orders")
    outcome = run_in_transactions(lp, read_records(sys.stdin.buffer, b"\\n"), every=1000)
    outcome.committed, outcome.transactions, outcome.aborted, outcome.interrupted

One transaction per `every` input records (the last one may hold fewer), or one for the
whole input (every=None; none for an empty input). On Ctrl-C or any error the open
transaction is aborted; the ones committed before it stay committed, so a rerun can resume
from input record `committed + 1`. A Ctrl-C while a commit is on its way waits for its
answer (the transaction is then either committed or not, never half-known), then stops; so
does a SIGTERM whose handler raises KeyboardInterrupt, as `kafkactl produce`'s does.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from types import FrameType
from typing import TYPE_CHECKING, Any

from kafkactl.client.delimited import LongRecord
from kafkactl.client.errors import ClientError

if TYPE_CHECKING:
    from kafkactl.client.line_producer import LineProducer


class AbortInterrupted(ClientError):  # noqa: N818 - named for what happened
    """The abort of the open transaction was itself interrupted (a second Ctrl-C)."""


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


# the signals that stop a run, when the caller handles them in Python (Ctrl-C's
# KeyboardInterrupt; `kafkactl produce` treats SIGTERM alike)
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class _Deferred:
    """Hold off Ctrl-C (and SIGTERM, when it has a Python handler) while a commit is on its
    way (main thread only); `deliver()` then hands the first one that came to its handler."""

    def __init__(self) -> None:
        self.hit: int | None = None  # the first signal held off
        self._old: dict[int, Callable[[int, FrameType | None], Any]] = {}

    def __enter__(self) -> _Deferred:
        if threading.current_thread() is threading.main_thread():
            for sig in STOP_SIGNALS:
                old = signal.getsignal(sig)
                if callable(old):  # (SIG_DFL and SIG_IGN act outside Python: left alone)
                    signal.signal(sig, self._note)
                    self._old[sig] = old
        return self

    def _note(self, signum: int, _frame: FrameType | None) -> None:
        if self.hit is None:
            self.hit = signum

    def __exit__(self, *exc: object) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)

    def deliver(self) -> None:
        """Run the handler of the signal held off (Ctrl-C's raises KeyboardInterrupt)."""
        if self.hit is not None:
            self._old[self.hit](self.hit, None)


def _cut(chunk: list[bytes] | LongRecord, room: int,
         ) -> tuple[list[bytes] | LongRecord, list[bytes]]:
    """The first `room` records of a chunk (at least 1), and the rest; a LongRecord (one
    record, refused as one too large) whole."""
    if isinstance(chunk, LongRecord):
        return chunk, []
    return chunk[:room], chunk[room:]


def run_in_transactions(lp: LineProducer, chunks: Iterable[list[bytes] | LongRecord],
                        every: int | None = None, *,
                        abort_timeout: float = 30.0,
                        finishing: Callable[[], None] | None = None) -> TransactionOutcome:
    """Send the records of `chunks` through `lp` in transactions of `every` records (None:
    one transaction), then stop the producer. Ctrl-C and errors are returned, not raised.
    `finishing()` is called before the producer is stopped, KeyboardInterrupt or not (the
    caller's signal handler stops raising it there)."""
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
        deferred.deliver()
        producer.begin_transaction()

    def pieces() -> Iterator[list[bytes] | LongRecord]:
        nonlocal open_records
        for chunk in chunks:
            while chunk:
                room = len(chunk) if every is None else every - open_records
                piece, chunk = _cut(chunk, room)
                yield piece
                open_records += len(piece)
                if every is not None and open_records >= every:
                    commit()

    txn = producer.transactions
    if txn is not None:
        # a record refused before it was sent (too large: the sender never saw it) fails
        # the transaction as one the broker refused does: it can only be aborted now, as
        # Java's producer makes a send error abortable (committing would drop the record)
        producer.add_batch_callback(
            lambda _batch, _offset, error: None if error is None else txn.fail(error))
    begun = False
    try:
        producer.init_transactions()
        producer.begin_transaction()
        begun = True
        lp.send_all(pieces())
        if open_records:  # (an empty input commits no transaction)
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
            except KeyboardInterrupt:  # a second Ctrl-C: the abort is left unfinished
                out.interrupted = True
                out.abort_error = AbortInterrupted("interrupted")
            except Exception as e:  # noqa: BLE001
                out.abort_error = e
    from kafkactl.client.line_producer import call_finishing

    out.interrupted = call_finishing(finishing) or out.interrupted
    producer.abort()  # stop the sender: nothing is left to deliver
    return out
