"""CreateTopics (19), DeleteTopics (20), CreatePartitions (37): decode each entry and ask
the TopicAdmin, which decides (kafkactl.broker.topic_admin). With an authorizer, CreateTopics
needs Create on the cluster or the topic, DeleteTopics Delete and CreatePartitions Alter on
the topic (TOPIC_AUTHORIZATION_FAILED otherwise)."""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

from kafkactl.broker.handlers.configs import topic_config_entries
from kafkactl.broker.quota_manager import ThrottlingQuotaExceeded
from kafkactl.broker.request_handler import RequestContext
from kafkactl.broker.security.acl import AclOperation
from kafkactl.broker.security.checks import authorize_cluster, unauthorized_topics
from kafkactl.broker.services import BrokerServices
from kafkactl.broker.topic_admin import TopicError
from kafkactl.protocol.errors import ErrorCode

NULL_UUID = uuid.UUID(int=0)


DEFAULT_TIMEOUT_MS = 30000  # a request without timeout_ms


async def _settle(services: BrokerServices, rows: list[dict[str, Any]], key: str, *,
                  created: bool, timeout_ms: int) -> None:
    """Wait for the controller to carry out what succeeded (a cluster); rows it did not
    finish in time get REQUEST_TIMED_OUT, as Kafka's delayed topic operations answer. A
    timeout_ms of 0 or less does not wait at all: every row that succeeded is answered
    REQUEST_TIMED_OUT (the work still goes on), as Kafka's ZkAdminManager createTopics,
    deleteTopics and createPartitions do ("if (timeout <= 0 ...)")."""
    done = [r[key] for r in rows if r.get("error_code") == ErrorCode.NONE and r[key]]
    if not done:
        return
    if timeout_ms <= 0:
        late = dict.fromkeys(done, ErrorCode.REQUEST_TIMED_OUT)
    else:
        late = await services.topic_admin.settled(done if created else [],
                                                  [] if created else done, timeout_ms)
    for r in rows:
        if r[key] in late:
            r.update(error_code=late[r[key]],
                     error_message=None if timeout_ms <= 0 else
                     "the controller has not finished it within timeout_ms")
            if "num_partitions" in r:  # CreateTopics: as of any failed entry (KafkaApis)
                r.update(num_partitions=-1, replication_factor=-1, configs=None)


