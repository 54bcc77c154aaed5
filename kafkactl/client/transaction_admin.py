"""Transactions through the Kafka protocol, as Kafka's Admin client and kafka-transactions
tool do them (KIP-664): ListTransactions (every broker), DescribeTransactions (the id's
coordinator, from FindCoordinator key type 1), DescribeProducers (each partition's leader,
or a broker named), hanging transactions (open on a partition their coordinator does not
list among the transaction's partitions, as kafka-transactions find-hanging decides) and
their abort (WriteTxnMarkers ABORT to the partition's leader, with the producer's epoch and
coordinator epoch, as Admin.abortTransaction does).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

from kafkactl.client.errors import (
    COORDINATOR_RETRIABLE,
    ClientError,
    KafkaConnectionError,
    KafkaTimeoutError,
)
from kafkactl.client.kafka_client import KafkaClient
from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.errors import ErrorCode

TRANSACTION_KEY_TYPE = 1
DEFAULT_MAX_TRANSACTION_TIMEOUT_MS = 15 * 60 * 1000  # transaction.max.timeout.ms default
# The states a ListTransactions state filter may name (Kafka's admin TransactionState, less
# its client-side UNKNOWN; Dead ids are never listed).
TRANSACTION_STATES = ("Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit",
                      "CompleteAbort", "PrepareEpochFence")


def transaction_state(name: str) -> str | None:
    """The state `name` names, spelled as the brokers know it (any case), or None."""
    return next((s for s in TRANSACTION_STATES if s.lower() == name.lower()), None)


@dataclass(frozen=True)
class TransactionListing:
    transactional_id: str
    coordinator: int
    producer_id: int
    state: str


@dataclass(frozen=True)
class TransactionDescription:
    transactional_id: str
    coordinator: int
    state: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    start_time_ms: int  # -1: no transaction started
    partitions: list[tuple[str, int]] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["partitions"] = [{"topic": t, "partition": p} for t, p in self.partitions]
        return out


@dataclass(frozen=True)
class ProducerState:
    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int  # -1: no open transaction


class _CoordinatorMoving(ClientError):
    """NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS: ask again."""


class TransactionalIdNotFound(ClientError):
    """DescribeTransactions' TRANSACTIONAL_ID_NOT_FOUND: the coordinator has no such id."""


def _check(code: int, what: str, message: str | None = None) -> None:
    if code:
        try:
            name = ErrorCode(code).name
        except ValueError:
            name = str(code)
        error = _CoordinatorMoving if code in COORDINATOR_RETRIABLE else ClientError
        raise error(f"{what}: {name}" + (f": {message}" if message else ""))


T = TypeVar("T")


