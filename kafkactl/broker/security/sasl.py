"""SaslServerAuthenticator: one connection's SASL state on a SASL_PLAINTEXT / SASL_SSL
listener (Kafka's SaslServerAuthenticator, KIP-43, KIP-152, KIP-368).

Before authentication a client may send only ApiVersions, SaslHandshake and
SaslAuthenticate (kafkactl.broker.security.gate closes the connection on anything else),
and frames of at most `sasl.server.max.receive.size` bytes. After SaslHandshake v0 the
tokens come as bare size-prefixed frames, without a request header (KIP-43).

A failed authentication answers SASL_AUTHENTICATION_FAILED with Kafka's message, counts it,
logs one line with the peer (never a password; the first failure of a peer in full, then a
count per minute: ListenerSecurity.failure_log) and closes the connection once the answer is
written, both after `connection.failed.authentication.delay.ms` (the network layer's timer:
kafkactl.broker.network), as Kafka does, so that guessing passwords is slow. A
SaslHandshake-v0 client (raw tokens, no answer on failure) gets the same delay before the
close (Kafka closes those at once; the delay is the point, whichever handshake a guesser
picks). With `connections.max.reauth.ms` (the mechanism's own,
`listener.name.<l>.<mechanism>.connections.max.reauth.ms`, first), the session lasts that
long (SaslAuthenticate v1+ tells the client); past it any request but a re-authentication
closes the connection, and a re-authentication must keep the mechanism and the principal.
"""

from __future__ import annotations

import hmac
import logging
import time
from typing import Any, Protocol

from kafkactl.broker.security.credential_store import CredentialStore
from kafkactl.broker.security.listeners import ListenerSecurity
from kafkactl.broker.security.principal import USER_TYPE, KafkaPrincipal
from kafkactl.broker.security.scram import SaslAuthenticationError, ScramServerExchange
from kafkactl.protocol import scram
from kafkactl.protocol.errors import ErrorCode

log = logging.getLogger(__name__)


class AuthenticatedConnection(Protocol):
    """What the authenticator changes on the network layer's ConnectionInfo."""

    peer: str
    client_host: str
    principal: KafkaPrincipal
    max_receive: int
    close_after_response: bool
    failed_authentication: bool


class _PlainExchange:
    """SASL PLAIN (RFC 4616): one token `authzid NUL username NUL password`."""

    def __init__(self, users: dict[str, str]) -> None:
        self.users = users
        self.username = ""
        self.complete = False

    def evaluate(self, token: bytes) -> bytes:
        parts = token.split(b"\x00")
        if len(parts) != 3:
            raise SaslAuthenticationError(
                "Authentication failed: Invalid SASL/PLAIN response: expected 3 tokens")
        try:
            authzid, username, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError:
            raise SaslAuthenticationError(
                "Authentication failed: Invalid SASL/PLAIN response: not UTF-8") from None
        if not username or not password:
            raise SaslAuthenticationError(
                "Authentication failed: username or password not specified")
        if authzid and authzid != username:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is "
                "different from username")
        expected = self.users.get(username)
        ok = hmac.compare_digest((expected or "\x00" + password).encode(), password.encode())
        if expected is None or not ok:
            raise SaslAuthenticationError(
                "Authentication failed: Invalid username or password")
        self.username, self.complete = username, True
        return b""


