"""The handlers' one way to ask the authorizer: may this request's principal, from this
host, do `operation` on this resource? Everything is allowed without an authorizer
(`authorizer.class.name` unset), as in Kafka.

`authorized_operations` answers KIP-430's fields (Metadata, DescribeCluster,
DescribeGroups): a 32-bit field of 1 << AclOperation for each operation Kafka supports on
the resource type that the principal may do; Kafka's sentinel when the request did not ask.
The cluster's field (`cluster_authorized_operations`) is 0 for a principal that may not
Describe the cluster, as Kafka answers (KafkaApis.handleTopicMetadataRequest,
AuthHelper.computeDescribeClusterResponse).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from kafkactl.broker.security.acl import CLUSTER_NAME, AclOperation, ResourceType

if TYPE_CHECKING:
    from kafkactl.broker.request_handler import RequestContext
    from kafkactl.broker.services import BrokerServices


def authorize(services: BrokerServices, ctx: RequestContext, operation: AclOperation,
              resource_type: ResourceType, name: str, *, log_if_allowed: bool = True,
              log_if_denied: bool = True) -> bool:
    """The authorizer's answer, audited as Kafka's Action says: `log_if_denied=False` for
    the checks whose denial only narrows an answer (listing every topic, the cluster
    check before the per-topic one), `log_if_allowed=False` for KIP-430's fields."""
    authorizer = services.authorizer
    if authorizer is None:
        return True
    conn = ctx.connection
    return authorizer.authorize(conn.principal, conn.client_host, operation, resource_type,
                                name, ctx.api_key, None, log_if_allowed, log_if_denied)


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
               if authorize(services, ctx, op, resource_type, name, log_if_allowed=False,
                            log_if_denied=False))


def cluster_authorized_operations(services: BrokerServices, ctx: RequestContext,
                                  requested: bool) -> int:
    """The cluster's KIP-430 field: Kafka's sentinel when not asked; 0 when the principal
    may not Describe the cluster (that check audited as Kafka's is, a denial at INFO);
    else the operations on the cluster it may do."""
    if not requested:
        return AUTHORIZED_OPERATIONS_OMITTED
    if not authorize_cluster(services, ctx, AclOperation.DESCRIBE):
        return 0
    return authorized_operations(services, ctx, ResourceType.CLUSTER, CLUSTER_NAME, True)


def authorize_cluster(services: BrokerServices, ctx: RequestContext,
                      operation: AclOperation, *, log_if_denied: bool = True) -> bool:
    return authorize(services, ctx, operation, ResourceType.CLUSTER, CLUSTER_NAME,
                     log_if_denied=log_if_denied)


def authorize_topic(services: BrokerServices, ctx: RequestContext, operation: AclOperation,
                    topic: str, *, log_if_denied: bool = True) -> bool:
    return authorize(services, ctx, operation, ResourceType.TOPIC, topic,
                     log_if_denied=log_if_denied)


def authorize_group(services: BrokerServices, ctx: RequestContext, operation: AclOperation,
                    group: str, *, log_if_denied: bool = True) -> bool:
    return authorize(services, ctx, operation, ResourceType.GROUP, group,
                     log_if_denied=log_if_denied)


def unauthorized_topics(services: BrokerServices, ctx: RequestContext,
                        operation: AclOperation, topics: Iterable[str], *,
                        log_if_denied: bool = True) -> set[str]:
    """The topics among `topics` the principal may not `operation` (empty without an
    authorizer); each asked once, audited with how many times `topics` names it (Kafka's
    resourceRefCount)."""
    authorizer = services.authorizer
    if authorizer is None:
        return set()
    refs = topics if isinstance(topics, (list, tuple)) else list(topics)
    conn = ctx.connection
    principal, host, api_key = conn.principal, conn.client_host, ctx.api_key
    return {t for t in set(refs)
            if not authorizer.authorize(principal, host, operation, ResourceType.TOPIC, t,
                                        api_key, refs, True, log_if_denied)}


def authorize_idempotent_write(services: BrokerServices, ctx: RequestContext) -> bool:
    """IdempotentWrite on the cluster (its denial not audited: Kafka's logIfDenied=false),
    or Write on any topic (Kafka 2.8+: authorizeByResourceType)."""
    authorizer = services.authorizer
    if authorizer is None or authorize_cluster(services, ctx, AclOperation.IDEMPOTENT_WRITE,
                                               log_if_denied=False):
        return True
    conn = ctx.connection
    return authorizer.authorize_any(conn.principal, conn.client_host, AclOperation.WRITE,
                                    ResourceType.TOPIC, ctx.api_key)
