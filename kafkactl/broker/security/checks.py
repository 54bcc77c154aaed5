"""The handlers' one way to ask the authorizer: may this request's principal, from this
host, do `operation` on this resource? Everything is allowed without an authorizer
(`authorizer.class.name` unset), as in Kafka.

`authorized_operations` answers KIP-430's fields (Metadata, DescribeCluster,
DescribeGroups): a 32-bit field of 1 << AclOperation for each operation Kafka supports on
the resource type that the principal may do; Kafka's sentinel when the request did not ask.
"""

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


# The operations Kafka supports per resource type (AclEntry.supportedOperations).
TOPIC_OPERATIONS = (AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE,
                    AclOperation.DESCRIBE, AclOperation.DELETE, AclOperation.ALTER,
                    AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS)
GROUP_OPERATIONS = (AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE)
CLUSTER_OPERATIONS = (AclOperation.CREATE, AclOperation.CLUSTER_ACTION,
                      AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS,
                      AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER, AclOperation.DESCRIBE)
SUPPORTED_OPERATIONS = {ResourceType.TOPIC: TOPIC_OPERATIONS,
                        ResourceType.GROUP: GROUP_OPERATIONS,
                        ResourceType.CLUSTER: CLUSTER_OPERATIONS}
AUTHORIZED_OPERATIONS_OMITTED = -(1 << 31)


def authorized_operations(services: BrokerServices, ctx: RequestContext,
                          resource_type: ResourceType, name: str, requested: bool) -> int:
    """The bit field of the operations on the resource (a LITERAL name) this request's
    principal may do: every supported one without an authorizer."""
    if not requested:
        return AUTHORIZED_OPERATIONS_OMITTED
    return sum(1 << op for op in SUPPORTED_OPERATIONS[resource_type]
               if authorize(services, ctx, op, resource_type, name))


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
