"""AuthenticationGate: in front of the request handler on every connection, it lets a
connection that has not (re)authenticated send only ApiVersions, SaslHandshake and
SaslAuthenticate, feeds SaslHandshake-v0 raw tokens to the authenticator, and closes
connections whose session (connections.max.reauth.ms) has expired (Kafka's
"Unexpected Kafka request of type ... during SASL handshake")."""

from __future__ import annotations

import struct

from kafkactl.broker.network import CloseConnection, ConnectionInfo, HandlerResult, RequestHandler
from kafkactl.broker.security.sasl import SaslServerAuthenticator
from kafkactl.protocol.api_keys import ApiKey

_API_KEY = struct.Struct(">h")
_SIZE = struct.Struct(">i")
_AUTH_APIS = frozenset({int(ApiKey.API_VERSIONS), int(ApiKey.SASL_HANDSHAKE),
                        int(ApiKey.SASL_AUTHENTICATE)})
_REAUTH_APIS = frozenset({int(ApiKey.SASL_HANDSHAKE), int(ApiKey.SASL_AUTHENTICATE)})


class AuthenticationGate:
    def __init__(self, inner: RequestHandler) -> None:
        self.inner = inner

    def handle(self, conn: ConnectionInfo, frame: bytearray) -> HandlerResult:
        auth = conn.authenticator
        if not isinstance(auth, SaslServerAuthenticator):
            return self.inner.handle(conn, frame)
        if auth.raw_tokens:
            reply = auth.raw_token(conn, frame)
            if reply is None:
                # failed (logged by the authenticator): no answer on a v0 handshake, the
                # connection closes after connection.failed.authentication.delay.ms
                return []
            return [_SIZE.pack(len(reply)) + reply]
        if len(frame) < 2:
            raise CloseConnection(f"request of {len(frame)} bytes is shorter than a header")
        (api_key,) = _API_KEY.unpack_from(frame)
        if auth.in_progress and api_key not in _AUTH_APIS:
            name = ApiKey(api_key).name if api_key in ApiKey._value2member_map_ else api_key
            raise CloseConnection(f"unexpected Kafka request of type {name} during SASL "
                                  "authentication; closing the connection")
        if auth.authenticated and not auth.reauthenticating and auth.expired() \
                and api_key not in _REAUTH_APIS:
            raise CloseConnection("SASL session expired (connections.max.reauth.ms) and "
                                  "the client did not re-authenticate; closing the "
                                  "connection")
        return self.inner.handle(conn, frame)