class SaslServerAuthenticator:
    def __init__(self, listener: ListenerSecurity, credentials: CredentialStore) -> None:
        self.listener = listener
        self.credentials = credentials
        self.mechanism = ""
        self.raw_tokens = False  # SaslHandshake v0: tokens follow without Kafka headers
        self.authenticated = False
        self.reauthenticating = False
        self.expires_at: float | None = None  # time.monotonic() deadline of the session
        self._exchange: _PlainExchange | ScramServerExchange | None = None

    def start(self, conn: AuthenticatedConnection) -> None:
        conn.max_receive = self.listener.max_receive_before_auth

    @property
    def in_progress(self) -> bool:
        """True while a client may only (re)authenticate."""
        return not self.authenticated or self.reauthenticating

    def expired(self) -> bool:
        return self.expires_at is not None and time.monotonic() >= self.expires_at

    # ---- SaslHandshake ---------------------------------------------------------------------
    def handshake(self, conn: AuthenticatedConnection, mechanism: str,
                  version: int) -> dict[str, Any]:
        enabled = list(self.listener.sasl_mechanisms)
        if self._exchange is not None and not self.authenticated:
            return self._refuse(conn, {"error_code": ErrorCode.ILLEGAL_SASL_STATE,
                                       "mechanisms": enabled},
                                "SaslHandshake received twice")
        if mechanism not in enabled:
            return self._refuse(conn, {"error_code": ErrorCode.UNSUPPORTED_SASL_MECHANISM,
                                       "mechanisms": enabled},
                                f"unsupported SASL mechanism {mechanism[:64]!r}")
        if self.authenticated:
            if mechanism != self.mechanism or version == 0:
                return self._refuse(conn, {"error_code": ErrorCode.ILLEGAL_SASL_STATE,
                                           "mechanisms": enabled},
                                    "re-authentication must use SaslHandshake v1 and the "
                                    "same mechanism")
            self.reauthenticating = True
        self.mechanism = mechanism
        if mechanism == "PLAIN":
            self._exchange = _PlainExchange(self.listener.plain_users)
        else:
            self._exchange = ScramServerExchange(scram.MECHANISMS[mechanism],
                                                 self.credentials)
        self.raw_tokens = version == 0
        return {"error_code": ErrorCode.NONE, "mechanisms": enabled}

    # ---- SaslAuthenticate (and v0 raw tokens) -----------------------------------------------
    def authenticate(self, conn: AuthenticatedConnection, token: bytes | bytearray | memoryview,
                     version: int) -> dict[str, Any]:
        exchange = self._exchange
        if exchange is None or (self.authenticated and not self.reauthenticating):
            return self._refuse(conn, {
                "error_code": ErrorCode.ILLEGAL_SASL_STATE,
                "error_message": "Unexpected SaslAuthenticate request: no SaslHandshake "
                                 "before it", "auth_bytes": b"", "session_lifetime_ms": 0},
                "SaslAuthenticate without SaslHandshake")
        try:
            reply = exchange.evaluate(bytes(token))
        except SaslAuthenticationError as e:
            return self._failed(conn, str(e))
        lifetime = 0
        if exchange.complete:
            principal = KafkaPrincipal(USER_TYPE, exchange.username)
            if self.reauthenticating and principal != conn.principal:
                return self._failed(conn, "Cannot change principals during "
                                          "re-authentication")
            conn.principal = principal
            conn.max_receive = 0
            self.authenticated, self.reauthenticating = True, False
            self._exchange = None
            self.listener.successful_authentications += 1
            reauth_ms = self.listener.reauth_ms_for(self.mechanism)
            if reauth_ms > 0:
                lifetime = reauth_ms
                self.expires_at = time.monotonic() + lifetime / 1000
            log.debug("%s authenticated as %s with %s", conn.peer, principal, self.mechanism)
        return {"error_code": ErrorCode.NONE, "error_message": None, "auth_bytes": reply,
                "session_lifetime_ms": lifetime if version >= 1 else 0}

    def raw_token(self, conn: AuthenticatedConnection, token: bytes | bytearray) -> bytes | None:
        """A SaslHandshake-v0 token: the reply token (None: failed, close)."""
        result = self.authenticate(conn, token, 0)
        if result["error_code"]:
            return None
        if self.authenticated:
            self.raw_tokens = False
        reply: bytes = result["auth_bytes"]
        return reply

    # ---- failures --------------------------------------------------------------------------
    def _failed(self, conn: AuthenticatedConnection, message: str) -> dict[str, Any]:
        self.listener.failed_authentications += 1
        self.listener.failure_log.event(
            conn.client_host or conn.peer,
            f"Failed authentication with {conn.peer} ({message}) on listener "
            f"{self.listener.name} [{self.listener.failed_authentications} failed so far]")
        conn.close_after_response = True
        conn.failed_authentication = True
        return {"error_code": ErrorCode.SASL_AUTHENTICATION_FAILED, "error_message": message,
                "auth_bytes": b"", "session_lifetime_ms": 0}

    def _refuse(self, conn: AuthenticatedConnection, response: dict[str, Any],
                why: str) -> dict[str, Any]:
        log.info("%s: %s on listener %s; closing the connection", conn.peer, why,
                 self.listener.name)
        conn.close_after_response = True
        return response
