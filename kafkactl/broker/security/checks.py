"""The handlers' one way to ask the authorizer: may this request's principal, from this
host, do `operation` on this resource? Everything is allowed without an authorizer
(`authorizer.class.name` unset), as in Kafka."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from kafkactl.broker.security.acl import CLUSTER_NAME, AclOperation, ResourceType

if TYPE_CHECKING:
    from kafkactl.broker.request_handler import RequestContext
    from kafkactl.broker.services import BrokerServices


def authorize(services: BrokerServices, ctx: RequestContext, operation: AclOperation,
              resource_type: ResourceType, name: str) -> bool:
    authorizer = services.authorizer
    if authorizer is None:
        return True
    conn = ctx.connection
    return authorizer.authorize(conn.principal, conn.client_host, operation, resource_type,
                                name)


def authorize_cluster(services: BrokerServices, ctx: RequestContext,
                      operation: AclOperation) -> bool:
    return authorize(services, ctx, operation, ResourceType.CLUSTER, CLUSTER_NAME)


def authorize_topic(services: BrokerServices, ctx: RequestContext, operation: AclOperation,
                    topic: str) -> bool:
    return authorize(services, ctx, operation, ResourceType.TOPIC, topic)


def authorize_group(services: BrokerServices, ctx: RequestContext, operation: AclOperation,
                    group: str) -> bool:
    return authorize(services, ctx, operation, ResourceType.GROUP, group)


def unauthorized_topics(services: BrokerServices, ctx: RequestContext,
                        operation: AclOperation, topics: Iterable[str]) -> set[str]:
    """The topics among `topics` the principal may not `operation` (empty without an
    authorizer)."""
    if services.authorizer is None:
        return set()
    return {t for t in set(topics) if not authorize_topic(services, ctx, operation, t)}


def authorize_idempotent_write(services: BrokerServices, ctx: RequestContext) -> bool:
    """IdempotentWrite on the cluster, or Write on any topic (Kafka 2.8+)."""
    authorizer = services.authorizer
    if authorizer is None or authorize_cluster(services, ctx, AclOperation.IDEMPOTENT_WRITE):
        return True
    conn = ctx.connection
    return authorizer.authorize_any(conn.principal, conn.client_host, AclOperation.WRITE,
                                    ResourceType.TOPIC)
