"""SCRAM (RFC 5802, RFC 7677) as Kafka speaks it: the mechanisms, the credential math and
the four messages, sans-IO. The broker's server side (kafkactl.broker.security.scram) uses
them; `ScramClientExchange` is the client side, for the client library and for brokers
authenticating to each other.

A stored credential is `salt`, `stored_key`, `server_key` and `iterations`; the password
is never kept. Kafka's `SCRAM-SHA-256` / `SCRAM-SHA-512` are mechanism types 1 and 2 in
the UserScramCredentials APIs; the minimum iteration count is 4096.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ScramMechanism:
    name: str
    hash_name: str
    type_code: int  # ScramMechanism in the UserScramCredentials APIs
    min_iterations: int = 4096
    max_iterations: int = 16384  # Kafka refuses more in AlterUserScramCredentials

    def hmac(self, key: bytes, data: bytes) -> bytes:
        return hmac.new(key, data, self.hash_name).digest()

    def hash(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()

    def salted_password(self, password: str, salt: bytes, iterations: int) -> bytes:
        return hashlib.pbkdf2_hmac(self.hash_name, password.encode("utf-8"), salt, iterations)


SCRAM_SHA_256 = ScramMechanism("SCRAM-SHA-256", "sha256", 1)
SCRAM_SHA_512 = ScramMechanism("SCRAM-SHA-512", "sha512", 2)
MECHANISMS = {m.name: m for m in (SCRAM_SHA_256, SCRAM_SHA_512)}
BY_TYPE = {m.type_code: m for m in (SCRAM_SHA_256, SCRAM_SHA_512)}


class ScramError(ValueError):
    """A SCRAM message that is malformed or does not prove what it must."""


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_text(self) -> str:
        """Kafka's stored form (as in /config/users/<user>)."""
        b64 = base64.b64encode
        return (f"salt={b64(self.salt).decode()},stored_key={b64(self.stored_key).decode()},"
                f"server_key={b64(self.server_key).decode()},iterations={self.iterations}")

    @classmethod
    def from_text(cls, text: str) -> ScramCredential:
        fields = dict(item.partition("=")[::2] for item in text.split(","))
        try:
            return cls(base64.b64decode(fields["salt"], validate=True),
                       base64.b64decode(fields["stored_key"], validate=True),
                       base64.b64decode(fields["server_key"], validate=True),
                       int(fields["iterations"]))
        except (KeyError, ValueError) as e:
            raise ScramError(f"not a SCRAM credential: {e}") from None


def credential_from_salted(mechanism: ScramMechanism, salted_password: bytes, salt: bytes,
                           iterations: int) -> ScramCredential:
    client_key = mechanism.hmac(salted_password, b"Client Key")
    return ScramCredential(salt, mechanism.hash(client_key),
                           mechanism.hmac(salted_password, b"Server Key"), iterations)


def new_credential(mechanism: ScramMechanism, password: str,
                   iterations: int = 4096, salt: bytes | None = None) -> ScramCredential:
    salt = salt if salt is not None else secrets.token_bytes(32)
    return credential_from_salted(
        mechanism, mechanism.salted_password(password, salt, iterations), salt, iterations)


def new_nonce() -> str:
    return base64.b64encode(secrets.token_bytes(24)).decode().rstrip("=").replace("/", "_")


# ---- messages -------------------------------------------------------------------------
_PRINTABLE_NONCE = re.compile(r"[\x21-\x2b\x2d-\x7e]+")  # printable, no comma


