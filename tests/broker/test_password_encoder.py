"""The dynamic password configs' encoder (kafkactl.broker.password_encoder): encrypt then
MAC with keys derived from the secret by PBKDF2-HMAC-SHA512."""

from __future__ import annotations

import base64

import pytest

from kafkactl.broker.password_encoder import (
    PasswordDecodeError,
    PasswordEncoder,
    encoder_of,
    is_encoded,
    parse_encoded,
)

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_admin="admin-secret" user_bob="bøb-sécret";')


@pytest.mark.parametrize("password", ["topsecret", "", JAAS, "x" * 1000])
def test_round_trip(password: str) -> None:
    encoder = PasswordEncoder("encoder-secret")
    encoded = encoder.encode(password)
    assert is_encoded(encoded)
    assert encoder.decode(encoded) == password
    assert PasswordEncoder("encoder-secret").decode(encoded) == password
    if password:
        assert password not in encoded


def test_each_value_has_its_own_salt_and_iv() -> None:
    encoder = PasswordEncoder("encoder-secret")
    first, second = encoder.encode("same"), encoder.encode("same")
    assert first != second
    a, b = parse_encoded(first), parse_encoded(second)
    assert a is not None and b is not None
    assert a["salt"] != b["salt"] and a["iv"] != b["iv"]
    assert (a["keyFactoryAlgorithm"], a["iterations"]) == ("PBKDF2WithHmacSHA512", "4096")


def test_another_secret_or_an_altered_value_is_refused() -> None:
    encoded = PasswordEncoder("encoder-secret").encode("topsecret")
    with pytest.raises(PasswordDecodeError, match="another secret, or altered"):
        PasswordEncoder("other-secret").decode(encoded)
    fields = parse_encoded(encoded)
    assert fields is not None
    flipped = bytearray(base64.b64decode(fields["encryptedPassword"]))
    flipped[0] ^= 1
    fields["encryptedPassword"] = base64.b64encode(bytes(flipped)).decode()
    with pytest.raises(PasswordDecodeError, match="another secret, or altered"):
        PasswordEncoder("encoder-secret").decode(",".join(f"{k}:{v}"
                                                          for k, v in fields.items()))
    fields = parse_encoded(encoded)
    assert fields is not None
    fields["iterations"] = "2048"  # a weaker derivation is not taken either
    with pytest.raises(PasswordDecodeError):
        PasswordEncoder("encoder-secret").decode(",".join(f"{k}:{v}"
                                                          for k, v in fields.items()))


def test_clear_text_is_not_an_encoded_value() -> None:
    assert not is_encoded("topsecret")
    assert not is_encoded(JAAS)
    assert not is_encoded("a:b,c:d")
    with pytest.raises(PasswordDecodeError):
        PasswordEncoder("s").decode("topsecret")


def test_the_encoder_of_the_broker_keys() -> None:
    assert encoder_of({}) is None
    assert encoder_of({"password.encoder.secret": ""}) is None
    encoder = encoder_of({"password.encoder.secret": "s",
                          "password.encoder.iterations": "5000"})
    assert encoder is not None and encoder.iterations == 5000
    old = encoder_of({"password.encoder.old.secret": "old-secret-x"},
                     "password.encoder.old.secret")
    assert old is not None and "old-secret-x" not in repr(old)
