"""Lines into a topic in transactions: all of a transaction's records become visible to
read_committed consumers together, or none of them (`kafkactl produce --transactional-id`).

    producer = Producer(bootstrap, transactional_id="loader-1")
    lp = LineProducer(producer, "orders")
    outcome = run_in_transactions(lp, read_records(sys.stdin.buffer, b"\\n"), every=1000)
    outcome.committed, outcome.transactions, outcome.aborted, outcome.interrupted

One transaction per `every` input records (the last one may hold fewer), or one for the
whole input (every=None; none for an empty input). On Ctrl-C or any error the open
transaction is aborted; the ones committed before it stay committed, so a rerun can resume
from input record `committed + 1`.

A stop (Ctrl-C's KeyboardInterrupt; SIGTERM too, when its handler raises it, as `kafkactl
produce`'s does) is prompt and bounded, as LineProducer.run's: while the records of a
commit are flushed it ends the flush at once (the transaction was not committed: it is
aborted); once EndTxn is on its way, its answer gets `stop_timeout` s (a second stop ends
the wait), and without one the outcome is `commit_unknown` (committed or not: never
claimed either way). The abort of the open transaction then gets `stop_timeout` s too (its
records in flight first: EndTxn is never sent while a broker may still write one of them);
one that does not end in time leaves the transaction open (`abort_error`) for its
coordinator to abort when transaction.timeout.ms passes, or for the next producer of the
transactional.id (InitProducerId aborts it). The blocking calls run in a helper thread the
caller waits for, so a coordinator or broker that does not answer cannot hold the stop.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafkactl.client.delimited import LongRecord
from kafkactl.client.errors import ClientError, KafkaTimeoutError

if TYPE_CHECKING:
    from kafkactl.client.line_producer import LineProducer


class AbortInterrupted(ClientError):  # noqa: N818 - named for what happened
    """The abort of the open transaction was itself interrupted (a second Ctrl-C)."""


@dataclass
class TransactionOutcome:
    """How a transactional run ended."""

    committed: int = 0  # input records in committed transactions
    transactions: int = 0  # transactions committed
    aborted: int = 0  # records sent in the open transaction when it stopped (0: none was
    # open): aborted, unless abort_error says it was not (or commit_unknown is set)
    read_unsent: int = 0  # records read from the input after those, never sent
    interrupted: bool = False
    error: BaseException | None = None
    abort_error: BaseException | None = None  # the abort itself failed or was not tried
    # (the coordinator aborts the transaction when it times out)
    commit_unknown: bool = False  # the open transaction's EndTxn(commit) was sent and not
    # answered before the stop: it may be committed or not (`aborted` records)
    abort_unanswered: bool = False  # its EndTxn(abort) was not answered (abort_error):
    # the coordinator may yet abort it, or not before transaction.timeout.ms


class AbortNotAnswered(ClientError):  # noqa: N818 - named for what happened
    """The abort did not end within the time a stop gives it."""


def _cut(chunk: list[bytes] | LongRecord, room: int,
         ) -> tuple[list[bytes] | LongRecord, list[bytes]]:
    """The first `room` records of a chunk (at least 1), and the rest; a LongRecord (one
    record, refused as one too large) whole."""
    if isinstance(chunk, LongRecord):
        return chunk, []
    return chunk[:room], chunk[room:]


class _Background:
    """`fn()` in a daemon thread, so that the caller can stop waiting for it (a call to a
    coordinator or broker that does not answer takes up to request.timeout.ms, and holds
    the TransactionManager's lock meanwhile)."""

    def __init__(self, fn: Callable[[], object], name: str) -> None:
        self.done = threading.Event()
        self.error: BaseException | None = None
        self.stopped = False  # a stop (KeyboardInterrupt) came while waiting, or before
        self.cut = False  # a second stop ended the wait
        threading.Thread(target=self._run, args=(fn,), name=name, daemon=True).start()

    def _run(self, fn: Callable[[], object]) -> None:
        try:
            fn()
        except BaseException as e:  # noqa: BLE001 - the caller's to judge
            self.error = e
        finally:
            self.done.set()

    def wait(self, timeout: float | None, grace: float, stopping: bool) -> bool:
        """Wait for the call, True if it returned: up to `timeout` s (None: until it
        returns). A stop (KeyboardInterrupt) cuts what is left of the wait to `grace` s;
        a second one (the first when `stopping`: the run is stopping already) ends it."""
        self.stopped = stopping
        now = time.monotonic()
        deadline = None if timeout is None else now + timeout
        if stopping:
            deadline = now + grace if deadline is None else min(deadline, now + grace)
        while True:
            try:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return self.done.is_set()
                if self.done.wait(1.0 if left is None else min(left, 1.0)):
                    return True
            except KeyboardInterrupt:
                if self.stopped:
                    self.cut = True
                    return self.done.is_set()
                self.stopped = True
                end = time.monotonic() + grace
                deadline = end if deadline is None else min(deadline, end)


def run_in_transactions(lp: LineProducer, chunks: Iterable[list[bytes] | LongRecord],
                        every: int | None = None, *,
                        abort_timeout: float = 30.0, stop_timeout: float | None = None,
                        finishing: Callable[[], None] | None = None) -> TransactionOutcome:
    """Send the records of `chunks` through `lp` in transactions of `every` records (None:
    one transaction), then stop the producer. Ctrl-C and errors are returned, not raised.
    After an error the abort gets `abort_timeout` s; after a stop `stop_timeout` s (default
    line_producer.STOP_FLUSH), and a stop during a commit waits that long for its answer.
    `finishing()` is called before the producer is stopped, KeyboardInterrupt or not (the
    caller's signal handler stops raising it there)."""
    from kafkactl.client.line_producer import STOP_FLUSH, call_finishing

    if every is not None and every <= 0:
        raise ValueError("--transaction-records must be at least 1")
    grace = STOP_FLUSH if stop_timeout is None else stop_timeout
    producer = lp.producer
    out = TransactionOutcome()
    open_records = 0  # records handed over in the open transaction
    taken = 0  # records taken from `chunks`
    txn_open = False  # a transaction is begun and not committed

    def commit() -> None:
        nonlocal open_records, txn_open
        # the records first, in this thread: a stop ends the wait at once, and the
        # transaction, not committed, is aborted
        producer.flush()
        stopped = _end(producer, out, grace)
        txn_open = False
        out.committed += open_records
        out.transactions += 1
        open_records = 0
        if stopped:
            raise KeyboardInterrupt
        producer.begin_transaction()
        txn_open = True

    def pieces() -> Iterator[list[bytes] | LongRecord]:
        nonlocal open_records, taken
        for chunk in chunks:
            taken += 1 if isinstance(chunk, LongRecord) else len(chunk)
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
    try:
        producer.init_transactions()
        producer.begin_transaction()
        txn_open = True
        lp.send_all(pieces())
        if open_records:  # (an empty input commits no transaction)
            commit()
    except KeyboardInterrupt:
        out.interrupted = True
    except Exception as e:  # noqa: BLE001 - reported with the counts, never raised
        out.error = e
    if (out.interrupted or out.error is not None) and txn_open and not out.commit_unknown:
        _abort_open(producer, out, grace if out.interrupted else abort_timeout, grace)
    out.interrupted = call_finishing(finishing) or out.interrupted
    _stop(producer, out.interrupted, grace)
    if out.interrupted or out.error is not None:
        _count_open(lp, out, taken)
    return out


def _end(producer: Any, out: TransactionOutcome, grace: float) -> bool:
    """Commit the flushed transaction (EndTxn), in a helper thread: a stop waits `grace` s
    more for its answer (a second one ends the wait); True if one came. Without an answer
    the outcome is unknown (`out.commit_unknown`: KeyboardInterrupt, or the coordinator's
    KafkaTimeoutError raised); a refusal raised."""
    call = _Background(producer.commit_transaction, "kafkactl-commit")
    done = call.wait(None, grace, False)
    if call.stopped:
        out.interrupted = True
    if not done:
        out.commit_unknown = True
        raise KeyboardInterrupt
    if isinstance(call.error, KafkaTimeoutError):  # EndTxn not answered in time: unknown
        out.commit_unknown = True
    if call.error is not None:
        raise call.error
    return call.stopped


def _stop(producer: Any, interrupted: bool, grace: float) -> None:
    """Stop the sender: nothing is left to deliver. In a helper thread: the
    TransactionManager's lock, which the producer's stop takes, may be held by a call that
    did not return (after a stop it is waited for STOP_ABORT + 1 s at most)."""
    from kafkactl.client.line_producer import STOP_ABORT

    if interrupted:
        _Background(lambda: producer.abort(STOP_ABORT), "kafkactl-stop").wait(
            STOP_ABORT + 1.0, grace, True)
    else:
        _Background(producer.abort, "kafkactl-stop").wait(None, grace, False)


def _count_open(lp: LineProducer, out: TransactionOutcome, taken: int) -> None:
    """The records the producer got in the open transaction (`aborted`: every record read
    before the interrupted chunk, and what the producer completed of it), and those taken
    from the input after them (`read_unsent`), once the producer is stopped."""
    unsent = lp.unsent() if hasattr(lp, "unsent") else []
    out.aborted = max(lp.read - len(unsent) - out.committed, 0)
    out.read_unsent = max(taken - out.committed - out.aborted, 0)


def _abort_open(producer: Any, out: TransactionOutcome, timeout: float, grace: float
                ) -> None:
    """Abort the open transaction (in a helper thread), waiting `timeout` s at most (a stop
    cuts the wait to `grace` s; a second one, or the first after a stop, ends it); what
    kept it from ending is `out.abort_error`."""
    phase = ["flush"]
    call = _Background(lambda: _abort(producer, timeout, phase), "kafkactl-abort")
    if not call.wait(timeout, grace, out.interrupted):
        out.abort_unanswered = phase[0] == "end"
        if call.cut:  # (a second stop)
            out.abort_error = AbortInterrupted("interrupted")
        elif phase[0] == "flush":
            out.abort_error = AbortNotAnswered(
                f"records of it in flight were not answered within {timeout:g} s, and an "
                "abort is not sent before they are")
        else:
            out.abort_error = AbortNotAnswered(f"not within {timeout:g} s")
    elif isinstance(call.error, KeyboardInterrupt):  # (a stand-in producer's)
        call.stopped = True
        out.abort_error = AbortInterrupted("interrupted")
    elif call.error is not None:
        out.abort_error = call.error
        # (EndTxn sent, its answer not come: the coordinator may take it yet)
        out.abort_unanswered = phase[0] == "end" and isinstance(call.error, KafkaTimeoutError)
    out.interrupted = out.interrupted or call.stopped


def _abort(producer: Any, timeout: float, phase: list[str]) -> None:
    """Abort the open transaction, its records in flight first: EndTxn is not sent while a
    broker that has not answered may still write one of them (written after the abort
    marker, it would open a transaction no marker ends). `phase[0]` becomes "end" once the
    records are done. A stand-in producer without a TransactionManager: its
    abort_transaction()."""
    txn = producer.transactions
    if txn is None:
        producer.abort_transaction(timeout)
        return
    from kafkactl.client.transaction_manager import TransactionError

    if txn.fatal is not None:
        raise txn.fatal
    txn.fail(TransactionError("the transaction was aborted"))
    producer.sender.wakeup()  # (what is queued fails; what is in flight completes)
    if not producer.flush(timeout):
        raise KafkaTimeoutError(f"records of it in flight were not answered within "
                                f"{timeout:g} s, and an abort is not sent before they are")
    phase[0] = "end"
    txn.end(commit=False)
