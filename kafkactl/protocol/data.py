"""Version-prefixed data messages: the consumer-protocol bytes carried inside JoinGroup /
SyncGroup, and the ``__consumer_offsets`` record keys and values.

Each is an int16 schema version followed by the fields of that version (the schemas are in
:mod:`kafkactl.protocol.messages.consumer_protocol` and
:mod:`kafkactl.protocol.messages.group_metadata`). A version newer than our table is read
with our newest version and the unknown trailing bytes are ignored, as Kafka does for the
consumer protocol.
"""

from __future__ import annotations

import struct
from typing import Any

from kafkactl.protocol.compiler import Decoder, Encoder, compile_decoder, compile_encoder
from kafkactl.protocol.errors import ProtocolDecodeError, ProtocolEncodeError
from kafkactl.protocol.messages.consumer_protocol import ASSIGNMENT, SUBSCRIPTION
from kafkactl.protocol.messages.group_metadata import (
    GROUP_METADATA_KEY,
    GROUP_METADATA_VALUE,
    OFFSET_COMMIT_KEY,
    OFFSET_COMMIT_VALUE,
)
from kafkactl.protocol.schema import Message
from kafkactl.protocol.types import INT16

__all__ = [
    "SUBSCRIPTION", "ASSIGNMENT", "OFFSET_COMMIT_KEY", "OFFSET_COMMIT_VALUE",
    "GROUP_METADATA_KEY", "GROUP_METADATA_VALUE", "encode_data", "decode_data",
]

_DECODERS: dict[tuple[str, int], Decoder] = {}
_ENCODERS: dict[tuple[str, int], Encoder] = {}


def encode_data(schema: Message, version: int, value: dict[str, Any]) -> bytes:
    """int16 version + the fields of ``schema`` at ``version``."""
    if not schema.min_version <= version <= schema.max_version:
        raise ProtocolEncodeError(f"{schema.name} has no version {version}")
    key = (schema.name, version)
    enc = _ENCODERS.get(key)
    if enc is None:
        enc = _ENCODERS[key] = compile_encoder(schema, version)
    out = bytearray(INT16.pack(version))
    try:
        enc(out, None, value)
    except ProtocolEncodeError:
        raise
    except (struct.error, TypeError, AttributeError, OverflowError) as exc:
        raise ProtocolEncodeError(f"cannot encode {schema.name} v{version}: {exc}") from exc
    return bytes(out)


def decode_data(schema: Message, buf: Any) -> tuple[int, dict[str, Any]]:
    """Returns (version as written, decoded dict)."""
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    try:
        version = INT16.unpack_from(mv, 0)[0]
        if version < schema.min_version:
            raise ProtocolDecodeError(f"{schema.name} version {version} is unknown")
        use = min(version, schema.max_version)
        key = (schema.name, use)
        dec = _DECODERS.get(key)
        if dec is None:
            dec = _DECODERS[key] = compile_decoder(schema, use)
        return version, dec(mv, 2)[0]
    except ProtocolDecodeError:
        raise
    except (struct.error, IndexError, ValueError, OverflowError) as exc:
        raise ProtocolDecodeError(f"malformed {schema.name}: {exc}") from exc
