"""TransactionManager: the transactional producer's side of KIP-98 (and KIP-447's offsets).

    txn = TransactionManager(bootstrap, "my-txn-id", transaction_timeout_ms=60000)
    pid, epoch = txn.init()                   # FindCoordinator(type 1) + InitProducerId
    txn.begin()
    txn.add_partitions({("t", 0)})            # the sender, before a partition's first batch
    txn.send_offsets({("in", 0): 42}, GroupMetadata("g", 3, "member-1"))  # KIP-447
    txn.end(commit=True)                      # EndTxn; the coordinator writes the markers

It talks to the transaction coordinator (and, for TxnOffsetCommit, the group's coordinator)
over connections of its own, guarded by one lock: the producer's thread (begin, offsets,
commit, abort) and the sender thread (AddPartitionsToTxn before it drains a partition's
first batch of the transaction) both use it. Retriable answers (the coordinator moving or
loading, CONCURRENT_TRANSACTIONS while the previous transaction's markers are written) are
retried until the request timeout; a fenced producer is fatal (ProducerFencedError); any
other failure inside a transaction makes it abortable (TransactionAbortableError): the
caller must abort it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kafkactl.client.connection import BrokerConnection
from kafkactl.client.errors import ClientError, KafkaConnectionError, KafkaTimeoutError
from kafkactl.client.kafka_client import KafkaClient
from kafkactl.client.security import ClientSecurity
from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.errors import ErrorCode, error_for, error_name
from kafkactl.record.batch_header import ATTRIBUTES_OFFSET, restamp_crc

TopicPartition = tuple[str, int]
TRANSACTIONAL_FLAG = 0x10
TRANSACTION_KEY_TYPE = 1

# Answers after which the same request is sent again (after a pause): the coordinator is
# loading, gone or moved (find it again), or the previous transaction is still completing.
RETRY = frozenset({ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                   ErrorCode.NOT_COORDINATOR, ErrorCode.CONCURRENT_TRANSACTIONS,
                   ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.REQUEST_TIMED_OUT,
                   ErrorCode.NETWORK_EXCEPTION})
FIND_AGAIN = frozenset({ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR})
FENCED = frozenset({ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH,
                    ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                    ErrorCode.INVALID_PRODUCER_ID_MAPPING,
                    ErrorCode.TRANSACTION_COORDINATOR_FENCED})


class TransactionError(ClientError):
    """A transactional operation failed."""


class TransactionAbortableError(TransactionError):
    """The transaction cannot commit (a record or an offset was refused): abort it; the
    producer can begin another one afterwards."""


class ProducerFencedError(TransactionError):
    """Another producer with the same transactional.id took over (or this one may not use
    it): the producer cannot go on; close it."""


@dataclass(frozen=True)
class GroupMetadata:
    """The consumer group member a consume-transform-produce loop reads as (KIP-447): its
    offsets are committed in the transaction only while it still holds its generation."""

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None


def mark_transactional(built: bytes | bytearray | memoryview) -> bytes | bytearray | memoryview:
    """A built v2 batch with its transactional attribute set (CRC recomputed)."""
    attrs = int.from_bytes(built[ATTRIBUTES_OFFSET:ATTRIBUTES_OFFSET + 2], "big")
    if attrs & TRANSACTIONAL_FLAG:
        return built
    buf = bytearray(built)
    buf[ATTRIBUTES_OFFSET:ATTRIBUTES_OFFSET + 2] = (attrs | TRANSACTIONAL_FLAG).to_bytes(2, "big")
    restamp_crc(buf, 0)
    return bytes(buf)


class TransactionManager:
    def __init__(self, bootstrap_servers: str | Iterable[str] | None, transactional_id: str, *,
                 transaction_timeout_ms: int = 60000, client_id: str = "kafkactl-producer",
                 request_timeout_ms: int = 30000, retry_backoff_ms: int = 100,
                 security: ClientSecurity | None = None) -> None:
        if not transactional_id:
            raise ValueError("transactional.id must not be empty")
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.client = KafkaClient(bootstrap_servers, client_id=client_id,
                                  request_timeout_ms=request_timeout_ms,
                                  retry_backoff_ms=retry_backoff_ms, security=security)
        self.request_timeout = request_timeout_ms / 1000.0
        self.retry_backoff = max(retry_backoff_ms / 1000.0, 0.02)
        self.lock = threading.RLock()
        self.producer_id = -1
        self.epoch = -1
        self.in_transaction = False
        self.partitions: set[TopicPartition] = set()  # added to the ongoing transaction
        self.offsets_added = False  # AddOffsetsToTxn went through in it
        self.resumed = False  # an open transaction another process began (resume())
        self.error: BaseException | None = None  # abortable (or fatal) error of the txn
        self.fatal: BaseException | None = None
        self._conn: BrokerConnection | None = None
        self._group_conns: dict[str, BrokerConnection] = {}

    # ---- connections ----------------------------------------------------------------------

    def _find(self, key: str, key_type: int) -> tuple[str, int, int]:
        deadline = time.monotonic() + self.request_timeout
        while True:
            try:
                conn = self.client.any_connection()
                version = min(conn.version_for(ApiKey.FIND_COORDINATOR), 3)
                resp = conn.request(ApiKey.FIND_COORDINATOR,
                                    {"key": key, "key_type": key_type}, version=version)
                code = resp.get("error_code", 0)
                if code == 0:
                    return resp["host"], resp["port"], resp["node_id"]
                if code not in RETRY:
                    message = resp.get("error_message")
                    raise error_for(code)(f"FindCoordinator for {key!r}: {error_name(code)}"
                                          + (f" ({message})" if message else ""))
            except (KafkaConnectionError, KafkaTimeoutError) as e:
                self.client.close()
                if time.monotonic() >= deadline:
                    raise KafkaTimeoutError(f"no coordinator for {key!r}: {e}") from None
            if time.monotonic() >= deadline:
                raise KafkaTimeoutError(f"no coordinator for {key!r} within "
                                        f"{self.request_timeout:g} s")
            time.sleep(self.retry_backoff)

    def _connect(self, key: str, key_type: int) -> BrokerConnection:
        host, port, node = self._find(key, key_type)
        conn = BrokerConnection(host, port, node_id=node, client_id=self.client.client_id,
                                connect_timeout=self.client.connect_timeout,
                                request_timeout=self.request_timeout,
                                security=self.client.security)
        conn.connect()
        return conn

    def _coordinator(self) -> BrokerConnection:
        if self._conn is None or not self._conn.connected:
            self._conn = self._connect(self.transactional_id, TRANSACTION_KEY_TYPE)
        return self._conn

    def _drop(self, conn: BrokerConnection | None) -> None:
        if conn is not None:
            conn.close()
        if conn is self._conn:
            self._conn = None

    def _call(self, api_key: ApiKey, body: dict[str, Any], what: str, *,
              cap: int | None = None, code_of: Any = None) -> dict[str, Any]:
        """Send to the transaction coordinator until it answers something other than a
        retriable error (or the request timeout passes); returns the response."""
        deadline = time.monotonic() + self.request_timeout
        last: Any = None
        while True:
            conn = None
            try:
                conn = self._coordinator()
                version = conn.version_for(api_key)
                if cap is not None:
                    version = min(version, cap)
                resp = conn.request(api_key, body, version=version)
                code = code_of(resp) if code_of is not None else resp.get("error_code", 0)
                if code not in RETRY:
                    return resp
                last = ErrorCode(code).name
                if code in FIND_AGAIN:
                    self._drop(conn)
            except (KafkaConnectionError, KafkaTimeoutError) as e:
                self._drop(conn)
                last = e
            if time.monotonic() >= deadline:
                raise KafkaTimeoutError(f"{what}: the transaction coordinator did not "
                                        f"complete it within {self.request_timeout:g} s "
                                        f"(last: {last})")
            time.sleep(self.retry_backoff)

    def _raise(self, code: int, what: str, abortable: bool = True) -> None:
        """Raise the coordinator's refusal `code` of `what`, named (and explained where a
        setting of the caller's causes it): fatal when fenced, abortable inside a
        transaction, else the error of the code."""
        named = f"{what}: {error_name(code)}{self._explain(code)}"
        err = error_for(code)(named)
        if code in FENCED:
            why = ("may not be used by this principal"
                   if code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED else
                   "was taken over by another producer, or the coordinator aborted the "
                   "transaction when transaction.timeout.ms passed")
            fenced = ProducerFencedError(f"{what}: {error_name(code)} (transactional.id "
                                         f"{self.transactional_id!r} {why})")
            self.fatal = self.error = fenced
            raise fenced from err
        if abortable and self.in_transaction:
            wrapped = TransactionAbortableError(named)
            self.error = wrapped
            raise wrapped from err
        raise err

    def _explain(self, code: int) -> str:
        if code == ErrorCode.INVALID_TRANSACTION_TIMEOUT:
            return (f" (transaction.timeout.ms {self.transaction_timeout_ms} is more than the "
                    "broker's transaction.max.timeout.ms allows: 900000 unless it is "
                    "configured otherwise)")
        return ""

    def _check_usable(self) -> None:
        if self.fatal is not None:
            raise self.fatal
        if self.producer_id < 0:
            raise TransactionError("init_transactions() first")

    # ---- the protocol -------------------------------------------------------------------

    def init(self) -> tuple[int, int]:
        """InitProducerId with the transactional.id: the coordinator fences older producers
        of the id (aborting their open transaction) and hands out the id and epoch. Called
        again after an abort with the current id and epoch (KIP-360: the epoch is bumped,
        sequences start over)."""
        with self.lock:
            if self.fatal is not None:
                raise self.fatal
            body = {"transactional_id": self.transactional_id,
                    "transaction_timeout_ms": self.transaction_timeout_ms,
                    "producer_id": self.producer_id, "producer_epoch": self.epoch}
            resp = self._call(ApiKey.INIT_PRODUCER_ID, body, "InitProducerId")
            code = resp.get("error_code", 0)
            if code == ErrorCode.INVALID_PRODUCER_EPOCH and self.producer_id >= 0:
                # the broker does not bump epochs of a known id (no KIP-360): start afresh
                body.update(producer_id=-1, producer_epoch=-1)
                resp = self._call(ApiKey.INIT_PRODUCER_ID, body, "InitProducerId")
                code = resp.get("error_code", 0)
            if code:
                self._raise(code, "InitProducerId", abortable=False)
            self.producer_id = resp["producer_id"]
            self.epoch = resp["producer_epoch"]
            self.in_transaction = self.resumed = False
            self.partitions.clear()
            self.error = None
            return self.producer_id, self.epoch

    def begin(self) -> None:
        with self.lock:
            self._check_usable()
            if self.in_transaction:
                raise TransactionError("a transaction is already in progress")
            self.in_transaction = True
            self.partitions.clear()
            self.offsets_added = False
            self.error = None

    def resume(self, producer_id: int, epoch: int) -> None:
        """Take over the open transaction that another process began under this
        transactional.id with (`producer_id`, `epoch`) and flushed: end() then commits or
        aborts it (EndTxn names the id, producer id and epoch; the coordinator does not ask
        which connection sends it). The second phase of a two-phase commit whose first
        phase ran elsewhere, as a Spark job's driver does for its tasks' transactions."""
        with self.lock:
            if self.fatal is not None:
                raise self.fatal
            if self.in_transaction:
                raise TransactionError("a transaction is already in progress")
            self.producer_id, self.epoch = producer_id, epoch
            self.in_transaction = self.resumed = True
            self.partitions.clear()
            self.offsets_added = False
            self.error = None

    def add_partitions(self, tps: Iterable[TopicPartition]) -> None:
        """AddPartitionsToTxn (v0-v3, the client form) for partitions not yet in the
        transaction; raises (and marks the transaction) on a refusal."""
        with self.lock:
            self._check_usable()
            if self.error is not None:
                raise self.error
            todo = sorted(set(tps) - self.partitions)
            if not todo:
                return
            if not self.in_transaction:
                raise TransactionError("records sent outside a transaction "
                                       "(begin_transaction() first)")
            by_topic: dict[str, list[int]] = {}
            for t, p in todo:
                by_topic.setdefault(t, []).append(p)
            body = {"v3_and_below_transactional_id": self.transactional_id,
                    "v3_and_below_producer_id": self.producer_id,
                    "v3_and_below_producer_epoch": self.epoch,
                    "v3_and_below_topics": [{"name": t, "partitions": ps}
                                            for t, ps in by_topic.items()]}
            resp = self._call(ApiKey.ADD_PARTITIONS_TO_TXN, body, "AddPartitionsToTxn", cap=3,
                              code_of=_worst_partition_code)
            code = resp.get("error_code", 0) or _worst_partition_code(resp)
            if code:
                self._raise(code, f"AddPartitionsToTxn {', '.join(f'{t}-{p}' for t, p in todo)}")
            self.partitions.update(todo)

    def send_offsets(self, offsets: Mapping[TopicPartition, int],
                     group: GroupMetadata | str) -> None:
        """KIP-447: AddOffsetsToTxn (the group's __consumer_offsets partition joins the
        transaction), then TxnOffsetCommit to the group's coordinator, so the offsets are
        committed exactly when the transaction is."""
        meta = group if isinstance(group, GroupMetadata) else GroupMetadata(group)
        with self.lock:
            self._check_usable()
            if not self.in_transaction:
                raise TransactionError("send_offsets_to_transaction() outside a transaction")
            if self.error is not None:
                raise self.error
            resp = self._call(ApiKey.ADD_OFFSETS_TO_TXN, {
                "transactional_id": self.transactional_id, "producer_id": self.producer_id,
                "producer_epoch": self.epoch, "group_id": meta.group_id},
                f"AddOffsetsToTxn for group {meta.group_id!r}")
            code = resp.get("error_code", 0)
            if code:
                self._raise(code, f"AddOffsetsToTxn for group {meta.group_id!r}")
            self.offsets_added = True
            self._txn_offset_commit(offsets, meta)

    def _txn_offset_commit(self, offsets: Mapping[TopicPartition, int],
                           meta: GroupMetadata) -> None:
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (t, p), off in offsets.items():
            by_topic.setdefault(t, []).append({
                "partition_index": p, "committed_offset": off, "committed_leader_epoch": -1,
                "committed_metadata": ""})
        body = {"transactional_id": self.transactional_id, "group_id": meta.group_id,
                "producer_id": self.producer_id, "producer_epoch": self.epoch,
                "generation_id": meta.generation_id, "member_id": meta.member_id,
                "group_instance_id": meta.group_instance_id,
                "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}
        deadline = time.monotonic() + self.request_timeout
        last: Any = None
        while True:
            conn = self._group_conns.get(meta.group_id)
            try:
                if conn is None or not conn.connected:
                    conn = self._group_conns[meta.group_id] = self._connect(meta.group_id, 0)
                version = min(conn.version_for(ApiKey.TXN_OFFSET_COMMIT), 3)
                resp = conn.request(ApiKey.TXN_OFFSET_COMMIT, body, version=version)
                code = _worst_partition_code(resp, "partitions")
                if code not in RETRY:
                    if code:
                        self._raise(code, f"TxnOffsetCommit for group {meta.group_id!r}")
                    return
                last = ErrorCode(code).name
                if code in FIND_AGAIN:
                    conn.close()
                    self._group_conns.pop(meta.group_id, None)
            except (KafkaConnectionError, KafkaTimeoutError) as e:
                if conn is not None:
                    conn.close()
                self._group_conns.pop(meta.group_id, None)
                last = e
            if time.monotonic() >= deadline:
                err = TransactionAbortableError(
                    f"TxnOffsetCommit for group {meta.group_id!r} did not complete within "
                    f"{self.request_timeout:g} s (last: {last})")
                self.error = err
                raise err
            time.sleep(self.retry_backoff)

    def end(self, commit: bool) -> None:
        """EndTxn: commit (the caller flushed every record first) or abort."""
        with self.lock:
            self._check_usable()
            if not self.in_transaction:
                raise TransactionError("no transaction in progress")
            if commit and self.error is not None:
                raise self.error
            if self.partitions or self.offsets_added or self.resumed:
                # (else the coordinator knows nothing of the transaction)
                resp = self._call(ApiKey.END_TXN, {
                    "transactional_id": self.transactional_id, "producer_id": self.producer_id,
                    "producer_epoch": self.epoch, "committed": commit},
                    "EndTxn " + ("commit" if commit else "abort"))
                code = resp.get("error_code", 0)
                if code:
                    self._raise(code, "EndTxn " + ("commit" if commit else "abort"),
                                abortable=commit)
            self.in_transaction = False
            self.partitions.clear()
            self.offsets_added = self.resumed = False
            self.error = None

    def fenced(self, what: str) -> None:
        """A write of this producer was refused for its epoch: another producer of the
        transactional.id took over (and aborted the open transaction)."""
        with self.lock:
            if self.fatal is None:
                self.fatal = ProducerFencedError(
                    f"{what}: transactional.id {self.transactional_id!r} was taken over by "
                    "another producer, or the coordinator aborted the transaction when "
                    "transaction.timeout.ms passed; either way its open transaction is "
                    "aborted")
            self.error = self.fatal

    def fail(self, error: BaseException) -> None:
        """A record of the transaction was refused: it can only be aborted now."""
        with self.lock:
            if self.error is None and self.in_transaction:
                self.error = error if isinstance(error, TransactionError) else \
                    TransactionAbortableError(f"a record of the transaction failed: {error}")

    def close(self) -> None:
        with self.lock:
            self._drop(self._conn)
            for conn in self._group_conns.values():
                conn.close()
            self._group_conns.clear()
            self.client.close()


def _worst_partition_code(resp: dict[str, Any], key: str = "results_by_partition") -> int:
    """The first non-zero partition error of an AddPartitionsToTxn (v0-3) or TxnOffsetCommit
    response, preferring one that is not retriable."""
    codes: list[int] = []
    if key == "results_by_partition":
        for t in resp.get("results_by_topic_v3_and_below") or ():
            codes.extend(p.get("partition_error_code", 0) for p in t.get(key) or ())
    else:
        for t in resp.get("topics") or ():
            codes.extend(p.get("error_code", 0) for p in t.get(key) or ())
    bad = [c for c in codes if c and c != ErrorCode.OPERATION_NOT_ATTEMPTED]
    final = [c for c in bad if c not in RETRY]
    return (final or bad or [0])[0]
