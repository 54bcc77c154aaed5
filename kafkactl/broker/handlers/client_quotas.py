"""DescribeClientQuotas (key 48) and AlterClientQuotas (key 49), KIP-546.

What kafka-configs --entity-type users|clients|ips, confluent-kafka and `kafkactl quotas`
use. Describe needs DESCRIBE_CONFIGS on the cluster, Alter ALTER_CONFIGS, as in Kafka. An
entity is user and/or client-id, or ip alone (KIP-612: connection_creation_rate), a name or
null for the default; an ip filter component with a user or client-id one is refused
(INVALID_REQUEST), as Kafka's ZooKeeper mode refuses it.
A broker of a ZooKeeper cluster writes the quotas to ZooKeeper (kafkactl.cluster.
zk_client_quotas), whence every broker applies them; Describe answers from this broker's
applied view.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from kafkactl.broker.client_quotas import (
    CLIENT_ID,
    IP,
    USER,
    Entity,
    QuotaError,
    checked_ops,
    entity_of,
)
from kafkactl.broker.request_handler import RequestContext
from kafkactl.broker.security.acl import AclOperation
from kafkactl.broker.security.checks import authorize_cluster
from kafkactl.broker.services import BrokerServices
from kafkactl.protocol.errors import ErrorCode

NOT_ENABLED = "client quotas are not enabled on this broker"
Ops = list[tuple[str, float | None]]

WRITE_TIMEOUT_S = 20.0  # a ZooKeeper write not done by then: REQUEST_TIMED_OUT
# ZooKeeper writes of AlterClientQuotas: one thread, so they are made in request order
_writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="quota-store")


def handle_describe_client_quotas(services: BrokerServices, ctx: RequestContext,
                                  request: dict[str, Any]) -> dict[str, Any]:
    def fail(code: int, message: str) -> dict[str, Any]:
        return {"throttle_time_ms": 0, "error_code": code, "error_message": message,
                "entries": None}

    if not authorize_cluster(services, ctx, AclOperation.DESCRIBE_CONFIGS):
        return fail(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "not authorized")
    if services.quotas is None:
        return fail(ErrorCode.UNKNOWN_SERVER_ERROR, NOT_ENABLED)
    components = request.get("components") or []
    seen: set[str] = set()
    for c in components:
        if c["entity_type"] not in (USER, CLIENT_ID, IP):
            return fail(ErrorCode.INVALID_REQUEST,
                        f"unsupported quota entity type {c['entity_type']!r}")
        if c["entity_type"] in seen:  # Kafka's words
            name = "client" if c["entity_type"] == CLIENT_ID else c["entity_type"]
            return fail(ErrorCode.INVALID_REQUEST,
                        f"Duplicate {name} filter component entity type")
        seen.add(c["entity_type"])
        if c["match_type"] not in (0, 1, 2) or (c["match_type"] == 0 and c.get("match") is None):
            return fail(ErrorCode.INVALID_REQUEST, "a match of type 0 (exact) needs a name")
    if IP in seen and len(seen) > 1:
        return fail(ErrorCode.INVALID_REQUEST,
                    "Invalid entity filter component combination, IP filter component should "
                    "not be used with user or clientId filter component.")
    found = services.quotas.store.describe(components, bool(request.get("strict")))
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None,
            "entries": [{"entity": [{"entity_type": t, "entity_name": n} for t, n in entity],
                         "values": [{"key": k, "value": v} for k, v in sorted(values.items())]}
                        for entity, values in found]}


def handle_alter_client_quotas(services: BrokerServices, ctx: RequestContext,
                               request: dict[str, Any]
                               ) -> dict[str, Any] | Awaitable[dict[str, Any]]:
    """In a ZooKeeper cluster the quotas are written to ZooKeeper (on a worker thread, in
    the order the requests came; the broker serves others meanwhile); standalone, to the
    data dir."""
    allowed = authorize_cluster(services, ctx, AclOperation.ALTER_CONFIGS)
    validate_only = bool(request.get("validate_only"))
    quotas = services.quotas
    work: list[tuple[list[tuple[str, str | None]], Entity | None, Ops, int, str | None]] = []
    for entry in request.get("entries") or ():
        parts = [(e["entity_type"], e.get("entity_name")) for e in entry.get("entity") or ()]
        code, message, entity, ops = ErrorCode.NONE, None, None, []
        if not allowed:
            code, message = ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "not authorized"
        elif quotas is None:
            code, message = ErrorCode.UNKNOWN_SERVER_ERROR, NOT_ENABLED
        else:
            try:
                checked = entity_of(parts)
                ops = checked_ops(((op["key"], None if op.get("remove")
                                    else float(op["value"]))
                                   for op in entry.get("ops") or ()), checked)
                entity = checked
            except QuotaError as e:
                code, message = ErrorCode.INVALID_REQUEST, str(e)
        work.append((parts, entity, ops, code, message))
    if quotas is None or validate_only or not any(w[1] is not None for w in work):
        return _response(work)
    store = quotas.store

    def apply() -> dict[str, Any]:
        done = []
        for parts, entity, ops, code, message in work:
            if entity is not None:
                try:
                    store.alter(entity, ops)
                except QuotaError as e:
                    code, message = ErrorCode.INVALID_REQUEST, str(e)
                except OSError as e:
                    code, message = (ErrorCode.KAFKA_STORAGE_ERROR,
                                     f"cannot store the quotas: {e}")
                except Exception as e:  # ZooKeeper away or refusing: this entry failed
                    code, message = (ErrorCode.UNKNOWN_SERVER_ERROR,
                                     f"cannot store the quotas in ZooKeeper: "
                                     f"{type(e).__name__}: {e}")
            done.append((parts, entity, ops, code, message))
        return _response(done)

    if not store.writes_block:
        return apply()

    async def remote() -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        try:
            return await asyncio.wait_for(loop.run_in_executor(_writer, apply),
                                          WRITE_TIMEOUT_S)
        except TimeoutError:  # ZooKeeper away: the write may still land when it is back
            return _response([(parts, entity, ops, ErrorCode.REQUEST_TIMED_OUT,
                               f"ZooKeeper did not take the quotas within "
                               f"{WRITE_TIMEOUT_S:g} s") if entity is not None else
                              (parts, entity, ops, code, message)
                              for parts, entity, ops, code, message in work])

    return remote()


def _response(work: list[tuple[list[tuple[str, str | None]], Entity | None, Ops, int,
                               str | None]]) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "entries": [
        {"error_code": code, "error_message": message,
         "entity": [{"entity_type": t, "entity_name": n} for t, n in parts]}
        for parts, _, _, code, message in work]}
