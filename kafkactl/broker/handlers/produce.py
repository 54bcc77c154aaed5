"""Produce (key 0): acks 0 / 1 / -1 (with one replica, -1 behaves as 1)."""

from __future__ import annotations

from typing import Any

from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.errors import ErrorCode


def handle_produce(apis: Any, ctx: Any, request: dict[str, Any]) -> dict[str, Any] | None:
    rm = apis.server.replica_manager
    acks = request["acks"]
    version = ctx.api_version
    responses = []
    for topic in request["topic_data"]:
        name = topic["name"]
        parts = []
        for pdata in topic["partition_data"]:
            index = pdata["index"]
            if acks not in (0, 1, -1):
                parts.append({"index": index, "error_code": ErrorCode.INVALID_REQUIRED_ACKS,
                              "base_offset": -1})
                continue
            if request.get("transactional_id") is not None:
                parts.append({"index": index, "error_code": ErrorCode.INVALID_TXN_STATE,
                              "base_offset": -1,
                              "error_message": "transactions are not supported"})
                continue
            r = rm.append(name, index, pdata["records"], produce_version=version)
            entry: dict[str, Any] = {
                "index": index, "error_code": r.error, "base_offset": r.base_offset,
                "log_append_time_ms": r.log_append_time, "log_start_offset": r.log_start_offset,
            }
            if r.error != ErrorCode.NONE:
                entry["error_message"] = r.message
                if r.error in (ErrorCode.CORRUPT_MESSAGE, ErrorCode.INVALID_RECORD,
                               ErrorCode.INVALID_TIMESTAMP):
                    entry["record_errors"] = [{"batch_index": 0,
                                               "batch_index_error_message": r.message}]
            parts.append(entry)
        responses.append({"name": name, "partition_responses": parts})
    if acks == 0:
        return None
    return {"responses": responses, "throttle_time_ms": 0}


def register(apis: Any) -> None:
    apis.register(ApiKey.PRODUCE, handle_produce)
