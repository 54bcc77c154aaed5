"""ChannelBuilder (Kafka's name): what each new connection of a listener gets before its
first request. On SSL listeners, the principal of the client certificate (`User:` + the
mapped distinguished name; ANONYMOUS without a certificate); on SASL listeners, a
SaslServerAuthenticator (the principal comes from SASL)."""

from __future__ import annotations

import asyncio
import logging

from kafkactl.broker.network import ConnectionInfo, ConnectionSetup
from kafkactl.broker.security.credential_store import CredentialStore
from kafkactl.broker.security.listeners import ListenerSecurity
from kafkactl.broker.security.principal import (
    USER_TYPE,
    KafkaPrincipal,
    NoMatchingRule,
    distinguished_name,
)
from kafkactl.broker.security.sasl import SaslServerAuthenticator

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
        cert = transport.get_extra_info("peercert")
        if cert:
            dn = distinguished_name(cert)
            try:
                info.principal = KafkaPrincipal(USER_TYPE, sec.principal_mapper.principal_name(dn))
            except NoMatchingRule as e:
                sec.failed_authentications += 1
                return f"Failed authentication (SSL): {e}"
        sec.successful_authentications += 1
        return None

    return setup
