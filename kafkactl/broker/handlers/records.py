"""DeleteRecords (key 21): move a partition's log start offset forward. An error row
carries low_watermark -1, as Kafka's does."""

from __future__ import annotations

from typing import Any

from kafkactl.broker.request_handler import RequestContext
from kafkactl.broker.security.acl import AclOperation
from kafkactl.broker.security.checks import unauthorized_topics
from kafkactl.broker.services import BrokerServices
from kafkactl.protocol.errors import ErrorCode

INVALID_LOW_WATERMARK = -1


def handle_delete_records(services: BrokerServices, ctx: RequestContext,
                          request: dict[str, Any]) -> dict[str, Any]:
    store = services.partitions
    topics = []
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
            part, code = services.replica_manager.leader_partition(t["name"], idx)
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
            parts.append({"partition_index": idx, "low_watermark": part.log_start_offset,
                          "error_code": ErrorCode.NONE})
        topics.append({"name": t["name"], "partitions": parts})
    return {"throttle_time_ms": 0, "topics": topics}