def _attrs(text: str, what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        if len(key) != 1 or not sep:
            raise ScramError(f"invalid {what}: {item[:40]!r} is not an attribute")
        out.setdefault(key, value)
    return out


def saslname_decode(name: str) -> str:
    if re.search(r"=(?!2C|3D)", name):
        raise ScramError("invalid username encoding")
    return name.replace("=2C", ",").replace("=3D", "=")


def saslname_encode(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


@dataclass(frozen=True, slots=True)
class ClientFirst:
    gs2_header: str  # "n,," or "n,a=authzid,"
    username: str
    nonce: str
    bare: str  # client-first-message-bare, signed in the proof
    extensions: dict[str, str]

    @classmethod
    def parse(cls, data: bytes) -> ClientFirst:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise ScramError("invalid client first message: not UTF-8") from None
        flag, sep, rest = text.partition(",")
        authzid, sep2, bare = rest.partition(",")
        if not sep or not sep2 or flag != "n":
            raise ScramError("invalid client first message: channel binding is not "
                             "supported (gs2 header must be 'n,,')")
        if authzid and not authzid.startswith("a="):
            raise ScramError("invalid client first message: bad authzid")
        attrs = _attrs(bare, "client first message")
        if "m" in attrs or "n" not in attrs or "r" not in attrs:
            raise ScramError("invalid client first message: needs n= and r=")
        nonce = attrs["r"]
        if not _PRINTABLE_NONCE.fullmatch(nonce):
            raise ScramError("invalid client first message: bad nonce")
        username = saslname_decode(attrs["n"])
        if authzid and saslname_decode(authzid[2:]) != username:
            raise ScramError("authorization id must be the user name")
        extensions = {k: v for k, v in attrs.items() if k not in "nr"}
        return cls(f"{flag},{authzid},", username, nonce, bare, extensions)

    @classmethod
    def build(cls, username: str, nonce: str) -> ClientFirst:
        bare = f"n={saslname_encode(username)},r={nonce}"
        return cls("n,,", username, nonce, bare, {})

    def to_bytes(self) -> bytes:
        return (self.gs2_header + self.bare).encode("utf-8")


def server_first(nonce: str, salt: bytes, iterations: int) -> str:
    return f"r={nonce},s={base64.b64encode(salt).decode()},i={iterations}"


@dataclass(frozen=True, slots=True)
class ServerFirst:
    nonce: str
    salt: bytes
    iterations: int
    text: str

    @classmethod
    def parse(cls, data: bytes) -> ServerFirst:
        text = data.decode("utf-8", "replace")
        attrs = _attrs(text, "server first message")
        if "e" in attrs:
            raise ScramError(f"server error: {attrs['e']}")
        try:
            return cls(attrs["r"], base64.b64decode(attrs["s"]), int(attrs["i"]), text)
        except (KeyError, ValueError):
            raise ScramError("invalid server first message") from None


@dataclass(frozen=True, slots=True)
class ClientFinal:
    channel_binding: str
    nonce: str
    proof: bytes
    without_proof: str

    @classmethod
    def parse(cls, data: bytes) -> ClientFinal:
        text = data.decode("utf-8", "replace")
        without_proof, sep, proof = text.rpartition(",p=")
        if not sep:
            raise ScramError("invalid client final message: no proof")
        attrs = _attrs(without_proof, "client final message")
        if "c" not in attrs or "r" not in attrs:
            raise ScramError("invalid client final message: needs c= and r=")
        try:
            proof_bytes = base64.b64decode(proof, validate=True)
        except ValueError:
            raise ScramError("invalid client final message: proof is not base64") from None
        return cls(attrs["c"], attrs["r"], proof_bytes, without_proof)


def auth_message(client_first_bare: str, server_first_text: str, without_proof: str) -> bytes:
    return f"{client_first_bare},{server_first_text},{without_proof}".encode()


def client_proof(mechanism: ScramMechanism, salted_password: bytes, message: bytes) -> bytes:
    client_key = mechanism.hmac(salted_password, b"Client Key")
    signature = mechanism.hmac(mechanism.hash(client_key), message)
    return bytes(a ^ b for a, b in zip(client_key, signature, strict=True))


def verify_proof(mechanism: ScramMechanism, credential: ScramCredential, message: bytes,
                 proof: bytes) -> bool:
    """True when `proof` shows knowledge of the password behind `credential`."""
    signature = mechanism.hmac(credential.stored_key, message)
    if len(proof) != len(signature):
        return False
    client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
    return hmac.compare_digest(mechanism.hash(client_key), credential.stored_key)


def server_signature(mechanism: ScramMechanism, server_key: bytes, message: bytes) -> bytes:
    return mechanism.hmac(server_key, message)


class ScramClientExchange:
    """The client's side (sans-IO): `first()` -> client-first; `final(server_first)` ->
    client-final; `verify(server_final)` checks the server's signature. ScramError when
    the server's messages are not acceptable."""

    def __init__(self, mechanism: ScramMechanism, username: str, password: str) -> None:
        self.mechanism = mechanism
        self.password = password
        self._first = ClientFirst.build(username, new_nonce())
        self._salted = b""
        self._message = b""

    def first(self) -> bytes:
        return self._first.to_bytes()

    def final(self, server_first_message: bytes) -> bytes:
        sf = ServerFirst.parse(server_first_message)
        if not sf.nonce.startswith(self._first.nonce) or \
                sf.iterations < self.mechanism.min_iterations:
            raise ScramError("the server's first message is not acceptable")
        self._salted = self.mechanism.salted_password(self.password, sf.salt, sf.iterations)
        without_proof = f"c={base64.b64encode(b'n,,').decode()},r={sf.nonce}"
        self._message = auth_message(self._first.bare, sf.text, without_proof)
        proof = client_proof(self.mechanism, self._salted, self._message)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final_message: bytes) -> None:
        expected = b"v=" + base64.b64encode(server_signature(
            self.mechanism, self.mechanism.hmac(self._salted, b"Server Key"), self._message))
        if not self._message or not hmac.compare_digest(server_final_message, expected):
            raise ScramError("the server's signature is wrong")
