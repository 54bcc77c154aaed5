"""KIP-890 part 1 on a partition leader: a transactional batch that would open a transaction
on this partition is appended only once the transaction coordinator confirms that the
partition is in that producer's ongoing transaction.

Without the check, a batch that arrives after its transaction ended (a producer's late
retry, a hung request, a client that never called AddPartitionsToTxn) opens a transaction
here that no coordinator will ever end, and read_committed consumers of the partition stop
at its first offset until someone aborts it by hand (`kafkactl transactions find-hanging`).

Only the first batch of a transaction on a partition is checked: once the producer has an
open transaction here (producer state), later batches of it are not. The coordinator is
asked in process when this broker coordinates the transactional id (a standalone broker
always does), else with AddPartitionsToTxn v4 `verify_only` over the inter-broker channel,
as Kafka's AddPartitionsToTxnManager does (`transaction.partition.verification.enable=false`
turns the check off, as in Kafka). Its answer becomes the Produce error Kafka's
leader gives Produce v9 and older: INVALID_TXN_STATE when the partition is not in the
transaction, INVALID_PRODUCER_EPOCH for a fenced producer, and NOT_ENOUGH_REPLICAS
(retriable) while the coordinator cannot answer.
"""

from __future__ import annotations

import logging
import struct
from typing import TYPE_CHECKING, Any

from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kafkactl.broker.services import BrokerServices

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
_PRODUCER = struct.Struct(">qh")  # a v2 batch's producer id and epoch, at byte 43
_PRODUCER_AT = 43
_ATTRIBUTES_LOW = 22
_MAGIC = 16
_TRANSACTIONAL_FLAG = 0x10
TXN_TOPIC = "__transaction_state"
VERIFY_VERSION = 4
VERIFY_TIMEOUT_S = 10.0

# what a coordinator's answer becomes in a Produce response (v9 and older)
_AS_PRODUCE_ERROR = {
    ErrorCode.NONE: ErrorCode.NONE,
    ErrorCode.INVALID_TXN_STATE: ErrorCode.INVALID_TXN_STATE,
    ErrorCode.INVALID_PRODUCER_ID_MAPPING: ErrorCode.INVALID_TXN_STATE,
    ErrorCode.PRODUCER_FENCED: ErrorCode.INVALID_PRODUCER_EPOCH,
    ErrorCode.INVALID_PRODUCER_EPOCH: ErrorCode.INVALID_PRODUCER_EPOCH,
    ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
}


def transactional(records: Any) -> bool:
    """Whether a partition's records start with a transactional v2 batch."""
    return records is not None and len(records) > _ATTRIBUTES_LOW \
        and records[_MAGIC] >= 2 and bool(records[_ATTRIBUTES_LOW] & _TRANSACTIONAL_FLAG)


def enabled(services: BrokerServices) -> bool:
    """transaction.partition.verification.enable (Kafka's key; true by default, a dynamic
    broker config: read where dynamic changes land)."""
    value = services.config.props.get("transaction.partition.verification.enable", "true")
    return str(value).strip().lower() != "false"


def produce_error(code: ErrorCode) -> ErrorCode:
    """A coordinator's answer as a Produce error; what is not final is retriable."""
    return _AS_PRODUCE_ERROR.get(code, ErrorCode.NOT_ENOUGH_REPLICAS)


def message(code: ErrorCode, tp: TopicPartition) -> str:
    if code == ErrorCode.INVALID_TXN_STATE:
        return (f"the transaction coordinator has no ongoing transaction of this producer "
                f"with {tp[0]}-{tp[1]} in it (KIP-890): the batch is refused")
    if code == ErrorCode.INVALID_PRODUCER_EPOCH:
        return "the producer's epoch is fenced by the transaction coordinator"
    if code == ErrorCode.NOT_ENOUGH_REPLICAS:
        return ("the transaction coordinator could not confirm the transaction (KIP-890); "
                "retry")
    return code.name


