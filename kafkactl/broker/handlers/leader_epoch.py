"""OffsetForLeaderEpoch (key 23): where a leader epoch ended in the leader's log (its
leader-epoch cache): the log end for the current epoch, the start of the next epoch for an
older one; followers truncate there after a leader change (KIP-101)."""

from __future__ import annotations

from typing import Any

from kafkactl.broker.request_handler import RequestContext
from kafkactl.broker.security.acl import AclOperation
from kafkactl.broker.security.checks import unauthorized_topics
from kafkactl.broker.services import BrokerServices
from kafkactl.protocol.errors import ErrorCode


def handle_offset_for_leader_epoch(services: BrokerServices, ctx: RequestContext,
                                   request: dict[str, Any]) -> dict[str, Any]:
    topics = []
    refused = unauthorized_topics(services, ctx, AclOperation.DESCRIBE,
                                  (t["topic"] for t in request["topics"]))
    for t in request["topics"]:
        parts = []
        for p in t["partitions"]:
            idx = p["partition"]
            part, code = services.replica_manager.leader_partition(t["topic"], idx)
            out: dict[str, Any] = {"partition": idx, "leader_epoch": -1, "end_offset": -1}
            if t["topic"] in refused:
                out["error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif part is None:
                out["error_code"] = code
            elif p.get("current_leader_epoch", -1) > part.leader_epoch:
                out["error_code"] = ErrorCode.UNKNOWN_LEADER_EPOCH
            elif p.get("current_leader_epoch", -1) >= 0 and \
                    p["current_leader_epoch"] < part.leader_epoch:
                out["error_code"] = ErrorCode.FENCED_LEADER_EPOCH
            else:
                out["error_code"] = ErrorCode.NONE
                out["leader_epoch"], out["end_offset"] = part.epochs.end_offset_for(
                    p["leader_epoch"], part.log_end_offset)
            parts.append(out)
        topics.append({"topic": t["topic"], "partitions": parts})
    return {"throttle_time_ms": 0, "topics": topics}
