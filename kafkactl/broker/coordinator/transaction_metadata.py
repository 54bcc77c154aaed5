"""A transactional id's state (Kafka's TransactionMetadata) and its state machine.

Empty -> Ongoing -> PrepareCommit / PrepareAbort -> CompleteCommit / CompleteAbort, plus
Dead (an expired id: a tombstone) and PrepareEpochFence (in memory only: an ongoing
transaction of a fenced producer, about to be aborted with the bumped epoch). A change is
first *prepared* (`prepare_*` returns the new state as a `TxnTransit` and sets
`pending_state`), written to `__transaction_state`, and only then *completed*
(`complete_transition`); while a change is pending, others get CONCURRENT_TRANSACTIONS.
Everything runs on the broker's event loop: `pending_state` is the only lock needed.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from enum import IntEnum

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_EPOCH = 32767  # Short.MaxValue

TopicPartition = tuple[str, int]


class TxnState(IntEnum):
    """The TransactionStatus byte of a TransactionLogValue (Kafka's TransactionState ids)."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The name DescribeTransactions / ListTransactions use."""
        return _NAMES[self]

    @classmethod
    def from_name(cls, name: str) -> TxnState | None:
        return _BY_NAME.get(name)


_NAMES = {
    TxnState.EMPTY: "Empty", TxnState.ONGOING: "Ongoing",
    TxnState.PREPARE_COMMIT: "PrepareCommit", TxnState.PREPARE_ABORT: "PrepareAbort",
    TxnState.COMPLETE_COMMIT: "CompleteCommit", TxnState.COMPLETE_ABORT: "CompleteAbort",
    TxnState.DEAD: "Dead", TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
_BY_NAME = {v: k for k, v in _NAMES.items()}

S = TxnState
# The states each state may be entered from (Kafka's TransactionState.validPreviousStates).
VALID_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    S.PREPARE_ABORT: frozenset({S.ONGOING, S.PREPARE_EPOCH_FENCE}),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}
COMPLETED = frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT})


class IllegalTransition(Exception):
    """A transition Kafka's state machine does not allow (a coordinator bug)."""


@dataclass(frozen=True, slots=True)
class TxnTransit:
    """The state a prepared change leads to (Kafka's TxnTransitMetadata)."""

    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition]
    start_ms: int
    last_update_ms: int


def is_epoch_exhausted(epoch: int) -> bool:
    """One epoch is kept back to fence the producer once more (Kafka: >= Short.MaxValue-1)."""
    return epoch >= MAX_EPOCH - 1


