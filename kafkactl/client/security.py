"""The client's security settings (ClientSecurity) from librdkafka's names, as kcat takes
them (`security.protocol`, `sasl.mechanism(s)`, `sasl.username`, `sasl.password`,
`ssl.ca.location`, `ssl.certificate.location`, `ssl.key.location`, `ssl.key.password`,
`enable.ssl.certificate.verification`, `ssl.endpoint.identification.algorithm`), or the
Java client's (`ssl.truststore.location` of a PEM file, `sasl.jaas.config` with
username="..." password="..."), and the SASL exchange over a connection (SaslHandshake v1,
SaslAuthenticate): PLAIN and SCRAM-SHA-256/512. sasl_authenticate returns the session
lifetime the broker answers (`connections.max.reauth.ms`), which the connection
re-authenticates within (kafkactl.client.connection, KIP-368).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafkactl.client.errors import AuthenticationFailedError, KafkaConnectionError
from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.errors import error_name

if TYPE_CHECKING:
    import ssl  # imported where TLS is set up: a plaintext client never loads it (~8 ms)

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
SECURITY_KEYS = frozenset({
    "security.protocol", "sasl.mechanism", "sasl.mechanisms", "sasl.username",
    "sasl.password", "sasl.jaas.config", "ssl.ca.location", "ssl.certificate.location",
    "ssl.key.location", "ssl.key.password", "ssl.truststore.location",
    "ssl.truststore.type", "enable.ssl.certificate.verification",
    "ssl.endpoint.identification.algorithm", "ssl.keystore.location", "ssl.keystore.type"})


class SecurityConfigError(ValueError):
    """A client security property that cannot be used; the message names it."""


@dataclass(frozen=True)
class ClientSecurity:
    protocol: str = "PLAINTEXT"
    mechanism: str = ""
    username: str = ""
    password: str = ""
    ssl_context: ssl.SSLContext | None = None
    check_hostname: bool = True

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> ClientSecurity:
        protocol = props.get("security.protocol", "PLAINTEXT").strip().upper()
        if protocol not in PROTOCOLS:
            raise SecurityConfigError(f"security.protocol={protocol}: use one of "
                                      f"{', '.join(PROTOCOLS)}")
        username, password = props.get("sasl.username", ""), props.get("sasl.password", "")
        jaas = props.get("sasl.jaas.config", "")
        if jaas and not username:
            found = dict(re.findall(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"', jaas))
            username, password = found.get("username", ""), found.get("password", "")
        mechanism = (props.get("sasl.mechanism") or props.get("sasl.mechanisms") or
                     ("PLAIN" if protocol.startswith("SASL") else "")).strip().upper()
        if protocol.startswith("SASL"):
            if mechanism not in MECHANISMS:
                raise SecurityConfigError(f"sasl.mechanism={mechanism}: use one of "
                                          f"{', '.join(MECHANISMS)}")
            if not username or not password:
                raise SecurityConfigError(f"security.protocol={protocol} needs "
                                          "sasl.username and sasl.password")
        ctx = None
        verify = props.get("enable.ssl.certificate.verification", "true").lower() != "false"
        check_hostname = verify and props.get(
            "ssl.endpoint.identification.algorithm", "https").lower() not in ("none", "")
        if protocol.endswith("SSL"):
            import ssl

            ctx = ssl.create_default_context()
            ca = props.get("ssl.ca.location") or props.get("ssl.truststore.location")
            try:
                if ca:
                    ctx.load_verify_locations(cafile=ca)
                cert = props.get("ssl.certificate.location") or props.get(
                    "ssl.keystore.location")
                if cert:
                    ctx.load_cert_chain(cert, props.get("ssl.key.location") or None,
                                        password=props.get("ssl.key.password") or None)
            except OSError as e:  # ssl.SSLError too
                raise SecurityConfigError(f"cannot load the TLS files: "
                                          f"{getattr(e, 'strerror', None) or e}") from None
            ctx.check_hostname = check_hostname
            if not verify:
                ctx.verify_mode = ssl.CERT_NONE
        return cls(protocol, mechanism, username, password, ctx, check_hostname)


def split_properties(props: Mapping[str, str]) -> tuple[ClientSecurity, dict[str, str]]:
    """(the security, the other properties)."""
    security = ClientSecurity.from_properties(
        {k: v for k, v in props.items() if k in SECURITY_KEYS})
    return security, {k: v for k, v in props.items() if k not in SECURITY_KEYS}


Request = Callable[..., dict[str, Any]]


def sasl_authenticate(request: Request, security: ClientSecurity, where: str) -> int:
    """Run the SASL exchange with `request(api_key, body, version=...)` and return the
    session lifetime in ms of the last SaslAuthenticate response (0: the session does not
    expire); raises KafkaConnectionError with the broker's message when it refuses."""
    lifetime = 0
    resp = request(ApiKey.SASL_HANDSHAKE, {"mechanism": security.mechanism}, version=1)
    if resp["error_code"]:
        raise AuthenticationFailedError(
            f"broker {where} refused SASL mechanism {security.mechanism} "
            f"({error_name(resp['error_code'])}; it offers "
            f"{', '.join(resp['mechanisms']) or 'none'})")

    def step(token: bytes) -> bytes:
        nonlocal lifetime
        r = request(ApiKey.SASL_AUTHENTICATE, {"auth_bytes": token}, version=1)
        if r["error_code"]:
            message = r["error_message"]
            raise AuthenticationFailedError(
                f"SASL authentication with {where} failed: {error_name(r['error_code'])}"
                + (f": {message}" if message else ""))
        lifetime = int(r.get("session_lifetime_ms") or 0)
        return bytes(r["auth_bytes"] or b"")

    if security.mechanism == "PLAIN":
        step(b"\x00" + security.username.encode() + b"\x00" + security.password.encode())
        return lifetime
    from kafkactl.protocol import scram  # hashlib, secrets: only a SCRAM login needs them

    exchange = scram.ScramClientExchange(scram.MECHANISMS[security.mechanism],
                                         security.username, security.password)
    try:
        exchange.verify(step(exchange.final(step(exchange.first()))))
    except scram.ScramError as e:
        raise KafkaConnectionError(f"SCRAM with {where}: {e}") from None
    return lifetime
