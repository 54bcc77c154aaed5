"""Which address a client is told for a broker: the advertised endpoint of the listener
its own request came in on (Kafka answers Metadata, FindCoordinator and DescribeCluster
per listener), so a SASL_SSL client is never sent to the PLAINTEXT port. In a ZooKeeper
cluster the other brokers' listeners come from their registrations (through the
controller's UpdateMetadata); Metadata and DescribeCluster leave out a broker that lacks
the listener, and FindCoordinator answers COORDINATOR_NOT_AVAILABLE for one."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkactl.broker.metadata_cache import BrokerEndpoint

if TYPE_CHECKING:
    from kafkactl.broker.request_handler import RequestContext
    from kafkactl.broker.services import BrokerServices


def listener_endpoint(services: BrokerServices, ctx: RequestContext,
                      broker: BrokerEndpoint) -> tuple[str, int] | None:
    """(host, port) of `broker` on the request's listener; None when it has no such
    listener."""
    if broker.node_id == services.broker_id:
        endpoint = services.listener_endpoints.get(ctx.connection.listener)
        if endpoint is not None:
            return endpoint
    return broker.endpoint(ctx.connection.listener)


def brokers_on_listener(services: BrokerServices,
                        ctx: RequestContext) -> list[tuple[BrokerEndpoint, str, int]]:
    """(broker, host, port) of every live broker with the request's listener."""
    out = []
    for b in services.metadata_cache.brokers():
        endpoint = listener_endpoint(services, ctx, b)
        if endpoint is not None:
            out.append((b, *endpoint))
    return out