def to_verify(services: BrokerServices, request: dict[str, Any]
              ) -> dict[TopicPartition, tuple[int, int]]:
    """The partitions of a Produce whose transactional batch would open a transaction here,
    with the producer id and epoch it carries."""
    out: dict[TopicPartition, tuple[int, int]] = {}
    for topic in request["topic_data"]:
        name = topic["name"]
        for pdata in topic["partition_data"]:
            records = pdata["records"]
            if not transactional(records) or len(records) < _PRODUCER_AT + _PRODUCER.size:
                continue
            index = pdata["index"]
            part = services.partitions.get_partition(name, index)
            if part is None or not part.is_leader:
                continue  # the append answers for it
            pid, epoch = _PRODUCER.unpack_from(records, _PRODUCER_AT)
            entry = part.producer_state.producers.get(pid)
            if entry is not None and entry.current_txn_first_offset >= 0 \
                    and entry.epoch == epoch:
                continue  # its transaction is open here already
            out[(name, index)] = (pid, epoch)
    return out


def verify_here(services: BrokerServices, txn_id: str,
                wanted: dict[TopicPartition, tuple[int, int]]
                ) -> dict[TopicPartition, ErrorCode] | None:
    """The coordinator's answers when this broker coordinates `txn_id`; None otherwise."""
    coordinator = services.txn_coordinator
    if coordinator.check(txn_id) != ErrorCode.NONE:
        return None
    out: dict[TopicPartition, ErrorCode] = {}
    for (pid, epoch), tps in _by_producer(wanted).items():
        out.update(coordinator.verify_partitions(txn_id, pid, epoch, tps))
    return out


def _by_producer(wanted: dict[TopicPartition, tuple[int, int]]
                 ) -> dict[tuple[int, int], list[TopicPartition]]:
    out: dict[tuple[int, int], list[TopicPartition]] = {}
    for tp, producer in wanted.items():
        out.setdefault(producer, []).append(tp)
    return out


async def verify_remote(services: BrokerServices, txn_id: str,
                        wanted: dict[TopicPartition, tuple[int, int]]
                        ) -> dict[TopicPartition, ErrorCode]:
    """Ask the coordinator of `txn_id` on another broker (AddPartitionsToTxn v4,
    verify_only); a coordinator that cannot be found or reached: COORDINATOR_NOT_AVAILABLE
    for every partition (the producer retries)."""
    from kafkactl.cluster.broker_connection import request_once

    unavailable = dict.fromkeys(wanted, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    cluster = services.cluster
    if cluster is None:
        return unavailable
    p = services.txn_coordinator.coordinator_for(txn_id)
    state = services.metadata_cache.partition(TXN_TOPIC, p)
    leader = cluster.cache.broker(state.leader) if state is not None else None
    address = leader.endpoint(cluster.inter_broker.listener) if leader is not None else None
    if address is None:
        return unavailable
    out: dict[TopicPartition, ErrorCode] = {}
    for (pid, epoch), tps in _by_producer(wanted).items():
        topics: dict[str, list[int]] = {}
        for name, index in tps:
            topics.setdefault(name, []).append(index)
        body = {"transactions": [{
            "transactional_id": txn_id, "producer_id": pid, "producer_epoch": epoch,
            "verify_only": True,
            "topics": [{"name": n, "partitions": ps} for n, ps in topics.items()]}]}
        try:
            resp = await request_once(*address, ApiKey.ADD_PARTITIONS_TO_TXN, VERIFY_VERSION,
                                      body, client_id=f"kafkactl-broker-{services.broker_id}",
                                      timeout_s=VERIFY_TIMEOUT_S,
                                      security=cluster.inter_broker)
        except (OSError, EOFError, TimeoutError) as e:
            log.info("cannot verify transaction %s with broker %s: %s: %s", txn_id,
                     getattr(leader, "node_id", "?"), type(e).__name__, e)
            out.update(dict.fromkeys(tps, ErrorCode.COORDINATOR_NOT_AVAILABLE))
            continue
        if resp.get("error_code", 0) != ErrorCode.NONE:
            out.update(dict.fromkeys(tps, ErrorCode(resp["error_code"])))
            continue
        answered: dict[TopicPartition, ErrorCode] = {}
        for t in resp.get("results_by_transaction") or ():
            for topic in t.get("topic_results") or ():
                for r in topic.get("results_by_partition") or ():
                    answered[(topic["name"], r["partition_index"])] = \
                        ErrorCode(r["partition_error_code"])
        out.update({tp: answered.get(tp, ErrorCode.COORDINATOR_NOT_AVAILABLE) for tp in tps})
    return out
