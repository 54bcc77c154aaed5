"""The broker's side of a SCRAM exchange (RFC 5802): client-first -> server-first,
client-final -> server-final, against the stored credential. A wrong proof, an unknown user,
a changed nonce or a replayed final message fail with the same message, so a client learns
nothing about which users exist."""

from __future__ import annotations

import base64
import logging

from kafkactl.broker.security.credential_store import CredentialStore
from kafkactl.protocol import scram
from kafkactl.protocol.scram import ScramError

log = logging.getLogger(__name__)


class SaslAuthenticationError(Exception):
    """The exchange failed; the message is safe to send to the client."""


class ScramServerExchange:
    def __init__(self, mechanism: scram.ScramMechanism, store: CredentialStore) -> None:
        self.mechanism = mechanism
        self.store = store
        self.username = ""
        self._first: scram.ClientFirst | None = None
        self._server_first = ""
        self._nonce = ""
        self._credential: scram.ScramCredential | None = None
        self.complete = False

    def _fail(self) -> SaslAuthenticationError:
        return SaslAuthenticationError(
            "Authentication failed during authentication due to invalid credentials with "
            f"SASL mechanism {self.mechanism.name}")

    def evaluate(self, token: bytes) -> bytes:
        """The next server message; SaslAuthenticationError when the exchange fails."""
        if self.complete:
            raise SaslAuthenticationError("Authentication failed: SCRAM exchange already "
                                           "complete")
        try:
            if self._first is None:
                return self._on_client_first(token)
            return self._on_client_final(token)
        except ScramError as e:
            raise SaslAuthenticationError(f"Authentication failed: {e}") from None

    def _on_client_first(self, token: bytes) -> bytes:
        first = scram.ClientFirst.parse(token)
        if first.extensions.get("tokenauth", "").lower() == "true":
            raise ScramError("delegation tokens are not supported")
        cred = self.store.get(first.username, self.mechanism.name)
        if cred is None:
            raise self._fail()
        if cred.iterations < self.mechanism.min_iterations:
            raise self._fail()
        self._first, self._credential, self.username = first, cred, first.username
        self._nonce = first.nonce + scram.new_nonce()
        self._server_first = scram.server_first(self._nonce, cred.salt, cred.iterations)
        return self._server_first.encode()

    def _on_client_final(self, token: bytes) -> bytes:
        assert self._first is not None and self._credential is not None
        final = scram.ClientFinal.parse(token)
        expected_binding = base64.b64encode(self._first.gs2_header.encode()).decode()
        # Kafka's check is endsWith: librdkafka sends its own nonce again in front.
        if not final.nonce.endswith(self._nonce) or final.channel_binding != expected_binding:
            log.debug("SCRAM client-final for %r: nonce or channel binding changed",
                      self.username)
            raise self._fail()
        message = scram.auth_message(self._first.bare, self._server_first,
                                     final.without_proof)
        if not scram.verify_proof(self.mechanism, self._credential, message, final.proof):
            log.debug("SCRAM client-final for %r: wrong proof", self.username)
            raise self._fail()
        self.complete = True
        signature = scram.server_signature(self.mechanism, self._credential.server_key,
                                           message)
        return b"v=" + base64.b64encode(signature)
