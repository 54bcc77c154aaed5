"""Produce (key 0): acks 0 / 1 / -1. With acks=-1 (all) a replicated partition answers
once its high watermark passes the appended records (every in-sync replica has them), or
REQUEST_TIMED_OUT after the request's timeout_ms; the request waits in the produce
purgatory, not in a thread or a polling loop. Fewer in-sync replicas than the topic's
min.insync.replicas: NOT_ENOUGH_REPLICAS, nothing appended.

A partition's error carries `error_message` (v8+) and, when the validator names records
(Kafka's RecordValidationException: a null key on a compacted topic), one `record_errors`
entry per offending record (its index in the batch and why), so that clients fail exactly
those records. Clients may not write to internal topics (INVALID_TOPIC_EXCEPTION): only the
broker's own coordinators append there.

Transactional batches (KIP-98) are accepted; a request carrying them needs its
transactional_id and, with an authorizer, Write on that TRANSACTIONAL_ID (else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every partition, nothing appended, as Kafka).
Control batches (transaction markers) come only from the coordinator: a client's is
INVALID_RECORD (log/validator.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Collection
from typing import Any

from kafkactl.broker import txn_verification
from kafkactl.broker.request_handler import RequestContext
from kafkactl.broker.security.acl import AclOperation, ResourceType
from kafkactl.broker.security.checks import authorize, unauthorized_topics
from kafkactl.broker.services import BrokerServices
from kafkactl.protocol.errors import ErrorCode
from kafkactl.protocol.internal_topics import INTERNAL_TOPICS

_ACKS = frozenset({0, 1, -1})
_NO_TOPICS: frozenset[str] = frozenset()


def _has_transactional_records(request: dict[str, Any]) -> bool:
    """Kafka's hasTransactionalRecords: the first batch of some partition is
    transactional."""
    transactional = txn_verification.transactional
    for topic in request["topic_data"]:
        for pdata in topic["partition_data"]:
            if transactional(pdata["records"]):
                return True
    return False


def _txn_refusal(services: BrokerServices, ctx: RequestContext, request: dict[str, Any]
                 ) -> str | None:
    """Why a Produce carrying transactional batches may not write them, or None."""
    txn_id = request.get("transactional_id")
    if txn_id is None:
        return "transactional records need a transactional_id"
    if not authorize(services, ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, txn_id):
        return f"Not authorized to write with transactional id {txn_id}"
    return None


def _refusal(name: str, index: int, acks: int, txn_refused: str | None,
             refused: Collection[str],
             unverified: dict[tuple[str, int], tuple[ErrorCode, str]]
             ) -> tuple[ErrorCode, str] | None:
    """The error a partition of a Produce gets before anything is appended, in Kafka's
    order, or None."""
    if txn_refused is not None:
        return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, txn_refused
    if name in refused:
        return (ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                "Not authorized to access topics: [" + name + "]")
    if acks not in (0, 1, -1):
        return ErrorCode.INVALID_REQUIRED_ACKS, f"acks must be 0, 1 or -1, not {acks}"
    if name in INTERNAL_TOPICS:
        return ErrorCode.INVALID_TOPIC_EXCEPTION, f"Cannot append to internal topic {name}"
    return unverified.get((name, index))


def _error(index: int, code: ErrorCode, message: str) -> dict[str, Any]:
    return {"index": index, "error_code": code, "base_offset": -1, "error_message": message}


def handle_produce(services: BrokerServices, ctx: RequestContext, request: dict[str, Any]
                   ) -> dict[str, Any] | None | Awaitable[dict[str, Any] | None]:
    txn_id = request.get("transactional_id")
    transactional = _has_transactional_records(request)
    if txn_id is not None and transactional \
            and _txn_refusal(services, ctx, request) is None \
            and txn_verification.enabled(services):
        # KIP-890: a batch that would open a transaction here, checked with its coordinator
        wanted = txn_verification.to_verify(services, request)
        if wanted:
            answers = txn_verification.verify_here(services, txn_id, wanted)
            if answers is None:
                return _verify_then_produce(services, ctx, request, txn_id, wanted)
            return _produce(services, ctx, request, _refusals(answers), transactional)
    return _produce(services, ctx, request, {}, transactional)


def _refusals(answers: dict[tuple[str, int], ErrorCode]
              ) -> dict[tuple[str, int], tuple[ErrorCode, str]]:
    out: dict[tuple[str, int], tuple[ErrorCode, str]] = {}
    for tp, code in answers.items():
        error = txn_verification.produce_error(code)
        if error != ErrorCode.NONE:
            out[tp] = (error, txn_verification.message(error, tp))
    return out


async def _verify_then_produce(services: BrokerServices, ctx: RequestContext,
                               request: dict[str, Any], txn_id: str,
                               wanted: dict[tuple[str, int], tuple[int, int]]
                               ) -> dict[str, Any] | None:
    answers = await txn_verification.verify_remote(services, txn_id, wanted)
    result = _produce(services, ctx, request, _refusals(answers), True)
    if result is not None and not isinstance(result, dict):
        return await result
    return result


def _produce(services: BrokerServices, ctx: RequestContext, request: dict[str, Any],
             unverified: dict[tuple[str, int], tuple[ErrorCode, str]], transactional: bool
             ) -> dict[str, Any] | None | Awaitable[dict[str, Any] | None]:
    """The Produce itself; `unverified`: partitions whose transactional batch its
    coordinator did not confirm (KIP-890), answered with that error, nothing appended;
    `transactional`: the request carries transactional batches (_has_transactional_records)."""
    rm = services.replica_manager
    acks = request["acks"]
    version = ctx.api_version
    responses = []
    waiting: dict[tuple[str, int], int] = {}  # acks=all: partition -> high watermark needed
    entries: dict[tuple[str, int], dict[str, Any]] = {}
    refused = unauthorized_topics(services, ctx, AclOperation.WRITE,
                                  (t["name"] for t in request["topic_data"])) \
        if services.authorizer is not None else _NO_TOPICS
    txn_refused = _txn_refusal(services, ctx, request) if transactional else None
    # the refusals that do not depend on the topic: none applies to most requests
    check = txn_refused is not None or bool(refused) or acks not in _ACKS or bool(unverified)
    for topic in request["topic_data"]:
        name = topic["name"]
        parts = []
        checked = check or name in INTERNAL_TOPICS
        for pdata in topic["partition_data"]:
            index = pdata["index"]
            if checked:
                refusal = _refusal(name, index, acks, txn_refused, refused, unverified)
                if refusal is not None:
                    parts.append(_error(index, *refusal))
                    continue
            records = pdata["records"]
            r = rm.append(name, index, records, produce_version=version, acks=acks)
            entry: dict[str, Any] = {
                "index": index, "error_code": r.error, "base_offset": r.base_offset,
                "log_append_time_ms": r.log_append_time, "log_start_offset": r.log_start_offset,
            }
            if r.error != ErrorCode.NONE:
                entry["error_message"] = r.message
                if r.record_errors:
                    entry["record_errors"] = [
                        {"batch_index": i, "batch_index_error_message": m}
                        for i, m in r.record_errors]
            elif r.required_high_watermark >= 0:
                waiting[(name, index)] = r.required_high_watermark
                entries[(name, index)] = entry
            parts.append(entry)
        responses.append({"name": name, "partition_responses": parts})
    if acks == 0:
        return None
    response = {"responses": responses, "throttle_time_ms": 0}
    if not waiting:
        return response
    # registered now, in the step that appended: a follower fetch handled next must find it
    op = rm.produce_purgatory.watch(waiting)
    # all that is left is the wait: the connection's next Produce may go ahead (network.py)
    ctx.connection.produce_appended = True
    return _await_replication(services, op, entries, response,
                              request.get("timeout_ms", 30000))


async def _await_replication(services: BrokerServices, op: Any,
                             entries: dict[tuple[str, int], dict[str, Any]],
                             response: dict[str, Any], timeout_ms: int) -> dict[str, Any]:
    failed = await services.replica_manager.produce_purgatory.wait_for(
        op, max(timeout_ms, 0) / 1000)
    for key, code in failed.items():
        entry = entries[key]
        entry.update(error_code=code, base_offset=-1, error_message=(
            "the in-sync replicas did not all get the records within timeout_ms"
            if code == ErrorCode.REQUEST_TIMED_OUT else
            "the partition's leader moved before the in-sync replicas got the records"))
    return response
