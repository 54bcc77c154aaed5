"""Transaction APIs: AddPartitionsToTxn (24), AddOffsetsToTxn (25), EndTxn (26),
WriteTxnMarkers (27), DescribeProducers (61), DescribeTransactions (65), ListTransactions
(66). InitProducerId with a transactional id is in producer_id.py, FindCoordinator key type
1 in groups.py.

Thin adapters over kafkactl.broker.coordinator.transaction_coordinator, with Kafka's
authorization (KafkaApis): Write on the TRANSACTIONAL_ID for AddPartitions / AddOffsets /
EndTxn (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), Write on each topic added
(TOPIC_AUTHORIZATION_FAILED; internal topics are never added by a client), Read on the
group for AddOffsetsToTxn, ClusterAction for WriteTxnMarkers and AddPartitionsToTxn v4+
(sent by brokers), Describe on the TRANSACTIONAL_ID for DescribeTransactions /
ListTransactions (the others are left out), Read on the topic for DescribeProducers.
PRODUCER_FENCED is INVALID_PRODUCER_EPOCH for the versions before it existed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafkactl.broker.coordinator.group_metadata_manager import OFFSETS_TOPIC
from kafkactl.broker.coordinator.transaction_metadata import TopicPartition, TxnMetadata
from kafkactl.broker.eager import eager
from kafkactl.broker.request_handler import RequestContext
from kafkactl.broker.security.acl import AclOperation, ResourceType
from kafkactl.broker.security.checks import authorize, authorize_cluster, authorize_topic
from kafkactl.broker.services import BrokerServices
from kafkactl.protocol.errors import ErrorCode
from kafkactl.protocol.internal_topics import INTERNAL_TOPICS

if TYPE_CHECKING:
    from kafkactl.broker.partition import Partition

def fenced_code(code: ErrorCode, version: int, first_version: int) -> ErrorCode:
    """PRODUCER_FENCED as INVALID_PRODUCER_EPOCH before the version that knows it."""
    if code == ErrorCode.PRODUCER_FENCED and version < first_version:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return code


def _may_write_txn_id(services: BrokerServices, ctx: RequestContext, txn_id: str) -> bool:
    return authorize(services, ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, txn_id)


def _may_describe_txn_id(services: BrokerServices, ctx: RequestContext, txn_id: str) -> bool:
    return authorize(services, ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID,
                     txn_id)


# ---- AddPartitionsToTxn ---------------------------------------------------------------------
def _topic_results(errors: dict[TopicPartition, ErrorCode]) -> list[dict[str, Any]]:
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, p), code in errors.items():
        by_topic.setdefault(topic, []).append({"partition_index": p,
                                               "partition_error_code": code})
    return [{"name": t, "results_by_partition": ps} for t, ps in by_topic.items()]


def _partitions(topics: list[dict[str, Any]] | None) -> list[TopicPartition]:
    return [(t["name"], p) for t in topics or () for p in t.get("partitions") or ()]


async def _add_one(services: BrokerServices, ctx: RequestContext, txn_id: str, pid: int,
                   epoch: int, tps: list[TopicPartition], *, from_client: bool,
                   verify_only: bool = False) -> dict[TopicPartition, ErrorCode]:
    coordinator = services.txn_coordinator
    if verify_only:
        return coordinator.verify_partitions(txn_id, pid, epoch, tps)
    if from_client and not _may_write_txn_id(services, ctx, txn_id):
        return dict.fromkeys(tps, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    refused: dict[TopicPartition, ErrorCode] = {}
    allowed: list[TopicPartition] = []
    cache = services.metadata_cache
    for tp in tps:
        topic = tp[0]
        if from_client and (topic in INTERNAL_TOPICS or
                            not authorize_topic(services, ctx, AclOperation.WRITE, topic)):
            refused[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif cache.partition(*tp) is None:
            refused[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        else:
            allowed.append(tp)
    if refused:  # one bad partition fails the whole request; the others are not tried
        return {**refused, **dict.fromkeys(allowed, ErrorCode.OPERATION_NOT_ATTEMPTED)}
    code = await coordinator.add_partitions(txn_id, pid, epoch, tps)
    return dict.fromkeys(tps, code)


def handle_add_partitions_to_txn(services: BrokerServices, ctx: RequestContext,
                                 request: dict[str, Any]) -> Any:
    return eager(_add_partitions_to_txn(services, ctx, request))


async def _add_partitions_to_txn(services: BrokerServices, ctx: RequestContext,
                                 request: dict[str, Any]) -> dict[str, Any]:
    v = ctx.api_version
    if v <= 3:
        tps = _partitions(request.get("v3_and_below_topics"))
        errors = await _add_one(services, ctx, request["v3_and_below_transactional_id"],
                                request["v3_and_below_producer_id"],
                                request["v3_and_below_producer_epoch"], tps, from_client=True)
        errors = {tp: fenced_code(c, v, 2) for tp, c in errors.items()}
        return {"throttle_time_ms": 0, "results_by_topic_v3_and_below": _topic_results(errors)}
    # v4+: from brokers (KIP-890), batched over transactions
    if not authorize_cluster(services, ctx, AclOperation.CLUSTER_ACTION):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                "results_by_transaction": []}
    results = []
    for t in request.get("transactions") or ():
        tps = _partitions(t.get("topics"))
        errors = await _add_one(services, ctx, t["transactional_id"], t["producer_id"],
                                t["producer_epoch"], tps, from_client=False,
                                verify_only=bool(t.get("verify_only")))
        results.append({"transactional_id": t["transactional_id"],
                        "topic_results": _topic_results(errors)})
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE,
            "results_by_transaction": results}


# ---- AddOffsetsToTxn ------------------------------------------------------------------------
def handle_add_offsets_to_txn(services: BrokerServices, ctx: RequestContext,
                              request: dict[str, Any]) -> Any:
    return eager(_add_offsets_to_txn(services, ctx, request))


async def _add_offsets_to_txn(services: BrokerServices, ctx: RequestContext,
                              request: dict[str, Any]) -> dict[str, Any]:
    txn_id, group_id = request["transactional_id"], request["group_id"]

    def answer(code: ErrorCode) -> dict[str, Any]:
        return {"throttle_time_ms": 0, "error_code": fenced_code(code, ctx.api_version, 2)}

    if not _may_write_txn_id(services, ctx, txn_id):
        return answer(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not authorize(services, ctx, AclOperation.READ, ResourceType.GROUP, group_id):
        return answer(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    groups = services.group_coordinator
    if not groups.manager.topic_exists():  # the markers need its partitions
        try:
            await services.topic_admin.call(groups.manager.ensure_topic, timeout_s=0)
        except Exception:  # noqa: BLE001 - retriable for the client
            return answer(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    tp = (OFFSETS_TOPIC, groups.coordinator_for(group_id))
    code = await services.txn_coordinator.add_partitions(
        txn_id, request["producer_id"], request["producer_epoch"], [tp])
    return answer(code)


# ---- EndTxn ---------------------------------------------------------------------------------
def handle_end_txn(services: BrokerServices, ctx: RequestContext,
                   request: dict[str, Any]) -> Any:
    return eager(_end_txn(services, ctx, request))


async def _end_txn(services: BrokerServices, ctx: RequestContext,
                   request: dict[str, Any]) -> dict[str, Any]:
    txn_id = request["transactional_id"]
    if not _may_write_txn_id(services, ctx, txn_id):
        code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    else:
        code = await services.txn_coordinator.end_txn(
            txn_id, request["producer_id"], request["producer_epoch"],
            commit=bool(request["committed"]))
    return {"throttle_time_ms": 0, "error_code": fenced_code(code, ctx.api_version, 2)}


# ---- WriteTxnMarkers ------------------------------------------------------------------------
async def handle_write_txn_markers(services: BrokerServices, ctx: RequestContext,
                                   request: dict[str, Any]) -> dict[str, Any]:
    allowed = authorize_cluster(services, ctx, AclOperation.CLUSTER_ACTION)
    writer = services.txn_coordinator.writer
    markers = []
    for m in request.get("markers") or ():
        tps = [(t["name"], p) for t in m.get("topics") or ()
               for p in t.get("partition_indexes") or ()]
        if not allowed:
            errors = dict.fromkeys(tps, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        else:
            errors = await writer.write(m["producer_id"], m["producer_epoch"],
                                        m["coordinator_epoch"], bool(m["transaction_result"]),
                                        tps)
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (topic, p), code in errors.items():
            by_topic.setdefault(topic, []).append({"partition_index": p, "error_code": code})
        markers.append({"producer_id": m["producer_id"], "topics": [
            {"name": t, "partitions": ps} for t, ps in by_topic.items()]})
    return {"markers": markers}


# ---- DescribeTransactions / ListTransactions ------------------------------------------------
def _describe_one(services: BrokerServices, ctx: RequestContext, txn_id: str
                  ) -> dict[str, Any]:
    entry: dict[str, Any] = {"error_code": ErrorCode.NONE, "transactional_id": txn_id,
                             "transaction_state": "", "transaction_timeout_ms": 0,
                             "transaction_start_time_ms": -1, "producer_id": -1,
                             "producer_epoch": -1, "topics": []}
    if not _may_describe_txn_id(services, ctx, txn_id):
        entry["error_code"] = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        return entry
    code, txn = services.txn_coordinator.describe(txn_id)
    if txn is None:
        entry["error_code"] = code
        return entry
    by_topic: dict[str, list[int]] = {}
    for topic, p in sorted(txn.partitions):
        if authorize_topic(services, ctx, AclOperation.DESCRIBE, topic):
            by_topic.setdefault(topic, []).append(p)
    entry.update(transaction_state=txn.state.kafka_name, transaction_timeout_ms=txn.timeout_ms,
                 transaction_start_time_ms=txn.start_ms, producer_id=txn.producer_id,
                 producer_epoch=txn.producer_epoch,
                 topics=[{"topic": t, "partitions": ps} for t, ps in by_topic.items()])
    return entry


def handle_describe_transactions(services: BrokerServices, ctx: RequestContext,
                                 request: dict[str, Any]) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "transaction_states": [
        _describe_one(services, ctx, t) for t in request.get("transactional_ids") or ()]}


def handle_list_transactions(services: BrokerServices, ctx: RequestContext,
                             request: dict[str, Any]) -> dict[str, Any]:
    code, unknown, txns = services.txn_coordinator.list(
        request.get("state_filters") or (), request.get("producer_id_filters") or (),
        request.get("duration_filter", -1) if ctx.api_version >= 1 else -1)
    visible: list[TxnMetadata] = [t for t in txns
                                  if _may_describe_txn_id(services, ctx, t.transactional_id)]
    return {"throttle_time_ms": 0, "error_code": code, "unknown_state_filters": unknown,
            "transaction_states": [{"transactional_id": t.transactional_id,
                                    "producer_id": t.producer_id,
                                    "transaction_state": t.state.kafka_name}
                                   for t in visible]}


# ---- DescribeProducers ----------------------------------------------------------------------
def _hosted_replica(services: BrokerServices, topic: str, p: int
                    ) -> tuple[Partition | None, ErrorCode]:
    """(this broker's replica of topic-p, NONE), leader or follower: Kafka answers
    DescribeProducers from any online replica (a follower rebuilds its producer state from
    the batches it appends), which `kafka-transactions describe-producers --broker-id` asks.
    Otherwise (None, KAFKA_STORAGE_ERROR) for a replica in an offline log dir,
    NOT_LEADER_OR_FOLLOWER when the cluster has the partition on other brokers only,
    UNKNOWN_TOPIC_OR_PARTITION when nobody has it (ReplicaManager.getPartitionOrError)."""
    replicas = services.replica_manager
    part = replicas.partitions.get_partition(topic, p)
    if part is not None:
        return part, ErrorCode.NONE
    if (topic, p) in replicas.partitions.offline:
        return None, ErrorCode.KAFKA_STORAGE_ERROR
    if replicas.cache.partition(topic, p) is not None:
        return None, ErrorCode.NOT_LEADER_OR_FOLLOWER
    return None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def _producers_of(services: BrokerServices, ctx: RequestContext, topic: str, p: int
                  ) -> dict[str, Any]:
    entry: dict[str, Any] = {"partition_index": p, "error_code": ErrorCode.NONE,
                             "error_message": None, "active_producers": []}
    if not authorize_topic(services, ctx, AclOperation.READ, topic):
        entry["error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        return entry
    part, code = _hosted_replica(services, topic, p)
    if part is None:
        entry["error_code"] = code
        return entry
    producers = []
    for pid, e in sorted(part.producer_state.producers.items()):
        producers.append({
            "producer_id": pid, "producer_epoch": e.epoch, "last_sequence": e.last_seq,
            "last_timestamp": e.last_timestamp,
            "coordinator_epoch": getattr(e, "coordinator_epoch", -1),
            "current_txn_start_offset": getattr(e, "current_txn_first_offset", -1)})
    entry["active_producers"] = producers
    return entry


def handle_describe_producers(services: BrokerServices, ctx: RequestContext,
                              request: dict[str, Any]) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "topics": [
        {"name": t["name"], "partitions": [
            _producers_of(services, ctx, t["name"], p) for p in t.get("partition_indexes") or ()]}
        for t in request.get("topics") or ()]}


__all__ = ["fenced_code", "handle_add_offsets_to_txn",
           "handle_add_partitions_to_txn", "handle_describe_producers",
           "handle_describe_transactions", "handle_end_txn", "handle_list_transactions",
           "handle_write_txn_markers"]
