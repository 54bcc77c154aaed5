"""CreateTopics (19), DeleteTopics (20), CreatePartitions (37)."""

from __future__ import annotations

import uuid
from typing import Any

from kafkactl.broker.topic_manager import TopicError
from kafkactl.log.config_def import validate_topic_configs
from kafkactl.log.errors import ConfigError
from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.errors import ErrorCode

NULL_UUID = uuid.UUID(int=0)


def handle_create_topics(apis: Any, ctx: Any, request: dict[str, Any]) -> dict[str, Any]:
    server = apis.server
    tm = server.topics
    me = server.cache.broker_id
    validate_only = request.get("validate_only", False)
    results = []
    for t in request["topics"]:
        name = t["name"]
        res: dict[str, Any] = {"name": name, "topic_id": NULL_UUID, "num_partitions": -1,
                               "replication_factor": -1, "configs": None}
        try:
            n = t["num_partitions"]
            rf = t["replication_factor"]
            assignments = t.get("assignments") or []
            if assignments:
                if n != -1 or rf != -1:
                    raise TopicError("INVALID_REQUEST", "give either assignments or "
                                     "num_partitions/replication_factor, not both")
                indexes = sorted(a["partition_index"] for a in assignments)
                if indexes != list(range(len(indexes))):
                    raise TopicError("INVALID_REPLICA_ASSIGNMENT",
                                     "partition indexes must be 0..N-1")
                for a in assignments:
                    if a["broker_ids"] != [me]:
                        raise TopicError("INVALID_REPLICA_ASSIGNMENT",
                                         f"this cluster has one broker, id {me}")
                n, rf = len(indexes), 1
            if n == -1:
                n = server.config.get_int("num.partitions")
            if rf == -1:
                rf = server.config.get_int("default.replication.factor")
            if rf != 1:
                raise TopicError("INVALID_REPLICATION_FACTOR",
                                 f"replication factor {rf} is larger than the 1 available broker")
            configs = {}
            for c in t.get("configs") or []:
                if c["value"] is None:
                    raise TopicError("INVALID_CONFIG", f"config {c['name']} has a null value")
                configs[c["name"]] = c["value"]
            try:
                validate_topic_configs(configs)
            except ConfigError as e:
                raise TopicError("INVALID_CONFIG", str(e)) from e
            state = tm.create_topic(name, n, configs, validate_only=validate_only)
            res.update(error_code=ErrorCode.NONE, error_message=None, topic_id=state.topic_id,
                       num_partitions=n, replication_factor=1)
            if ctx.api_version >= 5:
                from kafkactl.broker.handlers.configs import topic_config_entries

                cfg = tm.log_config_for(configs)
                res["configs"] = [
                    {"name": e["name"], "value": e["value"], "read_only": False,
                     "config_source": e["config_source"], "is_sensitive": False}
                    for e in topic_config_entries(server, cfg, configs)]
        except TopicError as e:
            res.update(error_code=ErrorCode[e.code_name], error_message=str(e))
        results.append(res)
    return {"throttle_time_ms": 0, "topics": results}


def handle_delete_topics(apis: Any, ctx: Any, request: dict[str, Any]) -> dict[str, Any]:
    server = apis.server
    wanted: list[tuple[str | None, Any]] = []
    if ctx.api_version >= 6:
        wanted = [(t.get("name"), t.get("topic_id")) for t in request["topics"]]
    else:
        wanted = [(n, None) for n in request["topic_names"]]
    responses = []
    for name, topic_id in wanted:
        res: dict[str, Any] = {"name": name, "topic_id": topic_id or NULL_UUID}
        if name is None and topic_id is not None:
            meta = server.cache.topic_by_id(topic_id)
            if meta is None:
                res.update(error_code=ErrorCode.UNKNOWN_TOPIC_ID,
                           error_message=f"no topic has id {topic_id}")
                responses.append(res)
                continue
            name = meta.name
            res["name"] = name
        try:
            state = server.topics.delete_topic(name or "")
            res.update(error_code=ErrorCode.NONE, topic_id=state.topic_id, error_message=None)
        except TopicError as e:
            res.update(error_code=ErrorCode[e.code_name], error_message=str(e))
        responses.append(res)
    return {"throttle_time_ms": 0, "responses": responses}


def handle_create_partitions(apis: Any, ctx: Any, request: dict[str, Any]) -> dict[str, Any]:
    tm = apis.server.topics
    me = apis.server.cache.broker_id
    results = []
    for t in request["topics"]:
        res: dict[str, Any] = {"name": t["name"], "error_message": None}
        try:
            for a in t.get("assignments") or []:
                if a["broker_ids"] != [me]:
                    raise TopicError("INVALID_REPLICA_ASSIGNMENT",
                                     f"this cluster has one broker, id {me}")
            tm.add_partitions(t["name"], t["count"],
                              validate_only=request.get("validate_only", False))
            res["error_code"] = ErrorCode.NONE
        except TopicError as e:
            res.update(error_code=ErrorCode[e.code_name], error_message=str(e))
        results.append(res)
    return {"throttle_time_ms": 0, "results": results}


def register(apis: Any) -> None:
    apis.register(ApiKey.CREATE_TOPICS, handle_create_topics)
    apis.register(ApiKey.DELETE_TOPICS, handle_delete_topics)
    apis.register(ApiKey.CREATE_PARTITIONS, handle_create_partitions)
