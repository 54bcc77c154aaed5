"""DeleteRecords (key 21): move a partition's log start offset forward. An error row
carries low_watermark -1, as Kafka's does.

The leader moves its own log start at once; its followers move theirs when their next
fetch response carries it (kafkactl/broker/replica_fetcher.py) and report it in the fetch
after. A partition answers when its low watermark (the smallest log start offset over the
replicas on live brokers, Kafka's lowWatermarkIfLeader) has reached the requested offset,
with that low watermark; until then the request waits in the DeleteRecords purgatory
(Kafka's DelayedDeleteRecords), and a partition still short of it after the request's
timeout_ms answers REQUEST_TIMED_OUT (its records below the offset are gone on the leader
all the same)."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

from kafkactl.broker.purgatory import DelayedDeleteRecords
from kafkactl.broker.request_handler import RequestContext
from kafkactl.broker.security.acl import AclOperation
from kafkactl.broker.security.checks import unauthorized_topics
from kafkactl.broker.services import BrokerServices
from kafkactl.protocol.errors import ErrorCode

INVALID_LOW_WATERMARK = -1
DEFAULT_TIMEOUT_MS = 30000


def handle_delete_records(services: BrokerServices, ctx: RequestContext,
                          request: dict[str, Any]
                          ) -> dict[str, Any] | Awaitable[dict[str, Any]]:
    store = services.partitions
    rm = services.replica_manager
    topics = []
    # partitions whose low watermark is short of the offset: offset asked, response row
    waiting: dict[tuple[str, int], int] = {}
    entries: dict[tuple[str, int], dict[str, Any]] = {}
    refused = unauthorized_topics(services, ctx, AclOperation.DELETE,
                                  (t["name"] for t in request["topics"]))
    for t in request["topics"]:
        parts = []
        for p in t["partitions"]:
            idx = p["partition_index"]
            if t["name"] in refused:  # Delete on the topic, as Kafka checks
                parts.append({"partition_index": idx, "low_watermark": INVALID_LOW_WATERMARK,
                              "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED})
                continue
            part, code = rm.leader_partition(t["name"], idx)
            if part is None:
                parts.append({"partition_index": idx, "low_watermark": INVALID_LOW_WATERMARK,
                              "error_code": code})
                continue
            offset = p["offset"]
            hw = part.high_watermark
            if offset == -1:
                offset = hw
            if offset < 0 or offset > hw:
                parts.append({"partition_index": idx, "low_watermark": INVALID_LOW_WATERMARK,
                              "error_code": ErrorCode.OFFSET_OUT_OF_RANGE})
                continue
            if not store.topic_config(t["name"]).delete:
                # Kafka: records of a compact-only topic cannot be deleted
                parts.append({"partition_index": idx, "low_watermark": INVALID_LOW_WATERMARK,
                              "error_code": ErrorCode.POLICY_VIOLATION})
                continue
            if offset > part.log_start_offset:
                part.log.delete_records_before(offset)
            low = rm.low_watermark(part)
            entry = {"partition_index": idx, "low_watermark": low,
                     "error_code": ErrorCode.NONE}
            if low < offset:
                waiting[(t["name"], idx)] = offset
                entries[(t["name"], idx)] = entry
            parts.append(entry)
        topics.append({"name": t["name"], "partitions": parts})
    response = {"throttle_time_ms": 0, "topics": topics}
    if not waiting:
        return response
    # registered now, in the step that moved the log start: a follower fetch handled next
    # (which may already report the new start) must find it
    op = rm.delete_records_purgatory.watch(waiting)
    return _await_low_watermark(services, op, entries, response,
                                request.get("timeout_ms", DEFAULT_TIMEOUT_MS))


async def _await_low_watermark(services: BrokerServices, op: DelayedDeleteRecords,
                               entries: dict[tuple[str, int], dict[str, Any]],
                               response: dict[str, Any], timeout_ms: int) -> dict[str, Any]:
    reached = await services.replica_manager.delete_records_purgatory.wait_for(
        op, max(timeout_ms, 0) / 1000)
    for key, entry in entries.items():
        low = reached.get(key)
        if low is None:  # Kafka's DelayedDeleteRecords expires with the first low watermark
            entry["error_code"] = ErrorCode.REQUEST_TIMED_OUT
        else:
            entry["low_watermark"] = low
    return response
