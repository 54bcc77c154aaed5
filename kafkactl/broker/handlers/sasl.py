"""SaslHandshake (17) and SaslAuthenticate (36): handed to the connection's
SaslServerAuthenticator (kafkactl.broker.security.sasl). On a listener without SASL, or
after authentication, both answer ILLEGAL_SASL_STATE, as Kafka does."""

from __future__ import annotations

from typing import Any

from kafkactl.broker.request_handler import RequestContext
from kafkactl.broker.security.sasl import SaslServerAuthenticator
from kafkactl.broker.services import BrokerServices
from kafkactl.protocol.errors import ErrorCode


def handle_sasl_handshake(services: BrokerServices, ctx: RequestContext,
                          request: dict[str, Any]) -> dict[str, Any]:
    auth = ctx.connection.authenticator
    if not isinstance(auth, SaslServerAuthenticator):
        return {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "mechanisms": []}
    return auth.handshake(ctx.connection, request["mechanism"], ctx.api_version)


def handle_sasl_authenticate(services: BrokerServices, ctx: RequestContext,
                             request: dict[str, Any]) -> dict[str, Any]:
    auth = ctx.connection.authenticator
    if not isinstance(auth, SaslServerAuthenticator):
        return {"error_code": ErrorCode.ILLEGAL_SASL_STATE,
                "error_message": "SaslAuthenticate request received on a listener "
                                 "without SASL", "auth_bytes": b"", "session_lifetime_ms": 0}
    return auth.authenticate(ctx.connection, request["auth_bytes"], ctx.api_version)
