"""The writer's `transactional` option: Spark's commit protocol carried out as a two-phase
commit of Kafka transactions (KIP-98), the way Flink's Kafka sink commits its checkpoints.

Phase one runs in each task attempt, on an executor: the attempt writes its rows in a
transaction of its own, transactional.id `<prefix>-<partition>-<attempt>`, flushes them
(every record acknowledged, every partition added to the transaction) and hands the
transaction's producer id and epoch to the driver in its commit message, the transaction
left open. Phase two runs on the driver once Spark has every task's message: commit() first
checks with each coordinator that every transaction is still open under the epoch its task
saw (one that timed out was aborted by its coordinator), then commits them one by one
(EndTxn names the id, producer id and epoch; the coordinator does not ask which connection
sends it); abort() aborts them. Either way the open transactions of the job's other attempts
(failed, speculative, or lost with their executor) are then found (ListTransactions) and
aborted (InitProducerId on their id fences them), so none holds a partition's last stable
offset back until its timeout.

So a read_committed consumer sees all of a job's rows or none, and a retried task's rows
once. What a two-phase commit without a durable decision cannot cover: a driver that dies
between its first and its last EndTxn leaves the job's other transactions to be aborted by
their timeout (transaction.timeout.ms), after the first ones were committed.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass

from pyspark.sql.datasource import WriterCommitMessage

from kafkactl.client.errors import ClientError
from kafkactl.client.kafka_client import KafkaClient
from kafkactl.client.security import ClientSecurity
from kafkactl.client.transaction_admin import (
    DEFAULT_MAX_TRANSACTION_TIMEOUT_MS,
    TransactionAdmin,
)
from kafkactl.client.transaction_manager import TransactionManager
from kafkactl.protocol.errors import KafkaError

# a job's transactions stay open from its first task's rows to the driver's commit, so the
# default is the broker's longest (transaction.max.timeout.ms), not the producer's 60 s
DEFAULT_TIMEOUT_MS = DEFAULT_MAX_TRANSACTION_TIMEOUT_MS
# the states in which an EndTxn commit under the task's epoch succeeds: open, or committed
# (or committing) already, by an earlier call (a retried EndTxn succeeds, as in Kafka)
COMMITTABLE = ("Ongoing", "PrepareCommit", "CompleteCommit")
CLIENT_ID = "kafkactl-spark-writer"
# a transaction holding partitions back (read_committed consumers stop before it)
OPEN = ("Ongoing",)
# ... or one an attempt still running has initialized and is about to add partitions to
OPEN_OR_ABOUT_TO_BE = ("Ongoing", "Empty")

log = logging.getLogger(__name__)


@dataclass
class PreparedWrite(WriterCommitMessage):
    """A task attempt's commit message: its rows are in the open transaction of
    `transactional_id` (None when it had no rows: nothing to commit)."""
    records: int
    transactional_id: str | None = None
    producer_id: int = -1
    producer_epoch: int = -1


@dataclass(frozen=True)
class TxnTarget:
    """Where and how the driver reaches the coordinators. The writer carries it to the
    executors, whose attempts name their ids from `prefix`: it holds the security
    properties, not their ClientSecurity (an SSL context does not pickle)."""
    bootstrap: str
    prefix: str
    timeout_ms: int
    security_properties: tuple[tuple[str, str], ...] = ()

    @property
    def security(self) -> ClientSecurity:
        return ClientSecurity.from_properties(dict(self.security_properties))


def attempt_transactional_id(prefix: str) -> str:
    """This task attempt's transactional.id: one per attempt, so an attempt never fences
    another whose transaction the driver may be about to commit."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:
        raise RuntimeError("a transactional write runs in a Spark task")
    return f"{prefix}-{ctx.partitionId()}-{ctx.attemptNumber()}"


def _prepared(messages: Sequence[WriterCommitMessage | None]) -> list[PreparedWrite]:
    return [m for m in messages
            if isinstance(m, PreparedWrite) and m.transactional_id is not None]


@contextlib.contextmanager
def _manager(target: TxnTarget, transactional_id: str) -> Iterator[TransactionManager]:
    tm = TransactionManager(target.bootstrap, transactional_id, client_id=CLIENT_ID,
                            transaction_timeout_ms=target.timeout_ms,
                            security=target.security)
    try:
        yield tm
    finally:
        tm.close()


@contextlib.contextmanager
def _admin(target: TxnTarget) -> Iterator[TransactionAdmin]:
    client = KafkaClient(target.bootstrap, client_id=CLIENT_ID, security=target.security)
    try:
        yield TransactionAdmin(client)
    finally:
        client.close()