async def handle_create_topics(services: BrokerServices, ctx: RequestContext,
                               request: dict[str, Any]) -> dict[str, Any]:
    admin = services.topic_admin
    quota = ctx.quota.mutation if ctx.quota is not None else None  # controller_mutation_rate
    timeout_ms = request.get("timeout_ms", DEFAULT_TIMEOUT_MS)
    validate_only = request.get("validate_only", False)
    results = []
    refused = set() if authorize_cluster(services, ctx, AclOperation.CREATE,
                                         log_if_denied=False) else \
        unauthorized_topics(services, ctx, AclOperation.CREATE,
                            (t["name"] for t in request["topics"]))
    named = Counter(t["name"] for t in request["topics"])
    # KIP-525: a created topic's configs and counts only for a principal that may
    # DescribeConfigs it, else topic_config_error_code (KafkaApis, ZkAdminManager)
    no_configs = unauthorized_topics(services, ctx, AclOperation.DESCRIBE_CONFIGS,
                                     list(named), log_if_denied=False) \
        if ctx.api_version >= 5 else set()
    for t in request["topics"]:
        name = t["name"]
        res: dict[str, Any] = {"name": name, "topic_id": NULL_UUID, "num_partitions": -1,
                               "replication_factor": -1, "configs": None}
        if name in no_configs:
            res["topic_config_error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        if named[name] > 1:  # Kafka's KafkaApis: every entry of it, none created
            res.update(error_code=ErrorCode.INVALID_REQUEST,
                       error_message="Found multiple entries for this topic.")
            results.append(res)
            continue
        if name in refused:
            res.update(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                       error_message="Authorization failed.")
            results.append(res)
            continue
        # KIP-599: a topic to be made is refused while a strict quota is exhausted
        counted = quota if not validate_only and services.metadata_cache.topic(name) is None \
            else None
        try:
            if counted is not None:
                counted.check()
            assignments = [(a["partition_index"], a["broker_ids"])
                           for a in t.get("assignments") or []]
            configs = [(c["name"], c["value"]) for c in t.get("configs") or []]
            state = await admin.call(admin.create_topic, name, t["num_partitions"],
                                     t["replication_factor"], assignments, configs,
                                     validate_only=validate_only, timeout_s=timeout_ms / 1000)
            if counted is not None:
                counted.record(state.num_partitions, checked=False)
            res.update(error_code=ErrorCode.NONE, error_message=None, topic_id=state.topic_id)
            if name not in no_configs:
                res.update(num_partitions=state.num_partitions,
                           replication_factor=state.replication_factor)
            if ctx.api_version >= 5 and name not in no_configs:
                cfg = services.partitions.configs.log_config_for(state.configs)
                res["configs"] = [
                    {"name": e["name"], "value": e["value"], "read_only": False,
                     "config_source": e["config_source"], "is_sensitive": False}
                    for e in topic_config_entries(services, cfg, state.configs)]
        except ThrottlingQuotaExceeded as e:
            res.update(error_code=e.code, error_message=str(e))
        except TopicError as e:
            res.update(error_code=e.code, error_message=str(e))
        results.append(res)
    if not validate_only:
        await _settle(services, results, "name", created=True,
                      timeout_ms=timeout_ms)
    return {"throttle_time_ms": 0, "topics": results}


async def handle_delete_topics(services: BrokerServices, ctx: RequestContext,
                               request: dict[str, Any]) -> dict[str, Any]:
    quota = ctx.quota.mutation if ctx.quota is not None else None  # controller_mutation_rate
    wanted: list[tuple[str | None, Any]] = []
    if ctx.api_version >= 6:
        wanted = [(t.get("name"), t.get("topic_id")) for t in request["topics"]]
    else:
        wanted = [(n, None) for n in request["topic_names"]]
    admin = services.topic_admin
    timeout_ms = request.get("timeout_ms", DEFAULT_TIMEOUT_MS)
    responses = []
    for name, topic_id in wanted:
        res: dict[str, Any] = {"name": name, "topic_id": topic_id or NULL_UUID}
        if name is None and topic_id is not None:
            meta = services.metadata_cache.topic_by_id(topic_id)
            if meta is None:
                res.update(error_code=ErrorCode.UNKNOWN_TOPIC_ID,
                           error_message=f"no topic has id {topic_id}")
                responses.append(res)
                continue
            name = meta.name
            if unauthorized_topics(services, ctx, AclOperation.DESCRIBE, [name]):
                # asked by id without Describe: its name stays unsaid (KafkaApis)
                res.update(name=None, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                           error_message="Authorization failed.")
                responses.append(res)
                continue
            res["name"] = name
        if unauthorized_topics(services, ctx, AclOperation.DELETE, [name or ""]):
            res.update(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                       error_message="Authorization failed.")
            responses.append(res)
            continue
        meta = services.metadata_cache.topic(name or "")
        counted = quota if meta is not None else None
        try:
            if counted is not None:
                counted.check()
            state = await admin.call(admin.delete_topic, name or "", timeout_s=timeout_ms / 1000)
            if counted is not None and meta is not None:
                counted.record(len(meta.partitions), checked=False)
            res.update(error_code=ErrorCode.NONE, topic_id=state.topic_id, error_message=None)
        except ThrottlingQuotaExceeded as e:
            res.update(error_code=e.code, error_message=str(e))
        except TopicError as e:
            res.update(error_code=e.code, error_message=str(e))
        responses.append(res)
    await _settle(services, responses, "name", created=False,
                  timeout_ms=timeout_ms)
    return {"throttle_time_ms": 0, "responses": responses}


async def handle_create_partitions(services: BrokerServices, ctx: RequestContext,
                                   request: dict[str, Any]) -> dict[str, Any]:
    admin = services.topic_admin
    quota = ctx.quota.mutation if ctx.quota is not None else None  # controller_mutation_rate
    timeout_ms = request.get("timeout_ms", DEFAULT_TIMEOUT_MS)
    results = []
    named = Counter(t["name"] for t in request["topics"])
    for name in [n for n, times in named.items() if times > 1]:
        # Kafka's KafkaApis: one result for a topic named twice or more, nothing done
        results.append({"name": name, "error_code": ErrorCode.INVALID_REQUEST,
                        "error_message": "Duplicate topic in request."})
    for t in request["topics"]:
        if named[t["name"]] > 1:
            continue
        res: dict[str, Any] = {"name": t["name"], "error_message": None}
        if unauthorized_topics(services, ctx, AclOperation.ALTER, [t["name"]]):
            res.update(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                       error_message="Authorization failed.")
            results.append(res)
            continue
        meta = services.metadata_cache.topic(t["name"])
        grows = 0 if meta is None or request.get("validate_only", False) else \
            max(0, t["count"] - len(meta.partitions))
        try:
            if quota is not None and grows:
                quota.check()
            await admin.call(admin.add_partitions, t["name"], t["count"],
                             [a["broker_ids"] for a in t.get("assignments") or []],
                             validate_only=request.get("validate_only", False),
                             timeout_s=timeout_ms / 1000)
            if quota is not None and grows:
                quota.record(grows, checked=False)
            res["error_code"] = ErrorCode.NONE
        except ThrottlingQuotaExceeded as e:
            res.update(error_code=e.code, error_message=str(e))
        except TopicError as e:
            res.update(error_code=e.code, error_message=str(e))
        results.append(res)
    # Kafka's DelayedCreatePartitions: answered once this broker's metadata has every new
    # partition with a leader (a cluster), or a standalone broker's large growth is made
    if not request.get("validate_only", False):
        await _settle(services, results, "name", created=True,
                      timeout_ms=timeout_ms)
    return {"throttle_time_ms": 0, "results": results}
