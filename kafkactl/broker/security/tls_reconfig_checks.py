"""The checks Kafka makes before a TLS listener takes a new keystore or truststore at run
time (SslFactory.validateReconfiguration), for kafkactl.broker.security.listener_reconfig:

- `ensure_compatible` (Kafka's CertificateEntries.ensureCompatible): the new keystore's
  certificate has the distinguished name of the one in use, unless `ssl.allow.dn.changes`
  is true, and every subject alternative name of it, unless `ssl.allow.san.changes` is true
  (a broker's identity, which its peers' ACLs and host name checks rely on, does not change
  by accident);
- `ensure_handshakes` (Kafka's SslEngineValidator, for the inter-broker listener): a TLS
  handshake between the current and the new settings, both ways (the current server with a
  client of the new settings, a server of the new settings with the current client; host
  names not checked), so a keystore the broker's own truststore does not trust (expired, of
  another CA, no chain) or a truststore that does not trust the broker's own certificate is
  refused before the other brokers meet it;
- `ensure_self_handshake` (Kafka's SslFactory.configure, at start-up, for the inter-broker
  listener): a client and a server with the listener's own settings complete a handshake;
- `store_digests`: the contents of the keystore and truststore files, so a file replaced in
  place is seen (and reloaded when an alter re-sends its config, Kafka's
  reloadUpdatedFilesWithoutConfigChange).
"""

from __future__ import annotations

import hashlib
import ipaddress
import re
import ssl
from collections.abc import Callable
from dataclasses import dataclass

from kafkactl.broker.security.x500 import (
    CertificateParseError,
    _children,
    _oid,
    _read,
    name_rfc2253,
    subject_der,
)

# The alias of the one entry of a PEM keystore in Kafka (its PemStore).
PEM_ALIAS = "kafka"
STORE_FILE_KEYS = ("ssl.keystore.location", "ssl.truststore.location")
ALLOW_DN_CHANGES = "ssl.allow.dn.changes"
ALLOW_SAN_CHANGES = "ssl.allow.san.changes"

_SAN_OID = "2.5.29.17"
_PEM_CERT = re.compile(r"-----BEGIN CERTIFICATE-----[^-]+-----END CERTIFICATE-----")


class KeystoreMismatch(ValueError):
    """The new keystore's certificate is not compatible with the one in use (Kafka's
    ConfigException message)."""


class HandshakeRefused(ValueError):
    """A handshake between the current and the new TLS settings failed; says which side
    did not trust which certificate."""


@dataclass(frozen=True)
class KeystoreEntry:
    """The certificate of a keystore's key as Kafka compares it: subject and SANs."""

    alias: str
    subject: bytes  # DER of the subject Name
    dn: str  # RFC 2253, as Java's X500Principal.getName()
    sans: frozenset[tuple[int, str]]  # (GeneralName tag, value), as Java lists them

    def san_text(self) -> str:
        return "[" + ", ".join(f"[{t}, {v}]" for t, v in sorted(self.sans)) + "]"


def _general_name(tag: int, element: bytes, content: bytes) -> str:
    if tag in (1, 2, 6):  # rfc822Name, dNSName, uniformResourceIdentifier
        return content.decode("ascii", "replace")
    if tag == 7 and len(content) in (4, 16):  # iPAddress
        return str(ipaddress.ip_address(content))
    if tag == 8:  # registeredID
        return _oid(content)
    if tag == 4:  # directoryName: [4] EXPLICIT Name
        try:
            return name_rfc2253(content)
        except CertificateParseError:
            pass
    return element.hex()


def subject_alt_names(cert_der: bytes) -> frozenset[tuple[int, str]]:
    """The subject alternative names of an X.509 certificate (DER)."""
    cert = _read(cert_der, 0, len(cert_der))
    tbs = _children(_children(cert)[0])
    extensions = next((f for f in tbs if f.tag == b"\xa3"), None)  # [3] EXPLICIT
    if extensions is None:
        return frozenset()
    out: set[tuple[int, str]] = set()
    for ext in _children(_children(extensions)[0]):
        parts = _children(ext)
        if not parts or parts[0].tag != b"\x06" or _oid(parts[0].content) != _SAN_OID:
            continue
        value = parts[-1].content  # extnValue: OCTET STRING holding GeneralNames
        for name in _children(_read(value, 0, len(value))):
            tag = name.tag[0] & 0x1F
            out.add((tag, _general_name(tag, name.encoded(), name.content)))
    return frozenset(out)


def _first_certificate(text: str) -> bytes | None:
    found = _PEM_CERT.search(text)
    if found is None:
        return None
    try:
        return ssl.PEM_cert_to_DER_cert(found.group(0))
    except ValueError:
        return None


