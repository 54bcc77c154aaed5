"""A listener's server-side TLS context from Kafka's PEM keys.

Keys (each also as `listener.name.<listener>.<key>`): `ssl.keystore.type=PEM` with
`ssl.keystore.location` (one PEM file holding the private key and its certificate chain)
or `ssl.keystore.key` + `ssl.keystore.certificate.chain` (the PEM text itself);
`ssl.key.password` for an encrypted key; `ssl.truststore.type=PEM` with
`ssl.truststore.location` or `ssl.truststore.certificates`; `ssl.client.auth`
(`required`, `requested`, `none`); `ssl.enabled.protocols`; `ssl.cipher.suites`.
JKS and PKCS12 stores are refused with a sentence saying how to convert them.
"""

from __future__ import annotations

import contextlib
import os
import ssl
import tempfile
from collections.abc import Callable, Iterator


class SslConfigError(ValueError):
    """A TLS key that cannot be used; the message names it."""


# Every key server_context reads: a change of one makes another context (at run time too:
# kafkactl.broker.security.listener_reconfig).
CONTEXT_KEYS = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.key.password", "ssl.keystore.key",
    "ssl.keystore.certificate.chain", "ssl.truststore.type", "ssl.truststore.location",
    "ssl.truststore.certificates", "ssl.client.auth", "ssl.enabled.protocols",
    "ssl.cipher.suites"})

CLIENT_AUTH = {"required": ssl.CERT_REQUIRED, "requested": ssl.CERT_OPTIONAL,
               "none": ssl.CERT_NONE}
_PROTOCOLS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}


@contextlib.contextmanager
def _pem_file(text: str) -> Iterator[str]:
    """Inline PEM text in a private temporary file, removed at once after loading."""
    fd, path = tempfile.mkstemp(prefix="kafkactl-pem-", suffix=".pem")
    try:
        os.write(fd, text.encode("ascii", "replace"))
        os.close(fd)
        yield path
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)


def _check_type(get: Callable[[str], str], key: str) -> None:
    kind = (get(key) or "PEM").strip().upper()
    if kind != "PEM":
        raise SslConfigError(
            f"{key}={kind}: only PEM stores are supported; convert it (e.g. `keytool "
            "-importkeystore -deststoretype PKCS12` then `openssl pkcs12 -nodes`) and set "
            f"{key}=PEM")


def server_context(get: Callable[[str], str], listener: str) -> ssl.SSLContext:
    """The TLS context of `listener`; `get(key)` returns the listener's value of an
    ssl.* key ('' when unset). For a SASL_SSL listener `get("ssl.client.auth")` is only
    its listener-prefixed value (ListenerKeys, KIP-684): unset, no client certificate is
    asked for."""
    _check_type(get, "ssl.keystore.type")
    _check_type(get, "ssl.truststore.type")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _load_keystore(ctx, get, listener)
    client_auth = (get("ssl.client.auth") or "none").strip().lower()
    if client_auth not in CLIENT_AUTH:
        raise SslConfigError(f"ssl.client.auth={client_auth}: use required, requested or "
                             "none")
    trusted = _load_truststore(ctx, get, listener)
    if client_auth != "none" and not trusted:
        raise SslConfigError(f"ssl.client.auth={client_auth} on listener {listener} needs "
                             "a truststore (ssl.truststore.location) to check client "
                             "certificates against")
    ctx.verify_mode = CLIENT_AUTH[client_auth]
    _set_protocols(ctx, get)
    return ctx


def client_context(get: Callable[[str], str], listener: str, *,
                   check_hostname: bool = True) -> ssl.SSLContext:
    """The context this broker connects to other brokers' TLS listener `listener` with:
    its keystore as client certificate (when it has one), its truststore (or the system's
    CAs) to check theirs, and the host name unless `check_hostname` is False (Kafka's
    `ssl.endpoint.identification.algorithm` set empty)."""
    _check_type(get, "ssl.keystore.type")
    _check_type(get, "ssl.truststore.type")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if get("ssl.keystore.location") or get("ssl.keystore.key"):
        _load_keystore(ctx, get, listener)
    if not _load_truststore(ctx, get, listener):
        ctx.load_default_certs()
    ctx.check_hostname = check_hostname
    _set_protocols(ctx, get)
    return ctx


def _load_keystore(ctx: ssl.SSLContext, get: Callable[[str], str], listener: str) -> None:
    password = get("ssl.key.password") or None
    location = get("ssl.keystore.location")
    key, chain = get("ssl.keystore.key"), get("ssl.keystore.certificate.chain")
    try:
        if location:
            ctx.load_cert_chain(location, password=password)
        elif key and chain:
            with _pem_file(chain) as cert_path, _pem_file(key) as key_path:
                ctx.load_cert_chain(cert_path, key_path, password=password)
        else:
            raise SslConfigError(
                f"listener {listener} uses TLS but has no key: set ssl.keystore.location "
                "(a PEM file with the key and certificate chain) or ssl.keystore.key and "
                "ssl.keystore.certificate.chain")
    except (OSError, ssl.SSLError) as e:
        where = "ssl.keystore.location" if location else "ssl.keystore.key"
        raise SslConfigError(f"listener {listener}: cannot load the key from {where}: "
                             f"{getattr(e, 'strerror', None) or e}") from None


def _load_truststore(ctx: ssl.SSLContext, get: Callable[[str], str], listener: str) -> bool:
    """Load the truststore into `ctx`; False when none is configured."""
    trust_file, trust_text = get("ssl.truststore.location"), get("ssl.truststore.certificates")
    try:
        if trust_file:
            ctx.load_verify_locations(cafile=trust_file)
        elif trust_text:
            ctx.load_verify_locations(cadata=trust_text)
    except (OSError, ssl.SSLError) as e:
        raise SslConfigError(f"listener {listener}: cannot load the truststore: "
                             f"{getattr(e, 'strerror', None) or e}") from None
    return bool(trust_file or trust_text)


def _set_protocols(ctx: ssl.SSLContext, get: Callable[[str], str]) -> None:
    protocols = [p.strip() for p in (get("ssl.enabled.protocols") or "TLSv1.2,TLSv1.3")
                 .split(",") if p.strip()]
    known = [_PROTOCOLS[p] for p in protocols if p in _PROTOCOLS]
    if not known:
        raise SslConfigError(f"ssl.enabled.protocols={','.join(protocols)}: none of "
                             "TLSv1.2, TLSv1.3")
    ctx.minimum_version, ctx.maximum_version = min(known), max(known)
    ciphers = get("ssl.cipher.suites")
    if ciphers:
        try:
            ctx.set_ciphers(ciphers.replace(",", ":"))
        except ssl.SSLError:
            raise SslConfigError(f"ssl.cipher.suites={ciphers}: no usable cipher") from None


