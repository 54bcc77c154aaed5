"""Kafka's PasswordEncoder for the dynamic broker configs of type PASSWORD (KIP-226): the
value stored in the data dir is encrypted with `password.encoder.secret`, and a broker
without that secret refuses to store one ("Password encoder secret not configured").

Kafka derives an AES key from the secret (PBKDF2WithHmacSHA512, a random salt per value,
`password.encoder.iterations`, 4096 by default) and encrypts with AES/CBC. Python's standard
library has no AES, and the project takes no cryptography dependency for this one use, so
the cipher here is built from the standard library's primitives only, in the usual
encrypt-then-MAC way:

- key derivation: PBKDF2-HMAC-SHA512(secret, salt, iterations) gives 64 bytes: the first
  32 are the encryption key Ke, the last 32 the MAC key Km (a fresh 32-byte salt per value,
  from `secrets`, so no two values share keys);
- encryption: a keystream of HMAC-SHA256(Ke, iv || counter) blocks (counter: 8 bytes,
  big-endian, from 0; a fresh 16-byte iv per value) XORed with the password's UTF-8 bytes,
  that is a PRF in counter mode, which is as secure as HMAC-SHA256 is a pseudo-random
  function;
- integrity: tag = HMAC-SHA256(Km, everything the decryption uses: the format name, the
  iterations, the salt, the iv, the ciphertext), checked (in constant time) before anything
  is decrypted, so a wrong secret or an altered value is detected, never decrypted into
  garbage.

The stored value is, as Kafka's, a map of fields, `name:value` pairs joined by commas
(`keyFactoryAlgorithm`, `cipherAlgorithm`, `keyLength`, `iterations`, `salt`, `iv`,
`encryptedPassword`, `passwordLength`, and the `mac`), the binary ones in base64. It is
not Kafka's AES cipher text: a Kafka broker cannot decode it, nor this one Kafka's.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from collections.abc import Mapping

KEY_FACTORY_ALGORITHM = "PBKDF2WithHmacSHA512"
CIPHER_ALGORITHM = "kafkactl-HmacSHA256-CTR+HmacSHA256"  # what is described above
KEY_LENGTH = 256  # bits of each of the encryption and MAC keys
DEFAULT_ITERATIONS = 4096  # Kafka's password.encoder.iterations default
MIN_ITERATIONS = 1024  # Kafka's lower bound for it
SALT_BYTES, IV_BYTES = 32, 16
_BLOCK = hashlib.sha256().digest_size
_FIELDS = ("keyFactoryAlgorithm", "cipherAlgorithm", "keyLength", "iterations", "salt",
           "iv", "encryptedPassword", "passwordLength", "mac")

SECRET_KEY = "password.encoder.secret"
OLD_SECRET_KEY = "password.encoder.old.secret"
ITERATIONS_KEY = "password.encoder.iterations"


class PasswordDecodeError(ValueError):
    """An encoded value this encoder cannot decode: another secret made it, or it was
    altered (the message says which of the two it cannot tell, and never the value)."""


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str) -> bytes:
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError):
        raise PasswordDecodeError("a field is not base64") from None


def parse_encoded(value: str) -> dict[str, str] | None:
    """The fields of an encoded value, or None when `value` is not one (a clear text)."""
    fields: dict[str, str] = {}
    for item in value.split(","):
        name, sep, field_value = item.partition(":")
        if not sep:
            return None
        fields[name.strip()] = field_value.strip()
    if set(fields) != set(_FIELDS) or fields["cipherAlgorithm"] != CIPHER_ALGORITHM:
        return None
    return fields


def is_encoded(value: str) -> bool:
    return parse_encoded(value) is not None


class PasswordEncoder:
    """Encodes and decodes passwords with one secret."""

    def __init__(self, secret: str, iterations: int = DEFAULT_ITERATIONS) -> None:
        if not secret:
            raise ValueError("an empty secret")
        self._secret = secret.encode("utf-8")
        self.iterations = max(iterations, MIN_ITERATIONS)

    def __repr__(self) -> str:  # never the secret
        return f"PasswordEncoder(iterations={self.iterations})"

    def _keys(self, salt: bytes, iterations: int) -> tuple[bytes, bytes]:
        derived = hashlib.pbkdf2_hmac("sha512", self._secret, salt, iterations,
                                      2 * KEY_LENGTH // 8)
        return derived[:KEY_LENGTH // 8], derived[KEY_LENGTH // 8:]

    @staticmethod
    def _keystream_xor(key: bytes, iv: bytes, data: bytes) -> bytes:
        stream = b"".join(hmac.digest(key, iv + i.to_bytes(8, "big"), "sha256")
                          for i in range((len(data) + _BLOCK - 1) // _BLOCK))
        return bytes(a ^ b for a, b in zip(data, stream[:len(data)], strict=True))

    @staticmethod
    def _mac(key: bytes, iterations: int, salt: bytes, iv: bytes, ciphertext: bytes) -> bytes:
        message = b"".join((CIPHER_ALGORITHM.encode("ascii"), b"\0",
                            iterations.to_bytes(4, "big"), len(salt).to_bytes(2, "big"), salt,
                            len(iv).to_bytes(2, "big"), iv, ciphertext))
        return hmac.digest(key, message, "sha256")

    def encode(self, password: str) -> str:
        salt, iv = secrets.token_bytes(SALT_BYTES), secrets.token_bytes(IV_BYTES)
        enc_key, mac_key = self._keys(salt, self.iterations)
        ciphertext = self._keystream_xor(enc_key, iv, password.encode("utf-8"))
        fields = {
            "keyFactoryAlgorithm": KEY_FACTORY_ALGORITHM, "cipherAlgorithm": CIPHER_ALGORITHM,
            "keyLength": str(KEY_LENGTH), "iterations": str(self.iterations),
            "salt": _b64(salt), "iv": _b64(iv), "encryptedPassword": _b64(ciphertext),
            "passwordLength": str(len(password)),
            "mac": _b64(self._mac(mac_key, self.iterations, salt, iv, ciphertext)),
        }
        return ",".join(f"{name}:{fields[name]}" for name in _FIELDS)

    def decode(self, encoded: str) -> str:
        """The password; PasswordDecodeError when this secret did not encode `encoded` or
        it was altered since."""
        fields = parse_encoded(encoded)
        if fields is None:
            raise PasswordDecodeError("not a value encoded by kafkactl's password encoder")
        return self._decode_fields(fields)

    def _decode_fields(self, fields: Mapping[str, str]) -> str:
        try:
            iterations = int(fields["iterations"])
            length = int(fields["passwordLength"])
        except ValueError:
            raise PasswordDecodeError("its iterations or passwordLength is not a number") \
                from None
        if fields["keyFactoryAlgorithm"] != KEY_FACTORY_ALGORITHM or \
                fields["keyLength"] != str(KEY_LENGTH) or not \
                MIN_ITERATIONS <= iterations < 2**31:
            raise PasswordDecodeError("it was encoded with other parameters than kafkactl's")
        salt, iv = _unb64(fields["salt"]), _unb64(fields["iv"])
        ciphertext, tag = _unb64(fields["encryptedPassword"]), _unb64(fields["mac"])
        enc_key, mac_key = self._keys(salt, iterations)
        if not hmac.compare_digest(tag, self._mac(mac_key, iterations, salt, iv, ciphertext)):
            raise PasswordDecodeError("it was encoded with another secret, or altered")
        try:
            password = self._keystream_xor(enc_key, iv, ciphertext).decode("utf-8")
        except UnicodeDecodeError:
            raise PasswordDecodeError("it does not decrypt to text") from None
        if len(password) != length:  # Kafka's sanity check
            raise PasswordDecodeError("sanity check of length failed")
        return password


def encoder_of(props: Mapping[str, str], key: str = SECRET_KEY) -> PasswordEncoder | None:
    """The encoder of the secret `props` sets under `key` (password.encoder.secret, or
    password.encoder.old.secret), None without one."""
    secret = props.get(key, "")
    if not secret:
        return None
    try:
        iterations = int(props.get(ITERATIONS_KEY) or DEFAULT_ITERATIONS)
    except ValueError:
        iterations = DEFAULT_ITERATIONS
    return PasswordEncoder(secret, iterations)