def keystore_entry(get: Callable[[str], str]) -> KeystoreEntry | None:
    """The certificate of the keystore `get` names (ssl.keystore.location, else
    ssl.keystore.certificate.chain); None when there is none or it cannot be read (the
    context's own loading says why)."""
    location = get("ssl.keystore.location")
    try:
        if location:
            with open(location, encoding="ascii", errors="replace") as f:
                text = f.read()
        else:
            text = get("ssl.keystore.certificate.chain")
    except OSError:
        return None
    der = _first_certificate(text)
    if der is None:
        return None
    try:
        subject = subject_der(der)
        return KeystoreEntry(PEM_ALIAS, subject, name_rfc2253(subject),
                             subject_alt_names(der))
    except (CertificateParseError, IndexError, ValueError):
        return None


def ensure_compatible(new: KeystoreEntry | None, old: KeystoreEntry | None, *,
                      allow_dn_changes: bool, allow_san_changes: bool) -> None:
    """KeystoreMismatch, in Kafka's words, when `new` changes the DN or drops a SAN of
    `old` (each unless allowed)."""
    if new is None or old is None:
        return
    if not allow_dn_changes and new.subject != old.subject and \
            new.dn.lower() != old.dn.lower():
        raise KeystoreMismatch(
            "Keystore DistinguishedName does not match:  existing={"
            f"alias={old.alias}, DN={old.dn}}}, new={{alias={new.alias}, DN={new.dn}}}")
    if not allow_san_changes and not old.sans <= new.sans:
        raise KeystoreMismatch(
            "Keystore SubjectAltNames do not match:  existing={"
            f"alias={old.alias}, SAN={old.san_text()}}}, "
            f"new={{alias={new.alias}, SAN={new.san_text()}}}")


def _handshake(server_ctx: ssl.SSLContext, client_ctx: ssl.SSLContext) -> str | None:
    """Run a TLS handshake in memory: None when both ends complete it, else which end
    failed ("client" or "server") and why, as 'side:reason'."""
    c_in, c_out, s_in, s_out = (ssl.MemoryBIO() for _ in range(4))
    client = client_ctx.wrap_bio(c_in, c_out, server_side=False)
    server = server_ctx.wrap_bio(s_in, s_out, server_side=True)
    done = {"client": False, "server": False}
    ends = (("client", client, c_out, s_in), ("server", server, s_out, c_in))
    for _round in range(16):  # a handshake takes 2-3 flights each way
        for side, end, out, peer_in in ends:
            if not done[side]:
                try:
                    end.do_handshake()
                    done[side] = True
                except ssl.SSLWantReadError:
                    pass
                except ssl.SSLError as e:
                    return f"{side}:{_reason(e)}"
            data = out.read()
            if data:
                peer_in.write(data)
        if all(done.values()):
            return None
    return "client:the handshake did not complete"


def _reason(e: ssl.SSLError) -> str:
    if isinstance(e, ssl.SSLCertVerificationError) and e.verify_message:
        return f"certificate verify failed: {e.verify_message}"
    text = getattr(e, "reason", None) or str(e)
    return str(text).replace("_", " ").lower()


def ensure_handshakes(*, current_server: ssl.SSLContext, current_client: ssl.SSLContext,
                      new_server: ssl.SSLContext, new_client: ssl.SSLContext) -> None:
    """HandshakeRefused unless a client of the new settings completes a handshake with the
    current server and the current client with a server of the new settings (Kafka's
    SslEngineValidator.validate(old, new))."""
    pairs = ((current_server, new_client, "the current keystore's certificate",
              "the new truststore", "the new keystore's certificate (as client)",
              "the current truststore"),
             (new_server, current_client, "the new keystore's certificate",
              "the current truststore", "the current keystore's certificate (as client)",
              "the new truststore"))
    for server, client, server_cert, client_trust, client_cert, server_trust in pairs:
        failed = _handshake(server, client)
        if failed is None:
            continue
        side, _, why = failed.partition(":")
        if side == "client":
            raise HandshakeRefused(f"{server_cert} is not trusted by {client_trust}: {why}")
        raise HandshakeRefused(f"{client_cert} is not trusted by {server_trust}: {why}")


def ensure_self_handshake(server: ssl.SSLContext, client: ssl.SSLContext) -> None:
    """HandshakeRefused unless a client with a listener's settings completes a handshake
    with a server with the same settings (Kafka's SslFactory.configure of the inter-broker
    listener: SslEngineValidator.validate(builder, builder)), so a broker whose own
    certificate its truststore refuses (expired, of another CA) does not start."""
    failed = _handshake(server, client)
    if failed is None:
        return
    side, _, why = failed.partition(":")
    if side == "client":
        raise HandshakeRefused(f"its keystore's certificate is not trusted by its "
                               f"truststore: {why}")
    raise HandshakeRefused(f"its keystore's certificate (as client) is not trusted by its "
                           f"truststore: {why}")


def store_digests(get: Callable[[str], str]) -> dict[str, str | None]:
    """SHA-256 of each keystore/truststore file `get` names (None: unset or unreadable)."""
    out: dict[str, str | None] = {}
    for key in STORE_FILE_KEYS:
        path = get(key)
        digest = None
        if path:
            try:
                with open(path, "rb") as f:
                    digest = hashlib.sha256(f.read()).hexdigest()
            except OSError:
                digest = None
        out[key] = digest
    return out
