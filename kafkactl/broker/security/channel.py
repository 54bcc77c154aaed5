"""ChannelBuilder (Kafka's name): what each new connection of a listener gets before its
first request. On SSL listeners, the principal of the client certificate (`User:` + the
mapped distinguished name; ANONYMOUS without a certificate); on SASL listeners, a
SaslServerAuthenticator (the principal comes from SASL)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from kafkactl.broker.network import ConnectionInfo, ConnectionSetup
from kafkactl.broker.peer_log import PeerLogLimiter
from kafkactl.broker.security.credential_store import CredentialStore
from kafkactl.broker.security.listeners import ListenerSecurity
from kafkactl.broker.security.principal import (
    USER_TYPE,
    KafkaPrincipal,
    NoMatchingRule,
    distinguished_name,
)
from kafkactl.broker.security.sasl import SaslServerAuthenticator
from kafkactl.broker.security.x500 import CertificateParseError

log = logging.getLogger(__name__)


def channel_builder(sec: ListenerSecurity, credentials: CredentialStore) -> ConnectionSetup | None:
    """The ConnectionSetup of a listener (None for PLAINTEXT: nothing to set up)."""
    if sec.protocol == "PLAINTEXT":
        return None

    def setup(info: ConnectionInfo, transport: asyncio.Transport) -> str | None:
        if sec.uses_sasl:
            auth = SaslServerAuthenticator(sec, credentials)
            info.authenticator = auth
            auth.start(info)
            return None
        if transport.get_extra_info("peercert"):  # a certificate, verified
            ssl_object = transport.get_extra_info("ssl_object")
            try:
                dn = distinguished_name(ssl_object.getpeercert(binary_form=True))
                info.principal = KafkaPrincipal(USER_TYPE, sec.principal_mapper.principal_name(dn))
            except (NoMatchingRule, CertificateParseError) as e:
                sec.failed_authentications += 1
                return f"Failed authentication (SSL): {e}"
        sec.successful_authentications += 1
        return None

    return setup


def handshake_failure(error: BaseException) -> str:
    """Why a TLS handshake failed, in OpenSSL's words: the reason and, for a refused
    certificate, what was wrong with it ("CERTIFICATE_VERIFY_FAILED: certificate has
    expired", "...: unable to get local issuer certificate", "...: self-signed
    certificate")."""
    reason = getattr(error, "reason", None)
    verify = getattr(error, "verify_message", None)
    if reason and verify:
        return f"{reason}: {verify}"
    return str(reason or verify or error)


def tls_failure_reporter(listeners: dict[str, ListenerSecurity],
                         count: Callable[[str], None] | None = None
                         ) -> Callable[[str, str, str, BaseException], None]:
    """What the socket server calls for a failed TLS handshake (a client with no or an
    untrusted certificate, or not speaking TLS): Kafka's "Failed authentication with /ip
    (SSL handshake failed)", once per peer then a count a minute, under this module's
    logger (the SASL failures have theirs), and the listener's
    failed-authentication-total."""
    limiters: dict[str, PeerLogLimiter] = {}

    def failed(listener: str, host: str, peer: str, error: BaseException) -> None:
        sec = listeners.get(listener)
        if count is not None:
            count(listener)
        if sec is None:
            return
        sec.failed_authentications += 1
        limiter = limiters.get(listener)
        if limiter is None:
            limiter = limiters[listener] = PeerLogLimiter(log, logging.INFO,
                                                          "failed TLS handshakes")
        limiter.event(
            host, f"Failed authentication with {peer} (SSL handshake failed: "
                  f"{handshake_failure(error)}) on listener {sec.name} "
                  f"[{sec.failed_authentications} failed so far]")

    return failed