def _end(target: TxnTarget, m: PreparedWrite, commit: bool) -> None:
    assert m.transactional_id is not None
    with _manager(target, m.transactional_id) as tm:
        tm.resume(m.producer_id, m.producer_epoch)
        tm.end(commit)


def _check_open(admin: TransactionAdmin, m: PreparedWrite) -> str | None:
    """Why `m`'s transaction can no longer be committed, or None when it can."""
    assert m.transactional_id is not None
    d = admin.describe(m.transactional_id)
    if d.state in COMMITTABLE and (d.producer_id, d.producer_epoch) == \
            (m.producer_id, m.producer_epoch):
        return None
    return (f"transaction {m.transactional_id} is {d.state} under producer {d.producer_id}, "
            f"epoch {d.producer_epoch} (its task wrote under epoch {m.producer_epoch}): it "
            "was aborted, most likely by its coordinator when transaction.timeout.ms "
            f"({d.timeout_ms:,} ms) passed before the job ended; raise "
            "kafka.transaction.timeout.ms")


def commit_all(target: TxnTarget, messages: Sequence[WriterCommitMessage | None]) -> None:
    """Phase two: commit every task's transaction, or none when one of them can no longer
    be committed (then every one is aborted and the job fails)."""
    prepared = _prepared(messages)
    with _admin(target) as admin:
        lost = [why for m in prepared if (why := _check_open(admin, m)) is not None]
        if lost:
            _abort(target, prepared)
            abort_stragglers(target, admin, keep=())
            raise ClientError("the write is aborted, no row of it committed: " + lost[0])
        for m in prepared:
            _end(target, m, commit=True)
        try:
            abort_stragglers(target, admin, keep={m.transactional_id for m in prepared})
        except (ClientError, KafkaError) as e:
            # the rows are committed: failing the job now would have it run again and
            # write them twice; a straggler is aborted when its timeout passes
            log.warning("the write is committed, but its other attempts' transactions were "
                        "not all aborted (their timeout will): %s", e)


def _abort(target: TxnTarget, prepared: Sequence[PreparedWrite]) -> None:
    for m in prepared:
        with contextlib.suppress(ClientError, KafkaError):  # fenced, timed out, ended
            _end(target, m, commit=False)


def abort_all(target: TxnTarget, messages: Sequence[WriterCommitMessage | None]) -> None:
    """The job failed: abort the transactions of the tasks that succeeded and of every other
    attempt still open."""
    _abort(target, _prepared(messages))
    with _admin(target) as admin:
        abort_stragglers(target, admin, keep=())


def fence_leftovers(target: TxnTarget) -> list[str]:
    """Before a write with a named prefix runs a task: fence the transactions an earlier
    run of it left open (its driver died before it committed or aborted them), which would
    otherwise hold read_committed consumers back until their timeout."""
    with _admin(target) as admin:
        # only what is open: an earlier run's failed attempts were fenced by that run (its
        # own sweep), which leaves their ids Empty, no partition in them: nothing to abort
        # (fencing them again, each run, would report them as left open each run)
        fenced = abort_stragglers(target, admin, keep=(), states=OPEN)
    if fenced:
        log.warning("aborted %d transaction(s) an earlier run of prefix %s left open: %s",
                    len(fenced), target.prefix, ", ".join(fenced))
    return fenced


def is_attempt_of(prefix: str, transactional_id: str) -> bool:
    """`transactional_id` is one of a write's with `prefix` (`PREFIX-PARTITION-ATTEMPT`),
    not merely an id that starts with the prefix: another producer's (`orders-mirror`) or
    another job's (`orders-nightly-0-0`) is never fenced, as Kafka fences only an id's own
    earlier instances."""
    rest = transactional_id[len(prefix) + 1:]
    if not transactional_id.startswith(prefix + "-"):
        return False
    partition, sep, attempt = rest.partition("-")
    return bool(sep) and partition.isdecimal() and attempt.isdecimal() and partition.isascii() \
        and attempt.isascii()


def abort_stragglers(target: TxnTarget, admin: TransactionAdmin,
                     keep: Collection[str | None],
                     states: Sequence[str] = OPEN_OR_ABOUT_TO_BE) -> list[str]:
    """Fence this write's attempts that are not in `keep` and whose transaction is in one
    of `states`: by default open (Ongoing) or about to be (Empty: initialized, no partition
    added yet: an attempt of this job still running). An InitProducerId on the id aborts its
    transaction, and the attempt, which may still be running, can add nothing to it any
    more. Returns their ids."""
    out = []
    for t in admin.list_transactions(states=list(states)):
        if is_attempt_of(target.prefix, t.transactional_id) and t.transactional_id not in keep:
            with _manager(target, t.transactional_id) as tm:
                tm.init()
            out.append(t.transactional_id)
    return out
