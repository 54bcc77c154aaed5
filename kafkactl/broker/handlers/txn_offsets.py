"""TxnOffsetCommit (28): a transactional producer commits a consumer group's offsets in its
transaction (KIP-98; KIP-447 adds the member's generation, member id and instance id in
v3+). The group coordinator writes them to __consumer_offsets as a transactional batch of
the producer and keeps them pending until the transaction's marker: COMMIT makes them the
group's committed offsets, ABORT drops them (GroupCoordinator.handle_txn_completion).

When this broker coordinates the transactional.id too, the producer's transaction must
hold the group's __consumer_offsets partition (AddOffsetsToTxn came first; KIP-890's
verification): otherwise INVALID_TXN_STATE (CONCURRENT_TRANSACTIONS while it completes,
INVALID_PRODUCER_EPOCH for a fenced producer) and nothing is written, so a stray commit
cannot open a transaction no coordinator will ever end. (A transactional.id coordinated
by another broker of a cluster is not verified.)

With an authorizer, as Kafka: Write on the TRANSACTIONAL_ID (else every partition answers
TRANSACTIONAL_ID_AUTHORIZATION_FAILED), Read on the group (GROUP_AUTHORIZATION_FAILED),
Read on each topic (TOPIC_AUTHORIZATION_FAILED for that topic's partitions).
"""

from __future__ import annotations

from typing import Any

from kafkactl.broker.coordinator.group import OffsetAndMetadata
from kafkactl.broker.coordinator.group_metadata_manager import OFFSETS_TOPIC
from kafkactl.broker.request_handler import RequestContext
from kafkactl.broker.security.acl import AclOperation, ResourceType
from kafkactl.broker.security.checks import authorize, authorize_group, unauthorized_topics
from kafkactl.broker.services import BrokerServices
from kafkactl.protocol.errors import ErrorCode

TopicPartition = tuple[str, int]


def _answer(errors: dict[TopicPartition, ErrorCode]) -> dict[str, Any]:
    topics: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), code in errors.items():
        topics.setdefault(topic, []).append({"partition_index": partition, "error_code": code})
    return {"throttle_time_ms": 0, "topics": [
        {"name": name, "partitions": parts} for name, parts in topics.items()]}


def handle_txn_offset_commit(services: BrokerServices, ctx: RequestContext,
                             request: dict[str, Any]) -> dict[str, Any]:
    coordinator = services.group_coordinator
    now = coordinator.now_ms()
    offsets: dict[TopicPartition, OffsetAndMetadata] = {}
    for t in request.get("topics") or ():
        for p in t.get("partitions") or ():
            offsets[(t["name"], p["partition_index"])] = OffsetAndMetadata(
                p["committed_offset"], p.get("committed_leader_epoch", -1),
                p.get("committed_metadata") or "", now)
    group_id = request.get("group_id") or ""
    txn_id = request.get("transactional_id") or ""
    if not authorize(services, ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, txn_id):
        return _answer(dict.fromkeys(offsets, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
    if not authorize_group(services, ctx, AclOperation.READ, group_id):
        return _answer(dict.fromkeys(offsets, ErrorCode.GROUP_AUTHORIZATION_FAILED))
    refused = unauthorized_topics(services, ctx, AclOperation.READ, (t for t, _p in offsets))
    denied = {tp: ErrorCode.TOPIC_AUTHORIZATION_FAILED for tp in offsets if tp[0] in refused}
    allowed = {tp: o for tp, o in offsets.items() if tp not in denied}
    errors: dict[TopicPartition, ErrorCode] = {}
    refusal = _verify(services, txn_id, request["producer_id"], request["producer_epoch"],
                      group_id) if allowed else ErrorCode.NONE
    if refusal != ErrorCode.NONE:
        errors = dict.fromkeys(allowed, refusal)
    elif allowed:
        errors = coordinator.commit_txn_offsets(
            group_id, request["producer_id"], request["producer_epoch"],
            request.get("generation_id", -1), request.get("member_id") or "",
            request.get("group_instance_id"), allowed)
    return _answer({**errors, **denied})


def _verify(services: BrokerServices, txn_id: str, producer_id: int, producer_epoch: int,
            group_id: str) -> ErrorCode:
    """KIP-890's check, when the transaction coordinator is this broker: the group's
    offsets partition is in the producer's ongoing transaction."""
    txns = getattr(services, "txn_coordinator", None)
    if txns is None or not group_id or txns.check(txn_id) != ErrorCode.NONE:
        return ErrorCode.NONE
    tp = (OFFSETS_TOPIC, services.group_coordinator.coordinator_for(group_id))
    code = txns.verify_partitions(txn_id, producer_id, producer_epoch, [tp])[tp]
    if code == ErrorCode.PRODUCER_FENCED:  # TxnOffsetCommit's name for it
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return ErrorCode(code)