@dataclass(slots=True)
class TxnMetadata:
    transactional_id: str
    producer_id: int
    last_producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    timeout_ms: int = 60000
    state: TxnState = TxnState.EMPTY
    partitions: set[TopicPartition] = field(default_factory=set)
    start_ms: int = -1
    last_update_ms: int = -1
    pending_state: TxnState | None = None
    has_failed_epoch_fence: bool = False

    # ---- queries -----------------------------------------------------------------------
    @property
    def pending_transition(self) -> bool:
        return self.pending_state is not None

    @property
    def epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    def transit(self, state: TxnState, *, producer_id: int | None = None,
                last_producer_id: int | None = None, producer_epoch: int | None = None,
                last_producer_epoch: int | None = None, timeout_ms: int | None = None,
                partitions: frozenset[TopicPartition] | None = None,
                start_ms: int | None = None, update_ms: int) -> TxnTransit:
        """Prepare the change to `state` (Kafka's prepareTransitionTo)."""
        if self.pending_state is not None:
            raise IllegalTransition(f"{self.transactional_id}: a change to "
                                    f"{self.pending_state.kafka_name} is pending")
        if self.state not in VALID_PREVIOUS[state]:
            raise IllegalTransition(f"{self.transactional_id}: {self.state.kafka_name} -> "
                                    f"{state.kafka_name} is not a valid transition")
        new = TxnTransit(
            self.producer_id if producer_id is None else producer_id,
            self.last_producer_id if last_producer_id is None else last_producer_id,
            self.producer_epoch if producer_epoch is None else producer_epoch,
            self.last_producer_epoch if last_producer_epoch is None else last_producer_epoch,
            self.timeout_ms if timeout_ms is None else timeout_ms, state,
            frozenset(self.partitions) if partitions is None else partitions,
            self.start_ms if start_ms is None else start_ms, update_ms)
        self.pending_state = state
        return new

    # ---- the prepared changes (Kafka's prepare* methods) -----------------------------------
    def prepare_increment_epoch(self, timeout_ms: int, expected_epoch: int | None,
                                now_ms: int) -> TxnTransit | None:
        """InitProducerId: the next epoch (None: the caller's epoch is fenced)."""
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epoch, last = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            epoch, last = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            # a retry of a bump whose answer was lost: the same epoch again
            epoch, last = self.producer_epoch, self.last_producer_epoch
        else:
            return None
        return self.transit(TxnState.EMPTY, producer_epoch=epoch, last_producer_epoch=last,
                            timeout_ms=timeout_ms, partitions=frozenset(), start_ms=-1,
                            update_ms=now_ms)

    def prepare_producer_id_rotation(self, new_producer_id: int, timeout_ms: int, now_ms: int,
                                     record_last_epoch: bool) -> TxnTransit:
        """The epoch is exhausted: a new producer id at epoch 0."""
        return self.transit(
            TxnState.EMPTY, producer_id=new_producer_id, last_producer_id=self.producer_id,
            producer_epoch=0,
            last_producer_epoch=self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
            timeout_ms=timeout_ms, partitions=frozenset(), start_ms=-1, update_ms=now_ms)

    def prepare_fence_epoch(self) -> TxnTransit:
        """An ongoing transaction of a fenced (or timed out) producer: bump the epoch in
        memory; the abort that follows writes it (never returned to a client before)."""
        if self.producer_epoch >= MAX_EPOCH:
            raise IllegalTransition(f"{self.transactional_id}: cannot fence epoch "
                                    f"{self.producer_epoch}")
        epoch = self.producer_epoch if self.has_failed_epoch_fence else self.producer_epoch + 1
        return self.transit(TxnState.PREPARE_EPOCH_FENCE, producer_epoch=epoch,
                            last_producer_epoch=NO_PRODUCER_EPOCH,
                            update_ms=self.last_update_ms)

    def prepare_add_partitions(self, added: set[TopicPartition], now_ms: int) -> TxnTransit:
        start = now_ms if self.state in COMPLETED else self.start_ms
        return self.transit(TxnState.ONGOING, partitions=frozenset(self.partitions | added),
                            start_ms=start, update_ms=now_ms)

    def prepare_abort_or_commit(self, state: TxnState, now_ms: int) -> TxnTransit:
        return self.transit(state, update_ms=now_ms)

    def prepare_complete(self, now_ms: int) -> TxnTransit:
        state = TxnState.COMPLETE_COMMIT if self.state == TxnState.PREPARE_COMMIT \
            else TxnState.COMPLETE_ABORT
        return self.transit(state, partitions=frozenset(), update_ms=now_ms)

    def prepare_dead(self) -> TxnTransit:
        return self.transit(TxnState.DEAD, partitions=frozenset(),
                            update_ms=self.last_update_ms)

    # ---- after the write ---------------------------------------------------------------------
    def complete_transition(self, new: TxnTransit) -> None:
        """The change `new` is in the log: it becomes the state (Kafka's
        completeTransitionTo, with its checks)."""
        if self.pending_state != new.state:
            raise IllegalTransition(
                f"{self.transactional_id}: completing {new.state.kafka_name} but "
                f"{self.pending_state.kafka_name if self.pending_state else 'nothing'} "
                "is pending")
        self.producer_id, self.last_producer_id = new.producer_id, new.last_producer_id
        self.producer_epoch, self.last_producer_epoch = new.producer_epoch, \
            new.last_producer_epoch
        self.timeout_ms, self.state = new.timeout_ms, new.state
        self.partitions = set(new.partitions)
        self.start_ms, self.last_update_ms = new.start_ms, new.last_update_ms
        self.pending_state = None
        self.has_failed_epoch_fence = False

    def copy(self) -> TxnMetadata:
        return dataclasses.replace(self, partitions=set(self.partitions))