class TransactionAdmin:
    def __init__(self, client: KafkaClient) -> None:
        self.client = client

    def _retrying(self, call: Callable[[], T]) -> T:
        """`call()`, again while a broker it needs cannot be reached or a coordinator is
        moving (a killed broker is in the metadata until its session expires, its
        transactions' new coordinator loads them), until the request timeout, as Kafka's
        admin client retries until default.api.timeout.ms."""
        deadline = time.monotonic() + self.client.request_timeout
        while True:
            try:
                return call()
            except (KafkaConnectionError, KafkaTimeoutError, _CoordinatorMoving) as e:
                if time.monotonic() + self.client.retry_backoff >= deadline:
                    raise ClientError(f"{e} (still so after {self.client.request_timeout:g} "
                                      "s: a broker may be down)") from None
            time.sleep(self.client.retry_backoff)
            self.client.cluster.invalidate()

    def _brokers(self) -> list[int]:
        cluster = self.client.refresh_metadata([])
        return sorted(cluster.brokers)

    # ---- ListTransactions ---------------------------------------------------------------
    def list_transactions(self, states: Iterable[str] = (), producer_ids: Iterable[int] = (),
             min_duration_ms: int = -1) -> list[TransactionListing]:
        """Every broker's transactions (each coordinates those of the __transaction_state
        partitions it leads)."""
        return self.list_transactions_and_unknown_states(states, producer_ids,
                                                         min_duration_ms)[0]

    def list_transactions_and_unknown_states(
            self, states: Iterable[str] = (), producer_ids: Iterable[int] = (),
            min_duration_ms: int = -1) -> tuple[list[TransactionListing], dict[int, list[str]]]:
        """list_transactions, and the state filters each broker did not know (its
        unknown_state_filters: it matched no transaction with them)."""
        body = {"state_filters": list(states), "producer_id_filters": list(producer_ids),
                "duration_filter": min_duration_ms}

        def listing() -> tuple[list[TransactionListing], dict[int, list[str]]]:
            out: list[TransactionListing] = []
            unknown: dict[int, list[str]] = {}
            for node in self._brokers():
                resp = self.client.connection(node).request(ApiKey.LIST_TRANSACTIONS, body)
                _check(resp["error_code"], f"list transactions on broker {node}")
                if resp.get("unknown_state_filters"):
                    unknown[node] = list(resp["unknown_state_filters"])
                out.extend(TransactionListing(t["transactional_id"], node, t["producer_id"],
                                              t["transaction_state"])
                           for t in resp.get("transaction_states") or ())
            return sorted(out, key=lambda t: t.transactional_id), unknown

        return self._retrying(listing)

    # ---- DescribeTransactions -------------------------------------------------------------
    def coordinator(self, transactional_id: str) -> int:
        conn = self.client.any_connection()
        version = conn.version_for(ApiKey.FIND_COORDINATOR)
        if version >= 4:
            resp = conn.request(ApiKey.FIND_COORDINATOR, {
                "key_type": TRANSACTION_KEY_TYPE, "coordinator_keys": [transactional_id]})
            entry = resp["coordinators"][0]
        else:
            entry = conn.request(ApiKey.FIND_COORDINATOR, {
                "key": transactional_id, "key_type": TRANSACTION_KEY_TYPE})
        _check(entry["error_code"], f"find the coordinator of {transactional_id}",
               entry.get("error_message"))
        self.client.refresh_metadata([])
        return int(entry["node_id"])

    def describe(self, transactional_id: str) -> TransactionDescription:
        return self._retrying(lambda: self._describe(transactional_id))

    def _describe(self, transactional_id: str) -> TransactionDescription:
        node = self.coordinator(transactional_id)
        try:
            resp = self.client.connection(node).request(
                ApiKey.DESCRIBE_TRANSACTIONS, {"transactional_ids": [transactional_id]})
        except KafkaConnectionError as e:
            raise KafkaConnectionError(f"the coordinator of {transactional_id}, broker "
                                       f"{node}: {e}") from None
        t = resp["transaction_states"][0]
        if t["error_code"] == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND:
            raise TransactionalIdNotFound(f"describe transaction {transactional_id}: "
                                          "TRANSACTIONAL_ID_NOT_FOUND")
        _check(t["error_code"], f"describe transaction {transactional_id}")
        return TransactionDescription(
            transactional_id, node, t["transaction_state"], t["producer_id"],
            t["producer_epoch"], t["transaction_timeout_ms"], t["transaction_start_time_ms"],
            [(tp["topic"], p) for tp in t.get("topics") or () for p in tp["partitions"]])

    # ---- DescribeProducers ----------------------------------------------------------------
    def producers(self, partitions: Iterable[tuple[str, int]], broker_id: int | None = None
                  ) -> list[ProducerState]:
        """The active producers of each partition, asked of its leader, or of broker
        `broker_id` (as Kafka's DescribeProducersOptions.brokerId: any broker hosting a
        replica answers from its own log, a follower as well; one with no replica answers
        NOT_LEADER_OR_FOLLOWER)."""
        wanted = list(partitions)
        cluster = self.client.refresh_metadata(sorted({t for t, _ in wanted}))
        if broker_id is not None and broker_id not in cluster.brokers:
            raise ClientError(f"broker {broker_id} is not in the cluster (brokers: "
                              f"{', '.join(map(str, sorted(cluster.brokers))) or 'none'})")
        by_broker: dict[int, dict[str, list[int]]] = {}
        for topic, p in wanted:
            node = cluster.leader_for(topic, p) if broker_id is None else broker_id
            if node < 0:
                raise ClientError(f"{topic}-{p} has no leader (unknown partition?)")
            by_broker.setdefault(node, {}).setdefault(topic, []).append(p)
        out: list[ProducerState] = []
        for node, topics in by_broker.items():
            resp = self.client.connection(node).request(ApiKey.DESCRIBE_PRODUCERS, {
                "topics": [{"name": t, "partition_indexes": ps} for t, ps in topics.items()]})
            on = "" if broker_id is None else f" on broker {broker_id}"
            for t in resp.get("topics") or ():
                for pr in t.get("partitions") or ():
                    _check(pr["error_code"], f"describe producers of {t['name']}-"
                           f"{pr['partition_index']}{on}", pr.get("error_message"))
                    out.extend(ProducerState(
                        t["name"], pr["partition_index"], s["producer_id"], s["producer_epoch"],
                        s["last_sequence"], s["last_timestamp"], s["coordinator_epoch"],
                        s["current_txn_start_offset"]) for s in pr.get("active_producers") or ())
        return out

    def partitions_of(self, topic: str | None, partition: int | None,
                      broker_id: int | None) -> list[tuple[str, int]]:
        """The partitions named (a topic, one partition of it) or those a broker hosts (of the
        topic given, if one is): as kafka-transactions find-hanging picks them, a partition
        named is taken whether or not `broker_id` hosts it (the broker then refuses)."""
        cluster = self.client.refresh_metadata([topic] if topic else None)
        out = []
        named = False  # the topic (and partition) given exist
        for name, t in cluster.topics.items():
            if topic is not None and name != topic:
                continue
            for p, meta in t.partitions.items():
                if partition is not None and p != partition:
                    continue
                named = True
                if broker_id is not None and partition is None and \
                        broker_id not in meta.replicas:
                    continue
                out.append((name, p))
        if topic is not None and not named:
            raise ClientError(f"unknown topic or partition {topic}"
                              + ("" if partition is None else f"-{partition}"))
        return sorted(out)

    # ---- hanging transactions -------------------------------------------------------------
    def find_hanging(self, partitions: Iterable[tuple[str, int]],
                     max_transaction_timeout_ms: int = DEFAULT_MAX_TRANSACTION_TIMEOUT_MS,
                     broker_id: int | None = None) -> list[ProducerState]:
        """Open transactions older than the longest allowed transaction (their producer's
        last write) whose coordinator does not list that partition among the transaction's,
        as kafka-transactions find-hanging decides (filterHangingTransactions): the
        partitions DescribeTransactions gives are those of an Ongoing transaction and,
        PrepareCommit / PrepareAbort, those still waiting for their marker, whatever the
        producer epoch. A producer id no coordinator lists, or whose transactional id its
        coordinator does not know, is hanging. The partitions' producers are asked of their
        leaders, or all of broker `broker_id` (Kafka's DescribeProducersOptions.brokerId)."""
        now = int(time.time() * 1000)
        candidates = [s for s in self.producers(partitions, broker_id)
                      if s.current_txn_start_offset >= 0 and
                      now - s.last_timestamp > max_transaction_timeout_ms]
        if not candidates:
            return []
        producer_ids = {s.producer_id for s in candidates}
        txn_ids: dict[int, str] = {}
        for t in self.list_transactions(producer_ids=producer_ids):
            if t.producer_id in producer_ids:
                txn_ids[t.producer_id] = t.transactional_id
        described: dict[str, TransactionDescription | None] = {}
        for txn_id in sorted(set(txn_ids.values())):
            try:
                described[txn_id] = self.describe(txn_id)
            except TransactionalIdNotFound:
                described[txn_id] = None  # (any other failure ends the search, as Kafka's)
        hanging = []
        for s in candidates:
            known_id = txn_ids.get(s.producer_id)
            d = None if known_id is None else described[known_id]
            if d is None or (s.topic, s.partition) not in d.partitions:
                hanging.append(s)
        return hanging

    # ---- abort ----------------------------------------------------------------------------
    def abort(self, topic: str, partition: int, producer_id: int, producer_epoch: int,
              coordinator_epoch: int) -> None:
        """Write an ABORT marker for the producer's open transaction on the partition (the
        leader refuses a stale producer or coordinator epoch)."""
        cluster = self.client.refresh_metadata([topic])
        leader = cluster.leader_for(topic, partition)
        if leader < 0:
            raise ClientError(f"{topic}-{partition} has no leader (unknown partition?)")
        resp = self.client.connection(leader).request(ApiKey.WRITE_TXN_MARKERS, {"markers": [{
            "producer_id": producer_id, "producer_epoch": producer_epoch,
            "transaction_result": False, "coordinator_epoch": coordinator_epoch,
            "topics": [{"name": topic, "partition_indexes": [partition]}]}]})
        for m in resp.get("markers") or ():
            for t in m.get("topics") or ():
                for pr in t.get("partitions") or ():
                    _check(pr["error_code"], f"abort the transaction of producer "
                           f"{producer_id} on {topic}-{partition}")

    def abort_at(self, topic: str, partition: int, start_offset: int) -> ProducerState:
        """Abort the open transaction that starts at `start_offset` of the partition."""
        match = [s for s in self.producers([(topic, partition)])
                 if s.current_txn_start_offset == start_offset]
        if not match:
            raise ClientError(f"no open transaction starts at offset {start_offset} of "
                              f"{topic}-{partition}")
        s = match[0]
        self.abort(topic, partition, s.producer_id, s.producer_epoch,
                   max(s.coordinator_epoch, 0))
        return s
