"""Metadata (key 3): brokers, controller, topics and partitions; auto-creates topics.

Topic list semantics: null = every topic; an empty list = no topic (v1+; aiokafka sends
that at bootstrap); in v0 an empty list meant every topic.

With an authorizer: "every topic" lists only the topics the principal may Describe; a
named topic it may not Describe answers TOPIC_AUTHORIZATION_FAILED; auto-creation needs
Create on the cluster or on the topic.

Auto-creation races: requests of different connections are handled concurrently, so two
may both find a topic missing before either has created it. The second creator gets what
Kafka answers it, LEADER_NOT_AVAILABLE (retriable; the topic is there on the next try),
never TOPIC_ALREADY_EXISTS (TopicAdmin.auto_create is idempotent, and the error is mapped
here for any admin).
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable
from typing import Any

from kafkactl.broker.advertised import brokers_on_listener
from kafkactl.broker.metadata_cache import MetadataCache
from kafkactl.broker.request_handler import RequestContext
from kafkactl.broker.security.acl import AclOperation, ResourceType
from kafkactl.broker.security.checks import (
    AUTHORIZED_OPERATIONS_OMITTED,
    authorize_cluster,
    authorize_topic,
    authorized_operations,
    cluster_authorized_operations,
    unauthorized_topics,
)
from kafkactl.broker.services import BrokerServices
from kafkactl.broker.topic_admin import TopicError, validate_topic_name
from kafkactl.protocol.errors import ErrorCode

NULL_UUID = uuid.UUID(int=0)


def _topic_entry(cache: MetadataCache, name: str) -> dict[str, Any]:
    meta = cache.topic(name)
    if meta is None:
        return {"error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "name": name,
                "topic_id": NULL_UUID, "partitions": []}
    partitions = meta.response_partitions
    if partitions is None:  # once per topic change: 10,000 partitions are 10,000 dicts
        partitions = meta.response_partitions = [
            {"error_code": ErrorCode.NONE if p.leader >= 0 else ErrorCode.LEADER_NOT_AVAILABLE,
             "partition_index": p.partition,
             "leader_id": p.leader, "leader_epoch": p.leader_epoch,
             "replica_nodes": p.replicas, "isr_nodes": p.isr,
             "offline_replicas": p.offline_replicas}
            for p in sorted(meta.partitions.values(), key=lambda p: p.partition)]
    return {
        "error_code": ErrorCode.NONE, "name": name, "topic_id": meta.topic_id,
        "is_internal": meta.is_internal, "partitions": partitions,
    }


def handle_metadata(services: BrokerServices, ctx: RequestContext, request: dict[str, Any]
                    ) -> dict[str, Any] | Awaitable[dict[str, Any]]:
    cache = services.metadata_cache
    requested = request.get("topics")
    if requested is None or (ctx.api_version == 0 and not requested):
        names = cache.topic_names()
        hidden = unauthorized_topics(services, ctx, AclOperation.DESCRIBE, names,
                                     log_if_denied=False)  # as Kafka: not audited
        names = [n for n in names if n not in hidden]
    else:
        names = []
        for t in requested:
            name = t.get("name")
            if name is None:
                topic_id = t.get("topic_id")
                meta = cache.topic_by_id(topic_id) if topic_id else None
                if meta is not None:
                    names.append(meta.name)
                continue
            names.append(name)
    names = list(dict.fromkeys(names))
    allow_auto = request.get("allow_auto_topic_creation", True) and services.auto_create_topics
    refused = unauthorized_topics(services, ctx, AclOperation.DESCRIBE, names)
    # the requested topics that do not exist: an error for each, or (None) made now
    absent: dict[str, ErrorCode | None] = {}
    for name in names:
        if name in refused or cache.topic(name) is not None:
            continue
        if not _valid_name(name):
            absent[name] = ErrorCode.INVALID_TOPIC_EXCEPTION
        elif not allow_auto:
            absent[name] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        elif not (authorize_cluster(services, ctx, AclOperation.CREATE, log_if_denied=False)
                  or authorize_topic(services, ctx, AclOperation.CREATE, name)):
            absent[name] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        else:
            absent[name] = None
    if None in absent.values():  # a cluster's auto-creation waits on ZooKeeper: off the loop
        return _auto_create_then_answer(services, ctx, request, names, refused, absent)
    return _response(services, ctx, request, names, refused, absent)


async def _auto_create_then_answer(services: BrokerServices, ctx: RequestContext,
                                   request: dict[str, Any], names: list[str], refused: set[str],
                                   absent: dict[str, ErrorCode | None]) -> dict[str, Any]:
    admin = services.topic_admin
    for name, code in absent.items():
        if code is None:
            try:
                await admin.call(admin.auto_create, name, timeout_s=0)
            except TopicError as e:
                # another request created it first: what Kafka answers the second
                # creator (auto_create is idempotent; this guards every TopicAdmin)
                absent[name] = ErrorCode.LEADER_NOT_AVAILABLE \
                    if e.code == ErrorCode.TOPIC_ALREADY_EXISTS else e.code
    return _response(services, ctx, request, names, refused, absent)


def _valid_name(name: str) -> bool:
    try:
        validate_topic_name(name)
    except TopicError:
        return False
    return True


def _response(services: BrokerServices, ctx: RequestContext, request: dict[str, Any],
              names: list[str], refused: set[str], absent: dict[str, ErrorCode | None]
              ) -> dict[str, Any]:
    """The answer, once the absent topics to auto-create (None in `absent`) were made."""
    cache = services.metadata_cache
    topics: list[dict[str, Any]] = []
    for name in names:
        code = absent.get(name, ErrorCode.NONE)
        if name in refused:
            topics.append(_no_topic(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
        elif code is None and cache.topic(name) is None:  # a cluster: the controller makes
            topics.append(_no_topic(name, ErrorCode.LEADER_NOT_AVAILABLE))  # it next
        elif code:
            topics.append(_no_topic(name, code))
        else:
            topics.append(_topic_entry(cache, name))
    # as Kafka: only the topics the principal may see (and create) get their operations;
    # one refused with TOPIC_AUTHORIZATION_FAILED keeps the sentinel
    include_topic_ops = bool(request.get("include_topic_authorized_operations"))
    for t in topics:
        t["topic_authorized_operations"] = AUTHORIZED_OPERATIONS_OMITTED \
            if t["error_code"] == ErrorCode.TOPIC_AUTHORIZATION_FAILED \
            else authorized_operations(services, ctx, ResourceType.TOPIC, t["name"],
                                       include_topic_ops)
    return {
        "throttle_time_ms": 0,
        "brokers": [{"node_id": b.node_id, "host": host, "port": port, "rack": b.rack}
                    for b, host, port in brokers_on_listener(services, ctx)],
        "cluster_id": cache.cluster_id,
        "controller_id": cache.controller_id(),
        "topics": topics,
        # 0 without Describe on the cluster, as Kafka (v8-v10 ask for it)
        "cluster_authorized_operations": cluster_authorized_operations(
            services, ctx, bool(request.get("include_cluster_authorized_operations"))),
    }


def _no_topic(name: str, code: ErrorCode) -> dict[str, Any]:
    return {"error_code": code, "name": name, "topic_id": NULL_UUID, "partitions": []}
