"""Which address a client is told for a broker: the advertised endpoint of the listener
its own request came in on (Kafka answers Metadata, FindCoordinator and DescribeCluster
per listener), so a SASL_SSL client is never sent to the PLAINTEXT port."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkactl.broker.metadata_cache import BrokerEndpoint

if TYPE_CHECKING:
    from kafkactl.broker.request_handler import RequestContext
    from kafkactl.broker.services import BrokerServices


def endpoint_for(services: BrokerServices, ctx: RequestContext,
                 broker: BrokerEndpoint) -> tuple[str, int]:
    """(host, port) of `broker` on the request's listener (this broker's own listeners are
    known; other brokers are given as the metadata cache has them)."""
    if broker.node_id == services.broker_id:
        endpoint = services.listener_endpoints.get(ctx.connection.listener)
        if endpoint is not None:
            return endpoint
    return broker.host, broker.port
